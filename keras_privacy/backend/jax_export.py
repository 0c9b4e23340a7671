"""Exporting an anonymizer from JAX: through jax2tf into the SavedModel, and to ONNX and TFLite
by a TensorFlow-backend subprocess (Keras' own JAX route to ONNX needs jax2onnx, which brings
flax, orbax and tensorstore; the TFLite converter cannot take jax2tf's shape-polymorphic gather;
a `.keras` file is the same on either backend)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence

import keras


def aligned_endpoint(
    model: keras.Model, factor: int, platforms: Sequence[str]
) -> tuple[Callable, dict]:
    """The bare model in inference mode and `add_endpoint`'s jax2tf arguments: the input shape
    declared as ``(batch, f*height, f*width, 3)`` so that the UNet's skip concatenations
    type-check for every size, lowered for `platforms` (serving only: no gradient)."""

    def call(frames):
        return model(frames, training=False)

    jax2tf = {
        "polymorphic_shapes": [f"(batch, {factor}*height, {factor}*width, 3)"],
        "native_serialization_platforms": tuple(platforms),
        "with_gradient": False,
    }
    return call, {"jax2tf_kwargs": jax2tf}


def write_onnx(model: keras.Model, out_path: str) -> None:
    """`model` written as ONNX by a TensorFlow-backend subprocess
    (`tensorflow_export.write_onnx` there)."""
    _in_tensorflow(
        "ONNX",
        model,
        out_path,
        "from keras_privacy.backend.tensorflow_export import write_onnx\nwrite_onnx(model, out)",
    )


def write_tflite(model: keras.Model, saved_model_dir: str | None, out_path: str) -> None:
    """`model` written as TFLite by a TensorFlow-backend subprocess, which exports it again
    and converts that: the jax2tf SavedModel at `saved_model_dir` has no TFLite form (its
    shape-polymorphic gather lowers to `dynamic_gather`), so it is not read."""
    _in_tensorflow(
        "TFLite",
        model,
        out_path,
        "import tempfile\n"
        "from keras_privacy.export import convert_to_tflite, export_anonymizer\n"
        "with tempfile.TemporaryDirectory() as folder:\n"
        "    convert_to_tflite(export_anonymizer(model, folder), out)",
    )


def _in_tensorflow(kind: str, model: keras.Model, out_path: str, code: str) -> None:
    """Run `code` in a TensorFlow-backend Python where `model` is `model` (through a
    temporary `.keras` file) and `out` is `out_path`; RuntimeError with its last error line
    when it fails."""
    preamble = (
        "import sys\nfrom keras_privacy.export import load_keras_anonymizer\n"
        "model, out = load_keras_anonymizer(sys.argv[1]), sys.argv[2]\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        saved = os.path.join(folder, "anonymizer.keras")
        model.save(saved)
        env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
        result = subprocess.run(
            [sys.executable, "-c", preamble + code, saved, out_path],
            env=env,
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no error message"])[-1]
        raise RuntimeError(f"{kind} conversion of {model.name} failed: {last}")
