"""Offline person boxes for the blur and blackening baselines.

SPAct detected people with a COCO-pretrained YOLOv5x; no weights can be downloaded here, so the
detectors below use what OpenCV < 5 ships offline:

- `HogPeopleDetector`: the Dalal-Triggs HOG + linear SVM pedestrian detector
  (`cv2.HOGDescriptor_getDefaultPeopleDetector`). Its window is 64 x 128 pixels, so it only finds
  standing people at least ~128 px tall: small frames are upscaled before detection.
- `HaarFaceDetector`: OpenCV's bundled Haar cascades (frontal and profile faces). Close-ups such
  as UCF101's ApplyEyeMakeup show a head and hands, no full body, and HOG finds no real person
  there; the face boxes are enlarged to cover the head and hair.
- `PersonOrFaceDetector`: the union of both, the default of the baselines. It detects "a person's
  body or head", which is what the blur / blackening baselines must hide.

Boxes are (N, 4) int32 arrays `[x1, y1, x2, y2]` in pixels of the frame given, `x2` and `y2`
exclusive (the box is `frame[y1:y2, x1:x2]`).

Clips: running a detector on every frame is slow and flickers (a person missed on one frame is
left visible there), so by default a detector runs on `keyframes` equidistant frames and the
union of their boxes is applied to every frame of the clip. Over a whole video the union both
over-covers and misses: on test.avi 34 % of the pixels that detecting each frame covers are
left visible by it (a moving head between keyframes). `keyframes=None` detects on every frame
and keeps each frame's own boxes.

Large images: a frame whose longer side exceeds `max_side` (640 pixels, the inference size of
YOLOv5's `detect.py`, SPAct's detector) is area-reduced to it before detection and its boxes are
scaled back: a 4000 x 3000 image (test.avi's frame blown up) took ~20 s with HOG and Haar at
full size on 2 cores (with spurious small HOG boxes), ~0.8 s at 640; UCF101's and
HMDB51's frames are smaller and detected as they are.

Known limits, measured on test.avi (a face filling a 320 x 240 frame, eyes closed, a hand over
it): the face is found on about 60 % of the frames, as a box over the eyes and forehead
(~(190, 0)-(320, 124)) that leaves the mouth and chin visible; false hits fall on a cardboard box
and a dark cabinet (HOG) in the background and on the hand. A learned detector (SPAct: YOLOv5x)
does better; `BoxesFromFile` takes boxes made by one (see its docstring for the JSON format).
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Protocol

import cv2
import numpy as np

from keras_privacy.data.frames import frames_as_uint8

_HOG_WINDOW_HEIGHT = 128
DETECTION_SIDE = 640
"""The longer side, in pixels, to which the offline detectors reduce larger frames: YOLOv5's
inference size (`detect.py --img 640`)."""
OUTSIDE_TOLERANCE = 0.05
"""How far, as a fraction of the frame's side, a box of a box file may reach beyond its frame
(a detector's unclipped box at the edge) before it is taken for a box of other pixels."""


class Detector(Protocol):
    """Anything that gives the boxes of each frame of a (T, H, W, 3) clip."""

    def detect_clip(self, clip: np.ndarray) -> list[np.ndarray]:
        """One (N, 4) array of (x1, y1, x2, y2) pixel boxes per frame of `clip`."""
        ...


def non_max_suppression(
    boxes: np.ndarray, scores: np.ndarray, iou_threshold: float = 0.3
) -> np.ndarray:
    """Indices of the boxes kept by greedy NMS: highest score first, dropping every box whose
    IoU with a kept one exceeds `iou_threshold`."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    order = list(np.argsort(-np.asarray(scores, np.float64), kind="stable"))
    kept = []
    while order:
        best, order = order[0], order[1:]
        kept.append(best)
        if not order:
            break
        rest = boxes[order]
        width = np.minimum(rest[:, 2], boxes[best, 2]) - np.maximum(rest[:, 0], boxes[best, 0])
        height = np.minimum(rest[:, 3], boxes[best, 3]) - np.maximum(rest[:, 1], boxes[best, 1])
        overlap = np.clip(width, 0, None) * np.clip(height, 0, None)
        iou = overlap / (areas[order] + areas[best] - overlap)
        order = [index for index, value in zip(order, iou) if value <= iou_threshold]
    return np.asarray(kept, dtype=np.int64)


def round_outwards(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) boxes with their corners rounded outwards to whole pixels (float64), so that a
    box still covers every pixel it touches."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    return np.concatenate([np.floor(boxes[:, :2]), np.ceil(boxes[:, 2:])], axis=1)


def clip_boxes(boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """Boxes rounded outwards to whole pixels, clipped to the frame, empty ones dropped."""
    boxes = np.clip(round_outwards(boxes), 0, [width, height, width, height]).astype(np.int32)
    return boxes[(boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])]


def keyframe_indices(num_frames: int, keyframes: int) -> np.ndarray:
    """`keyframes` equidistant frame indices from the first to the last frame (fewer if the
    clip is shorter)."""
    count = max(1, min(keyframes, num_frames))
    return np.unique(np.linspace(0, num_frames - 1, count).round().astype(np.int64))


def reduced_to(frame: np.ndarray, max_side: int | None) -> tuple[np.ndarray, float]:
    """`frame` area-reduced so that its longer side is at most `max_side` (None: as it is),
    and the factor from its pixels to the reduced frame's."""
    height, width = frame.shape[:2]
    if max_side is None or max(height, width) <= max_side:
        return frame, 1.0
    factor = max_side / max(height, width)
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA), factor


@dataclasses.dataclass
class FrameDetector(abc.ABC):
    """A per-frame detector with the clip strategy of the module docstring.

    Attributes:
        keyframes: Frames detected per clip, whose boxes are united and applied to every frame;
            None detects every frame and keeps per-frame boxes.
        max_side: `detect_clip` detects on frames area-reduced to this longer side and scales
            the boxes back to the clip's pixels (None: frames as they are).
    """

    keyframes: int | None = 4
    max_side: int | None = None

    @abc.abstractmethod
    def detect(self, frame: np.ndarray) -> np.ndarray:
        """(N, 4) int32 boxes of one RGB frame (H, W, 3), uint8 or float in [0, 1]."""

    def detect_clip(self, clip: np.ndarray) -> list[np.ndarray]:
        """The boxes of every frame of a (T, H, W, 3) clip (a list of T arrays)."""
        if self.keyframes is None:
            return [self._detect_reduced(frame) for frame in clip]
        indices = keyframe_indices(len(clip), self.keyframes)
        found = [self._detect_reduced(clip[index]) for index in indices]
        union = np.concatenate(found).reshape(-1, 4)
        return [union] * len(clip)

    def _detect_reduced(self, frame: np.ndarray) -> np.ndarray:
        """`detect` on the frame reduced to `max_side`, its boxes in the frame's pixels."""
        reduced, factor = reduced_to(frame, self.max_side)
        if factor == 1.0:
            return self.detect(frame)
        return clip_boxes(self.detect(reduced) / factor, *frame.shape[:2])


@dataclasses.dataclass
class HogPeopleDetector(FrameDetector):
    """OpenCV's HOG pedestrian detector with upscaling and non-maximum suppression.

    Attributes:
        max_side: As `FrameDetector`'s: larger frames are reduced to `DETECTION_SIDE`.
        min_height: Frames shorter than this are upscaled (bilinear) to it before detection;
            the 64 x 128 HOG window then fits people ~128 / upscale px tall (a 240 px high
            UCF101 frame is detected at 2x).
        win_stride: Window step in pixels of the upscaled frame.
        scale: Step of the detection image pyramid.
        min_score: SVM score below which a window is dropped (OpenCV keeps every window
            above 0; on the clutter of UCF101's test.avi spurious windows score 0.2-0.55 at 2x).
        nms_iou: IoU above which overlapping boxes are suppressed.
    """

    max_side: int | None = DETECTION_SIDE
    min_height: int = 2 * 240
    win_stride: int = 8
    scale: float = 1.05
    min_score: float = 0.5
    nms_iou: float = 0.3

    def __post_init__(self) -> None:
        self._hog = cv2.HOGDescriptor()
        self._hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())

    def detect(self, frame: np.ndarray) -> np.ndarray:
        frame = frames_as_uint8(frame)
        height, width = frame.shape[:2]
        factor = max(1.0, self.min_height / height)
        if factor > 1.0:
            frame = cv2.resize(frame, None, fx=factor, fy=factor, interpolation=cv2.INTER_LINEAR)
        if frame.shape[0] < _HOG_WINDOW_HEIGHT:
            return np.zeros((0, 4), np.int32)
        rects, weights = self._hog.detectMultiScale(
            frame, winStride=(self.win_stride,) * 2, padding=(16, 16), scale=self.scale
        )
        rects = np.asarray(rects, np.float64).reshape(-1, 4)
        scores = np.asarray(weights, np.float64).reshape(-1)
        keep = scores >= self.min_score
        boxes = _xywh_to_xyxy(rects[keep]) / factor
        boxes = boxes[non_max_suppression(boxes, scores[keep], self.nms_iou)]
        return clip_boxes(boxes, height, width)


@dataclasses.dataclass
class HaarFaceDetector(FrameDetector):
    """OpenCV's bundled Haar face cascades on the histogram-equalised grey frame: the frontal
    cascade, and the profile cascade on the frame and its mirror (it knows one side only).

    Attributes:
        max_side: As `FrameDetector`'s: larger frames are reduced to `DETECTION_SIDE`.
        frontal: Frontal-face cascade file in `cv2.data.haarcascades`.
        profile: Profile-face cascade file in `cv2.data.haarcascades`.
        scale_factor: Step of the cascades' image pyramid (1.1 misses most of the partly
            hidden faces of UCF101's make-up close-ups that 1.05 finds).
        min_neighbors: Overlapping hits needed to keep a face (OpenCV's default 5 misses
            those faces too).
        min_size: Smallest face side in pixels; the cost grows as it shrinks (~0.8 s for a
            320 x 240 frame at 32 px on one CPU core, ~0.6 s at 48 px).
        expand: Each face box is scaled by this about its centre to cover the head and hair.
        nms_iou: IoU above which overlapping boxes are suppressed (the larger one is kept).
    """

    max_side: int | None = DETECTION_SIDE
    frontal: str = "haarcascade_frontalface_default.xml"
    profile: str = "haarcascade_profileface.xml"
    scale_factor: float = 1.05
    min_neighbors: int = 3
    min_size: int = 32
    expand: float = 1.6
    nms_iou: float = 0.3

    def __post_init__(self) -> None:
        self._frontal = _load_cascade(self.frontal)
        self._profile = _load_cascade(self.profile)

    def detect(self, frame: np.ndarray) -> np.ndarray:
        gray = cv2.equalizeHist(cv2.cvtColor(frames_as_uint8(frame), cv2.COLOR_RGB2GRAY))
        height, width = gray.shape
        mirrored = self._faces(self._profile, gray[:, ::-1].copy())
        unmirrored = np.stack(
            [width - mirrored[:, 2], mirrored[:, 1], width - mirrored[:, 0], mirrored[:, 3]], axis=1
        )
        faces = [self._faces(self._frontal, gray), self._faces(self._profile, gray), unmirrored]
        boxes = _scale_about_centre(np.concatenate(faces), self.expand)
        areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        return clip_boxes(boxes[non_max_suppression(boxes, areas, self.nms_iou)], height, width)

    def _faces(self, classifier: cv2.CascadeClassifier, gray: np.ndarray) -> np.ndarray:
        rects = classifier.detectMultiScale(
            gray,
            scaleFactor=self.scale_factor,
            minNeighbors=self.min_neighbors,
            minSize=(self.min_size, self.min_size),
        )
        return _xywh_to_xyxy(np.asarray(rects, np.float64).reshape(-1, 4))


@dataclasses.dataclass
class PersonOrFaceDetector(FrameDetector):
    """Boxes of people (HOG) or faces (Haar, enlarged to the head): the baselines' default,
    on frames reduced to `DETECTION_SIDE` (`max_side`)."""

    max_side: int | None = DETECTION_SIDE
    person: HogPeopleDetector = dataclasses.field(default_factory=HogPeopleDetector)
    face: HaarFaceDetector = dataclasses.field(default_factory=HaarFaceDetector)

    def detect(self, frame: np.ndarray) -> np.ndarray:
        return np.concatenate([self.person.detect(frame), self.face.detect(frame)])

    @property
    def description(self) -> str:
        """The detector in words, for the report."""
        frames = "every frame" if self.keyframes is None else f"{self.keyframes} keyframes"
        side = "" if self.max_side is None else f", at most {self.max_side} px a side"
        return f"OpenCV HOG people + Haar faces ({frames}{side})"


class BoxesFromFile:
    """Person boxes given by the user in a JSON file, instead of a detector.

    Format: one key per video or image, its file name without folders (the evaluation looks
    each file up by it), whose value is a list of boxes in pixels of the source frames the
    baseline receives, `x2` / `y2` exclusive, either

    - `[[frame_index, x1, y1, x2, y2], ...]`: boxes per frame of a video (0-based frame index
      in the video; several entries may share a frame; a frame with no entry has no box), or
    - `[[x1, y1, x2, y2], ...]`: boxes of an image, or of every frame of a video.

    Example: `{"v_ApplyEyeMakeup_g01_c01.avi": [[0, 180, 0, 320, 240], [1, 182, 0, 320, 240]],
    "2017_10001018.jpg": [[12, 40, 200, 380]]}`. The two forms cannot be mixed under one key.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} (--eval_boxes): no such box file")
        with open(path, "rb") as file:
            content = file.read()
        self.sha256 = hashlib.sha256(content).hexdigest()
        """The digest of the file as read, naming these boxes in an evaluation cache's key."""
        try:
            raw = json.loads(content)
        except UnicodeDecodeError as error:
            raise ValueError(f"{path}: not UTF-8 text ({error})") from error
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: invalid JSON ({error.msg})") from error
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object of name -> list of boxes")
        self._entries = {
            name: _parse_entries(f"{path}: {name!r}", entries) for name, entries in raw.items()
        }

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    @property
    def description(self) -> str:
        """Where the boxes come from, for the report."""
        return f"boxes from {self.path} (--eval_boxes)"

    @property
    def names(self) -> list[str]:
        """The videos and images the file gives boxes for."""
        return list(self._entries)

    def require(self, names: Sequence[str]) -> None:
        """Raise ValueError naming the file, how many of `names` it gives no boxes for and the
        first of them: checked before an evaluation, not when its baseline reaches the file."""
        missing = [name for name in names if name not in self._entries]
        if missing:
            raise ValueError(
                f"{self.path} (--eval_boxes): no boxes for {len(missing)} of the evaluation's "
                f"{len(names)} files, e.g. {missing[0]!r}"
            )

    def frame_boxes(self, name: str, frame_index: int = 0) -> np.ndarray:
        """The (N, 4) boxes of frame `frame_index` of `name` (an image's boxes for any index)."""
        if name not in self._entries:
            raise ValueError(f"{self.path} (--eval_boxes): no boxes for {name!r}")
        static, per_frame = self._entries[name]
        if static is not None:
            return static
        return per_frame.get(int(frame_index), np.zeros((0, 4), np.int32))

    def detector(self, name: str, frame_indices: Sequence[int] | None = None) -> Detector:
        """A `Detector` giving the boxes of `name` to a clip whose frame t is video frame
        `frame_indices[t]` (default: frame t), for `baselines.build_baseline`."""
        return _FileBoxes(self, name, frame_indices)


@dataclasses.dataclass(frozen=True)
class KnownBoxes:
    """A `Detector` giving the same (N, 4) `boxes` to every frame of a clip: boxes found
    elsewhere (a frame's boxes in its whole video)."""

    boxes: np.ndarray

    def detect_clip(self, clip: np.ndarray) -> list[np.ndarray]:
        """`boxes` for each frame of `clip`."""
        return [self.boxes] * len(clip)


@dataclasses.dataclass(frozen=True)
class _FileBoxes:
    source: BoxesFromFile
    name: str
    frame_indices: Sequence[int] | None

    def detect_clip(self, clip: np.ndarray) -> list[np.ndarray]:
        indices = range(len(clip)) if self.frame_indices is None else self.frame_indices
        if len(indices) != len(clip):
            raise ValueError(f"{len(indices)} frame indices for a clip of {len(clip)} frames")
        boxes = [self.source.frame_boxes(self.name, index) for index in indices]
        height, width = clip.shape[1:3]
        for index, frame_boxes in zip(indices, boxes):
            self._require_inside(frame_boxes, index, height, width)
        return boxes

    def _require_inside(self, boxes: np.ndarray, index: int, height: int, width: int) -> None:
        """Refuse a box reaching beyond its frame by more than `OUTSIDE_TOLERANCE` of a side:
        boxes in pixels of another size or orientation (a detector that read an image with
        its EXIF rotation applied, or resized frames) would mask the wrong pixels."""
        slack_x, slack_y = OUTSIDE_TOLERANCE * width, OUTSIDE_TOLERANCE * height
        for box in boxes:
            x1, y1, x2, y2 = box.tolist()
            if min(x1 + slack_x, y1 + slack_y) < 0 or x2 > width + slack_x or y2 > height + slack_y:
                raise ValueError(
                    f"{self.source.path} (--eval_boxes): {self.name!r}, frame {index}: box "
                    f"{box.tolist()} reaches beyond its {width} x {height} frame; boxes are "
                    "in pixels of the files as stored (videos at their size, images without "
                    "their EXIF rotation)"
                )


def _parse_entries(where: str, entries) -> tuple[np.ndarray | None, dict[int, np.ndarray]]:
    """(boxes of every frame, or None; boxes by frame index) of one key of the JSON file;
    `where` names the file and the key in an error."""
    expected = f"{where}: expected a list of [x1, y1, x2, y2] or of [frame, x1, y1, x2, y2]"
    try:
        array = np.asarray(entries, np.float64)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{expected} ({error})") from error
    if array.size == 0:
        return np.zeros((0, 4), np.int32), {}
    if array.ndim != 2 or array.shape[1] not in (4, 5):
        raise ValueError(expected)
    _check_boxes(where, array)
    if array.shape[1] == 4:
        return round_outwards(array).astype(np.int32), {}
    per_frame: dict[int, list] = {}
    for row in array:
        per_frame.setdefault(int(row[0]), []).append(row[1:])
    return None, {
        index: round_outwards(boxes).astype(np.int32) for index, boxes in per_frame.items()
    }


def _check_boxes(where: str, rows: np.ndarray) -> None:
    """Refuse a row with a value that is not a finite number, a frame index that is not a
    whole number from 0, or a box whose corners are inverted ([x, y, w, h] boxes of a box
    writer of another convention, which would mask nothing or the wrong pixels)."""
    for row in rows:
        if not np.all(np.isfinite(row)):
            raise ValueError(f"{where}: {row.tolist()} holds a value that is not a finite number")
        if len(row) == 5 and not (row[0] >= 0 and row[0] == int(row[0])):
            raise ValueError(
                f"{where}: {row.tolist()}: the frame {row[0]:g} is not an index from 0"
            )
        x1, y1, x2, y2 = row[-4:]
        if x2 < x1 or y2 < y1:
            raise ValueError(
                f"{where}: box {row[-4:].tolist()} has x2 < x1 or y2 < y1 (boxes are "
                "[x1, y1, x2, y2] corners, not [x, y, width, height])"
            )


def _load_cascade(name: str) -> cv2.CascadeClassifier:
    classifier = cv2.CascadeClassifier(os.path.join(cv2.data.haarcascades, name))
    if classifier.empty():
        raise FileNotFoundError(f"OpenCV Haar cascade {name} not found (needs opencv<5)")
    return classifier


def _xywh_to_xyxy(rects: np.ndarray) -> np.ndarray:
    rects = np.asarray(rects, np.float64).reshape(-1, 4)
    return np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]], axis=1)


def _scale_about_centre(boxes: np.ndarray, factor: float) -> np.ndarray:
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    half = (boxes[:, 2:] - boxes[:, :2]) * factor / 2
    return np.concatenate([centre - half, centre + half], axis=1)
