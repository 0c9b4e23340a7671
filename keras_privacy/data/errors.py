"""Errors of the data layer; every message names the file and the problem."""


class DatasetFormatError(ValueError):
    """An annotation file does not follow its dataset's official format.

    The message starts with `path:line:` (or `path:` for a whole-file problem) so the faulty
    line can be found at once.
    """


class AttributeChoiceError(ValueError):
    """A choice of privacy attributes names one the dataset does not have, or one twice: the
    caller that knows which setting gave it names that setting."""


class VideoDecodeError(RuntimeError):
    """A video cannot be decoded: missing, empty, corrupt, or without any decodable frame."""


class TransformError(RuntimeError):
    """A cache's change of a file (a baseline: its boxes, its detector) failed on it. Not a
    decoding failure: skipping the file would leave it out of that method's test set alone, so
    the cache stops, naming the file and the change."""
