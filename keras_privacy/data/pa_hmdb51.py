"""PA-HMDB51: HMDB51 videos with frame-level privacy annotations (`<action>.json` per action).

Each attribute of a video is a list of inclusive frame ranges `[start, end, value]`, the value
an int or a list of ints (one per person): gender 0 unidentifiable, 1 male, 2 female; face 0
invisible, 1 partial, 2 complete; skin colour 0 unidentifiable, 1 white, 2 yellow, 3 black;
nudity 0 none, 1 partial, 2 semi; relationship 0 unidentifiable, 1 identifiable. An attribute is
present in a frame when the first range holding that frame has a value (or a person's value)
> 0, as the release's viewer (`GUI/Reviewer.py`) reads them; a frame no range of an attribute
holds is unlabelled (the viewer shows "N/A": 14 of the release's 515 videos start all their
ranges at frames 1 to 13, one more its nudity ranges at frame 1) and is never a test image
(`labelled_frames`).

Its cross-dataset evaluation (`--eval_privacy_dataset=pa_hmdb51`): the target privacy model
trains on VISPR relabelled by `vispr_as_pa_hmdb51` and is tested on `privacy_images`, frames
each labelled with their own frame index. Two label schemes (`LABEL_SCHEMES`) name the columns
of both: VITA's five merged attributes, or SPAct's six VISPR-1 columns.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from keras_privacy.data.annotations import named_subset, read_json, resolve
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.hmdb51 import why_not_of_class
from keras_privacy.data.phvu import frame_images
from keras_privacy.data.vispr import VISPR1

LARGEST_VALUE = {"gender": 2, "face": 2, "nudity": 2, "skin_color": 3, "relationship": 1}
"""The largest value of each attribute (the module docstring gives their meanings); a value
outside 0 .. this is a malformed annotation."""

PA_HMDB51_ATTRIBUTES = ("gender", "face", "nudity", "skin_color", "relationship")
"""The five attributes of the annotation files, in the order of the field's
`attributes_pa_hmdb51` table (idx 0-4, Wu et al.'s code)."""
RECORD_NOTES = {"review", "note"}
"""The keys of a video's record besides its attributes, in the release's files."""


@dataclasses.dataclass(frozen=True)
class Column:
    """One privacy label column on PA-HMDB51 and VISPR alike: present in a PA-HMDB51 frame when
    a range holding it gives `attribute` one of `values` (for one of its people); present in a
    VISPR image when any of the VISPR-1 ids `vispr_ids` is."""

    attribute: str
    values: tuple[int, ...]
    vispr_ids: tuple[str, ...]


LABEL_SCHEMES = {
    "merged": {
        "gender": Column("gender", (1, 2), ("a4_gender",)),
        "face": Column("face", (1, 2), ("a9_face_complete", "a10_face_partial")),
        "nudity": Column("nudity", (1, 2), ("a12_semi_nudity",)),
        "skin_color": Column("skin_color", (1, 2, 3), ("a17_color",)),
        "relationship": Column("relationship", (1,), ("a64_rel_personal", "a65_rel_social")),
    },
    "vispr1": {
        "a17_color": Column("skin_color", (1, 2, 3), ("a17_color",)),
        "a4_gender": Column("gender", (1, 2), ("a4_gender",)),
        "a9_face_complete": Column("face", (2,), ("a9_face_complete",)),
        "a10_face_partial": Column("face", (1,), ("a10_face_partial",)),
        "a12_semi_nudity": Column("nudity", (1, 2), ("a12_semi_nudity",)),
        "a64_rel_personal": Column("relationship", (1,), ("a64_rel_personal",)),
    },
}
"""The label columns of the cross-dataset evaluation on PA-HMDB51, by scheme, in label order.
`merged` is VITA's: the five annotated attributes, present when any value is > 0 (Wu et al.'s
`vispr_anno_conversion.py`), each VISPR-1 id of the same kind merged onto one (complete or
partial face, personal or social relationship); the meta generalisation paper names these five
too. `vispr1` is SPAct's (supp. B: "the same as VISPR-1 subset ... except a65_rel_soci"; the
penalty code scores `ap[:6]`, `train_privacy.py:126`): VISPR-1's first six ids, complete face
(value 2) and partial face (value 1) as two columns, a relationship as a personal one."""

Ranges = dict[str, list[tuple[int, int, tuple[int, ...]]]]
"""One video's annotation: attribute -> inclusive frame ranges (start, end, values)."""


def label_columns(scheme: str) -> dict[str, Column]:
    """The label columns of `scheme` (`LABEL_SCHEMES`) by name; ValueError for another."""
    if scheme not in LABEL_SCHEMES:
        raise ValueError(
            f"unknown PA-HMDB51 label scheme {scheme!r} (one of {', '.join(LABEL_SCHEMES)})"
        )
    return LABEL_SCHEMES[scheme]


def attribute_subset(attributes: str, scheme: str = "merged") -> list[str]:
    """The label columns of `scheme` that `attributes` names: all for `all`, else a
    comma-separated subset, in the order given. Raises ValueError naming an unknown one."""
    columns = list(label_columns(scheme))
    if attributes == "all":
        return columns
    return named_subset(attributes, columns, f"PA-HMDB51 ({scheme} labels)")


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
    if not Path(annotations_dir).is_dir():
        raise FileNotFoundError(f"{annotations_dir}: no such folder (PA-HMDB51's annotations)")
    files = {f.stem: f for f in Path(annotations_dir).glob("*.json")}
    if not files:
        raise FileNotFoundError(f"{annotations_dir}: no PA-HMDB51 '<action>.json' files")
    class_names = sorted(files)
    examples, missing = [], []
    listings: dict = {}  # the folders listed for names of another case, once each
    for label, action in enumerate(class_names):
        for video, ranges in _read_action_file(files[action]).items():
            privacy = tuple(
                int(any(v > 0 for *_, values in ranges[name] for v in values))
                for name in PA_HMDB51_ATTRIBUTES
            )
            path, exists = resolve(root, f"{action}/{video}", listings)
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


def _columns(names: Sequence[str] | None, scheme: str) -> list[Column]:
    columns = label_columns(scheme)
    return [columns[name] for name in (columns if names is None else names)]


def _values_at(ranges: Ranges, attribute: str, frame: int) -> tuple[int, ...] | None:
    """The values of the first range of `attribute` holding `frame` (where two overlap, the
    release's viewer shows the first), or None where none holds it."""
    return next((values for start, end, values in ranges[attribute] if start <= frame <= end), None)


def labels_at(
    ranges: Ranges, frame: int, names: Sequence[str] | None = None, scheme: str = "merged"
) -> tuple[int, ...]:
    """The binary labels of frame `frame` over the columns `names` of `scheme` (default all):
    1 where the first range holding the frame gives the column's attribute one of its values
    (for one of its people), else 0. Raises ValueError for a frame that an attribute the
    columns read leaves unlabelled (`labelled_frames`)."""
    labels = []
    for column in _columns(names, scheme):
        values = _values_at(ranges, column.attribute, frame)
        if values is None:
            raise ValueError(f"frame {frame} has no {column.attribute} label (no range holds it)")
        labels.append(int(any(v in column.values for v in values)))
    return tuple(labels)


def labelled_frames(
    ranges: Ranges, num_frames: int, names: Sequence[str] | None = None, scheme: str = "merged"
) -> list[int]:
    """The frames below `num_frames` that a range of every attribute the columns `names` of
    `scheme` read holds: the frames `labels_at` labels, the only ones tested (VITA's test
    frames are those with an annotation). An attribute with no range leaves every frame
    unlabelled; the release's 2575 lists of ranges hold at least one each."""
    attributes = {column.attribute for column in _columns(names, scheme)}
    return [
        frame
        for frame in range(num_frames)
        if all(_values_at(ranges, attribute, frame) is not None for attribute in attributes)
    ]


def _read_action_file(path: Path) -> dict[str, Ranges]:
    """Video name -> its checked frame ranges over PA_HMDB51_ATTRIBUTES, from one
    `<action>.json`."""
    videos = read_json(path, unique_keys=True)
    if not isinstance(videos, dict):
        raise DatasetFormatError(f"{path}: expected an object mapping video names to annotations")
    _require_videos_of_the_action(path, list(videos))
    labels = {}
    unknown = set()
    for video, record in videos.items():
        if not isinstance(record, dict):
            raise DatasetFormatError(f"{path}: video {video!r}: expected an object of attributes")
        unknown |= set(record) - set(PA_HMDB51_ATTRIBUTES) - RECORD_NOTES
        labels[video] = {
            name: _ranges(record.get(name), path, video, name) for name in PA_HMDB51_ATTRIBUTES
        }
    if unknown:
        logging.warning(
            "%s: ignoring the keys %s, which are not PA-HMDB51 attributes (%s)",
            path,
            ", ".join(sorted(map(repr, unknown))),
            ", ".join(PA_HMDB51_ATTRIBUTES),
        )
    return labels


def _require_videos_of_the_action(path: Path, videos: list[str]) -> None:
    """Refuse an `<action>.json` that lists videos of another action: every HMDB51 video's
    name holds its action (`..._<action>_...`, all 6766 of the split lists), as do the 515 of
    the official release, but the copy in VITA-Group's Privacy-AdversarialLearning
    (`raw_pa_hmdb51_annos/`) lists 76 under a wrong action, which would label them so."""
    action = path.stem
    actions = [sibling.stem for sibling in path.parent.glob("*.json")]
    reasons = {video: why_not_of_class(video, action, actions) for video in videos}
    foreign = [video for video, reason in reasons.items() if reason]
    if foreign:
        raise DatasetFormatError(
            f"{path}: {len(foreign)} of its {len(videos)} videos are not of action {action!r} "
            f"(e.g. {foreign[0]!r}: {reasons[foreign[0]]}): a copy with videos under the wrong "
            "action (as Privacy-AdversarialLearning's raw_pa_hmdb51_annos/); use the "
            "PrivacyAttributes/ folder of the official PA-HMDB51 release"
        )


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
    values: np.ndarray | Sequence[Sequence[float]],
    attribute_names: Sequence[str] = VISPR1,
    scheme: str = "merged",
) -> np.ndarray:
    """(N, len(attribute_names)) VISPR labels or scores -> (N, columns) over the label columns
    of `scheme`.

    Each column is the maximum of its VISPR-1 columns (`Column.vispr_ids`), so a privacy model
    trained on VISPR-1 can be scored on PA-HMDB51, as in the cross-dataset protocols.
    """
    values = np.asarray(values)
    if values.ndim != 2 or values.shape[1] != len(attribute_names):
        raise ValueError(
            f"expected values of shape (N, {len(attribute_names)}), got {values.shape}"
        )
    sources = [column.vispr_ids for column in label_columns(scheme).values()]
    absent = [i for ids in sources for i in ids if i not in attribute_names]
    if absent:
        raise ValueError(f"attribute_names lack the VISPR-1 id(s) {absent}")
    index = {name: i for i, name in enumerate(attribute_names)}
    return np.stack([values[:, [index[i] for i in ids]].max(axis=1) for ids in sources], axis=1)


def privacy_images(
    annotations_dir: str | os.PathLike,
    root: str | os.PathLike,
    out_dir: str | os.PathLike,
    frames_per_video: int,
    attributes: str = "all",
    scheme: str = "merged",
) -> Split:
    """PA-HMDB51's labelled videos as privacy test images: `frames_per_video` equidistant
    frames of the labelled frames of every video on disk (0: every labelled frame;
    `labelled_frames`), written as PNG under `out_dir` (kept if already there), each with the
    labels of its own frame index over the columns `attributes` of `scheme` (`labels_at`,
    `attribute_subset`). A video with no labelled frame is listed in the split's `missing`.

    Raises FileNotFoundError naming missing videos when none of the annotated ones is on disk
    (the others are listed in the split's `missing`)."""
    split = read_pa_hmdb51(annotations_dir, root)["test"]
    if not split.examples:
        raise FileNotFoundError(
            f"PA-HMDB51: none of the {len(split.missing)} annotated videos is under {root}, "
            f"e.g. {'; '.join(split.missing[:3])}"
        )
    names = attribute_subset(attributes, scheme)
    listings: dict = {}  # the folders listed for names of another case, once each
    ranges = {
        resolve(root, video, listings)[0]: video_ranges
        for video, video_ranges in read_frame_ranges(annotations_dir).items()
    }

    def frame_labels(path: str, frame: int) -> tuple[int, ...]:
        return labels_at(ranges[path], frame, names, scheme)

    def frames_of(path: str, num_frames: int) -> list[int]:
        return labelled_frames(ranges[path], num_frames, names, scheme)

    columns = dataclasses.replace(split, attribute_names=names)
    return frame_images(columns, out_dir, frames_per_video, frame_labels, frames_of)


def vispr_as_pa_hmdb51(split: Split, attributes: str = "all", scheme: str = "merged") -> Split:
    """A VISPR split labelled over (at least) the VISPR-1 ids, relabelled over the columns
    `attributes` of `scheme` by `vispr_to_pa_hmdb51`, so that a privacy model trained on VISPR
    is tested on PA-HMDB51 (the cross-dataset protocol). Unlabelled examples stay unlabelled."""
    examples = []
    for example in split.examples:
        privacy = example.privacy
        if privacy:
            merged = vispr_to_pa_hmdb51([privacy], split.attribute_names, scheme)[0]
            privacy = tuple(int(value) for value in merged)
        examples.append(dataclasses.replace(example, privacy=privacy))
    relabelled = dataclasses.replace(
        split, examples=examples, attribute_names=list(label_columns(scheme))
    )
    return _select(relabelled, attribute_subset(attributes, scheme))


def _select(split: Split, names: Sequence[str]) -> Split:
    """`split` with the privacy labels of the attributes `names` only, in that order."""
    columns = [split.attribute_names.index(name) for name in names]
    examples = [
        dataclasses.replace(e, privacy=tuple(e.privacy[c] for c in columns) if e.privacy else ())
        for e in split.examples
    ]
    return dataclasses.replace(split, examples=examples, attribute_names=list(names))
