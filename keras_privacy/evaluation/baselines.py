"""The hand-made anonymisation baselines of SPAct's Table 1: raw, down-sampling, blackening and
Gaussian blur of people.

Every function works frame by frame on RGB frames (H, W, 3) or clips (T, H, W, 3), uint8 or float
in [0, 1], and returns the same shape and dtype. `build_baseline(name)` gives the registered
baselines as callables on one clip.

Boxes are `[x1, y1, x2, y2]` pixel boxes, `x2` / `y2` exclusive (see `detection`). For a single
frame, `boxes` is array-like (N, 4); for a clip, either one (N, 4) `np.ndarray` used for every
frame or a list of T per-frame (N_t, 4) arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import cv2
import numpy as np

from keras_privacy.evaluation.detection import Detector, PersonOrFaceDetector, clip_boxes

ClipFn = Callable[[np.ndarray], np.ndarray]


def raw(frames: np.ndarray) -> np.ndarray:
    """The raw-data baseline: the frames themselves (the same array, not a copy)."""
    return frames


def downsample(frames: np.ndarray, factor: int) -> np.ndarray:
    """Down-sample by `factor`, then resize back up to the original size, so that target models
    see their usual input size with `factor`x less detail.

    Down: `cv2.INTER_AREA` (averages each factor x factor block: no aliasing). Up:
    `cv2.INTER_LINEAR` (bilinear, the smooth look of SPAct's Fig. 1a); both keep values within
    the input range, so floats stay in [0, 1].
    """
    if factor < 1:
        raise ValueError(f"factor must be >= 1, got {factor}")

    def frame_fn(frame: np.ndarray) -> np.ndarray:
        height, width = frame.shape[:2]
        small_size = (max(1, round(width / factor)), max(1, round(height / factor)))
        small = cv2.resize(frame, small_size, interpolation=cv2.INTER_AREA)
        return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)

    return _map_frames(frame_fn, frames)


def blacken_people(frames: np.ndarray, boxes) -> np.ndarray:
    """Set every channel to 0 inside the boxes (SPAct's Obf-Blackening); a new array."""
    return _replace_in_boxes(frames, boxes, np.zeros_like)


def blur_people(frames: np.ndarray, boxes, kernel: int = 21, sigma: float = 10.0) -> np.ndarray:
    """Gaussian blur inside the boxes (SPAct's Obf-StrongBlur: kernel 21, sigma 10; WeakBlur:
    kernel 13, sigma 10); pixels outside every box are unchanged; a new array.

    Each frame is blurred whole with `cv2.GaussianBlur` (reflected border) and the blurred
    pixels are copied inside the boxes, so a box edge takes in its surroundings, and
    overlapping boxes are blurred once (SPAct blurred each box with torchvision's GaussianBlur).
    """

    def blur(frame: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(frame, (kernel, kernel), sigma)

    return _replace_in_boxes(frames, boxes, blur)


BASELINES: dict[str, Callable[..., np.ndarray]] = {
    "raw": raw,
    "downsample_2x": functools.partial(downsample, factor=2),
    "downsample_4x": functools.partial(downsample, factor=4),
    "blacken": blacken_people,
    "blur_strong": functools.partial(blur_people, kernel=21, sigma=10.0),
    "blur_weak": functools.partial(blur_people, kernel=13, sigma=10.0),
}
"""The baselines by name: a function of the frames, and of the boxes for the people ones."""

PEOPLE_BASELINES = frozenset({"blacken", "blur_strong", "blur_weak"})
"""The baselines that need person boxes."""


def build_baseline(name: str, detector: Detector | None = None) -> ClipFn:
    """The baseline `name` as a function of one (T, H, W, 3) clip (float32 in [0, 1] or uint8)
    returning the anonymised clip of the same shape and dtype.

    The people baselines find boxes with `detector.detect_clip` (default: a
    `PersonOrFaceDetector`, people by HOG and faces by Haar cascades, on 4 keyframes).
    """
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
    anonymize = BASELINES[name]
    if name not in PEOPLE_BASELINES:
        return anonymize
    detector = detector or PersonOrFaceDetector()

    def anonymize_people(clip: np.ndarray) -> np.ndarray:
        return anonymize(clip, detector.detect_clip(clip))

    return anonymize_people


def box_mask(height: int, width: int, boxes) -> np.ndarray:
    """Boolean (H, W) mask, True inside any of the (N, 4) boxes (clipped to the frame)."""
    mask = np.zeros((height, width), dtype=bool)
    for x1, y1, x2, y2 in clip_boxes(boxes, height, width):
        mask[y1:y2, x1:x2] = True
    return mask


def _replace_in_boxes(frames: np.ndarray, boxes, replacement: Callable) -> np.ndarray:
    """Frames whose pixels inside the boxes come from `replacement(frame)`."""
    frames = np.asarray(frames)
    _check_frames(frames)
    if frames.ndim == 3:
        return _replace_frame(frames, boxes, replacement)
    per_frame = _boxes_per_frame(boxes, len(frames))
    return np.stack([_replace_frame(f, b, replacement) for f, b in zip(frames, per_frame)])


def _replace_frame(frame: np.ndarray, boxes, replacement: Callable) -> np.ndarray:
    mask = box_mask(frame.shape[0], frame.shape[1], boxes)
    if not mask.any():
        return frame.copy()
    return np.where(mask[..., None], replacement(frame), frame)


def _boxes_per_frame(boxes: np.ndarray | Sequence, num_frames: int) -> Sequence:
    """One (N, 4) array for every frame, or the per-frame list checked against the clip."""
    if isinstance(boxes, np.ndarray):
        return [boxes] * num_frames
    if len(boxes) != num_frames:
        raise ValueError(f"{len(boxes)} per-frame box lists for a clip of {num_frames} frames")
    return boxes


def _map_frames(frame_fn: Callable[[np.ndarray], np.ndarray], frames: np.ndarray) -> np.ndarray:
    frames = np.asarray(frames)
    _check_frames(frames)
    if frames.ndim == 3:
        return frame_fn(frames)
    return np.stack([frame_fn(frame) for frame in frames])


def _check_frames(frames: np.ndarray) -> None:
    if frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise ValueError(f"expected RGB frames (H, W, 3) or (T, H, W, 3), got {frames.shape}")
