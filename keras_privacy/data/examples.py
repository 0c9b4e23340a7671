"""Plain, inspectable records that every dataset reader returns."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Example:
    """One video or image of a dataset split.

    Attributes:
        path: Absolute path of the file on disk (or root-relative when no root was given).
        label: Action class index, or -1 when the example has no action label.
        privacy: Binary privacy labels, one per attribute of the split, or () when unknown.
        actions: Multi-hot action labels over `Split.class_names` for multi-label datasets
            (P-HVU, whose `label` is -1), or () for single-label ones.
    """

    path: str
    label: int = -1
    privacy: tuple[int, ...] = ()
    actions: tuple[int, ...] = ()


@dataclasses.dataclass
class Split:
    """The examples of one split, with the names that give their labels a meaning.

    Attributes:
        examples: Examples whose files exist (or every listed example when no root was given).
        class_names: Action class names indexed by `Example.label` (empty for image datasets).
        attribute_names: Privacy attribute names indexed like `Example.privacy`.
        missing: Files named by the annotations that are not on disk, as "path: reason".
        frame_sources: For an image split of frames of videos (`phvu.frame_images`): each
            image's path -> (its video's path, the frame's index in it).
    """

    examples: list[Example]
    class_names: list[str] = dataclasses.field(default_factory=list)
    attribute_names: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    frame_sources: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.examples)
