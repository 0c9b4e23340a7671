"""Time the meta-generalisation step against the plain supervised adversarial (VITA) step.

    python benchmarks/meta_step.py [--size 32] [--frames 8] [--clips 8] [--images 16] [--steps 5]
    python benchmarks/meta_step.py --paper [--clips 2] [--images 4]

Three trainers get the same models (same initial weights), data and batches, each step
XLA-compiled on the backend of KERAS_BACKEND: VITA with the attack models as its budget
ensemble, and `MetaGeneralization` second order and first order (`meta_first_order`). The
defaults are the tiny models of configs/synthetic_meta.cfg at its sizes; `--paper` takes the
models of configs/ucf101_vispr_meta.cfg (UNet, SPAct's R3D-18, the paper's MobileNet-V2 attack
models at 8 width multipliers), 16 x 112 x 112 clips, VISPR-1's 7 attributes and train_step.py's
batch (2 clips, 4 images); flags given with it override those.

The timed branch: the meta trainers run with T1 = T2 = 0, so Algorithm 1's choice picks the
anonymizer's second-order meta update every step (the JSON counts the updates of f_A and of the
other players to show it). The meta trainer decides on accuracies measured by a first pass; on
an accelerator it skips the unselected updates (`jax.lax.cond` / `tf.cond`), so a meta step
pays for that pass and the meta update only, while on a CPU (XLA, where a conditional makes
convolution gradients 30-80x slower) it computes them and discards their results. VITA gates
its f_T and budget updates on their own forward passes, so a VITA step always pays for its
f_A, f_T and budget updates. A step's time is the median over `--steps` steps after a
compiling one. The last line is one JSON object.
"""

import argparse
import json
import os
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from keras_privacy.methods.meta import MetaGeneralization, epoch_splits
from keras_privacy.methods.vita import VITA
from keras_privacy.models import registry

PAPER = {
    "anonymizer": "unet",
    "action_model": "r3d_18_spact",
    "attack_models": ",".join(
        f"mobilenet_v2_{alpha}" for alpha in (0.35, 0.5, 0.6, 0.75, 0.9, 1.0, 1.3, 1.4)
    ),
    "classes": 101,
    "attributes": 7,
    "clips": 2,
    "images": 4,
    "frames": 16,
    "size": 112,
}
"""The `--paper` settings (configs/ucf101_vispr_meta.cfg's models; train_step.py's batch)."""


class StepTimes(keras.callbacks.Callback):
    """Wall-clock seconds of every training batch (the logs are read, so the step has ended)."""

    def __init__(self):
        super().__init__()
        self.seconds: list[float] = []

    def on_train_batch_begin(self, batch, logs=None):
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)


def build_models(args: argparse.Namespace) -> tuple[keras.Model, keras.Model, list[keras.Model]]:
    """f_A, f_T and the attack models, with the same initial weights at every call."""
    keras.utils.set_random_seed(0)
    anonymizer = registry.build_anonymizer(args.anonymizer)
    action = registry.build_action_model(
        args.action_model,
        num_classes=args.classes,
        input_shape=(args.frames, args.size, args.size, 3),
    )
    attack_models = [
        registry.build_privacy_classifier(name, args.attributes, f"attack_{i}")
        for i, name in enumerate(args.attack_models.split(","))
    ]
    return anonymizer, action, attack_models


def time_steps(trainer: keras.Model, dataset) -> tuple[float, float]:
    """(seconds of the first step, compile included; median seconds of the dataset's other
    steps)."""
    start = time.perf_counter()
    trainer.fit(dataset.take(1), epochs=1, verbose=0)
    compile_seconds = time.perf_counter() - start
    times = StepTimes()
    trainer.fit(dataset.skip(1), epochs=1, verbose=0, callbacks=[times])
    return compile_seconds, statistics.median(times.seconds)


def updates(trainer: keras.Model, groups: tuple[str, ...]) -> int:
    """How many updates the optimizers of `groups` have applied."""
    return sum(int(trainer.group_optimizer(g).iterations.numpy()) for g in groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anonymizer", default="unet_tiny")
    parser.add_argument("--action_model", default="factorized_tiny_diff")
    parser.add_argument(
        "--attack_models", default="resnet_tiny_small_images,resnet_tiny,resnet_tiny_small_images"
    )
    parser.add_argument("--classes", type=int, default=6)
    parser.add_argument("--attributes", type=int, default=5)
    parser.add_argument("--clips", type=int, default=8)
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--paper", action="store_true", help="the paper's models and sizes")
    if parser.parse_known_args()[0].paper:
        parser.set_defaults(**PAPER)
    args = parser.parse_args()

    c, t, s, n = args.clips, args.frames, args.size, args.images
    num_models = len(args.attack_models.split(","))
    rng = np.random.default_rng(0)
    batches = args.steps + 1
    data = {
        "clips": rng.random((batches, c, t, s, s, 3), dtype="float32"),
        "labels": rng.integers(0, args.classes, (batches, c)).astype("int32"),
        "images": rng.random((batches, n, s, s, 3), dtype="float32"),
        "privacy": rng.integers(0, 2, (batches, n, args.attributes)).astype("float32"),
        **epoch_splits(0, 0, batches, n, args.attributes, num_models),
    }
    dataset = tf.data.Dataset.from_tensor_slices(data)

    adam = keras.optimizers.Adam
    anonymizer, action, budget_models = build_models(args)
    # The earlier VITA step (one gated f_T update, one budget update), the figures' baseline.
    vita = VITA(
        anonymizer,
        action,
        budget_models,
        action_schedule="batch_gate",
        action_moves_anonymizer=False,
        budget_updates=1,
    )
    vita.compile(
        {g: adam(1e-4) for g in ("anonymizer", "action", *vita.budget_groups)}, jit_compile=True
    )
    compile_seconds, vita_seconds = time_steps(vita, dataset)
    figures = {
        "backend": keras.backend.backend(),
        "input": f"{t}x{s}x{s}",
        "clips_per_step": c,
        "images_per_step": n,
        "attack_models": num_models,
        "adversarial_seconds_per_step": vita_seconds,
        "adversarial_first_step_with_compile_seconds": compile_seconds,
    }
    for name, first_order in (("meta", False), ("meta_first_order", True)):
        anonymizer, action, attack_models = build_models(args)
        meta = MetaGeneralization(
            anonymizer,
            action,
            attack_models,
            first_order=first_order,
            action_threshold=0.0,
            attack_threshold=0.0,
        )
        others = ("action", *meta.attack_groups)
        meta.compile(
            {"anonymizer": keras.optimizers.SGD(1e-4), **{g: adam(1e-4) for g in others}},
            jit_compile=True,
        )
        compile_seconds, seconds = time_steps(meta, dataset)
        figures[f"{name}_seconds_per_step"] = seconds
        figures[f"{name}_first_step_with_compile_seconds"] = compile_seconds
        figures[f"{name}_over_adversarial"] = seconds / vita_seconds
        # The timed branch: every step updates f_A (meta), none updates f_T or an attack model.
        figures[f"{name}_anonymizer_updates"] = updates(meta, ("anonymizer",))
        figures[f"{name}_other_player_updates"] = updates(meta, others)
    figures["load_average"] = os.getloadavg()[0]
    print(
        "Timed branch: the second-order (first-order) meta update of f_A. The meta trainer skips "
        "the unselected players' updates on an accelerator and computes and discards them on a "
        "CPU; VITA computes every gated update each step."
    )
    print(
        json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in figures.items()})
    )


if __name__ == "__main__":
    main()
