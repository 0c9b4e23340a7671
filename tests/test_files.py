"""Atomic file writes (`keras_privacy.files`)."""

import os

import pytest

from keras_privacy.files import write_text_atomically

pytestmark = pytest.mark.backend_independent


def test_a_file_is_replaced_whole_and_no_temporary_is_left(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("old")
    inode = path.stat().st_ino
    write_text_atomically(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["config.json"]
    assert path.stat().st_ino != inode  # a rename over it: a reader holds the old file or this


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path):
    folder = tmp_path / "taken"
    (folder / "inside").mkdir(parents=True)  # a folder in the file's place cannot be replaced
    with pytest.raises(OSError):
        write_text_atomically(folder, "text")
    assert sorted(os.listdir(tmp_path)) == ["taken"]
