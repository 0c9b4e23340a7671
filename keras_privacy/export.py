"""Export the anonymizer f_A alone as a TensorFlow SavedModel, from either training backend.

    python -m keras_privacy.export --anonymizer MODEL.keras --out DIR [--tflite]

The SavedModel holds four signatures, all of any batch and any frame size:

* ``serve(frames)``: float32 (N, H, W, 3) in [0, 1] -> float32 (N, H, W, 3) in [0, 1]; also
  ``serving_default``.
* ``serve_uint8(frames)``: uint8 (N, H, W, 3) -> uint8 (N, H, W, 3), for video pipelines.
* ``serve_clips(clips)``: float32 (B, T, H, W, 3) -> same shape; time is folded into the batch.
* ``serve_aligned(frames)``: like ``serve`` without padding; H and W must be multiples of the
  UNet's down-sampling factor (the fast path when the caller already knows the size fits).

A UNet only takes H and W divisible by its down-sampling factor 2 ** pools, so the other
signatures pad the frames up to the next multiple by repeating the edge pixels, then crop the
output back to (H, W). Reload with plain ``tf.saved_model.load(DIR)``: neither Keras nor
keras_privacy is needed to serve.

From the JAX backend the model goes through jax2tf (StableHLO inside an ``XlaCallModule`` op),
lowered for every platform in ``platforms`` so one artifact serves on CPU and GPU. From the
TensorFlow backend the graph is plain TensorFlow and runs on any device.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import keras

PLATFORMS = ("cpu", "cuda")


def _tf():
    """TensorFlow, imported on use: exporting needs it on every backend, importing this module
    does not."""
    import tensorflow as tf

    return tf


def pad_to_multiple(frames, factor: int):
    """Pad frames (..., H, W, C) at the bottom and right, repeating the edge pixels, so that H
    and W become multiples of `factor`. Works on NumPy arrays and TF tensors of unknown shape;
    returns a TF tensor. Crop the model's output back with ``output[..., :H, :W, :]``."""
    tf = _tf()
    frames = tf.convert_to_tensor(frames)
    shape = tf.shape(frames)
    frames = _repeat_edge(frames, (-shape[-3]) % factor, axis=-3)
    return _repeat_edge(frames, (-shape[-2]) % factor, axis=-2)


def _repeat_edge(frames, amount, axis: int):
    """Append `amount` copies of the last slice of `frames` along `axis` (edge padding)."""
    tf = _tf()
    rank = frames.shape.rank
    axis = axis % rank
    begin = [0] * rank
    begin[axis] = tf.shape(frames)[axis] - 1
    size = [-1] * rank
    size[axis] = 1
    edge = tf.slice(frames, tf.stack(begin), size)
    return tf.concat([frames, tf.repeat(edge, amount, axis=axis)], axis=axis)


def anonymizer_factor(model: keras.Model) -> int:
    """The factor H and W must be divisible by: 2 ** (max-pooling layers), 1 for a model that
    does not pool."""
    from keras_privacy.models.unet import downsampling_factor

    return downsampling_factor(model)


class _GraphSafeUpSampling2D(keras.layers.UpSampling2D):
    """UpSampling2D (channels_last, non-nearest) calling ``tf.image.resize`` directly, as Keras'
    TF backend does, minus the ``size > 0`` check that Keras 3.15 evaluates in Python: on a TF
    graph of unknown H and W that check fails (keras-team/keras#22079)."""

    def call(self, inputs):
        tf = _tf()
        size = tf.shape(inputs)[1:3] * tf.constant(self.size, dtype=tf.int32)
        resized = tf.image.resize(inputs, size, method=self.interpolation)
        return tf.cast(resized, inputs.dtype)


def _swap_upsampling(layer):
    """`clone_model`'s clone function: a fresh copy of `layer`, graph-safe if it up-samples."""
    if (
        isinstance(layer, keras.layers.UpSampling2D)
        and layer.interpolation != "nearest"
        and layer.data_format == "channels_last"
    ):
        return _GraphSafeUpSampling2D.from_config(layer.get_config())
    return layer.__class__.from_config(layer.get_config())


def _graph_safe(model: keras.Model) -> keras.Model:
    """On the TF backend, a copy of `model` (same weights) whose interpolating UpSampling2D
    layers trace with unknown H and W; `model` itself elsewhere (jax2tf traces symbolic sizes)."""
    if keras.backend.backend() != "tensorflow":
        return model
    clone = keras.models.clone_model(model, clone_function=_swap_upsampling, recursive=True)
    clone.set_weights(model.get_weights())
    return clone


def _aligned_endpoint(archive, model: keras.Model, factor: int, platforms: Sequence[str]):
    """Register ``serve_aligned``: the bare model on frames whose H and W are multiples of
    `factor`. On JAX the shapes are declared to jax2tf as such multiples, which lets the UNet's
    skip concatenations type-check for every size; no gradient is exported (serving only)."""
    kwargs = {}
    if keras.backend.backend() == "jax":
        kwargs["jax2tf_kwargs"] = {
            "polymorphic_shapes": [f"(batch, {factor}*height, {factor}*width, 3)"],
            "native_serialization_platforms": tuple(platforms),
            "with_gradient": False,
        }
    model = _graph_safe(model)
    archive.track(model)
    return archive.add_endpoint(
        "serve_aligned",
        model.__call__,
        input_signature=[keras.InputSpec(shape=(None, None, None, 3), dtype="float32")],
        **kwargs,
    )


def _serving_functions(aligned, factor: int) -> dict:
    """The padded float, uint8 and clip signatures, in plain TensorFlow around `aligned`."""
    tf = _tf()
    frames_spec = tf.TensorSpec((None, None, None, 3), tf.float32, name="frames")

    @tf.function(input_signature=[frames_spec])
    def serve(frames):
        height, width = tf.shape(frames)[1], tf.shape(frames)[2]
        output = aligned(pad_to_multiple(frames, factor))
        return output[:, :height, :width, :]

    @tf.function(input_signature=[tf.TensorSpec((None, None, None, 3), tf.uint8, name="frames")])
    def serve_uint8(frames):
        output = serve(tf.cast(frames, tf.float32) / 255.0)
        return tf.cast(tf.round(tf.clip_by_value(output, 0.0, 1.0) * 255.0), tf.uint8)

    @tf.function(input_signature=[tf.TensorSpec((None, None, None, None, 3), tf.float32, "clips")])
    def serve_clips(clips):
        shape = tf.shape(clips)
        output = serve(tf.reshape(clips, tf.concat([[-1], shape[2:]], axis=0)))
        return tf.reshape(output, shape)

    return {"serve": serve, "serve_uint8": serve_uint8, "serve_clips": serve_clips}


def export_anonymizer(
    model: keras.Model,
    out_dir: str | os.PathLike,
    platforms: Sequence[str] = PLATFORMS,
    factor: int | None = None,
) -> str:
    """Write `model` (frames in [0, 1] -> frames in [0, 1]) as a SavedModel in `out_dir` with the
    signatures of this module's docstring; returns `out_dir` as a string.

    `platforms` are jax2tf's lowering platforms (JAX backend only; TF graphs run anywhere).
    `factor` is the size multiple the model needs (default: from its max-pooling layers).
    """
    factor = factor or anonymizer_factor(model)
    archive = keras.export.ExportArchive()
    aligned = _aligned_endpoint(archive, model, factor, platforms)
    functions = _serving_functions(aligned, factor)
    for name, function in functions.items():
        function.get_concrete_function()
        archive.add_endpoint(name, function)
    archive.add_endpoint("serving_default", functions["serve"])
    out_dir = os.fspath(out_dir)
    archive.write_out(out_dir, verbose=False)
    return out_dir


def convert_to_tflite(saved_model_dir: str | os.PathLike, out_path: str | os.PathLike) -> str:
    """Convert the ``serving_default`` signature (float frames, padded) to a TFLite flat buffer
    at `out_path`. Raises RuntimeError saying why when TFLite cannot take the model (a JAX
    export holds an ``XlaCallModule`` op that the converter may refuse)."""
    tf = _tf()
    converter = tf.lite.TFLiteConverter.from_saved_model(os.fspath(saved_model_dir))
    converter.target_spec.supported_ops = [
        tf.lite.OpsSet.TFLITE_BUILTINS,
        tf.lite.OpsSet.SELECT_TF_OPS,
    ]
    try:
        flat_buffer = converter.convert()
    except Exception as error:  # the converter raises many unrelated types
        raise RuntimeError(
            f"TFLite conversion of {saved_model_dir} failed: {type(error).__name__}: {error}"
        ) from error
    with open(out_path, "wb") as file:
        file.write(flat_buffer)
    return os.fspath(out_path)


def load_keras_anonymizer(path: str | os.PathLike) -> keras.Model:
    """Load a `.keras` anonymizer; importing keras_privacy.models registers its custom layers."""
    import keras_privacy.models  # noqa: F401

    return keras.saving.load_model(os.fspath(path), compile=False)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: export a `.keras` anonymizer as a SavedModel (and optionally a TFLite model)."""
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.export",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--anonymizer", required=True, help="the anonymizer, a .keras file")
    parser.add_argument("--out", required=True, help="the SavedModel directory to write")
    parser.add_argument(
        "--platforms",
        default=",".join(PLATFORMS),
        help="jax2tf lowering platforms, comma-separated (JAX backend only)",
    )
    parser.add_argument(
        "--tflite",
        action="store_true",
        help="also write OUT/anonymizer.tflite (reports when it cannot convert)",
    )
    args = parser.parse_args(argv)
    model = load_keras_anonymizer(args.anonymizer)
    out_dir = export_anonymizer(model, args.out, platforms=tuple(args.platforms.split(",")))
    print(
        f"SavedModel written to {out_dir} (backend {keras.backend.backend()}); signatures: "
        "serve, serve_uint8, serve_clips, serve_aligned"
    )
    if not args.tflite:
        return 0
    try:
        path = convert_to_tflite(out_dir, os.path.join(out_dir, "anonymizer.tflite"))
    except RuntimeError as error:
        print(f"TFLite: not converted. {error}", file=sys.stderr)
        return 1
    print(f"TFLite model written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
