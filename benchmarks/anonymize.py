"""Frames/s of the exported anonymizer on this machine's CPU, through each runtime.

    python benchmarks/anonymize.py [--models unet,unet_small,unet_tiny]
        [--sizes 112x112,224x224,480x640] [--runtimes savedmodel,tflite,onnx]
        [--batch 4] [--seconds 3]

Every anonymizer named (random weights: the speed does not depend on them) is exported by
`keras_privacy.export` from the current Keras backend and timed through each runtime on
batches of `--batch` uint8 frames, after one warm-up call, for at least `--seconds` and one
call:

* ``savedmodel``: `tf.saved_model.load`, its `serve_uint8` signature (KERAS_BACKEND=tensorflow:
  a TF graph; jax: a jax2tf module that XLA compiles).
* ``tflite``: the TFLite conversion of `serving_default` (on JAX, of a TensorFlow-backend
  export; uint8 to float outside), on the TFLite interpreter with one thread per core.
* ``onnx``: the ONNX file (`--onnx`) on ONNX Runtime's CPU provider, through
  `keras_privacy.runtimes.onnx_frames` (uint8 in and out, as `anonymize --runtime onnx`).

Each figure is marked when it reaches 25 frames/s (real time for PAL video). The machine may
be shared: the load average is printed with the figures. The last line is one JSON object.
"""

import argparse
import json
import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from keras_privacy.export import (
    anonymizer_factor,
    export_anonymizer,
    export_onnx,
    export_tflite,
)
from keras_privacy.models.registry import build_anonymizer
from keras_privacy.runtimes import onnx_frames

REAL_TIME_FPS = 25.0


def frames_per_second(run, frames: np.ndarray, seconds: float) -> float:
    """Frames/s of `run` on the uint8 `frames`, after one warm-up call."""
    run(frames)
    calls, start = 0, time.perf_counter()
    while calls < 1 or time.perf_counter() - start < seconds:
        run(frames)
        calls += 1
    return calls * len(frames) / (time.perf_counter() - start)


def runners(model, folder: str, runtimes: list[str]) -> dict:
    """A function uint8 frames -> output for each runtime this backend can export to."""
    saved_model = export_anonymizer(model, os.path.join(folder, "saved_model"), platforms=("cpu",))
    result = {}
    if "savedmodel" in runtimes:
        loaded = tf.saved_model.load(saved_model)  # the lambda keeps it (its signature does not)
        result["savedmodel"] = lambda frames: loaded.serve_uint8(tf.constant(frames)).numpy()
    if "tflite" in runtimes:
        path = export_tflite(model, saved_model, os.path.join(folder, "anonymizer.tflite"))
        interpreter = tf.lite.Interpreter(model_path=path, num_threads=os.cpu_count())
        runner = interpreter.get_signature_runner("serving_default")
        result["tflite"] = lambda frames: runner(frames=frames.astype("float32") / 255.0)
    if "onnx" in runtimes:
        result["onnx"] = onnx_frames(export_onnx(model, os.path.join(folder, "a.onnx")), "cpu")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="unet,unet_small,unet_tiny")
    parser.add_argument("--sizes", default="112x112,224x224,480x640")
    parser.add_argument("--runtimes", default="savedmodel,tflite,onnx")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    sizes = [tuple(int(side) for side in size.split("x")) for size in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    results = []
    for name in args.models.split(","):
        model = build_anonymizer(name)
        with tempfile.TemporaryDirectory() as folder:
            for runtime, run in runners(model, folder, args.runtimes.split(",")).items():
                for height, width in sizes:
                    frames = rng.integers(0, 256, (args.batch, height, width, 3), "uint8")
                    fps = frames_per_second(run, frames, args.seconds)
                    results.append(
                        {
                            "model": name,
                            "parameters": model.count_params(),
                            "factor": anonymizer_factor(model),
                            "runtime": runtime,
                            "size": f"{height}x{width}",
                            "frames_per_s": round(fps, 2),
                            "real_time": fps >= REAL_TIME_FPS,
                            "load_average_1min": round(os.getloadavg()[0], 2),
                        }
                    )
                    mark = "  >= 25 frames/s" if fps >= REAL_TIME_FPS else ""
                    print(
                        f"{name:11s} {runtime:10s} {height:4d} x {width:<4d} {fps:8.2f} frames/s"
                        f" (load {os.getloadavg()[0]:.1f}){mark}",
                        flush=True,
                    )
    summary = {
        "backend": keras.backend.backend(),
        "batch": args.batch,
        "cpu_count": os.cpu_count(),
        "results": results,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
