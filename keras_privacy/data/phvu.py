"""P-HVU (SPAct): multi-label actions with object and scene tags as privacy attributes.

SPAct's P-HVU is a subset of LSHVU whose videos carry multi-label action, object and scene
annotations; its split lists are not published with the paper, so the user provides one label
file, in either format (chosen by the suffix):

- `.csv`: header `video,split,actions,objects,scenes` (columns picked by name, extra columns
  ignored), one row per video; the tags of a cell are separated by `|`
  (`v001.mp4,train,ski|jump,ski_pole|snow,ski_slope`); an empty cell is no tag;
- `.json`: a list of `{"video": "v001.mp4", "split": "train", "actions": ["ski", "jump"],
  "objects": ["ski_pole"], "scenes": ["ski_slope"]}` records.

`video` is a path relative to the videos' `root`; `split` is `train`, `val` or `test`. Every video
needs at least one action tag; object or scene tags may be empty (all-zero privacy labels).

Labels are multi-hot over vocabularies shared by all splits: the sorted tags found in the whole
file, or the names passed in (`action_names`, ...), so a model trained on one split reads the
other's labels. Each `Example` carries its multi-hot actions in `actions` (its `label` is -1) and
its multi-hot privacy labels in `privacy`, over the objects, the scenes, or both (`privacy=`; with
both, names are prefixed `object:` and `scene:` since an object and a scene may share a tag).

The privacy models of the evaluation (f'_B) read images: `frame_images` writes frames of each
video as PNG files with the video's privacy labels, so that in Python

    splits = read_phvu("phvu.csv", "videos/", privacy="objects")
    data = EvaluationData(splits["train"], splits["test"],  # evaluation.datasets
                          frame_images(splits["train"], "frames/train"),
                          frame_images(splits["test"], "frames/test"))

is evaluated by `protocol.evaluate` with `--action_multilabel`.

Protocols of SPAct: known attributes evaluate with `privacy="both"` (or objects and scenes
reported separately: read the file twice, once with each); novel attributes, scenes -> objects,
evaluate on `privacy="objects"` an anonymizer trained with scenes as its privacy attributes (the
SPAct paper's Table 2 header says Scenes -> Obj, while its text lists objects for training and
scenes for the novel set: swap the two for that reading). Only the evaluation is built here:
the trainers' f_T takes one action label a clip, so f_A does not train on P-HVU's multi-label
actions, and no command-line dataset reads this file.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import numpy as np

from keras_privacy.data.annotations import read_csv_rows, read_json, resolve
from keras_privacy.data.errors import DatasetFormatError, VideoDecodeError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.video import probe_video, read_video

SPLITS = ("train", "val", "test")
PRIVACY_KINDS = ("objects", "scenes", "both")
TAG_SEPARATOR = "|"
_COLUMNS = ("video", "split", "actions", "objects", "scenes")


def read_phvu(
    path: str | os.PathLike,
    root: str | os.PathLike | None = None,
    privacy: str = "both",
    action_names: Sequence[str] | None = None,
    object_names: Sequence[str] | None = None,
    scene_names: Sequence[str] | None = None,
) -> dict[str, Split]:
    """The splits of a P-HVU label file (see the module docstring for its format).

    Returns the splits present in the file by name (`train`, `val`, `test`). With `root`, paths
    are `root/<video>` and files not on disk are listed in `Split.missing`. A malformed row, an
    unknown split, a video without action tags, a tag outside given names, a repeated video or
    an empty chosen vocabulary raises `DatasetFormatError` naming the file (and line or video).
    """
    if privacy not in PRIVACY_KINDS:
        raise ValueError(f"privacy must be one of {PRIVACY_KINDS}, not {privacy!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: P-HVU label file not found")
    if path.suffix.lower() == ".csv":
        rows = _read_csv(path)
    elif path.suffix.lower() == ".json":
        rows = _read_json(path)
    else:
        raise ValueError(f"{path}: P-HVU labels must be a .csv or .json file")
    if not rows:
        raise DatasetFormatError(f"{path}: no video listed")
    seen: dict[str, str] = {}
    for where, row in rows:
        if row["split"] not in SPLITS:
            raise DatasetFormatError(f"{where}: unknown split {row['split']!r}, expected {SPLITS}")
        if not row["actions"]:
            raise DatasetFormatError(f"{where}: video {row['video']!r} has no action tag")
        if row["video"] in seen:
            raise DatasetFormatError(
                f"{where}: video {row['video']!r} listed twice (first at {seen[row['video']]})"
            )
        seen[row["video"]] = where
    kinds = ("objects", "scenes") if privacy == "both" else (privacy,)
    vocab = {
        kind: _vocabulary(path, rows, kind, names, required=kind == "actions" or kind in kinds)
        for kind, names in (
            ("actions", action_names),
            ("objects", object_names),
            ("scenes", scene_names),
        )
    }
    if privacy == "both":
        attribute_names = [f"object:{n}" for n in vocab["objects"]]
        attribute_names += [f"scene:{n}" for n in vocab["scenes"]]
    else:
        attribute_names = list(vocab[privacy])
    examples: dict[str, list[Example]] = {}
    missing: dict[str, list[str]] = {}
    listings: dict = {}  # the folders listed for names of another case, once each
    for _, row in rows:
        actions = _multi_hot(row["actions"], vocab["actions"])
        labels = sum((_multi_hot(row[kind], vocab[kind]) for kind in kinds), ())
        file, exists = resolve(root, row["video"], listings)
        examples.setdefault(row["split"], [])
        if exists:
            examples[row["split"]].append(Example(path=file, privacy=labels, actions=actions))
        else:
            missing.setdefault(row["split"], []).append(f"{file}: file not found")
    return {
        name: Split(
            examples[name],
            class_names=list(vocab["actions"]),
            attribute_names=attribute_names,
            missing=missing.get(name, []),
        )
        for name in SPLITS
        if name in examples
    }


def _vocabulary(
    path: Path, rows, kind: str, names: Sequence[str] | None, required: bool
) -> list[str]:
    """The given `names` of `kind` (every tag must be among them) or the sorted tags found;
    empty only where the labels of `kind` are not `required`."""
    if names is not None:
        known = set(names)
        if len(known) != len(names):
            raise ValueError(f"{kind} names repeat a name: {list(names)}")
        for where, row in rows:
            unknown = sorted(set(row[kind]) - known)
            if unknown:
                raise DatasetFormatError(f"{where}: {kind} tag(s) {unknown} not among the names")
        vocabulary = list(names)
    else:
        vocabulary = sorted({tag for _, row in rows for tag in row[kind]})
    if required and not vocabulary:
        raise DatasetFormatError(f"{path}: no video has any {kind} tag, the label set is empty")
    return vocabulary


def _multi_hot(tags: Sequence[str], vocabulary: Sequence[str]) -> tuple[int, ...]:
    present = set(tags)
    return tuple(int(name in present) for name in vocabulary)


def _tags(value, where: str, kind: str) -> list[str]:
    """Tags of a CSV cell (`a|b`) or a JSON list of strings, blanks dropped, order kept."""
    if isinstance(value, str):
        items = value.split(TAG_SEPARATOR)
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = value
    else:
        raise DatasetFormatError(f"{where}: {kind} must be a list of strings, got {value!r}")
    return [item.strip() for item in items if item.strip()]


def _read_csv(path: Path) -> list[tuple[str, dict]]:
    lines = read_csv_rows(path)
    header = [column.strip().lower() for column in lines[0]] if lines else []
    absent = [column for column in _COLUMNS if column not in header]
    if absent:
        raise DatasetFormatError(
            f"{path}:1: expected a header with columns {list(_COLUMNS)}, missing {absent}"
        )
    index = {column: header.index(column) for column in _COLUMNS}
    rows = []
    for number, line in enumerate(lines[1:], 2):
        if not any(cell.strip() for cell in line):
            continue
        where = f"{path}:{number}"
        if len(line) != len(header):
            raise DatasetFormatError(f"{where}: expected {len(header)} fields, got {len(line)}")
        row = {"video": line[index["video"]].strip(), "split": line[index["split"]].strip()}
        if not row["video"]:
            raise DatasetFormatError(f"{where}: empty video path")
        for kind in ("actions", "objects", "scenes"):
            row[kind] = _tags(line[index[kind]], where, kind)
        rows.append((where, row))
    return rows


def _read_json(path: Path) -> list[tuple[str, dict]]:
    records = read_json(path)
    if not isinstance(records, list):
        raise DatasetFormatError(f"{path}: expected a list of video records")
    rows = []
    for number, record in enumerate(records):
        where = f"{path}: record {number}"
        if not isinstance(record, dict):
            raise DatasetFormatError(f"{where}: expected an object, got {record!r}")
        absent = [key for key in _COLUMNS if key not in record]
        if absent:
            raise DatasetFormatError(f"{where}: missing key(s) {absent}")
        if not isinstance(record["video"], str) or not record["video"].strip():
            raise DatasetFormatError(f"{where}: video must be a non-empty path")
        row = {"video": record["video"].strip(), "split": str(record["split"]).strip()}
        for kind in ("actions", "objects", "scenes"):
            if not isinstance(record[kind], list):
                raise DatasetFormatError(f"{where}: {kind} must be a list, got {record[kind]!r}")
            row[kind] = _tags(record[kind], where, kind)
        rows.append((where, row))
    return rows


def frame_images(
    split: Split,
    out_dir: str | os.PathLike,
    frames_per_video: int = 1,
    frame_labels: Callable[[str, int], tuple[int, ...]] | None = None,
    frames_of: Callable[[str, int], Sequence[int]] | None = None,
) -> Split:
    """An image split of `frames_per_video` equidistant frames of every video of `split`
    (centres of equal segments; 0: every frame, VITA's PA-HMDB51 test), written as PNG under
    `out_dir` (kept if already there; the name holds the frame's index, so another frame is
    never taken for it), each with its video's privacy labels, or
    `frame_labels(video path, frame index)` when given (frame-level annotations). With
    `frames_of(video path, frame count)`, the frames are taken among those it gives (the
    labelled ones); a video it gives none of is listed in `missing`, as are undecodable
    videos. A video of fewer frames than `frames_per_video` gives each of them once. The
    split's `frame_sources` gives each image's video and frame index; `frame_source` the unit
    of a frame from its file name."""
    if frames_per_video < 0:
        raise ValueError(
            f"frames_per_video must be 0 (every frame) or more, got {frames_per_video}"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    examples, missing, sources = [], list(split.missing), {}
    for index, example in enumerate(split.examples):
        try:
            num_frames = probe_video(example.path).num_frames
            candidates = (
                range(num_frames) if frames_of is None else frames_of(example.path, num_frames)
            )
            if not candidates:
                missing.append(f"{example.path}: none of its {num_frames} frames is labelled")
                continue
            count = frames_per_video or len(candidates)
            picks = ((np.arange(count) + 0.5) * len(candidates) / count).astype(int)
            positions = sorted({int(candidates[pick]) for pick in picks})  # each frame once
            stem = f"{index:06d}_{Path(example.path).stem}{FRAME_MARK}"
            targets = [out_dir / f"{stem}{position}.png" for position in positions]
            frames = None if all(t.exists() for t in targets) else read_video(example.path)
        except VideoDecodeError as error:
            logging.warning("skipping %s", error)
            missing.append(str(error))
            continue
        if frames is not None:
            if frame_labels is not None and len(frames) != num_frames:
                logging.warning(
                    "%s: %d frames decoded where %d were counted (a damaged file?): its frame "
                    "labels may fall on frames up to %d away",
                    example.path,
                    len(frames),
                    num_frames,
                    abs(num_frames - len(frames)),
                )
            for target, position in zip(targets, positions):
                frame = frames[min(position, len(frames) - 1)]
                cv2.imwrite(str(target), np.ascontiguousarray(frame[..., ::-1]))
        for target, position in zip(targets, positions):
            privacy = example.privacy
            if frame_labels is not None:
                privacy = frame_labels(example.path, position)
            examples.append(Example(path=str(target), privacy=privacy))
            sources[str(target)] = (example.path, position)
    return dataclasses.replace(
        split, examples=examples, class_names=[], missing=missing, frame_sources=sources
    )


FRAME_MARK = ".frame"
"""What `frame_images` writes between a video's name and a frame's number."""


def frame_source(path: str) -> str:
    """The video a frame of `frame_images` was taken from (`<index>_<video stem>`), or `path`
    itself for any other image: the unit a test image belongs to."""
    name = Path(path).name
    return name.rsplit(FRAME_MARK, 1)[0] if FRAME_MARK in name else str(path)
