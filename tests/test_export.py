"""The exported anonymizer, reloaded by plain TensorFlow in another process, equals the Keras
model on float and uint8 frames of several sizes (on JAX the export goes through jax2tf)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_privacy.export import convert_to_tflite, export_anonymizer, main
from keras_privacy.models.registry import build_anonymizer

FACTOR = 4  # unet_tiny pools twice
# (batch, height, width): multiples of the factor, and a size the signatures pad and crop.
SIZES = [(2, 16, 24), (3, 18, 30)]

# Runs in a fresh interpreter with TensorFlow and NumPy only (no keras_privacy import).
SERVE_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf

saved_model, inputs, outputs = sys.argv[1:]
loaded = tf.saved_model.load(saved_model)
frames = dict(np.load(inputs))
results = {}
for key, value in frames.items():
    serve = loaded.serve_uint8 if value.dtype == np.uint8 else loaded.serve
    results[key] = serve(tf.constant(value)).numpy()
default = loaded.signatures["serving_default"](frames=tf.constant(frames["float_16x24"]))
results["default"] = next(iter(default.values())).numpy()
np.savez(outputs, **results)
imported = sorted(name for name in sys.modules if name.startswith("keras_privacy"))
print(json.dumps({"signatures": sorted(loaded.signatures), "imported": imported}))
"""


def _frames(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    frames = {}
    for batch, height, width in SIZES:
        key = f"{height}x{width}"
        frames[f"float_{key}"] = rng.random((batch, height, width, 3), dtype="float32")
        frames[f"uint8_{key}"] = rng.integers(0, 256, (batch, height, width, 3), dtype=np.uint8)
    return frames


def _expected(model: keras.Model, frames: np.ndarray) -> np.ndarray:
    """The Keras model on `frames` in [0, 1], edge-padded to the factor and cropped back."""
    if frames.dtype == np.uint8:
        frames = frames.astype("float32") / 255.0
    height, width = frames.shape[1:3]
    pad = ((0, 0), (0, -height % FACTOR), (0, -width % FACTOR), (0, 0))
    return np.asarray(model.predict_on_batch(np.pad(frames, pad, mode="edge")))[:, :height, :width]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A unet_tiny with non-trivial BatchNorm statistics, saved as .keras and exported through
    the command line."""
    keras.utils.set_random_seed(1)
    folder = tmp_path_factory.mktemp("export")
    out = folder / "saved_model"
    model = build_anonymizer("unet_tiny")
    rng = np.random.default_rng(1)
    for variable in model.weights:
        if "moving_mean" in variable.path:
            variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
        elif "moving_variance" in variable.path:
            variable.assign(rng.uniform(0.5, 1.5, variable.shape).astype("float32"))
    model.save(folder / "anonymizer.keras")
    assert main(["--anonymizer", str(folder / "anonymizer.keras"), "--out", str(out)]) == 0
    return model, out


def test_reloaded_by_plain_tensorflow_matches_keras(exported, tmp_path):
    model, saved_model = exported
    frames = _frames(seed=0)
    np.savez(tmp_path / "inputs.npz", **frames)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("KERAS_BACKEND", None)
    result = subprocess.run(
        [sys.executable, "-c", SERVE_SCRIPT, str(saved_model), "inputs.npz", "outputs.npz"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["imported"] == []
    assert {"serve", "serve_uint8", "serve_aligned", "serving_default"} <= set(report["signatures"])
    outputs = dict(np.load(tmp_path / "outputs.npz"))
    for key, value in frames.items():
        served = outputs[key]
        assert served.dtype == np.float32 and served.shape == value.shape, key
        assert served.min() >= 0.0 and served.max() <= 1.0, key
        np.testing.assert_allclose(served, _expected(model, value), atol=1e-5, err_msg=key)
    np.testing.assert_allclose(outputs["default"], outputs["float_16x24"], atol=1e-6)


def test_a_folder_that_cannot_be_written_is_named(exported, capsys):
    """TensorFlow's own file errors are not OSErrors: the command printed a traceback."""
    model, _ = exported
    with pytest.raises(OSError, match="^/proc/keras_privacy_export: the SavedModel cannot be"):
        export_anonymizer(model, "/proc/keras_privacy_export")


def test_tflite_conversion(exported, tmp_path):
    """The TF-backend export converts with its dynamic shape kept; the jax2tf one cannot (its
    shape-polymorphic gather has no TFLite form) and says so."""
    import tensorflow as tf

    model, saved_model = exported
    path = tmp_path / "anonymizer.tflite"
    if keras.backend.backend() == "jax":
        with pytest.raises(RuntimeError, match="TFLite conversion of .* failed"):
            convert_to_tflite(saved_model, path)
        return
    convert_to_tflite(saved_model, path)
    runner = tf.lite.Interpreter(model_path=str(path)).get_signature_runner("serving_default")
    for frames in (_frames(seed=2)["float_16x24"], _frames(seed=3)["float_18x30"]):
        output = next(iter(runner(frames=frames).values()))
        np.testing.assert_allclose(output, _expected(model, frames), atol=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="JAX converts in a TensorFlow-backend subprocess, which this run covers",
)
def test_nearest_up_sampling_converts_to_built_in_tflite_ops(tmp_path):
    """Keras' `UpSampling2D` (in a UNet++ saved before it was built with
    `NearestUpSampling2D`) leaves the convolution after it a TensorFlow op: converting it is
    refused, naming the op, where it once wrote a file a stock interpreter refuses; the export
    converts the portable copy, which runs there with the model's outputs."""
    import tensorflow as tf

    from keras_privacy.export import export_anonymizer, export_tflite, portable_copy

    inputs = keras.Input((None, None, 3))
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same")(inputs)
    x = keras.layers.Concatenate()([keras.layers.UpSampling2D(2)(x), inputs])
    model = keras.Model(inputs, keras.layers.Conv2D(3, 3, padding="same")(x))
    saved = export_anonymizer(model, tmp_path / "saved_model", factor=2)
    refused = tmp_path / "refused.tflite"
    with pytest.raises(RuntimeError, match=r"TensorFlow ops that TFLite's built-in .* \(Conv2D\)"):
        convert_to_tflite(saved, refused)
    assert not refused.exists()
    portable = portable_copy(model)
    assert [type(layer).__name__ for layer in portable.layers].count("NearestUpSampling2D") == 1
    frames = np.random.default_rng(4).random((2, 6, 10, 3), dtype="float32")
    expected = np.asarray(model.predict_on_batch(frames))
    np.testing.assert_array_equal(portable.predict_on_batch(frames), expected)
    path = export_tflite(model, saved, str(tmp_path / "anonymizer.tflite"))
    runner = tf.lite.Interpreter(model_path=path).get_signature_runner("serving_default")
    served = next(iter(runner(frames=frames).values()))
    np.testing.assert_allclose(served, np.clip(expected, 0.0, 1.0), atol=1e-5)  # serve clips


def test_onnx_export_matches_keras(exported, tmp_path):
    """`--onnx` writes anonymizer.onnx (on JAX through a TensorFlow-backend subprocess); ONNX
    Runtime on the CPU gives the Keras model's output within 1e-4 for several sizes and
    batches, and the file records the down-sampling factor."""
    import onnxruntime

    from keras_privacy.runtimes import onnx_factor

    model, _ = exported
    keras_file = tmp_path.parent / "anonymizer.keras"
    model.save(keras_file)
    out = tmp_path / "saved_model"
    assert main(["--anonymizer", str(keras_file), "--out", str(out), "--onnx"]) == 0
    path = out / "anonymizer.onnx"
    assert onnx_factor(path) == FACTOR
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    for batch, height, width in [(1, 16, 24), (3, 32, 20), (2, 112, 112)]:
        frames = rng.random((batch, height, width, 3), dtype="float32")
        (output,) = session.run(None, {session.get_inputs()[0].name: frames})
        assert output.shape == frames.shape
        np.testing.assert_allclose(output, _expected(model, frames), atol=1e-4)


def test_tflite_through_the_command_line(exported, tmp_path, capsys):
    """`--tflite` writes OUT/anonymizer.tflite on either backend (JAX's through a TensorFlow-
    backend export in a subprocess), serving the Keras model's output; an export without it
    into the same folder removes it."""
    import tensorflow as tf

    model, _ = exported
    keras_file = tmp_path / "anonymizer.keras"
    model.save(keras_file)
    out = tmp_path / "saved_model"
    assert main(["--anonymizer", str(keras_file), "--out", str(out), "--tflite"]) == 0
    assert (out / "saved_model.pb").is_file()
    assert f"TFLite model written to {out / 'anonymizer.tflite'}" in capsys.readouterr().out
    interpreter = tf.lite.Interpreter(model_path=str(out / "anonymizer.tflite"))
    frames = _frames(seed=2)["float_16x24"]
    output = next(iter(interpreter.get_signature_runner("serving_default")(frames=frames).values()))
    np.testing.assert_allclose(output, _expected(model, frames), atol=1e-5)
    # Exported again into the same folder without --tflite: the earlier model is not left
    # beside the new SavedModel as if it were its.
    assert main(["--anonymizer", str(keras_file), "--out", str(out)]) == 0
    assert not (out / "anonymizer.tflite").exists()
    assert f"removed {out / 'anonymizer.tflite'}: an earlier export's" in capsys.readouterr().out


def test_an_export_that_fails_leaves_no_earlier_anonymizers_extras(
    exported, tmp_path, capsys, monkeypatch
):
    """A missing ONNX package is named before anything is written; a conversion that fails
    after the SavedModel leaves no earlier export's ONNX or TFLite model beside it."""
    import keras_privacy.export as export
    from keras_privacy.optional import MissingDependencyError

    model, _ = exported
    keras_file = tmp_path / "anonymizer.keras"
    model.save(keras_file)
    out = tmp_path / "saved_model"
    assert main(["--anonymizer", str(keras_file), "--out", str(out)]) == 0
    earlier = {name: out / name for name in ("anonymizer.onnx", "anonymizer.tflite")}
    for path in earlier.values():
        path.write_bytes(b"an earlier anonymizer")
    saved = (out / "saved_model.pb").stat().st_mtime_ns
    capsys.readouterr()

    def tf2onnx_missing(module, purpose, install):
        raise MissingDependencyError(f"{purpose} needs {module}: {install}")

    monkeypatch.setattr(export, "import_optional", tf2onnx_missing)
    assert main(["--anonymizer", str(keras_file), "--out", str(out), "--onnx"]) == 1
    assert capsys.readouterr().err == (
        'error: ONNX export needs tf2onnx: pip install -e ".[onnx]"\n'
    )
    assert (out / "saved_model.pb").stat().st_mtime_ns == saved
    assert all(path.read_bytes() == b"an earlier anonymizer" for path in earlier.values())

    def conversion_fails(*args):
        raise RuntimeError("the converter failed")

    monkeypatch.setattr(export, "export_tflite", conversion_fails)
    assert main(["--anonymizer", str(keras_file), "--out", str(out), "--tflite"]) == 1
    assert "error: the converter failed" in capsys.readouterr().err
    assert not any(path.exists() for path in earlier.values())


def test_platforms_are_checked_and_one_platform_serves_on_the_cpu(exported, tmp_path, capsys):
    """`--platforms cpu` gives a SavedModel that serves the Keras model's output here (on JAX
    lowered for the CPU alone); an unknown platform is a usage error naming it."""
    import tensorflow as tf

    model, _ = exported
    keras_file = tmp_path / "anonymizer.keras"
    model.save(keras_file)
    args = ["--anonymizer", str(keras_file), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--platforms", "cpu,gpu"])
    assert exit_info.value.code == 2
    assert "--platforms: unknown platform 'gpu' (choose from cpu, cuda, rocm, tpu)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "out").exists()
    (tmp_path / "a_file").touch()
    assert main(["--anonymizer", str(keras_file), "--out", str(tmp_path / "a_file")]) == 1
    assert "a_file: --out names a file" in capsys.readouterr().err
    assert main([*args, "--platforms", "cpu"]) == 0
    frames = _frames(seed=5)["float_16x24"]
    loaded = tf.saved_model.load(str(tmp_path / "out"))  # held: its variables live in it
    served = loaded.serve(tf.constant(frames)).numpy()
    np.testing.assert_allclose(served, _expected(model, frames), atol=1e-5)


def _mixed_anonymizer() -> keras.Model:
    """A unet_tiny built under the mixed_bfloat16 policy, as `--mixed_precision` trains one."""
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        return build_anonymizer("unet_tiny")
    finally:
        keras.config.set_dtype_policy("float32")


def test_portable_copy_of_a_mixed_precision_anonymizer_computes_in_float32():
    from keras_privacy.export import portable_copy

    model = _mixed_anonymizer()
    plain = portable_copy(model)
    assert {layer.compute_dtype for layer in plain.layers} == {"float32"}
    assert portable_copy(plain) is plain
    frames = np.random.default_rng(0).random((2, 16, 24, 3), dtype="float32")
    for kept, copied in zip(model.weights, plain.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(copied), np.asarray(kept))
    mixed = np.asarray(model.predict_on_batch(frames), "float32")
    np.testing.assert_allclose(plain.predict_on_batch(frames), mixed, atol=1e-2)  # bf16 rounding


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="JAX converts in a TensorFlow-backend subprocess, which this run covers",
)
def test_a_mixed_precision_anonymizer_exports_onnx_and_tflite_that_run(tmp_path):
    """ONNX Runtime takes no bfloat16 convolution and TFLite's interpreter no half-precision
    one: both files hold the float32 copy, and give its outputs."""
    import onnxruntime
    import tensorflow as tf

    from keras_privacy.export import export_anonymizer, export_onnx, export_tflite, portable_copy

    model = _mixed_anonymizer()
    frames = np.random.default_rng(1).random((1, 16, 24, 3), dtype="float32")
    expected = portable_copy(model).predict_on_batch(frames)
    saved = export_anonymizer(model, tmp_path / "saved_model")
    session = onnxruntime.InferenceSession(
        export_onnx(model, tmp_path / "anonymizer.onnx"), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(session.run(None, {"frames": frames})[0], expected, atol=1e-4)
    tflite = export_tflite(model, saved, str(tmp_path / "anonymizer.tflite"))
    runner = tf.lite.Interpreter(model_path=tflite).get_signature_runner()
    np.testing.assert_allclose(next(iter(runner(frames=frames).values())), expected, atol=1e-4)


def test_an_unbounded_anonymizer_serves_frames_in_the_unit_range(tmp_path):
    """`unetpp_unbounded` (the authors' UNet++) gives values outside [0, 1]: `serve` and
    `serve_uint8` clip them, so a camera gets frames; `serve_aligned` is the model itself."""
    tf = pytest.importorskip("tensorflow")
    model = build_anonymizer("unetpp_tiny", output_activation=None)
    head = model.get_layer("segmentation_head")
    head.kernel.assign(np.asarray(head.kernel) * 50.0)
    export_anonymizer(model, tmp_path / "unbounded", platforms=("cpu",))
    served = tf.saved_model.load(str(tmp_path / "unbounded"))
    frames = np.random.default_rng(4).random((1, 16, 24, 3), dtype="float32")
    raw = np.asarray(model(frames, training=False))
    assert raw.min() < 0.0 or raw.max() > 1.0
    np.testing.assert_allclose(served.serve_aligned(tf.constant(frames)).numpy(), raw, atol=1e-4)
    np.testing.assert_allclose(
        served.serve(tf.constant(frames)).numpy(), np.clip(raw, 0.0, 1.0), atol=1e-4
    )
    uint8 = served.serve_uint8(tf.constant(np.round(frames * 255).astype(np.uint8))).numpy()
    assert uint8.min() >= 0.0 and uint8.max() <= 1.0
