"""Frames between their stored form (uint8, as videos hold them) and their computed form
(float32 in [0, 1], as the models take them). NumPy only, so that every runtime can use them."""

from __future__ import annotations

import numpy as np


def frames_as_uint8(array: np.ndarray) -> np.ndarray:
    """Float frames in [0, 1] as uint8, clipped and rounded to 1/255 (a video's own precision);
    arrays of other dtypes (uint8 frames, integer labels) unchanged."""
    array = np.asarray(array)
    if array.dtype.kind != "f":
        return array
    return np.round(np.clip(array, 0.0, 1.0) * 255.0).astype(np.uint8)


def frames_as_floats(array: np.ndarray) -> np.ndarray:
    """The inverse of `frames_as_uint8`: uint8 frames as float32 in [0, 1]; others unchanged."""
    array = np.asarray(array)
    return array.astype(np.float32) / 255.0 if array.dtype == np.uint8 else array
