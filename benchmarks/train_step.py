"""Time one SPAct minimax step (both halves) at the paper's model sizes on this backend.

    KERAS_BACKEND=jax python benchmarks/train_step.py [--clips 2] [--images 4] [--size 112]
                                                      [--no-xla | --xla]
                                                      [--dtype-policy mixed_bfloat16]

Models: SPAct UNet f_A, R3D-18 (SPAct variant) f_T, ResNet-50 + 2048-2048-128 head f_B. By
default the step compiles as training's `--jit_compile=auto` chooses
(`distribute.choose_jit_compile`: XLA on JAX and a TensorFlow GPU, a plain `tf.function` graph
on a TensorFlow CPU for these 3-D convolutions); `--xla` and `--no-xla` force either on
TensorFlow (the JAX step is always XLA-compiled, and `--no-xla` is refused there). The authors'
PyTorch step at the same sizes is benchmarks/train_step_torch.py. `--dtype-policy
mixed_bfloat16` computes in bfloat16 (on TensorFlow without XLA, oneDNN's bfloat16 kernels
where the CPU has them). Efficiency = model FLOPs of the step / time, as a fraction of the
matmul peak measured in the same run (a large float32 matmul, so bfloat16 can exceed 1). The
last line is one JSON object.
"""

import argparse
import json
import time

import keras
import numpy as np

from keras_privacy.distribute import choose_jit_compile
from keras_privacy.methods.spact import SPAct
from keras_privacy.models import registry
from keras_privacy.models.flops import forward_flops
from keras_privacy.models.resnet import privacy_encoder, projection_head


def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """FLOP/s of a plain float32 n x n matmul on this backend."""
    a = keras.random.normal((n, n))
    b = keras.random.normal((n, n))
    keras.ops.convert_to_numpy(keras.ops.matmul(a, b))
    start = time.perf_counter()
    for _ in range(repeats):
        c = keras.ops.matmul(a, b)
    keras.ops.convert_to_numpy(c)
    return 2 * n**3 * repeats / (time.perf_counter() - start)


def step_flops(models, clips, frames, size, images):
    """Model FLOPs of one minimax iteration (forward + backward, both halves)."""
    f_a = forward_flops(models["anonymizer"], (size, size, 3))
    f_t = forward_flops(models["action"], (frames, size, size, 3))
    f_b = forward_flops(models["privacy"], (size, size, 3))
    anonymized = clips * frames + 2 * images
    contrastive = 2 * (clips + images)
    forward = anonymized * f_a + clips * f_t + contrastive * f_b
    # f_A half: forward, input gradients through f_T and f_B (~1x), full backward of f_A (~2x).
    anonymizer_half = forward + clips * f_t + contrastive * f_b + 2 * anonymized * f_a
    # Adversary half: f_A forward only, full backward (~2x) of f_T and f_B.
    adversary_half = forward + 2 * (clips * f_t + contrastive * f_b)
    return anonymizer_half + adversary_half


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2)
    parser.add_argument("--images", type=int, default=4)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--steps", type=int, default=3)
    xla = parser.add_mutually_exclusive_group()
    xla.add_argument("--no-xla", action="store_true", help="TensorFlow: no jit_compile")
    xla.add_argument("--xla", action="store_true", help="TensorFlow: jit_compile")
    parser.add_argument(
        "--dtype-policy", default="float32", help="Keras dtype policy, e.g. mixed_bfloat16"
    )
    args = parser.parse_args()
    keras.config.set_dtype_policy(args.dtype_policy)
    if args.no_xla and keras.backend.backend() != "tensorflow":
        parser.error("--no-xla is for TensorFlow: on JAX the step is always XLA-compiled here")

    backbone = registry.build_image_backbone("resnet50")
    models = {
        "anonymizer": registry.build_anonymizer("unet"),
        "action": registry.build_action_model("r3d_18_spact", num_classes=101),
        "privacy": privacy_encoder(backbone, projection_head(backbone.output_shape[-1])),
    }
    # Frame pairs and image views, as the FLOP count below (the figures in the README).
    trainer = SPAct(
        models["anonymizer"], models["action"], models["privacy"], contrastive_views="both"
    )
    setting = "false" if args.no_xla else "true" if args.xla else "auto"
    jit_compile, why = choose_jit_compile(setting, models.values())
    trainer.compile(
        {g: keras.optimizers.Adam(1e-4) for g in ("anonymizer", "action", "privacy")},
        jit_compile=jit_compile,
    )
    rng = np.random.default_rng(0)
    c, t, s, n = args.clips, args.frames, args.size, args.images
    # One minimax step's batch: (batch, half, ...) as `pair_batches` gives it, the f_A half's
    # batch at index 0 of axis 1 and the adversary half's at index 1.
    pair = {
        "clips": rng.random((c, 2, t, s, s, 3), dtype="float32"),
        "labels": rng.integers(0, 101, (c, 2)).astype("int32"),
        "frame_pairs": rng.integers(0, t, (c, 2, 2)).astype("int32"),
        "views": rng.random((n, 2, 2, s, s, 3), dtype="float32"),
    }
    data = {k: np.repeat(v[None], args.steps + 1, axis=0) for k, v in pair.items()}

    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(data)
    start = time.perf_counter()
    trainer.fit(dataset.take(1), epochs=1, verbose=0)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    trainer.fit(dataset.skip(1), epochs=1, verbose=0)
    step_seconds = (time.perf_counter() - start) / args.steps

    peak = matmul_peak()
    flops = step_flops(models, c, t, s, n)
    figures = {
        "backend": keras.backend.backend(),
        "clips_per_step": 2 * c,
        "image_pairs_per_step": 2 * n,
        "input": f"{t}x{s}x{s}",
        "xla": jit_compile,
        "xla_choice": why,
        "dtype_policy": args.dtype_policy,
        "seconds_per_minimax_step": round(step_seconds, 3),
        "clips_per_second": round(2 * c / step_seconds, 3),
        "first_step_with_compile_seconds": round(compile_seconds, 1),
        "model_gflops_per_step": round(flops / 1e9, 1),
        "achieved_gflops_per_second": round(flops / step_seconds / 1e9, 1),
        "matmul_peak_gflops_per_second": round(peak / 1e9, 1),
        "fraction_of_matmul_peak": round(flops / step_seconds / peak, 3),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
