"""Reading an image file: an RGB array, or an error that names the file."""

from __future__ import annotations

import logging
import os

import cv2
import numpy as np

JPEG_START, JPEG_END = b"\xff\xd8", b"\xff\xd9"
JPEG_TAIL = 1024
"""Bytes at a JPEG's end searched for its end marker (some writers append a few after it)."""


def read_image(path: str | os.PathLike) -> np.ndarray:
    """The (H, W, 3) uint8 RGB image in `path` (an animation's first frame, without alpha);
    raises ValueError naming the file when it is missing, empty or not a decodable image. A JPEG
    cut short still decodes (libjpeg fills its missing part in grey, with a warning of its own
    that names no file): a warning names it."""
    path = os.fspath(path)
    bgr = cv2.imread(path, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{path}: unreadable image")
    if _cut_short_jpeg(path):
        logging.warning(
            "%s: a JPEG without its end marker, probably cut short: its missing part decodes "
            "as grey",
            path,
        )
    return np.ascontiguousarray(bgr[..., ::-1])


def _cut_short_jpeg(path: str) -> bool:
    """Whether `path` starts as a JPEG and has no end marker in its last bytes."""
    with open(path, "rb") as file:
        if file.read(2) != JPEG_START:
            return False
        file.seek(max(file.seek(0, os.SEEK_END) - JPEG_TAIL, 0))
        return JPEG_END not in file.read()
