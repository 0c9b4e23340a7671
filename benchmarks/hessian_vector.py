"""Peak memory of the ways to differentiate f_A twice, against one plain gradient, per backend.

    python benchmarks/hessian_vector.py                      # TensorFlow, UNet, 8 images
    python benchmarks/hessian_vector.py --backend jax --images 16
    python benchmarks/hessian_vector.py --small              # a tiny UNet: a smoke run
    python benchmarks/hessian_vector.py --jit_compile --ways gradient,reverse_over_reverse

The meta-generalisation step needs the Hessian-vector product H v of its support loss
(`keras_privacy.backend.hessian_vector_product`). Each way is measured in a fresh process on
f_A alone (the paper's UNet on 112 x 112 images, in training mode, loss the mean square of its
output, v = the weights themselves), compiled as training compiles it (`tf.function` without
XLA on TensorFlow, with XLA under `--jit_compile`; `jax.jit` on JAX):
- `gradient`: one plain gradient, the unit;
- `reverse_over_reverse`: the gradient of <grad L, v>;
- `forward_over_reverse`: the forward derivative of grad L along v (`jax.jvp` of `jax.grad`;
  TensorFlow's `ForwardAccumulator` around a tape);
- `forward_over_reverse_blocks`: the same with f_A run block by block, each block under
  `backend.checkpoint` (`models.segments`; recomputed on JAX, the meta update's way; on
  TensorFlow nothing is recomputed).
Figures per way: `peak_rss_gib` (the process's `VmHWM`), `above_models_gib` (the peak less the
resident size once f_A is built), `ratio` (that over the plain gradient's) and `seconds`
(compilation and one run). The backend's `hessian_vector_product` takes the way with the lower
ratio. `--ways` measures some of them (the gradient, the unit, always first). Each worker runs
under `memory.py`'s guard at its hard cap (`HARD_CAP_GIB`). The last line of
the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/memory.py

from memory import HARD_CAP_GIB, proc_kib, run_guarded  # noqa: E402

WAYS = ("gradient", "reverse_over_reverse", "forward_over_reverse", "forward_over_reverse_blocks")
TIMEOUT_SECONDS = 1800.0


def _rss_gib(field: str) -> float:
    """This process's `field` of /proc/self/status (VmRSS, VmHWM), GiB."""
    return proc_kib("/proc/self/status", field) / 2**20


def differentiate(way: str, loss, params: list) -> list:
    """`way`'s result on this backend: the gradient of `loss` at `params`, or its Hessian
    times `params`."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        if way == "gradient":
            return jax.grad(loss)(params)
        if way == "forward_over_reverse":
            return jax.jvp(jax.grad(loss), (params,), (params,))[1]
        return jax.grad(lambda p: _inner(jax.grad(loss)(p), params))(params)
    import tensorflow as tf

    def gradient(p):
        with tf.GradientTape() as tape:
            tape.watch(p)
            value = loss(p)
        return tape.gradient(value, p)

    if way == "gradient":
        return gradient(params)
    if way == "forward_over_reverse":
        with tf.autodiff.ForwardAccumulator(params, params) as accumulator:
            grads = gradient(params)
        return accumulator.jvp(grads)
    with tf.GradientTape() as tape:
        tape.watch(params)
        directional = _inner(gradient(params), params)
    return tape.gradient(directional, params)


def _inner(grads: list, vector: list):
    from keras import ops

    return sum(ops.sum(g * ops.stop_gradient(v)) for g, v in zip(grads, vector))


def measure(way: str, images: int, small: bool, jit_compile: bool = False) -> dict:
    """Build f_A, compile and run `way` once; its figures (in this process)."""
    import keras
    import numpy as np

    from keras_privacy import backend
    from keras_privacy.models import registry
    from keras_privacy.models.segments import block_ends, functional_segments, run_segments
    from keras_privacy.models.unet import unet

    keras.utils.set_random_seed(0)
    model = unet(widths=(4, 8)) if small else registry.build_anonymizer("unet")
    size = 16 if small else 112
    inputs = np.random.default_rng(0).random((images, size, size, 3), dtype="float32")
    non_trainable = [v.value for v in model.non_trainable_variables]

    blocks = functional_segments(model, block_ends(model)) if way.endswith("_blocks") else ()

    def loss(params):
        if blocks:
            outputs, _ = run_segments(
                blocks, params, non_trainable, inputs, True, backend.checkpoint
            )
        else:
            outputs, _ = model.stateless_call(params, non_trainable, inputs, training=True)
        return keras.ops.mean(outputs**2)

    def run(params):
        return differentiate(way.removesuffix("_blocks"), loss, params)

    if keras.backend.backend() == "jax":
        import jax

        compiled = jax.jit(run)
        params = [v.value for v in model.trainable_variables]
    else:
        import tensorflow as tf

        compiled = tf.function(run, jit_compile=jit_compile)
        params = [tf.convert_to_tensor(v.value) for v in model.trainable_variables]
    models_gib = _rss_gib("VmRSS")
    start = time.perf_counter()
    result = compiled(params)
    total = float(sum(np.sum(np.abs(np.asarray(r))) for r in result))
    return {
        "way": way,
        "peak_rss_gib": round(_rss_gib("VmHWM"), 3),
        "above_models_gib": round(_rss_gib("VmHWM") - models_gib, 3),
        "seconds": round(time.perf_counter() - start, 1),
        "finite": total == total,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("tensorflow", "jax"), default="tensorflow")
    parser.add_argument("--images", type=int, default=8, help="112 x 112 images through f_A")
    parser.add_argument("--small", action="store_true", help="a tiny UNet on 16 x 16 images")
    parser.add_argument("--jit_compile", action="store_true", help="TensorFlow: with XLA")
    parser.add_argument("--ways", default=",".join(WAYS), help="comma-separated ways")
    parser.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.images, args.small, args.jit_compile)))
        return
    ways = ["gradient"] + [w for w in args.ways.split(",") if w != "gradient"]
    unknown = set(ways) - set(WAYS)
    if unknown:
        parser.error(f"--ways: {sorted(unknown)} are not among {list(WAYS)}")
    env = dict(
        os.environ,
        KERAS_BACKEND=args.backend,
        TF_CPP_MIN_LOG_LEVEL="3",
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        PYTHONPATH=str(Path(__file__).resolve().parent.parent),
    )
    report = {
        "backend": args.backend,
        "jit_compile": args.jit_compile,
        "images": args.images,
        "small": args.small,
        "ways": [],
    }
    for way in ways:
        command = [sys.executable, __file__, "--worker", way, "--images", str(args.images)]
        command += ["--small"] if args.small else []
        command += ["--jit_compile"] if args.jit_compile else []
        done = run_guarded(command, HARD_CAP_GIB, TIMEOUT_SECONDS, env)
        lines = [line for line in done["output"].splitlines() if line.startswith("{")]
        if done["killed_because"] or done["returncode"] != 0 or not lines:
            tail = (done["output"].strip().splitlines() or [f"exit {done['returncode']}"])[-1]
            figures = {"way": way, "error": done["killed_because"] or tail[:300]}
        else:
            figures = json.loads(lines[-1])
        report["ways"].append(figures)
        print(json.dumps(figures), flush=True)
    unit = report["ways"][0].get("above_models_gib")
    for figures in report["ways"]:
        if unit and "above_models_gib" in figures:
            figures["ratio"] = round(figures["above_models_gib"] / unit, 2)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
