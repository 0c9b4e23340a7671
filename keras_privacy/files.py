"""Writing a file so that no reader, and no crash, ever sees a part of it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write `text` to a temporary file next to `path`, then rename it over `path`: a reader
    (another process of a multi-process run, a later start after a kill) finds the old file or
    the new one, never a truncated one."""
    path = Path(path)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", delete=False
    ) as file:
        file.write(text)
        temporary = file.name
    try:
        os.replace(temporary, path)
    except OSError:
        os.unlink(temporary)
        raise
