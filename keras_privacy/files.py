"""Files written so that no reader, and no crash, ever sees a part of one; `.keras` archives
read with what is wrong with them named."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import logging
import os
import re
import socket
import uuid
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras

_HOST = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write `text` (UTF-8) to a temporary file next to `path`, flush it to the disk, then
    rename it over `path`: a reader (another process of a multi-process run, a later start
    after a kill or a power cut) finds the old file or the new one, never a part of one. The
    file keeps the mode of the one it replaces (a new one: the umask's, as `open` gives);
    through a link, the link's target is written."""
    path = Path(os.path.realpath(path))
    remove_abandoned_temporaries(path, prefix=".")
    temporary = temporary_beside(path, prefix=".")
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


def temporary_beside(path: Path, prefix: str = "", suffix: str = ".tmp") -> Path:
    """A name beside `path` (`prefix`, its name, `suffix`) that no other writer uses: two
    processes writing `path` at once each write their own file, and the last rename wins. It
    names its writer (host and process id), so that a later writer can remove it once that
    process is gone (`remove_abandoned_temporaries`)."""
    return path.with_name(f"{prefix}{path.name}.{_HOST}-{os.getpid()}-{uuid.uuid4().hex}{suffix}")


def remove_abandoned_temporaries(path: Path, prefix: str = "", suffix: str = ".tmp") -> list[Path]:
    """Remove the temporaries of `path` (`temporary_beside` with the same `prefix` and
    `suffix`) whose writer, a process of this host, is gone: a process killed while writing
    leaves its temporary behind, and a cache's shard or an anonymized video is large. Those of
    live processes and of other hosts (a shared disk) are kept. Returns the files removed."""
    name = re.escape(f"{prefix}{path.name}.{_HOST}-")
    mine = re.compile(name + r"(\d+)-[0-9a-f]{32}" + re.escape(suffix))
    removed = []
    for candidate in path.parent.glob(f"{glob.escape(prefix + path.name)}.*{glob.escape(suffix)}"):
        match = mine.fullmatch(candidate.name)
        if match and not _process_alive(int(match.group(1))):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


def _process_alive(pid: int) -> bool:
    """Whether a process `pid` runs on this host (on a system without POSIX signals: assumed)."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


class LockedError(RuntimeError):
    """Another process holds the lock a writer needs (`exclusive_lock`)."""


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, what: str) -> Iterator[None]:
    """Hold an advisory lock on the file `path` (created where missing, and left in place:
    removing it would race the next holder) while inside, for one writer of a folder at a
    time. Raises LockedError naming the file, `what` it guards and its holder (host and process
    id) where another process holds it. POSIX record locks (`lockf`), which NFS carries too;
    on a disk that keeps no locks, a warning, and no lock."""
    with open(path, "a+", encoding="utf-8") as file:
        try:
            fcntl.lockf(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EAGAIN):  # a disk without locks
                logging.warning("%s: cannot be locked (%s); going on unlocked", path, error)
                yield
                return
            file.seek(0)
            holder = file.read().strip() or "a process"
            raise LockedError(f"{path}: {what} is held by {holder}") from error
        file.seek(0)
        file.truncate()
        file.write(f"host {socket.gethostname()}, process {os.getpid()}\n")
        file.flush()
        try:
            yield
        finally:
            fcntl.lockf(file, fcntl.LOCK_UN)


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


def load_keras_model(
    path: str | os.PathLike, kind: str = "Keras model", remedy: str = ""
) -> keras.Model:
    """The model saved at `path`, without its compile state. A ValueError names `path` and why
    it does not load: a `.keras` file that is no zip, a member damaged or missing (`remedy`
    after it), or a model Keras cannot rebuild as a `kind` (a class it does not know, a
    Lambda layer, a config that does not parse)."""
    import keras

    if os.fspath(path).endswith(".keras") and (problem := not_a_keras_archive(path)):
        raise ValueError(f"{path}: {problem}")
    try:
        return keras.saving.load_model(os.fspath(path), compile=False)
    except (OSError, zipfile.BadZipFile, KeyError) as error:
        # KeyError: a member the archive lacks ("There is no item named 'config.json' ...").
        reason = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise ValueError(
            f"{path}: a damaged .keras archive ({reason}){f': {remedy}' if remedy else ''}"
        ) from error
    except (ValueError, TypeError) as error:  # TypeError: a class Keras cannot rebuild
        lines = str(error).strip().splitlines() or [type(error).__name__]
        reason = lines[0].split(". ")[0].rstrip(".")
        raise ValueError(f"{path}: not loadable as a {kind} ({reason})") from error
