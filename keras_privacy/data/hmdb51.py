"""HMDB51 from its official split files (`<class>_test_splitN.txt`)."""

from __future__ import annotations

import os
from pathlib import Path

from keras_privacy.data.annotations import read_lines, resolve
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split

SUBSETS = {"1": "train", "2": "test"}
"""Split-file codes that select a video; code 0 means "not used in this split"."""


def read_hmdb51(
    annotations_dir: str | os.PathLike, root: str | os.PathLike | None = None, split: int = 1
) -> dict[str, Split]:
    """The "train" and "test" examples of HMDB51 split `split` (1, 2 or 3).

    Each line of `<class>_test_splitN.txt` is `video.avi N` (1 = train, 2 = test, 0 = unused;
    names may contain `#`). Class names are sorted alphabetically (`climb` before
    `climb_stairs`), the usual HMDB51 label order. With `root`, videos are
    `root/<class>/<video>` and files not on disk are listed in `Split.missing`.
    """
    if split not in (1, 2, 3):
        raise ValueError(f"HMDB51 has splits 1, 2 and 3, not {split}")
    suffix = f"_test_split{split}.txt"
    files = {f.name[: -len(suffix)]: f for f in Path(annotations_dir).glob(f"*{suffix}")}
    if not files:
        raise FileNotFoundError(f"{annotations_dir}: no '*{suffix}' split files")
    class_names = sorted(files)
    subsets = {"train": ([], []), "test": ([], [])}
    for label, name in enumerate(class_names):
        path = files[name]
        for number, line in read_lines(path):
            video, _, code = line.rpartition(" ")
            if not video.strip() or code not in ("0", "1", "2"):
                raise DatasetFormatError(
                    f"{path}:{number}: expected 'video.avi 0|1|2', got {line!r}"
                )
            if code == "0":
                continue
            examples, missing = subsets[SUBSETS[code]]
            file, exists = resolve(root, f"{name}/{video.strip()}")
            if exists:
                examples.append(Example(path=file, label=label))
            else:
                missing.append(f"{file}: file not found")
    return {
        subset: Split(examples, class_names=class_names, missing=missing)
        for subset, (examples, missing) in subsets.items()
    }
