"""Exporting an anonymizer from TensorFlow: the model's own graph in the SavedModel (it runs on
any device), Keras' tf2onnx route to ONNX, and the TFLite converter on that SavedModel."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence

import keras
import tensorflow as tf


def aligned_endpoint(
    model: keras.Model, factor: int, platforms: Sequence[str]
) -> tuple[Callable, dict]:
    """The bare model in inference mode behind a check that H and W are multiples of `factor`,
    and no further `add_endpoint` arguments (`platforms` are jax2tf's: unused)."""

    def call(frames):
        size = tf.shape(frames)[1:3]
        message = f"serve_aligned: frame height and width must be multiples of {factor}"
        check = tf.debugging.assert_equal(size % factor, 0, message=message)
        with tf.control_dependencies([check]):
            return model(tf.identity(frames), training=False)

    return call, {}


def write_onnx(model: keras.Model, out_path: str) -> None:
    """`model` written as ONNX by Keras (tf2onnx): input ``frames``, dynamic N, H and W."""
    spec = keras.InputSpec(shape=(None, None, None, 3), dtype="float32", name="frames")
    model.export(out_path, format="onnx", input_signature=[spec], verbose=False)


def write_tflite(model: keras.Model, saved_model_dir: str | None, out_path: str) -> None:
    """The SavedModel of `model` at `saved_model_dir` (None: an export of `model` to a
    temporary folder) converted to TFLite at `out_path`."""
    from keras_privacy.export import convert_to_tflite, export_anonymizer

    if saved_model_dir is not None:
        convert_to_tflite(saved_model_dir, out_path)
        return
    with tempfile.TemporaryDirectory() as folder:
        convert_to_tflite(export_anonymizer(model, folder), out_path)
