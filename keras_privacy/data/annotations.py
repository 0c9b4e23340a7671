"""Helpers shared by the dataset readers: reading list files, resolving paths on disk."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

from keras_privacy.data.errors import AttributeChoiceError, DatasetFormatError


def read_lines(path: str | os.PathLike, listing: str | None = None) -> list[tuple[int, str]]:
    """Non-empty lines of a text file as (line number, text), CRLF and trailing blanks removed.
    With `listing` (what each line lists: "video", "class"), a file without one is refused by
    name: an empty split list would silently give a class or a subset no example."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: annotation file not found")
    text = read_text(path)
    lines = [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if listing is not None and not lines:
        raise DatasetFormatError(f"{path}: lists no {listing} (an empty file)")
    return lines


def read_text(path: str | os.PathLike) -> str:
    """The text of an annotation file, a byte-order mark dropped (Excel and Notepad write one:
    it would stick to the first line's first field); raises DatasetFormatError naming the file
    when it is not UTF-8 text."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise DatasetFormatError(f"{path}: not UTF-8 text ({error})") from error
    except OSError as error:  # a folder, or a file this user cannot read
        raise DatasetFormatError(f"{path}: not readable ({error.strerror or error})") from error


def read_json(path: str | os.PathLike, unique_keys: bool = False) -> object:
    """The JSON value of an annotation file (a byte-order mark dropped); raises
    DatasetFormatError naming the file (and the line) when it is not UTF-8 text or not JSON,
    and with `unique_keys` when an object names a key twice (JSON keeps the last silently)."""

    def unique(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise DatasetFormatError(f"{path}: {', '.join(map(repr, repeated))} given twice")
        return dict(pairs)

    try:
        return json.loads(read_text(path), object_pairs_hook=unique if unique_keys else None)
    except json.JSONDecodeError as error:
        raise DatasetFormatError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from error


def read_csv_rows(path: str | os.PathLike) -> list[list[str]]:
    """The rows of a CSV annotation file (a byte-order mark dropped); raises
    DatasetFormatError naming the file when it is not UTF-8 text."""
    return list(csv.reader(io.StringIO(read_text(path), newline="")))


class ListedOnce:
    """Refuses a video (or image) that a dataset's split lists name twice, in one list or in
    two: a repeated line would weight a clip twice, an overlap would test on training videos.
    Names are compared case-insensitively, as `resolve` finds files."""

    def __init__(self) -> None:
        self._first_line: dict[str, str] = {}

    def check(self, video: str, where: str) -> None:
        """Records `video` as listed at `where` ("file:line"); raises DatasetFormatError
        naming both lines when it was listed before."""
        first = self._first_line.setdefault(video.lower(), where)
        if first != where:
            raise DatasetFormatError(f"{where}: {video!r} is listed again (first at {first})")


def resolve(
    root: str | os.PathLike | None,
    relative: str,
    listings: dict[Path, dict[str, str]] | None = None,
) -> tuple[str, bool]:
    """The on-disk path of `relative` under `root` and whether it exists.

    When the exact path is missing, a case-insensitive match is looked for in its folder (UCF101
    names `HandstandPushups` files `v_HandStandPushups_*`), and for its folder in the folder's
    own parent (a class folder of another case). Without a root the relative path is returned
    as it is and counted as present. `listings` keeps each folder's listing for the next call:
    a reader passes one dict for all the files of a split, so that the names missing from a
    folder list it once, not once each (1,000 missing of VISPR's 10,000 images: 7 s).
    """
    if not root:
        return relative, True
    path = Path(root) / relative
    if path.exists():
        return str(path), True
    listings = {} if listings is None else listings
    folder = path.parent
    if not folder.is_dir():
        folder = _named_alike(folder.parent, folder.name, listings)
        if folder is None or not folder.is_dir():
            return str(path), False
    found = _named_alike(folder, path.name, listings)
    return (str(found), True) if found is not None else (str(path), False)


def _named_alike(folder: Path, name: str, listings: dict[Path, dict[str, str]]) -> Path | None:
    """The entry of `folder` whose name is `name` in any case (None if none, or no folder)."""
    if folder not in listings:
        if not folder.is_dir():
            return None
        names: dict[str, str] = {}
        for entry in folder.iterdir():
            names.setdefault(entry.name.lower(), entry.name)
        listings[folder] = names
    found = listings[folder].get(name.lower())
    return folder / found if found is not None else None


def named_subset(
    attributes: str | Sequence[str],
    known: Sequence[str],
    dataset: str,
    source: str | None = None,
) -> list[str]:
    """The attributes of `known` that `attributes` names (a list, or comma-separated), in the
    order given. Raises AttributeChoiceError naming an unknown or repeated one: `dataset` names
    the set, and `source` the file that lists `known` (without it, the message lists `known`)."""
    if isinstance(attributes, str):
        chosen = [name.strip() for name in attributes.split(",") if name.strip()]
    else:
        chosen = list(attributes)
    unknown = [name for name in chosen if name not in known]
    if unknown:
        choices = f"not in {source}" if source else f"choose all, or among {', '.join(known)}"
        raise AttributeChoiceError(
            f"unknown {dataset} attribute(s) {', '.join(unknown)}: {choices}"
        )
    if not chosen or len(set(chosen)) != len(chosen):
        got = ", ".join(chosen) or "none"
        raise AttributeChoiceError(f"choose distinct {dataset} attributes, got {got}")
    return chosen
