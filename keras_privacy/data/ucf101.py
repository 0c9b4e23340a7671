"""UCF101 from its official split lists (classInd.txt, trainlist0N.txt, testlist0N.txt)."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from keras_privacy.data.annotations import ListedOnce, read_lines, resolve
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split


def read_class_index(path: str | os.PathLike) -> list[str]:
    """Class names of `classInd.txt` (`1 ApplyEyeMakeup` ...), so that index 0 is class 1."""
    names = []
    for number, line in read_lines(path, listing="class"):
        parts = line.split()
        if len(parts) != 2 or not (parts[0].isascii() and parts[0].isdigit()):
            raise DatasetFormatError(f"{path}:{number}: expected 'INDEX ClassName', got {line!r}")
        if int(parts[0]) != len(names) + 1:
            raise DatasetFormatError(
                f"{path}:{number}: class index {parts[0]} out of order (expected {len(names) + 1})"
            )
        # The lists' class folders are matched whatever their case: so are the names here.
        first = next((i for i, name in enumerate(names) if name.lower() == parts[1].lower()), None)
        if first is not None:
            raise DatasetFormatError(
                f"{path}:{number}: class {parts[1]!r} again (first as class {first + 1}"
                + ("" if names[first] == parts[1] else f", {names[first]!r}")
                + ")"
            )
        names.append(parts[1])
    return names


def read_ucf101(
    annotations_dir: str | os.PathLike, root: str | os.PathLike | None = None, split: int = 1
) -> dict[str, Split]:
    """The "train" and "test" examples of UCF101 split `split` (1, 2 or 3).

    Train lines carry a 1-based label (`Class/v_Class_g08_c01.avi 1`), checked against the
    class folder; test lines carry none, so the label comes from the class folder, matched
    case-insensitively (`HandstandPushups` holds `v_HandStandPushups_*`). A video listed twice
    (in one list, or in both) is refused. With `root`, paths are
    `root/<line path>`, found case-insensitively when the exact one is absent, and files not on
    disk are listed in `Split.missing` instead of `examples`.
    """
    if split not in (1, 2, 3):
        raise ValueError(f"UCF101 has splits 1, 2 and 3, not {split}")
    annotations_dir = Path(annotations_dir)
    class_names = read_class_index(annotations_dir / "classInd.txt")
    by_lower_name = {name.lower(): i for i, name in enumerate(class_names)}
    listings: dict = {}  # the folders listed for names of another case, once each
    result, listed = {}, ListedOnce()
    for subset in ("train", "test"):
        list_path = annotations_dir / f"{subset}list0{split}.txt"
        examples, missing = [], []
        for number, line in read_lines(list_path, listing="video"):
            relative, *rest = line.split()
            if not re.fullmatch(r"\.[A-Za-z0-9]+", PurePosixPath(relative).suffix):
                raise DatasetFormatError(
                    f"{list_path}:{number}: expected 'Class/video.avi [LABEL]', fields separated "
                    f"by a space, got {line!r}"
                )
            folder = relative.split("/")[0]
            if relative.count("/") > 1:
                raise DatasetFormatError(
                    f"{list_path}:{number}: expected 'Class/video.avi', a class folder and a file "
                    f"in it, got {relative!r}"
                )
            if "/" not in relative or folder.lower() not in by_lower_name:
                raise DatasetFormatError(
                    f"{list_path}:{number}: {relative!r} is not in a class folder of classInd.txt"
                )
            label = by_lower_name[folder.lower()]
            if rest and (len(rest) != 1 or not (rest[0].isascii() and rest[0].isdigit())):
                raise DatasetFormatError(
                    f"{list_path}:{number}: expected 'Class/video.avi [LABEL]', got {line!r}"
                )
            if rest and int(rest[0]) - 1 != label:
                raise DatasetFormatError(
                    f"{list_path}:{number}: label {rest[0]} does not match class folder {folder!r}"
                    f" (class {label + 1})"
                )
            listed.check(relative, f"{list_path}:{number}")
            path, exists = resolve(root, relative, listings)
            if exists:
                examples.append(Example(path=path, label=label))
            else:
                missing.append(f"{path}: file not found")
        result[subset] = Split(examples, class_names=class_names, missing=missing)
    return result
