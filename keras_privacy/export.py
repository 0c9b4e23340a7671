"""Export the anonymizer f_A alone as a TensorFlow SavedModel, from either Keras backend.

    python -m keras_privacy.export --anonymizer MODEL.keras --out DIR [--tflite] [--onnx]

Reload with plain ``tf.saved_model.load(DIR)``: neither Keras nor keras_privacy is needed to
serve. Signatures, all of any batch N, height H and width W:

* ``serve(frames)``, also ``serving_default``: float32 (N, H, W, 3) in [0, 1] -> float32
  (N, H, W, 3) in [0, 1] (clipped there: an anonymizer without a bounded output, such as
  ``unetpp_unbounded``, serves frames too).
* ``serve_uint8(frames)``: uint8 (N, H, W, 3) in 0..255 (decoded video frames) -> float32
  (N, H, W, 3) in [0, 1]; the same as ``serve(frames / 255)``.
* ``serve_aligned(frames)``: float32 like ``serve`` without padding or clipping: H and W must
  already be multiples of the down-sampling factor (the model itself).

An anonymizer takes only H and W divisible by its down-sampling factor (the product of the
strides of its graph): 16 for SPAct's UNet and UNet++, 4 for ``unet_tiny`` and VITA's net.
``serve`` and ``serve_uint8`` pad the frames at the bottom and right up to the next multiple
by repeating the edge pixels, run the model and crop the output back to (H, W); a size that is
already a multiple gives the model's output exactly.

From the TensorFlow backend the graph is plain TensorFlow and runs on any device. From the JAX
backend the model goes through jax2tf (StableHLO inside an ``XlaCallModule`` op) with
polymorphic shapes ``(batch, f*height, f*width, 3)``, lowered for every platform of
``--platforms`` (default cpu and cuda) so one artifact serves on both.

``--onnx`` also writes ``DIR/anonymizer.onnx``: the bare model (float32 (N, H, W, 3) in [0, 1],
H and W multiples of the factor, which the file's metadata holds as ``downsampling_factor``),
converted by tf2onnx from the TensorFlow graph. Keras' own JAX route needs jax2onnx (which
brings flax, orbax and tensorstore); since a `.keras` file is the same on either backend, the
JAX backend converts it in a TensorFlow-backend subprocess instead. An export into a folder
that an earlier export wrote removes the earlier ONNX or TFLite model it does not rewrite.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from types import ModuleType

import keras
import numpy as np

from keras_privacy import backend
from keras_privacy.checkpoint import non_finite_variables
from keras_privacy.cli import refuse_a_file, run_command
from keras_privacy.files import load_keras_model
from keras_privacy.methods.trainer import StatelessTrainer
from keras_privacy.models.layers import NearestUpSampling2D
from keras_privacy.optional import ONNX_INSTALL, import_optional
from keras_privacy.runtimes import ONNX_FACTOR_KEY
from keras_privacy.types import Tensor

PLATFORMS = ("cpu", "cuda")
LOWERING_PLATFORMS = ("cpu", "cuda", "rocm", "tpu")
"""The platforms jax2tf can lower an export for."""
SIGNATURES = ("serve", "serve_uint8", "serve_aligned")
EXTRA_FILES = ("anonymizer.onnx", "anonymizer.tflite")  # --onnx, --tflite: in OUT


def _tf():
    """TensorFlow, imported on use: exporting needs it on every backend, importing this module
    does not."""
    import tensorflow as tf

    return tf


def load_keras_anonymizer(path: str | os.PathLike) -> keras.Model:
    """Load a `.keras` anonymizer; importing keras_privacy.models registers its custom layers,
    keras_privacy.methods the trainers, so that a trainer given in its place is named as one.

    Raises FileNotFoundError or ValueError naming `path` and the problem (Keras' own reason,
    e.g. its refusal of a Lambda layer, whose Python code loading would run; weights that are
    not finite, whose frames would be NaN)."""
    import keras_privacy.methods  # noqa: F401
    import keras_privacy.models  # noqa: F401

    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{path}: a folder (a SavedModel export?), not a .keras file: give the .keras file"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such anonymizer file (a .keras file)")
    model = load_keras_model(path, "Keras anonymizer", "copy it again, or train it again")
    if isinstance(model, StatelessTrainer):
        raise ValueError(
            f"{path}: a saved {type(model).__name__} trainer, not an anonymizer: save its "
            "anonymizer alone (trainer.anonymizer.save(...); train.py writes anonymizer.keras)"
        )
    _require_frames_to_frames(model, path)
    bad = non_finite_variables({"anonymizer": model})
    if bad:
        raise ValueError(
            f"{path}: the anonymizer holds non-finite weights (e.g. {', '.join(bad[:3])}): a "
            "diverged model, whose frames would be NaN (written as black)"
        )
    return model


def _require_frames_to_frames(model: keras.Model, path: str | os.PathLike) -> None:
    """Raise ValueError naming `path` where the model does not map (N, H, W, 3) frames to
    frames (a saved action model or privacy encoder given in place of the anonymizer). A
    model without static shapes (never built as a graph) is left to its first call."""
    try:
        shapes = (model.input_shape, model.output_shape)
    except (AttributeError, ValueError):
        return
    if not all(isinstance(shape, tuple) and len(shape) == 4 and shape[-1] == 3 for shape in shapes):
        raise ValueError(
            f"{path}: not an anonymizer: it maps {shapes[0]} to {shapes[1]}, not (N, H, W, 3) "
            "frames to frames"
        )
    # Free sizes say nothing of the output's size: one probe at twice the factor does.
    factor = anonymizer_factor(model)
    probe = np.zeros([1, *(dim or 2 * factor for dim in shapes[0][1:3]), 3], "float32")
    output_size = tuple(keras.ops.shape(model(probe, training=False))[1:3])
    if output_size != probe.shape[1:3]:
        size, out = probe.shape[1:3], output_size
        raise ValueError(
            f"{path}: not an anonymizer: it maps {size[0]} x {size[1]} frames to "
            f"{out[0]} x {out[1]}, not to frames of their own size"
        )


def anonymizer_factor(model: keras.Model) -> int:
    """The factor H and W must be divisible by (the product of the graph's strides; 1 if none)."""
    from keras_privacy.models.unet import downsampling_factor

    return downsampling_factor(model)


def pad_to_multiple(frames: Tensor, factor: int) -> Tensor:
    """TF tensor `frames` (N, H, W, C) padded at the bottom and right, repeating the edge pixels,
    so H and W become multiples of `factor` (shapes may be unknown until run time)."""
    tf = _tf()
    shape = tf.shape(frames)
    pad_h, pad_w = (-shape[1]) % factor, (-shape[2]) % factor
    frames = tf.concat([frames, tf.repeat(frames[:, -1:], pad_h, axis=1)], axis=1)
    return tf.concat([frames, tf.repeat(frames[:, :, -1:], pad_w, axis=2)], axis=2)


def _model_endpoint(archive, model: keras.Model, factor: int, platforms: Sequence[str]):
    """Register ``serve_aligned``, the bare model (inference mode) on float frames whose H and W
    are multiples of `factor`, as the backend builds it (`aligned_endpoint` of
    `backend.jax_export` and `backend.tensorflow_export`); returns its tf.function."""
    call, kwargs = backend.export().aligned_endpoint(model, factor, platforms)
    archive.track(model)
    return archive.add_endpoint(
        "serve_aligned",
        call,
        input_signature=[keras.InputSpec(shape=(None, None, None, 3), dtype="float32")],
        **kwargs,
    )


def _padded_functions(aligned, factor: int) -> dict:
    """The ``serve`` (float) and ``serve_uint8`` signatures, plain TensorFlow around
    `aligned`: pad to a multiple of `factor`, run, crop back."""
    tf = _tf()

    @tf.function(input_signature=[tf.TensorSpec((None, None, None, 3), tf.float32, "frames")])
    def serve(frames):
        """Float frames (N, H, W, 3) in [0, 1], any N, H, W -> anonymized float frames in
        [0, 1]. H and W are edge-padded to a multiple of the UNet's factor, then cropped."""
        height, width = tf.shape(frames)[1], tf.shape(frames)[2]
        anonymized = aligned(pad_to_multiple(frames, factor))[:, :height, :width, :]
        return tf.clip_by_value(anonymized, 0.0, 1.0)

    @tf.function(input_signature=[tf.TensorSpec((None, None, None, 3), tf.uint8, "frames")])
    def serve_uint8(frames):
        """uint8 frames (N, H, W, 3) in 0..255 -> anonymized float frames in [0, 1]."""
        return serve(tf.cast(frames, tf.float32) / 255.0)

    return {"serve": serve, "serve_uint8": serve_uint8}


def export_anonymizer(
    model: keras.Model,
    out_dir: str | os.PathLike,
    platforms: Sequence[str] = PLATFORMS,
    factor: int | None = None,
) -> str:
    """Write `model` (frames in [0, 1] -> frames in [0, 1]) as a SavedModel in `out_dir` with
    the signatures of this module's docstring; returns `out_dir` as a string.

    `platforms` are jax2tf's lowering platforms (JAX backend only; TF graphs run anywhere).
    `factor` is the size multiple the model needs (default: from its strides). A folder that
    cannot be written (permissions, a read-only file system) raises OSError naming it.
    """
    factor = factor or anonymizer_factor(model)
    archive = keras.export.ExportArchive()
    aligned = _model_endpoint(archive, model, factor, platforms)
    functions = _padded_functions(aligned, factor)
    for name, function in functions.items():
        archive.add_endpoint(name, function)
    archive.add_endpoint("serving_default", functions["serve"])
    out_dir = os.fspath(out_dir)
    try:
        archive.write_out(out_dir, verbose=False)
    except _tf().errors.OpError as error:  # TensorFlow's file errors are not OSErrors
        raise OSError(
            f"{out_dir}: the SavedModel cannot be written there ({error.message})"
        ) from None
    return out_dir


def convert_to_tflite(saved_model_dir: str | os.PathLike, out_path: str | os.PathLike) -> str:
    """Convert the ``serving_default`` signature (float frames, padded, dynamic shape) to a
    TFLite flat buffer at `out_path`; returns the path.

    Works for a SavedModel exported from the TensorFlow backend. One exported from JAX fails:
    the converter cannot take the StableHLO dynamic gather of the shape-polymorphic bilinear
    up-sampling (`export_tflite` converts a TensorFlow-backend export instead). Built-in
    TFLite operations only, so that a stock interpreter runs the file: a model that needs
    TensorFlow ops (the Flex delegate) raises RuntimeError naming them, as any other failure
    with the converter's first error message.
    """
    tf = _tf()
    converter = tf.lite.TFLiteConverter.from_saved_model(
        os.fspath(saved_model_dir), signature_keys=["serving_default"]
    )
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        flat_buffer = converter.convert()
    except Exception as error:  # the converter raises many unrelated types
        raise RuntimeError(
            f"TFLite conversion of {saved_model_dir} failed ({type(error).__name__}): "
            f"{_conversion_failure(str(error))}"
        ) from None
    with open(out_path, "wb") as file:
        file.write(flat_buffer)
    return os.fspath(out_path)


def _conversion_failure(message: str) -> str:
    """The reason in the TFLite converter's error `message`: the TensorFlow ops that TFLite's
    built-in kernels lack, where that is why, else its first error line."""
    for line in message.splitlines():
        if line.startswith("TF Select ops:"):
            needed = line.split(":", 1)[1].strip()
            return (
                f"the model needs TensorFlow ops that TFLite's built-in kernels lack ({needed}); "
                "a file holding them would need TFLite's Flex delegate, which a stock "
                "interpreter refuses"
            )
    lines = [line for line in message.splitlines() if "error:" in line]
    reasons = [line.split("error:", 1)[1].strip() for line in lines]
    reasons = [r for r in reasons if r and not r.startswith("failed while converting")]
    return (reasons[0] if reasons else message)[:300]


def portable_copy(model: keras.Model) -> keras.Model:
    """`model` as ONNX Runtime's and TFLite's built-in kernels take it, else `model` itself: a
    copy where every layer computes in float32 (a mixed-precision policy keeps float32
    weights, so they serve as they are: ONNX Runtime takes no bfloat16 convolution, and
    TFLite's built-in kernels no half-precision one) and Keras' nearest `UpSampling2D` is
    `NearestUpSampling2D`, the same pixels (an anonymizer saved before UNet++ was built with
    it: TFLite's converter loses the channel count of `UpSampling2D`'s repeat)."""
    if not any(_needs_replacing(layer) for layer in _all_layers(model)):
        return model

    def portable(layer: keras.layers.Layer) -> keras.layers.Layer:
        config = {**layer.get_config(), "dtype": "float32"}
        if _is_nearest_upsampling(layer):
            return NearestUpSampling2D(layer.size[0], name=layer.name, dtype="float32")
        return layer.__class__.from_config(config)

    copy = keras.models.clone_model(model, clone_function=portable, recursive=True)
    copy.set_weights(model.get_weights())
    return copy


def _needs_replacing(layer: keras.layers.Layer) -> bool:
    return layer.compute_dtype != "float32" or _is_nearest_upsampling(layer)


def _is_nearest_upsampling(layer: keras.layers.Layer) -> bool:
    """Keras' `UpSampling2D` that `NearestUpSampling2D` replaces: nearest, channels last, one
    factor on both axes."""
    return (
        type(layer) is keras.layers.UpSampling2D
        and layer.interpolation == "nearest"
        and layer.data_format == "channels_last"
        and layer.size[0] == layer.size[1]
    )


def _all_layers(layer: keras.layers.Layer) -> Iterator[keras.layers.Layer]:
    """`layer` and every layer inside it, nested models' layers included."""
    yield layer
    for inner in getattr(layer, "layers", []):
        yield from _all_layers(inner)


def export_tflite(model: keras.Model, saved_model_dir: str | os.PathLike, out_path: str) -> str:
    """`model` as a TFLite flat buffer at `out_path` (``serving_default``, dynamic shape), in
    float32 (`portable_copy`); returns the path. The TensorFlow backend converts its SavedModel at
    `saved_model_dir` (of a float32 model; else an export of the copy); the JAX backend
    converts a TensorFlow-backend export of the same model in a subprocess."""
    plain = portable_copy(model)
    exported = os.fspath(saved_model_dir) if plain is model else None
    backend.export().write_tflite(plain, exported, os.fspath(out_path))
    return os.fspath(out_path)


def require_onnx_export() -> ModuleType:
    """The `onnx` module, once both ONNX export's packages (onnx, tf2onnx) are found to be
    installed; MissingDependencyError naming the one missing otherwise."""
    import_optional("tf2onnx", "ONNX export", ONNX_INSTALL)
    return import_optional("onnx", "ONNX export", ONNX_INSTALL)


def export_onnx(model: keras.Model, out_path: str | os.PathLike, factor: int | None = None) -> str:
    """Write `model` as an ONNX file at `out_path` (dynamic N, H, W; input ``frames``) with its
    down-sampling factor in the metadata, in float32 (`portable_copy`); returns the path. Needs
    the ``onnx`` extra.

    On the TensorFlow backend Keras converts it with tf2onnx; on JAX the model is saved to a
    temporary `.keras` file and converted by a TensorFlow-backend subprocess.
    """
    onnx = require_onnx_export()
    factor = factor or anonymizer_factor(model)
    out_path = os.fspath(out_path)
    backend.export().write_onnx(portable_copy(model), out_path)
    proto = onnx.load(out_path)
    entry = proto.metadata_props.add()
    entry.key, entry.value = ONNX_FACTOR_KEY, str(factor)
    onnx.save(proto, out_path)
    return out_path


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
        default=PLATFORMS,
        type=_platforms,
        help=f"jax2tf lowering platforms, comma-separated, of {', '.join(LOWERING_PLATFORMS)} "
        "(JAX backend only)",
    )
    parser.add_argument(
        "--tflite",
        action="store_true",
        help="also write OUT/anonymizer.tflite (either backend: JAX converts a TensorFlow-backend "
        "export in a subprocess)",
    )
    parser.add_argument(
        "--onnx",
        action="store_true",
        help="also write OUT/anonymizer.onnx (either backend; needs the onnx extra)",
    )
    parser.add_argument("--verbose", action="store_true", help="the traceback of an error too")
    args = parser.parse_args(argv)
    return run_command(lambda: _export(args), args.verbose)


def _platforms(text: str) -> tuple[str, ...]:
    """`--platforms`' value as a tuple; an unknown platform is a usage error naming it."""
    platforms = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in platforms if name not in LOWERING_PLATFORMS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown platform {unknown[0]!r} (choose from {', '.join(LOWERING_PLATFORMS)})"
        )
    return platforms


def _export(args: argparse.Namespace) -> int:
    """The CLI's work once its arguments are parsed."""
    refuse_a_file(args.out)
    model = load_keras_anonymizer(args.anonymizer)
    if args.onnx:
        require_onnx_export()
    factor = anonymizer_factor(model)
    onnx_path, tflite_path = (os.path.join(args.out, name) for name in EXTRA_FILES)
    _remove_earlier_extras({onnx_path: args.onnx, tflite_path: args.tflite})
    out_dir = export_anonymizer(model, args.out, platforms=args.platforms)
    print(
        f"SavedModel written to {out_dir} (backend {keras.backend.backend()}, down-sampling "
        f"factor {factor}); signatures: {', '.join(SIGNATURES)}, serving_default = serve"
    )
    if args.onnx:
        path = export_onnx(model, onnx_path, factor)
        print(f"ONNX model written to {path} (H and W multiples of {factor})")
    if args.tflite:
        path = export_tflite(model, out_dir, tflite_path)
        print(f"TFLite model written to {path}")
    return 0


def _remove_earlier_extras(asked: dict[str, bool]) -> None:
    """Remove an earlier export's ONNX and TFLite models before anything is written: one not
    asked for again, or whose conversion then fails, would sit beside the new SavedModel as
    if it were the same anonymizer."""
    for path, rewritten in asked.items():
        if os.path.isfile(path):
            os.remove(path)
            if not rewritten:
                print(
                    f"removed {path}: an earlier export's, not asked for this time (it may not "
                    "be of this anonymizer)"
                )


if __name__ == "__main__":
    sys.exit(main())
