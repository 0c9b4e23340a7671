"""Writing a file so that no reader, and no crash, ever sees a part of it."""

from __future__ import annotations

import os
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to a temporary file next to `path`, flush it to the disk, then
    rename it over `path`: a reader (another process of a multi-process run, a later start
    after a kill or a power cut) finds the old file or the new one, never a part of one. The
    file keeps the mode of the one it replaces (a new one: the umask's, as `open` gives);
    through a link, the link's target is written."""
    path = Path(os.path.realpath(path))
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "x", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def save_atomically(path: str | os.PathLike, save: Callable[[Path], object]) -> None:
    """`save(temporary)` a file beside `path` (same suffix, which writers such as Keras'
    `model.save` and NumPy's `np.save` read the format from), then rename it to `path`: a
    process killed while saving leaves the old file or none, never a part of one."""
    path = Path(path)
    temporary = path.with_name(f".{path.stem}.partial{path.suffix}")
    try:
        save(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def not_a_keras_archive(path: str | os.PathLike) -> str | None:
    """Why the file at `path` cannot be a `.keras` archive (no zip: empty, cut short or another
    kind of file), or None where it is a zip, whose members Keras then reads."""
    if zipfile.is_zipfile(path):
        return None
    return (
        f"not a .keras archive ({os.path.getsize(path)} bytes: empty, cut short, or another kind "
        "of file)"
    )
