"""Exporting an anonymizer from JAX: through jax2tf into the SavedModel, and to ONNX by a
TensorFlow-backend subprocess (Keras' own JAX route needs jax2onnx, which brings flax, orbax
and tensorstore; a `.keras` file is the same on either backend)."""

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
    """`model` saved to a temporary `.keras` file and written as ONNX by a TensorFlow-backend
    subprocess (`tensorflow_export.write_onnx` there)."""
    with tempfile.TemporaryDirectory() as folder:
        saved = os.path.join(folder, "anonymizer.keras")
        model.save(saved)
        code = (
            "import sys; from keras_privacy.backend.tensorflow_export import write_onnx; "
            "from keras_privacy.export import load_keras_anonymizer; "
            "write_onnx(load_keras_anonymizer(sys.argv[1]), sys.argv[2])"
        )
        env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2"}
        result = subprocess.run(
            [sys.executable, "-c", code, saved, out_path],
            env=env,
            capture_output=True,
            text=True,
        )
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no error message"])[-1]
        raise RuntimeError(f"ONNX conversion of {saved} failed: {last}")
