"""HMDB51 from its official split files (`<class>_test_splitN.txt`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from keras_privacy.data.annotations import ListedOnce, read_lines, resolve
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split

NUM_CLASSES = 51

SUBSETS = {"1": "train", "2": "test"}
"""Split-file codes that select a video; code 0 means "not used in this split"."""


def read_hmdb51(
    annotations_dir: str | os.PathLike, root: str | os.PathLike | None = None, split: int = 1
) -> dict[str, Split]:
    """The "train" and "test" examples of HMDB51 split `split` (1, 2 or 3).

    Each line of `<class>_test_splitN.txt` is `video.avi N` (1 = train, 2 = test, 0 = unused;
    names may contain `#`, never a space). Class names are sorted alphabetically (`climb` before
    `climb_stairs`), the usual HMDB51 label order. A video on two lines of a class's file is
    refused, as is one whose name lacks `_<class>_` or holds a longer class's (`why_not_of_class`):
    every one of the 6766 videos of the official lists holds its class in its name, so such a
    line was copied from another class's file (its video would be missing under this class's
    folder). With `root`, videos are `root/<class>/<video>` and files not on disk are listed in
    `Split.missing`.
    """
    if split not in (1, 2, 3):
        raise ValueError(f"HMDB51 has splits 1, 2 and 3, not {split}")
    files = _split_files(annotations_dir, split)
    class_names = sorted(files)
    subsets = {"train": ([], []), "test": ([], [])}
    listed = ListedOnce()
    listings: dict = {}  # the folders listed for names of another case, once each
    for label, name in enumerate(class_names):
        path = files[name]
        for number, line in read_lines(path, listing="video"):
            fields = line.split()
            if len(fields) != 2 or fields[1] not in ("0", "1", "2"):
                raise DatasetFormatError(
                    f"{path}:{number}: expected 'video.avi 0|1|2', got {line!r}"
                )
            video, code = fields
            foreign = why_not_of_class(video, name, class_names)
            if foreign:
                raise DatasetFormatError(
                    f"{path}:{number}: {video} is not a {name} video: {foreign} (a line of "
                    "another class's file?)"
                )
            listed.check(f"{name}/{video}", f"{path}:{number}")
            if code == "0":
                continue
            examples, missing = subsets[SUBSETS[code]]
            file, exists = resolve(root, f"{name}/{video}", listings)
            if exists:
                examples.append(Example(path=file, label=label))
            else:
                missing.append(f"{file}: file not found")
    return {
        subset: Split(examples, class_names=class_names, missing=missing)
        for subset, (examples, missing) in subsets.items()
    }


def why_not_of_class(video: str, name: str, class_names: Iterable[str]) -> str | None:
    """Why the HMDB51 video file `video` is not of class `name`, or None where it is: every
    HMDB51 video's name holds its class as `_<class>_`, and none holds a longer class's that
    begins with it (`climb_stairs`, `kick_ball`, `sword_exercise` against `climb`, `kick`,
    `sword`; checked on the 6766 videos of the official lists)."""
    if f"_{name}_" not in video:
        return f"its name lacks '_{name}_', which every HMDB51 video's name holds"
    for other in class_names:
        if other.startswith(f"{name}_") and f"_{other}_" in video:
            return f"its name holds '_{other}_', a {other} video's"
    return None


def _split_files(annotations_dir: str | os.PathLike, split: int) -> dict[str, Path]:
    """Each class's split file of `split`. A class whose file of another split is there but
    not this one's is refused (its videos would be left out and every later label shifted);
    fewer than HMDB51's 51 classes is only logged, as a subset of the classes may be meant."""
    directory = Path(annotations_dir)
    suffix = f"_test_split{split}.txt"
    files = {f.name[: -len(suffix)]: f for f in directory.glob(f"*{suffix}")}
    if not files:
        raise FileNotFoundError(f"{annotations_dir}: no '*{suffix}' split files")
    other_splits = {f.name.rsplit("_test_split", 1)[0] for f in directory.glob("*_test_split?.txt")}
    lacking = sorted(other_splits - set(files))
    if lacking:
        raise DatasetFormatError(
            f"{annotations_dir}: no {lacking[0]}{suffix}, though {lacking[0]} has the split "
            f"files of other splits ({len(lacking)} classes lack this split's file)"
        )
    if len(files) != NUM_CLASSES:
        logging.warning(
            "%s: %d classes have a '*%s' file; HMDB51 has %d",
            annotations_dir,
            len(files),
            suffix,
            NUM_CLASSES,
        )
    return files
