"""Frames/s of the exported anonymizer, served by plain TensorFlow on this machine's CPU.

    python benchmarks/anonymize.py [--models unet,unet_small,unet_tiny] [--sizes 112,224]
                                   [--batch 8] [--seconds 5]

Every registered anonymizer (random weights: the speed does not depend on them) is exported by
`keras_privacy.export` from the current Keras backend (KERAS_BACKEND=tensorflow: a TF graph;
jax: a jax2tf module that XLA compiles), reloaded with `tf.saved_model.load`, and its
`serve_uint8` signature timed on batches of `--batch` uint8 frames after one warm-up call, for
at least `--seconds` and 2 calls. Each figure is marked when it reaches 25 frames/s (real time
for PAL video). The machine may be shared: the load average is printed with the figures.
The last line is one JSON object.
"""

import argparse
import json
import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from keras_privacy.export import anonymizer_factor, export_anonymizer
from keras_privacy.models.registry import ANONYMIZERS, build_anonymizer

REAL_TIME_FPS = 25.0


def frames_per_second(serve, size: int, batch: int, seconds: float) -> float:
    """Frames/s of `serve` on (batch, size, size, 3) uint8 frames, after one warm-up call."""
    frames = tf.constant(np.random.default_rng(0).integers(0, 256, (batch, size, size, 3), "uint8"))
    serve(frames).numpy()
    calls, start = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - start < seconds:
        serve(frames).numpy()
        calls += 1
    return calls * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(ANONYMIZERS))
    parser.add_argument("--sizes", default="112,224")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            model = build_anonymizer(name)
            path = export_anonymizer(model, os.path.join(folder, name), platforms=("cpu",))
            loaded = tf.saved_model.load(path)  # keep it: the signature holds no reference
            for size in sizes:
                fps = frames_per_second(loaded.serve_uint8, size, args.batch, args.seconds)
                results.append(
                    {
                        "model": name,
                        "parameters": model.count_params(),
                        "factor": anonymizer_factor(model),
                        "size": size,
                        "frames_per_s": round(fps, 2),
                        "real_time": fps >= REAL_TIME_FPS,
                    }
                )
                mark = "  >= 25 frames/s" if fps >= REAL_TIME_FPS else ""
                print(f"{name:11s} {size:4d} x {size:<4d} {fps:8.2f} frames/s{mark}", flush=True)
    real_time = {
        str(size): [r["model"] for r in results if r["size"] == size and r["real_time"]]
        for size in sizes
    }
    print(f"reach {REAL_TIME_FPS:g} frames/s: {real_time}")
    summary = {
        "backend": keras.backend.backend(),
        "signature": "serve_uint8",
        "batch": args.batch,
        "cpu_count": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "results": results,
        "real_time_models": real_time,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
