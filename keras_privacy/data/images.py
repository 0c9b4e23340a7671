"""Reading an image file: an RGB array, or an error that names the file."""

from __future__ import annotations

import logging
import os
import threading

import cv2
import numpy as np

JPEG_START, JPEG_END, START_OF_SCAN = b"\xff\xd8", b"\xff\xd9", 0xDA
STANDALONE_MARKERS = {0x01, *range(0xD0, 0xD8)}
"""JPEG markers without a length field (TEM, RST0-7)."""

JPEG_CUT_SHORT = "a JPEG without its end marker, probably cut short"
_cut_short: dict[tuple[str, int, int], bool] = {}
"""Whether each file read so far is a JPEG cut short, by path, size and modification time:
checked the first time it is read, and again once it is rewritten."""
_cut_short_lock = threading.Lock()
IMAGE_SIGNATURES = (
    b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a", b"BM", b"II*\x00", b"MM\x00*"
)  # fmt: skip
"""How JPEG, PNG, GIF, BMP and TIFF files start (WebP: RIFF, 4 bytes, WEBP)."""


def read_image(path: str | os.PathLike) -> np.ndarray:
    """The (H, W, 3) uint8 RGB image in `path` (an animation's first frame, without alpha), as
    stored: an EXIF orientation is not applied, as the authors' loaders (torchvision's
    `read_image`, scikit-image's `imread`) do not apply it to VISPR's photos. Raises ValueError
    naming the file when it is missing, empty or not a decodable image. A JPEG cut short still
    decodes (libjpeg fills its missing part in grey, with a warning of its own that names no
    file): a warning names it, the first time the file is read."""
    return read_image_and_cut(path)[0]


def read_image_and_cut(path: str | os.PathLike) -> tuple[np.ndarray, bool]:
    """`read_image`'s image, and whether the file is a JPEG cut short (`jpeg_cut_short`, run
    once per version of a file: a later read of it unchanged takes the first one's answer)."""
    path = os.fspath(path)
    bgr = cv2.imread(path, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if bgr is None:
        raise ValueError(f"{path}: unreadable image: {_why_unreadable(path)}")
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    with _cut_short_lock:
        cut = _cut_short.get(key)
    if cut is None:
        cut = jpeg_cut_short(path)
        with _cut_short_lock:
            first = key not in _cut_short
            _cut_short.setdefault(key, cut)
        if cut and first:
            logging.warning("%s: %s: its missing part decodes as grey", path, JPEG_CUT_SHORT)
    return np.ascontiguousarray(bgr[..., ::-1]), cut


def jpeg_cut_short(path: str | os.PathLike) -> bool:
    """Whether `path` is a JPEG whose image data has no end marker after its first scan. Data
    after the marker (a motion photo's video, padding) is allowed, and a thumbnail's marker in
    the metadata before the scan does not count."""
    with open(path, "rb") as file:
        data = file.read()
    if not data.startswith(JPEG_START):
        return False
    scan = _first_scan(data)
    return scan is None or JPEG_END not in data[scan:]


def _first_scan(data: bytes) -> int | None:
    """Where the entropy-coded data of a JPEG's first scan starts: after the segments before
    it (metadata, tables, frame header), skipped by their lengths, and stray bytes between
    them skipped up to the next marker as libjpeg does ("extraneous bytes before marker");
    None where they run past the end."""
    position = len(JPEG_START)
    while position + 4 <= len(data):
        if data[position] != 0xFF:
            position = data.find(b"\xff", position)
            if position < 0:
                return None
            continue
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte
            position += 1
            continue
        if marker == 0x00:  # a stuffed zero, no marker: libjpeg's search goes on past it
            position += 2
            continue
        if marker in STANDALONE_MARKERS:
            position += 2
            continue
        end = position + 2 + int.from_bytes(data[position + 2 : position + 4], "big")
        if marker == START_OF_SCAN:
            return end
        position = end
    return None


def _why_unreadable(path: str) -> str:
    """Why OpenCV read no image from `path`: missing, empty, not an image file, or corrupt."""
    if not os.path.exists(path):
        return "no such file"
    if os.path.isdir(path):
        return "a folder, not an image file"
    with open(path, "rb") as file:
        head = file.read(12)
    if not head:
        return "empty file (0 bytes)"
    webp = head[:4] == b"RIFF" and head[8:12] == b"WEBP"
    if not webp and not head.startswith(IMAGE_SIGNATURES):
        return f"not a JPEG, PNG, GIF, BMP, TIFF or WebP file (it starts with {head[:8]!r})"
    return "corrupt image data (an image file's header, but it does not decode)"
