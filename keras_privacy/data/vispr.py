"""VISPR privacy images: list files naming per-image JSON annotations of attribute ids."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from keras_privacy.data.annotations import (
    ListedOnce,
    named_subset,
    read_json,
    read_lines,
    resolve,
)
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split

VISPR1 = (
    "a17_color",
    "a4_gender",
    "a9_face_complete",
    "a10_face_partial",
    "a12_semi_nudity",
    "a64_rel_personal",
    "a65_rel_social",
)
"""VISPR-1: the seven attributes of SPAct (supplementary Table 1) and of the penalty paper
(Table 4), after Wu et al.; the papers truncate the last id to `a65_rel_soci`."""

VISPR2 = (
    "a6_hair_color",
    "a16_race",
    "a59_sports",
    "a1_age_approx",
    "a2_weight_approx",
    "a73_landmark",
    "a11_tattoo",
)
"""VISPR-2: the seven novel attributes of the VISPR1 -> VISPR2 generalisation protocol (SPAct
supplementary Table 1, penalty paper Table 4)."""

SAFE = "a0_safe"
"""The id an image carries when it shows none of the 68 attributes; never a label column."""

SUBSETS = ("train", "val", "test")


def read_attribute_vocabulary(path: str | os.PathLike) -> list[str]:
    """Attribute ids of `attributes.tsv` (TAB separated `idx attribute_id group description`)."""
    ids = {}
    for number, line in read_lines(path):
        fields = [field.strip() for field in line.split("\t")]
        if number == 1 and fields[:2] == ["idx", "attribute_id"]:
            continue
        if len(fields) < 2 or not fields[1]:
            raise DatasetFormatError(
                f"{path}:{number}: expected TAB-separated 'idx attribute_id ...', got {line!r}"
            )
        if fields[1] in ids:
            raise DatasetFormatError(
                f"{path}:{number}: attribute id {fields[1]!r} again (first on line "
                f"{ids[fields[1]]})"
            )
        ids[fields[1]] = number
    if not ids:
        raise DatasetFormatError(f"{path}: lists no attribute (an empty file, or its header alone)")
    return list(ids)


def requested_ids(attributes: str | Sequence[str]) -> list[str] | None:
    """The ids `attributes` names in order: VISPR-1 or VISPR-2 by name ("vispr1", "vispr2"),
    or explicit ids (a list, or a comma-separated string); None for "all", which only the
    vocabulary spells out."""
    if not isinstance(attributes, str):
        return list(attributes)
    if attributes == "all":
        return None
    named = {"vispr1": list(VISPR1), "vispr2": list(VISPR2)}
    return named.get(attributes) or [a.strip() for a in attributes.split(",") if a.strip()]


def attribute_subset(
    attributes: str | Sequence[str], vocabulary: Sequence[str], source: str = "attributes.tsv"
) -> list[str]:
    """The attribute ids that `attributes` names, each checked against `vocabulary`.

    `attributes` is "vispr1", "vispr2", "all" (every id of the vocabulary but a0_safe), or
    explicit ids (a list, or a comma-separated string as a command line gives them). An
    unknown id raises ValueError naming it and `source` (where the vocabulary comes from).
    """
    chosen = requested_ids(attributes)
    if chosen is None:
        chosen = [a for a in vocabulary if a != SAFE]
    return named_subset(chosen, vocabulary, "VISPR", source=source)


def read_vispr(
    annotations_dir: str | os.PathLike,
    root: str | os.PathLike | None = None,
    attributes: str | Sequence[str] = "vispr1",
) -> dict[str, Split]:
    """The "train", "val" and "test" images of VISPR with binary labels over `attributes`.

    `annotations_dir` holds `{train,val,test}2017.txt` and `attributes.tsv`. Each list line
    names a per-image JSON (`{"image_path": ..., "labels": [ids]}`), looked for under
    `annotations_dir`, then under `root`. An image is positive for an attribute its `labels`
    list. A JSON not on disk is listed in `Split.missing`. Without `root` (counting the lists,
    as `stats` does) its image is still returned with `privacy=()` (unknown), at the
    conventional path `images/<subset>2017/<id>.jpg`. With `root`, images are `root/<image_path>`,
    and an image without its JSON or not on disk is listed in `missing` instead of returned,
    so every example of a split read with a root has its labels.
    A malformed JSON, an attribute id not in attributes.tsv, or a JSON listed twice (in one
    list, or in two: a test image trained on) raises `DatasetFormatError`.
    """
    annotations_dir = Path(annotations_dir)
    tsv = annotations_dir / "attributes.tsv"
    vocabulary = read_attribute_vocabulary(tsv)
    chosen = attribute_subset(attributes, vocabulary, source=str(tsv))
    known = set(vocabulary)
    result, listed = {}, ListedOnce()
    listings: dict = {}  # the folders listed for names of another case, once each
    for subset in SUBSETS:
        examples, missing = [], []
        list_path = annotations_dir / f"{subset}2017.txt"
        for number, line in read_lines(list_path, listing="image"):
            if len(line.split()) != 1:
                raise DatasetFormatError(
                    f"{list_path}:{number}: expected one annotation JSON path, got {line!r}"
                )
            listed.check(line, f"{list_path}:{number}")
            json_path = _find(line, listings, annotations_dir, root)
            if json_path is not None and Path(json_path).is_dir():
                raise DatasetFormatError(
                    f"{list_path}:{number}: {line!r} names the folder {json_path}, not an "
                    "annotation JSON"
                )
            if json_path is None and root:
                missing.append(
                    f"{annotations_dir / line}: annotation JSON not found, image skipped"
                )
                continue
            if json_path is None:
                missing.append(f"{annotations_dir / line}: annotation JSON not found")
                image_path, privacy = _image_of_annotation(line), ()
            else:
                image_path, labels = _read_image_annotation(json_path, known)
                privacy = tuple(int(a in labels) for a in chosen)
            file, exists = resolve(root, image_path, listings)
            if exists:
                examples.append(Example(path=file, privacy=privacy))
            else:
                missing.append(f"{file}: image not found")
        result[subset] = Split(examples, attribute_names=chosen, missing=missing)
    return result


def _find(relative: str, listings: dict, *folders: str | os.PathLike | None) -> str | None:
    """The first on-disk match of `relative` under the given folders (None or "" ones, no
    folder given, skipped); `listings` as `resolve`'s."""
    for folder in folders:
        if folder:
            path, exists = resolve(folder, relative, listings)
            if exists:
                return path
    return None


def _image_of_annotation(relative: str) -> str:
    """`annotations/train2017/<id>.json` -> `images/train2017/<id>.jpg` (the VISPR layout)."""
    parts = PurePosixPath(relative).with_suffix(".jpg").parts
    if parts[0] == "annotations":
        parts = ("images", *parts[1:])
    return str(PurePosixPath(*parts))


def _read_image_annotation(path: str, known: set[str]) -> tuple[str, set[str]]:
    """The image path and attribute ids of one VISPR JSON, checked against `known` ids."""
    record = read_json(path)
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("image_path"), str)
        or not record["image_path"].strip()
        or not isinstance(record.get("labels"), list)
        or not all(isinstance(label, str) for label in record["labels"])
    ):
        raise DatasetFormatError(
            f"{path}: expected an object with a non-empty 'image_path' string and a 'labels' "
            "list of attribute ids"
        )
    unknown = [label for label in record["labels"] if label not in known]
    if unknown:
        raise DatasetFormatError(
            f"{path}: unknown attribute id(s) {unknown} (not in attributes.tsv)"
        )
    return record["image_path"], set(record["labels"])
