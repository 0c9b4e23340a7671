"""Video-level privacy labels (VP-UCF101 / VP-HMDB51 style) from a CSV or JSON file."""

from __future__ import annotations

import ast
import dataclasses
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePath

from keras_privacy.data.annotations import named_subset, read_csv_rows, read_json
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Split

VP_ATTRIBUTES = ("face", "skin_color", "gender", "nudity", "relationship")
"""The five binary attributes of VP-UCF101 and VP-HMDB51 (face, skin colour, gender, nudity,
familial relationship), in the order of the penalty paper's dataset section."""
ARRAY_HEADER = ("File Path", "Array Values")
"""The header of the VP labels' CSV as loaders of the release read it (one list per video)."""


def read_vp_labels(
    path: str | os.PathLike,
    attribute_names: Sequence[str] | None = None,
    list_order: Sequence[str] | None = None,
) -> dict[str, tuple[int, ...]]:
    """Video name -> binary labels over `attribute_names` (default `list_order`, else
    `VP_ATTRIBUTES`).

    Formats, chosen by the file suffix:
    - `.csv`: header `video,<attr1>,...`, one row per video; columns are picked by name, so
      their order in the file does not matter and extra columns are ignored;
    - `.csv` with `File Path` and `Array Values` columns (as loaders of the VP release read
      it): one video and a list of labels, `"[1, 0, 1, 0, 0]"`;
    - `.json`: `{"video.avi": {"attr": 0/1, ...}}` (picked by name) or
      `{"video.avi": [0, 1, ...]}`.
    A list holds the attributes `list_order` (default `attribute_names`) in that order, of
    which `attribute_names` are picked, so that a subset of the five is read from the release.
    Video names are kept as written (a bare name or `Class/video.avi`). A value other than
    0/1, a missing attribute or a repeated video raises `DatasetFormatError` naming the file.
    """
    path = Path(path)
    names = tuple(attribute_names or list_order or VP_ATTRIBUTES)
    order = tuple(list_order or names)
    absent = [name for name in names if name not in order]
    if absent or len(set(order)) != len(order):
        raise ValueError(
            f"{path}: the attributes {list(names)} must be among the list order {list(order)}, "
            "each once"
        )
    columns = ListColumns(order, tuple(order.index(name) for name in names))
    if path.suffix.lower() == ".csv":
        return _read_csv(path, names, columns)
    if path.suffix.lower() == ".json":
        return _read_json(path, names, columns)
    raise ValueError(f"{path}: privacy labels must be a .csv or .json file")


@dataclasses.dataclass(frozen=True)
class ListColumns:
    """How a list of labels is read: it holds the attributes `order`, of which the positions
    `picked` are kept."""

    order: tuple[str, ...]
    picked: tuple[int, ...]

    def pick(self, values: Sequence[int | float | str], where: str) -> tuple[int, ...]:
        """The picked labels of the list `values` (read at `where`), each 0 or 1."""
        return tuple(_binary(values[index], where) for index in self.picked)


def vp_attribute_subset(attributes: str) -> list[str]:
    """The VP attributes that an `--eval_privacy_attributes` value names: the five
    `VP_ATTRIBUTES` for `all`, else a comma-separated subset, in the order given. Raises
    ValueError naming an unknown or repeated one."""
    if attributes == "all":
        return list(VP_ATTRIBUTES)
    return named_subset(attributes, VP_ATTRIBUTES, "VP")


def _binary(value, where: str) -> int:
    """0 or 1 from an int, a bool, a float 0.0/1.0 or a string "0"/"1"; anything else is a
    format error."""
    whole = isinstance(value, bool) or (isinstance(value, float) and value in (0.0, 1.0))
    text = str(int(value)) if whole else str(value).strip()
    if text not in ("0", "1"):
        raise DatasetFormatError(f"{where}: expected a 0/1 label, got {value!r}")
    return int(text)


def _read_csv(
    path: Path, names: tuple[str, ...], list_columns: ListColumns
) -> dict[str, tuple[int, ...]]:
    rows = read_csv_rows(path)
    if not rows:
        raise DatasetFormatError(f"{path}:1: empty file, expected a 'video,<attr>,...' header")
    header = [column.strip() for column in rows[0]]
    if all(name in header for name in ARRAY_HEADER):
        return _read_array_csv(path, rows, list_columns)
    absent = [name for name in names if name not in header]
    if not header or header[0].lower() != "video" or absent:
        raise DatasetFormatError(
            f"{path}:1: expected a header 'video,<attr>,...' with columns {list(names)}, "
            f"missing {absent or ['video']}"
        )
    repeated = sorted({name for name in names if header.count(name) > 1})
    if repeated:
        raise DatasetFormatError(f"{path}:1: the header names column(s) {repeated} twice")
    columns = [header.index(name) for name in names]
    labels = {}
    for where, row in _data_rows(path, rows):
        _add_once(labels, row[0], tuple(_binary(row[c], where) for c in columns), where)
    return labels


def _read_array_csv(
    path: Path, rows: list[list[str]], list_columns: ListColumns
) -> dict[str, tuple[int, ...]]:
    """The rows of a CSV with `File Path` and `Array Values` columns (others, such as a pandas
    index, ignored): a video and its labels as a Python list or tuple literal."""
    header = [column.strip() for column in rows[0]]
    video_column, values_column = (header.index(name) for name in ARRAY_HEADER)
    _warn_list_order(path, list_columns.order)
    labels = {}
    for where, row in _data_rows(path, rows):
        try:
            values = ast.literal_eval(row[values_column].strip())
        except (ValueError, SyntaxError):
            values = None
        if not isinstance(values, (list, tuple)) or len(values) != len(list_columns.order):
            raise DatasetFormatError(
                f"{where}: expected a list of {len(list_columns.order)} labels under 'Array "
                f"Values' (the list order {list(list_columns.order)}), got "
                f"{row[values_column]!r}"
            )
        _add_once(labels, row[video_column], list_columns.pick(values, where), where)
    return labels


def _warn_list_order(path: Path, order: Sequence[str]) -> None:
    """Say in which order the lists of `path` are read: no release file here confirms it."""
    logging.warning(
        "%s: each list read as the labels of %s, in this order (not confirmed by a release "
        "file here: check it against the VP release's documentation)",
        path,
        ", ".join(order),
    )


def _data_rows(path: Path, rows: list[list[str]]) -> Iterator[tuple[str, list[str]]]:
    """("file:line", row) of each non-blank row below the header, as wide as the header."""
    for number, row in enumerate(rows[1:], 2):
        if not any(cell.strip() for cell in row):
            continue
        where = f"{path}:{number}"
        if len(row) != len(rows[0]):
            raise DatasetFormatError(f"{where}: expected {len(rows[0])} fields, got {len(row)}")
        yield where, row


def _add_once(labels: dict, video: str, values: tuple[int, ...], where: str) -> None:
    """`labels[video] = values`; a video listed again is a format error at `where`."""
    video = video.strip()
    if not video:
        raise DatasetFormatError(f"{where}: no video name")
    if video in labels:
        raise DatasetFormatError(f"{where}: video {video!r} listed twice")
    labels[video] = values


def _read_json(
    path: Path, names: tuple[str, ...], list_columns: ListColumns
) -> dict[str, tuple[int, ...]]:
    records = read_json(path, unique_keys=True)
    if not isinstance(records, dict):
        raise DatasetFormatError(f"{path}: expected an object mapping video names to labels")
    labels = {}
    if any(isinstance(record, list) for record in records.values()):
        _warn_list_order(path, list_columns.order)
    unknown = set()
    for video, record in records.items():
        where = f"{path}: video {video!r}"
        if isinstance(record, dict):
            absent = [name for name in names if name not in record]
            if absent:
                raise DatasetFormatError(f"{where}: missing attribute(s) {absent}")
            unknown |= set(record) - set(list_columns.order) - set(VP_ATTRIBUTES)
            _add_once(labels, video, tuple(_binary(record[name], where) for name in names), where)
        elif isinstance(record, list) and len(record) == len(list_columns.order):
            _add_once(labels, video, list_columns.pick(record, where), where)
        else:
            raise DatasetFormatError(
                f"{where}: expected an object of attributes or a list of "
                f"{len(list_columns.order)} labels (the list order {list(list_columns.order)})"
            )
    if unknown:
        logging.warning(
            "%s: ignoring the keys %s, which are neither the attributes read (%s) nor VP's",
            path,
            ", ".join(sorted(map(repr, unknown))),
            ", ".join(names),
        )
    return labels


def attach_privacy_labels(
    split: Split,
    labels: dict[str, tuple[int, ...]],
    attribute_names: Sequence[str] = VP_ATTRIBUTES,
) -> Split:
    """A copy of `split` whose examples carry their video's labels from `labels`.

    Videos are matched by file name without its extension (loaders of the VP release turn
    its `.mp4` names into UCF101's `.avi`), case-insensitively; label keys may also hold the
    class folder. Examples without labels are left out and listed in `missing`.
    `attribute_names` names the label positions: pass the names given to `read_vp_labels`.
    """
    by_name: dict[str, tuple[int, ...]] = {}
    first_key: dict[str, str] = {}
    for video, values in labels.items():
        if len(values) != len(attribute_names):
            raise ValueError(
                f"labels of {video!r} have {len(values)} values for {len(attribute_names)} "
                "attribute names"
            )
        key = PurePath(video.replace("\\", "/")).stem.lower()
        if key in by_name and by_name[key] != tuple(values):
            raise ValueError(
                f"the labels of {first_key[key]!r} and {video!r} differ, and both are video "
                f"{key!r} (videos are matched by file name, without extension or case)"
            )
        by_name[key] = tuple(values)
        first_key.setdefault(key, video)
    examples, missing = [], list(split.missing)
    for example in split.examples:
        values = by_name.get(PurePath(example.path).stem.lower())
        if values is None:
            missing.append(f"{example.path}: no privacy labels")
        else:
            examples.append(dataclasses.replace(example, privacy=values))
    return dataclasses.replace(
        split, examples=examples, attribute_names=list(attribute_names), missing=missing
    )
