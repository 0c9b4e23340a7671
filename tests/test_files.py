"""Atomic file writes (`keras_privacy.files`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from keras_privacy.files import (
    LockedError,
    exclusive_lock,
    temporary_beside,
    write_text_atomically,
)

pytestmark = pytest.mark.backend_independent


def test_a_file_is_replaced_whole_keeping_its_mode_and_no_temporary_is_left(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("old")
    path.chmod(0o640)
    inode = path.stat().st_ino
    write_text_atomically(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["config.json"]
    assert path.stat().st_ino != inode  # a rename over it: a reader holds the old file or this
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_new_file_has_the_umasks_mode_and_a_link_writes_its_target(tmp_path):
    umask = os.umask(0o022)
    try:
        write_text_atomically(tmp_path / "new.json", "{}")
    finally:
        os.umask(umask)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o644  # readable by a colleague
    (tmp_path / "link.json").symlink_to(tmp_path / "new.json")
    write_text_atomically(tmp_path / "link.json", "[]")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "new.json").read_text() == "[]"


@pytest.mark.parametrize("failure", ["rename", "write"])
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, failure):
    if failure == "rename":
        target = tmp_path / "taken"
        (target / "inside").mkdir(parents=True)  # a folder in the file's place stays
        text = "text"
    else:
        target = tmp_path / "config.json"
        target.write_text("old")
        text = "\ud800"  # a lone surrogate: not encodable as UTF-8
    with pytest.raises((OSError, UnicodeEncodeError)):
        write_text_atomically(target, text)
    assert os.listdir(tmp_path) == [target.name]
    if failure == "write":
        assert target.read_text() == "old"


def killed_writers_temporary(path: Path, prefix: str = "", suffix: str = ".tmp") -> Path:
    """The name of a temporary of `path` (`temporary_beside`) whose writer, a process of this
    host, has ended without renaming it."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    mine = temporary_beside(path, prefix, suffix)
    return mine.with_name(mine.name.replace(f"-{os.getpid()}-", f"-{ended.pid}-"))


def test_a_killed_writers_temporary_is_removed_by_the_next_write_and_no_other(tmp_path):
    """A process killed between writing its temporary and renaming it leaves the temporary; the
    next write of the same file removes it, but not a live process's, another host's or another
    file's."""
    path = tmp_path / "report.json"
    mine = temporary_beside(path, prefix=".")
    assert mine.name.startswith(".report.json.") and f"-{os.getpid()}-" in mine.name
    abandoned = killed_writers_temporary(path, prefix=".")
    other_host = tmp_path / f".report.json.elsewhere-1-{'0' * 32}.tmp"
    other_file = killed_writers_temporary(tmp_path / "config.json", prefix=".")
    for kept_or_not in (mine, abandoned, other_host, other_file):
        kept_or_not.write_text("partial")
    write_text_atomically(path, "{}")
    kept = {mine.name, other_host.name, other_file.name, "report.json"}
    assert set(os.listdir(tmp_path)) == kept


HOLD_A_LOCK = """
import fcntl, os, sys, time
file = open(sys.argv[1], "a+")
fcntl.lockf(file, fcntl.LOCK_EX)
file.write(f"host elsewhere, process {os.getpid()}")
file.flush()
print("held", flush=True)
time.sleep(120)
"""


def holding_a_lock(path: Path) -> subprocess.Popen:
    """Another process holding the lock on `path` (until it is killed)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_LOCK, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_lock_another_process_holds_is_refused_naming_it_and_taken_once_free(tmp_path):
    path = tmp_path / ".lock"
    holder = holding_a_lock(path)
    try:
        with pytest.raises(LockedError) as raised:
            with exclusive_lock(path, "the run folder"):
                pass
    finally:
        holder.kill()
        holder.wait()
    assert str(raised.value) == (
        f"{path}: the run folder is held by host elsewhere, process {holder.pid}"
    )
    with exclusive_lock(path, "the run folder"):
        assert path.read_text().endswith(f"process {os.getpid()}\n")
