"""PA-HMDB51: HMDB51 videos with frame-level privacy annotations (`<action>.json` per action).

Each attribute of a video is a list of inclusive frame ranges `[start, end, value]`, the value
an int or a list of ints (one per person): gender 0 unidentifiable, 1 male, 2 female; face 0
invisible, 1 partial, 2 complete; skin colour 0 unidentifiable, 1 white, 2 yellow, 3 black;
nudity 0 none, 1 partial, 2 semi; relationship 0 unidentifiable, 1 identifiable. An attribute is
present in a frame when a range holding that frame has a value (or a person's value) > 0, so 0
and frames outside every range are negatives (`labels_at`).

Its cross-dataset evaluation (`--eval_privacy_dataset=pa_hmdb51`): the target privacy model
trains on VISPR relabelled by `vispr_as_pa_hmdb51` and is tested on `privacy_images`, frames
each labelled with their own frame index.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from keras_privacy.data.annotations import named_subset, read_json, resolve
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.phvu import frame_images
from keras_privacy.data.vispr import VISPR1

PA_HMDB51_TO_VISPR1 = {
    "gender": ("a4_gender",),
    "face": ("a9_face_complete", "a10_face_partial"),
    "nudity": ("a12_semi_nudity",),
    "skin_color": ("a17_color",),
    "relationship": ("a64_rel_personal", "a65_rel_social"),
}
"""The VISPR-1 ids behind each PA-HMDB51 attribute, in the order of the field's
`attributes_pa_hmdb51` table (idx 0-4, Wu et al.'s code): a PA-HMDB51 attribute is present
when any of its VISPR ids is (complete or partial face; personal or social relationship)."""

PA_HMDB51_ATTRIBUTES = tuple(PA_HMDB51_TO_VISPR1)
"""The five PA-HMDB51 attributes in label order: gender, face, nudity, skin_color,
relationship: those of the annotation files and of SPAct Sec. 5.1 ("5 different human privacy
attributes"); its supplementary (B) counts 6, VISPR-1's but a65_rel_soci."""

LARGEST_VALUE = {"gender": 2, "face": 2, "nudity": 2, "skin_color": 3, "relationship": 1}
"""The largest value of each attribute (the module docstring gives their meanings); a value
outside 0 .. this is a malformed annotation."""

Ranges = dict[str, list[tuple[int, int, tuple[int, ...]]]]
"""One video's annotation: attribute -> inclusive frame ranges (start, end, values)."""


def attribute_subset(attributes: str) -> list[str]:
    """The PA-HMDB51 attributes that `attributes` names: all five for `all`, else a
    comma-separated subset, in the order given. Raises ValueError naming an unknown one."""
    if attributes == "all":
        return list(PA_HMDB51_ATTRIBUTES)
    return named_subset(attributes, PA_HMDB51_ATTRIBUTES, "PA-HMDB51")


def read_pa_hmdb51(
    annotations_dir: str | os.PathLike, root: str | os.PathLike | None = None
) -> dict[str, Split]:
    """The PA-HMDB51 evaluation videos as {"test": Split}, with action and privacy labels.

    `annotations_dir` holds one `<action>.json` per HMDB51 action (`PrivacyAttributes/`), each
    `{"video.avi": {"face": [[start, end, value], ...], ...}}` with inclusive frame ranges and
    an int or a list of ints (one per person) as value. A video's binary label of an attribute
    is "present in some frame" (some value > 0; `privacy_images` labels each frame by its own
    index instead); labels follow `PA_HMDB51_ATTRIBUTES`. Action classes are the sorted action
    names, which is HMDB51's label order when all 51 files are there. With `root`, videos are
    `root/<action>/<video>` and those not on disk are listed in `Split.missing`. A malformed
    file raises `DatasetFormatError` naming it and the video.
    """
    files = {f.stem: f for f in Path(annotations_dir).glob("*.json")}
    if not files:
        raise FileNotFoundError(f"{annotations_dir}: no PA-HMDB51 '<action>.json' files")
    class_names = sorted(files)
    examples, missing = [], []
    for label, action in enumerate(class_names):
        for video, ranges in _read_action_file(files[action]).items():
            privacy = tuple(
                int(any(v > 0 for *_, values in ranges[name] for v in values))
                for name in PA_HMDB51_ATTRIBUTES
            )
            path, exists = resolve(root, f"{action}/{video}")
            if exists:
                examples.append(Example(path=path, label=label, privacy=privacy))
            else:
                missing.append(f"{path}: file not found")
    split = Split(
        examples,
        class_names=class_names,
        attribute_names=list(PA_HMDB51_ATTRIBUTES),
        missing=missing,
    )
    return {"test": split}


def read_frame_ranges(annotations_dir: str | os.PathLike) -> dict[str, Ranges]:
    """Every annotated video's frame ranges by "<action>/<video>" (see `labels_at`)."""
    return {
        f"{path.stem}/{video}": ranges
        for path in sorted(Path(annotations_dir).glob("*.json"))
        for video, ranges in _read_action_file(path).items()
    }


def labels_at(
    ranges: Ranges, frame: int, names: Sequence[str] = PA_HMDB51_ATTRIBUTES
) -> tuple[int, ...]:
    """The binary labels of frame `frame` over the attributes `names`: 1 where a range holding
    the frame has a value (or a person's value) > 0, else 0 (also outside every range)."""
    return tuple(
        int(
            any(
                start <= frame <= end and any(v > 0 for v in values)
                for start, end, values in ranges[name]
            )
        )
        for name in names
    )


def _read_action_file(path: Path) -> dict[str, Ranges]:
    """Video name -> its checked frame ranges over PA_HMDB51_ATTRIBUTES, from one
    `<action>.json`."""
    videos = read_json(path)
    if not isinstance(videos, dict):
        raise DatasetFormatError(f"{path}: expected an object mapping video names to annotations")
    labels = {}
    for video, record in videos.items():
        if not isinstance(record, dict):
            raise DatasetFormatError(f"{path}: video {video!r}: expected an object of attributes")
        labels[video] = {
            name: _ranges(record.get(name), path, video, name) for name in PA_HMDB51_ATTRIBUTES
        }
    return labels


def _ranges(ranges, path: Path, video: str, name: str) -> list[tuple[int, int, tuple[int, ...]]]:
    """The checked `[start, end, value]` ranges of one attribute, values as tuples."""
    if not isinstance(ranges, list):
        raise DatasetFormatError(
            f"{path}: video {video!r}: attribute {name!r} missing or not a list of ranges"
        )
    checked = []
    for entry in ranges:
        values = entry[2] if isinstance(entry, list) and len(entry) == 3 else None
        values = [values] if isinstance(values, int) else values
        if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in [*entry[:2], *values]
        ):
            raise DatasetFormatError(
                f"{path}: video {video!r}: attribute {name!r}: expected [start, end, value] with "
                f"an int or a list of ints as value, got {entry!r}"
            )
        start, end = entry[:2]
        where = f"{path}: video {video!r}: attribute {name!r}: range {entry!r}"
        if not 0 <= start <= end:
            raise DatasetFormatError(f"{where}: frames must satisfy 0 <= start <= end")
        if not all(0 <= v <= LARGEST_VALUE[name] for v in values):
            raise DatasetFormatError(f"{where}: values must be in 0 .. {LARGEST_VALUE[name]}")
        checked.append((start, end, tuple(values)))
    return checked


def vispr_to_pa_hmdb51(
    values: np.ndarray | Sequence[Sequence[float]], attribute_names: Sequence[str] = VISPR1
) -> np.ndarray:
    """(N, len(attribute_names)) VISPR labels or scores -> (N, 5) over PA_HMDB51_ATTRIBUTES.

    Each PA-HMDB51 column is the maximum of its VISPR-1 columns (`PA_HMDB51_TO_VISPR1`), so a
    privacy model trained on VISPR-1 can be scored on PA-HMDB51, as in the cross-dataset
    protocols.
    """
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] != len(attribute_names):
        raise ValueError(
            f"expected values of shape (N, {len(attribute_names)}), got {values.shape}"
        )
    absent = [i for ids in PA_HMDB51_TO_VISPR1.values() for i in ids if i not in attribute_names]
    if absent:
        raise ValueError(f"attribute_names lack the VISPR-1 id(s) {absent}")
    columns = {name: i for i, name in enumerate(attribute_names)}
    return np.stack(
        [values[:, [columns[i] for i in ids]].max(axis=1) for ids in PA_HMDB51_TO_VISPR1.values()],
        axis=1,
    )


def privacy_images(
    annotations_dir: str | os.PathLike,
    root: str | os.PathLike,
    out_dir: str | os.PathLike,
    frames_per_video: int,
    attributes: str = "all",
) -> Split:
    """PA-HMDB51's labelled videos as privacy test images: `frames_per_video` equidistant
    frames of every video on disk, written as PNG under `out_dir` (kept if already there),
    each with the labels of its own frame index over `attributes` (`labels_at`,
    `attribute_subset`).

    Raises FileNotFoundError naming missing videos when none of the annotated ones is on disk
    (the others are listed in the split's `missing`)."""
    split = read_pa_hmdb51(annotations_dir, root)["test"]
    if not split.examples:
        raise FileNotFoundError(
            f"PA-HMDB51: none of the {len(split.missing)} annotated videos is under {root}, "
            f"e.g. {'; '.join(split.missing[:3])}"
        )
    names = attribute_subset(attributes)
    ranges = {
        resolve(root, video)[0]: video_ranges
        for video, video_ranges in read_frame_ranges(annotations_dir).items()
    }

    def frame_labels(path: str, frame: int) -> tuple[int, ...]:
        return labels_at(ranges[path], frame, names)

    return frame_images(_select(split, names), out_dir, frames_per_video, frame_labels)


def vispr_as_pa_hmdb51(split: Split, attributes: str = "all") -> Split:
    """A VISPR split labelled over (at least) the VISPR-1 ids, relabelled over PA-HMDB51's
    `attributes` by `vispr_to_pa_hmdb51`, so that a privacy model trained on VISPR is tested on
    PA-HMDB51 (the cross-dataset protocol). Unlabelled examples stay unlabelled."""
    examples = []
    for example in split.examples:
        privacy = example.privacy
        if privacy:
            merged = vispr_to_pa_hmdb51([privacy], split.attribute_names)[0]
            privacy = tuple(int(value) for value in merged)
        examples.append(dataclasses.replace(example, privacy=privacy))
    relabelled = dataclasses.replace(
        split, examples=examples, attribute_names=list(PA_HMDB51_ATTRIBUTES)
    )
    return _select(relabelled, attribute_subset(attributes))


def _select(split: Split, names: Sequence[str]) -> Split:
    """`split` with the privacy labels of the attributes `names` only, in that order."""
    columns = [split.attribute_names.index(name) for name in names]
    examples = [
        dataclasses.replace(e, privacy=tuple(e.privacy[c] for c in columns) if e.privacy else ())
        for e in split.examples
    ]
    return dataclasses.replace(split, examples=examples, attribute_names=list(names))
