"""Reading an image file: an RGB array, or an error that names the file."""

from __future__ import annotations

import os

import cv2
import numpy as np


def read_image(path: str | os.PathLike) -> np.ndarray:
    """The (H, W, 3) uint8 RGB image in `path` (an animation's first frame, without alpha);
    raises ValueError naming the file when it is missing, empty or not a decodable image."""
    bgr = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError(f"{os.fspath(path)}: unreadable image")
    return np.ascontiguousarray(bgr[..., ::-1])
