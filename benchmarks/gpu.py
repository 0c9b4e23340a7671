"""GPU benchmark: the SPAct, VITA, penalty and meta minimax steps at the paper's sizes on JAX.

    KERAS_BACKEND=jax python benchmarks/gpu.py                    # everything, on the GPU
    KERAS_BACKEND=jax python benchmarks/gpu.py --small            # CPU smoke run, tiny models
    KERAS_BACKEND=jax python benchmarks/gpu.py --methods spact --policies mixed_bfloat16
    KERAS_BACKEND=jax python benchmarks/gpu.py --jobs meta:mixed_bfloat16,spact:float32

Needs Keras and JAX only (no TensorFlow, no PyAV): the recipe that carries Keras to a GPU machine
is in the README ("Measured on an H100 and an H200"). Every measurement runs in a fresh process
of its own (this script with `--worker`), so that each peak of device memory is that
configuration's and an out-of-memory stops only that configuration.

Per method and dtype policy (`float32`, `mixed_bfloat16`), at the paper's batch (24 clips of
16 x 112 x 112 and 64 privacy images per batch):
- the training step XLA-compiled as `fit` compiles it (`trainer.train_step` under `jax.jit`,
  the state donated; for meta, whose player JAX picks on the host, the deciding pass and the
  meta update's program, `JaxStep.host_chosen_step`), fed a batch already on the device; the
  median of `--steps` steps after a compiling one;
- clips/s: action clips consumed per second (a SPAct or penalty step is one minimax iteration,
  two batches: 48 clips; a VITA or meta step one batch: 24 clips);
- `model_gflops_per_step`: the models' forward FLOPs (Conv and Dense layers) combined as the
  step needs them (backward = 2x forward, input gradients only = 1x; `step_flops`); none for
  meta, whose second-order step has no such simple count (XLA's own cost analysis is no
  substitute: on a GPU it leaves out the cuDNN convolutions, most of the work);
- `fraction_of_bf16_matmul_peak`: model FLOPs / time over a bfloat16 8192^3 matmul timed in the
  same run (`--worker matmul`, always compiled with XLA's default autotuning);
- `peak_gib`: the device's peak bytes in use during the process (compile and steps);
- meta with `--attack_models K`: the first K of its eight attack models, a smaller program
  (the step that held all three players, 177 thousand StableHLO operations with all eight,
  compiled inside a lease's command only with `XLA_FLAGS=--xla_gpu_autotune_level=0`: 197 to
  272 s on an H200; with the default autotuning, not within 563 s; the meta update's program
  alone is 75 thousand);
- the largest batch that fits (`--largest_batch`): the paper's batch doubled until the step
  runs out of device memory;
- `planned_gib`: the device memory XLA's buffer assignment plans for the step (arguments,
  outputs and temporaries, `compiled.memory_analysis()`), known before the step runs, so a step
  that runs out of memory still says how much it wanted;
- with `--profile DIR`: `PROFILED_STEPS` more steps traced by JAX's profiler (a perfetto trace
  in DIR, one folder per step) and summarised (`profile`): the share of the traced time the
  device was busy (the rest is the host's dispatch and waits) and the operations that took
  most device time, by kind and by kernel: where a step below the matmul peak loses its time;
- `gpu_in_use_before`: the GPU memory every process held, and the GPU's utilisation, just
  before a measurement started (nvidia-smi): far from nothing, another process shared the GPU,
  and the figures are not the step's alone;
- with `--variant_flags "FLAGS;FLAGS..."`: every paper-batch step measured again for each
  variant, compiled with its FLAGS added to `XLA_FLAGS` (`variant_flags` in its row; a flag
  of the run's that a variant names again takes the variant's value), right after the step
  without them, with its `speedup` over it: compiler settings tried against their peer in the
  same run. A variant compiles into a cache folder of its own, so that it never loads the
  autotuning results another one found.
- with `--lower_only`: no compile and no timing, only each step's program counted
  (`program_counts`: StableHLO operations, convolutions, distinct convolutions, the ones
  autotuning times), so that the size of a compile can be read on a CPU.

`--compile_first N` compiles every measurement before any is timed, N processes at a time, into
a persistent compilation cache (`jax_compilation_cache_dir`) that the timed runs, one at a time,
then load: the compiles (minutes each, on the CPU) overlap, the timings do not. Each row then
gives `first_compile_seconds` (the concurrent compile) beside `compile_seconds` (the load).
`compile_loaded_from_cache` (and `first_compile_loaded_from_cache`) says where every program of
a step came from the persistent cache, as after an earlier command with the same `--cache`:
such a "compile" took the seconds of a load.
Run one benchmark at a time on a GPU: compiles autotuning their convolutions beside a timed
step can take most of the GPU's memory (134 of an H200's 139 GiB, 2026-11-28).
`--deadline S` starts no compile or measurement after S seconds and still prints the report,
so a run inside a fixed lease ends with what it measured. `--cache DIR` keeps the compilation cache
(and XLA's autotuning results of each fusion) in DIR: a compile that needs most of one command
of a lease can end there, and the next command, on the same warm machine with the same
`XLA_FLAGS`, loads and times it (a folder the repository ignores stays between commands).

The authors' PyTorch SPAct step (`benchmarks/train_step_torch.py --device cuda`) runs at the same
sizes in the same run, float32 and bfloat16 autocast, each as the authors wrote it and with
`--detach` (without the gradients it computes and discards: the work ours does), and the
PyTorch / JAX step-time ratio of each is reported (`jax_speedup`).

The learning check (`--learning_check DIR`): a SPAct minimax exported on a CPU by
`python -m keras_privacy.data arrays` (batches, starting models and settings) is trained from
those arrays with `fit`; `--record` (on the CPU) keeps its per-epoch losses as the reference,
and trains it `--noise_runs` more times from starting weights perturbed by float noise
(`PERTURBATION`): how far those runs end from the reference is the noise band of each loss,
since a minimax amplifies the rounding differences any other device or backend brings. A later
run (on the GPU) reports its losses beside the reference and whether each last-epoch loss (the
logs named `*loss`) is within `NOISE_MARGIN` times its band (`LEARNING_TOLERANCE` of it for a
reference recorded without perturbed runs).

Without a GPU (`--small`) the models are the synthetic benchmark's tiny ones, the sizes tiny
and the PyTorch peer left out: a smoke run that checks every path, not a timing.
The last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

METHODS = ("spact", "penalty", "vita", "meta")
BATCHES_PER_STEP = {"spact": 2, "penalty": 2, "vita": 1, "meta": 1}
"""Batches one training step takes: a SPAct (penalty) step is a minimax iteration of two."""
POLICIES = ("float32", "mixed_bfloat16")
MIN_WORKER_SECONDS = 5.0
"""Less time left than this (`--end`) and no worker is started: it could not even start JAX."""
META_BRANCHES = frozenset({"anonymizer"})
"""The player meta's benchmark step updates: `build_trainer` sets T1 = T2 = 0, so Algorithm 1
picks the meta update of f_A every step."""

PAPER = {
    "clips": 24,
    "images": 64,
    "frames": 16,
    "size": 112,
    "classes": 101,
    "attributes": 7,
    "anonymizer": {"spact": "unet", "penalty": "unetpp", "vita": "vita", "meta": "unet"},
    "action_model": "r3d_18_spact",
    "privacy_backbone": "resnet50",
    "projection": (2048, 128),
    "budget_models": ("resnet_v1_50", "resnet_v2_50", "mobilenet_v1_1.0", "mobilenet_v1_0.75"),
    "attack_models": tuple(
        f"mobilenet_v2_{alpha}" for alpha in (0.35, 0.5, 0.6, 0.75, 0.9, 1.0, 1.3, 1.4)
    ),
}
"""The configs/ucf101_vispr*.cfg models and the paper's batch."""

SMALL = {
    "clips": 2,
    "images": 4,
    "frames": 4,
    "size": 16,
    "classes": 6,
    "attributes": 5,
    "anonymizer": {method: "unet_tiny" for method in METHODS},
    "action_model": "factorized_tiny_diff",
    "privacy_backbone": "resnet_tiny_small_images",
    "projection": (32, 16),
    "budget_models": ("resnet_tiny_small_images", "resnet_tiny"),
    "attack_models": ("resnet_tiny_small_images", "resnet_tiny", "resnet_tiny_small_images"),
}
"""`--small`: the synthetic benchmark's tiny models at tiny sizes (the CPU smoke run)."""

LEARNING_TOLERANCE = 0.05
"""Largest relative difference of a last-epoch loss from a CPU reference recorded without
perturbed runs that the learning check takes for float noise."""

PERTURBATION = 1e-6
"""Relative size of the noise that a perturbed reference run multiplies into every starting
weight (each weight times 1 + PERTURBATION * N(0, 1)): a few float32 roundings (2^-24 = 6e-8),
the size of the differences another device's arithmetic makes in the first step."""

PROFILED_STEPS = 2
"""Steps that `--profile` traces after the timed ones."""

SHORT_GAP_US = 20.0
"""A device's idle gap between two operations shorter than this (microseconds) is counted as
launch latency (a few microseconds a kernel), longer ones as waits."""

NOISE_MARGIN = 1.5
"""How far past the farthest perturbed run a checked loss may end and still count as noise: a
few perturbed runs see less than the whole spread."""


def model_sizes(small: bool, attack_models: int = 0) -> dict:
    """`PAPER`, or `SMALL` where `small`; meta with the first `attack_models` of its attack
    models (0: all of them)."""
    sizes = SMALL if small else PAPER
    if attack_models:
        sizes = sizes | {"attack_models": sizes["attack_models"][:attack_models]}
    return sizes


def build_trainer(
    method: str,
    sizes: dict,
    clips: int,
    images: int,
    jit_compile: str = "auto",
    first_order: bool = False,
):
    """The trainer of `method` compiled as training compiles it (`--jit_compile=jit_compile`,
    `distribute.choose_jit_compile`), and one batch of its step; meta's meta-gradient is
    first-order with `first_order` (`--meta_first_order`)."""
    import keras

    from keras_privacy.distribute import choose_jit_compile
    from keras_privacy.methods.meta import MetaGeneralization, epoch_splits
    from keras_privacy.methods.spact import SPAct
    from keras_privacy.methods.vita import VITA
    from keras_privacy.models import registry
    from keras_privacy.models.resnet import privacy_encoder, projection_head

    keras.utils.set_random_seed(0)
    t, s = sizes["frames"], sizes["size"]
    anonymizer = registry.build_anonymizer(sizes["anonymizer"][method])
    action = registry.build_action_model(
        sizes["action_model"], num_classes=sizes["classes"], input_shape=(t, s, s, 3)
    )
    rng = np.random.default_rng(0)
    adam = keras.optimizers.Adam
    if method in ("spact", "penalty"):
        backbone = registry.build_image_backbone(sizes["privacy_backbone"])
        hidden, output = sizes["projection"]
        encoder = privacy_encoder(
            backbone, projection_head(backbone.output_shape[-1], hidden, output)
        )
        # Frame pairs and image views, as the FLOP count below (the figures in the README).
        trainer = SPAct(
            anonymizer,
            action,
            encoder,
            penalty_weight=float(method == "penalty"),
            contrastive_views="both",
        )
        trainer.compile(
            {g: adam(1e-4) for g in ("anonymizer", "action", "privacy")},
            jit_compile=choose_jit_compile(jit_compile, trainer.groups().values())[0],
        )
        # One minimax iteration: two batches, (batch, half, ...) as `pair_batches` lays them out.
        batch = {
            "clips": rng.random((clips, 2, t, s, s, 3), dtype="float32"),
            "labels": rng.integers(0, sizes["classes"], (clips, 2)).astype("int32"),
            "frame_pairs": rng.integers(0, t, (clips, 2, 2)).astype("int32"),
            "views": rng.random((images, 2, 2, s, s, 3), dtype="float32"),
        }
        return trainer, batch
    a = sizes["attributes"]
    batch = {
        "clips": rng.random((clips, t, s, s, 3), dtype="float32"),
        "labels": rng.integers(0, sizes["classes"], (clips,)).astype("int32"),
        "images": rng.random((images, s, s, 3), dtype="float32"),
        "privacy": rng.integers(0, 2, (images, a)).astype("float32"),
    }
    if method == "vita":
        budget = [
            registry.build_privacy_classifier(name, a, f"budget_{i}")
            for i, name in enumerate(sizes["budget_models"])
        ]
        # The earlier VITA step (one gated f_T update, one budget update), as the README's
        # figures and `step_flops` count it.
        trainer = VITA(
            anonymizer,
            action,
            budget,
            action_schedule="batch_gate",
            action_moves_anonymizer=False,
            budget_updates=1,
        )
        trainer.compile(
            {g: adam(1e-4) for g in trainer.groups()},
            jit_compile=choose_jit_compile(jit_compile, trainer.groups().values())[0],
        )
        return trainer, batch
    attack = [
        registry.build_privacy_classifier(name, a, f"attack_{i}")
        for i, name in enumerate(sizes["attack_models"])
    ]
    # T1 = T2 = 0: Algorithm 1 picks the second-order meta update of f_A every step.
    trainer = MetaGeneralization(
        anonymizer,
        action,
        attack,
        action_threshold=0.0,
        attack_threshold=0.0,
        first_order=first_order,
    )
    others = ("action", *trainer.attack_groups)
    trainer.compile(
        {"anonymizer": keras.optimizers.SGD(1e-4), **{g: adam(1e-4) for g in others}},
        jit_compile=choose_jit_compile(jit_compile, trainer.groups().values())[0],
    )
    splits = epoch_splits(0, 0, 1, images, a, len(attack))
    batch.update({key: value[0] for key, value in splits.items()})
    return trainer, batch


def step_flops(method: str, trainer, sizes: dict, clips: int, images: int) -> int | None:
    """Model FLOPs of one training step: forward FLOPs of each model times the images or clips
    it sees, backward counted as 2x forward for a trained model and 1x (input gradients only)
    for a model a gradient passes through. None for meta (a second-order step)."""
    from keras_privacy.models.flops import forward_flops

    t, s = sizes["frames"], sizes["size"]
    if method in ("spact", "penalty"):
        from train_step import step_flops as minimax_flops  # benchmarks/train_step.py

        models = {
            "anonymizer": trainer.anonymizer,
            "action": trainer.action_model,
            "privacy": trainer.privacy_encoder,
        }
        return minimax_flops(models, clips, t, s, images)
    f_a = forward_flops(trainer.anonymizer, (s, s, 3))
    f_t = forward_flops(trainer.action_model, (t, s, s, 3))
    if method == "vita":
        # f_A's update: f_A forward and backward (3x) on the frames, f_T and the budget
        # models (on the anonymized frames) forward and input gradients (2x).
        budget = sum(forward_flops(m, (s, s, 3)) for m in trainer.budget_models)
        anonymizer_update = 3 * clips * t * f_a + 2 * (clips * f_t + clips * t * budget)
        # f_T's update reads the updated f_A on the frames, the budget models' on the images.
        anonymized = (clips * t + images) * f_a
        return anonymizer_update + anonymized + 3 * clips * f_t + 3 * images * budget
    return None


def measure_step(
    method: str,
    policy: str,
    sizes: dict,
    clips: int,
    images: int,
    steps: int,
    compile_only: bool = False,
    profile: Path | None = None,
    lower_only: bool = False,
):
    """Time the jitted training step of `method` under `policy`; a dict of figures (only the
    compile's with `compile_only`; only its program's counts with `lower_only`; with `profile`,
    `PROFILED_STEPS` more steps traced there and summarised)."""
    import jax
    import keras

    keras.config.set_dtype_policy(policy)
    trainer, batch = build_trainer(method, sizes, clips, images)
    state = (
        [v.value for v in trainer.trainable_variables],
        [v.value for v in trainer.non_trainable_variables],
        [v.value for v in trainer.optimizer.variables],
        [v.value for v in trainer.metrics_variables],
    )
    batch = jax.device_put(batch)
    figures = {"method": method, "dtype_policy": policy, "clips": clips}
    cache_hits = []
    jax.monitoring.register_event_listener(
        lambda event, **_: (
            cache_hits.append(event) if event == "/jax/compilation_cache/cache_hits" else None
        )
    )
    start = time.perf_counter()
    lowered = lowered_programs(trainer, state, batch)
    if lower_only:
        texts = [program.as_text() for program in lowered]
        # Distinct over all the programs: one process autotunes a convolution once.
        figures |= program_counts("\n".join(texts))
        if len(texts) > 1:
            figures["programs"] = [program_counts(text) for text in texts]
        return figures
    programs = [program.compile() for program in lowered]
    figures["compile_seconds"] = round(time.perf_counter() - start, 1)
    # A program found in the persistent cache is loaded, not compiled: minutes become seconds.
    figures["compile_loaded_from_cache"] = len(cache_hits) == len(programs)
    plans = [planned_gib(program) for program in programs]
    if None not in plans:
        figures["planned_gib"] = max(plans)
    if compile_only:
        return figures
    compiled = programs[0] if len(programs) == 1 else host_decided_step(trainer, *programs)
    logs, state = compiled(state, batch)
    jax.block_until_ready(logs)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        logs, state = compiled(state, batch)
        jax.block_until_ready((logs, state))
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    clips_per_step = clips * BATCHES_PER_STEP[method]
    figures.update(
        clips_per_step=clips_per_step,
        images_per_step=images * BATCHES_PER_STEP[method],
        seconds_per_step=round(seconds, 4),
        clips_per_second=round(clips_per_step / seconds, 1),
        logs={k: round(float(v), 4) for k, v in logs.items() if np.ndim(v) == 0},
    )
    flops = step_flops(method, trainer, sizes, clips, images)
    if flops is not None:
        figures["model_gflops_per_step"] = round(flops / 1e9, 1)
        figures["model_tflops_per_second"] = round(flops / seconds / 1e12, 3)
    if profile is not None:
        try:
            figures["profile"] = profile_steps(compiled, state, batch, profile)
        except Exception as error:  # a profiler that fails (no CUPTI, say) keeps the timing
            figures["profile"] = {"error": f"{type(error).__name__}: {error}"[:300]}
    peak = device_peak_gib()
    if peak is not None:
        figures["peak_gib"] = peak
    figures["device"] = jax.local_devices()[0].device_kind
    return figures


def lowered_programs(trainer, state, batch) -> list:
    """The programs of the step as `fit` runs it, lowered: the jitted step; or, for a trainer
    whose players JAX picks on the host (meta, `JaxStep.host_chosen_step`), the deciding pass
    and the step of `META_BRANCHES`."""
    import jax

    step = trainer._backend_step
    shapes = step.decides_on_host(state, batch)
    if shapes is None:
        return [jax.jit(trainer.train_step, donate_argnums=0).lower(state, batch)]
    decided, begun_state, begun = shapes
    return [
        step.decide_program().lower(state, batch),
        step.branch_program(META_BRANCHES).lower(begun_state, batch, decided, begun=begun),
    ]


def host_decided_step(trainer, decide, branch):
    """One step from the compiled deciding pass and branch step, as `host_chosen_step` runs
    them: the decisions read on the host between the two."""

    def step(state, batch):
        decided, state, begun = decide(state, batch)
        chosen = trainer._backend_step.chosen_branches(decided)
        if chosen != META_BRANCHES:
            raise RuntimeError(f"the step picked {sorted(chosen)}, not {sorted(META_BRANCHES)}")
        return branch(state, batch, decided, begun=begun)

    return step


def program_counts(stablehlo: str) -> dict:
    """The size of a lowered step: its StableHLO operations, its convolutions, and how many of
    those are distinct (operand shapes, types and dimension layouts alike), which is what XLA's
    autotuning times the candidate kernels of, once each a compile."""
    operations = re.findall(r"^\s*(?:%\S+ = )?\"?(\w+\.\w+)", stablehlo, flags=re.MULTILINE)
    convolutions = [
        re.sub(r"%[\w#.]+", "%", line.split(" = ", 1)[-1]).strip()
        for line in stablehlo.splitlines()
        if "stablehlo.convolution" in line
    ]
    return {
        "stablehlo_operations": sum(op.startswith("stablehlo.") for op in operations),
        "convolutions": len(convolutions),
        "distinct_convolutions": len(set(convolutions)),
    }


def profile_steps(compiled, state, batch, folder: Path, steps: int = PROFILED_STEPS) -> dict:
    """`steps` more steps under JAX's profiler, their trace written in `folder`; its summary."""
    import jax

    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        for _ in range(steps):
            logs, state = compiled(state, batch)
        jax.block_until_ready((logs, state))
    trace = max(Path(folder).rglob("perfetto_trace.json.gz"), key=lambda path: path.stat().st_mtime)
    return summarize_trace(trace, steps)


def outermost(spans: list[dict]) -> list[dict]:
    """The trace events that no other event of their thread contains (a CPU's thunks hold
    their operations; a GPU stream's kernels do not nest): each stretch of time counted once."""
    kept, reached = [], {}
    for event in sorted(spans, key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"])):
        thread = (event["pid"], event["tid"])
        if event["ts"] >= reached.get(thread, float("-inf")):
            kept.append(event)
            reached[thread] = event["ts"] + event["dur"]
    return kept


def summarize_trace(trace: Path, steps: int, top: int = 12) -> dict:
    """Where the device's time went in a perfetto trace of `steps` steps: the share of the
    traced span it was busy, its busy seconds per step, and the `top` operations by time, by
    kind (the HLO operation less its number: `fusion`, `convolution`, ...) and by kernel; and
    where it idled (`idle`): the gaps between its operations, short ones (a launch's latency,
    under `SHORT_GAP_US`) apart from long ones (a wait: the host behind, a copy, a sync), and
    the `top` longest with the operations either side. A GPU's kernels are the events on its
    streams; a CPU's, the events naming an HLO op."""
    with gzip.open(trace, "rt") as file:
        data = json.load(file)
    events = data["traceEvents"] if isinstance(data, dict) else data
    metadata = [e for e in events if e.get("ph") == "M"]
    devices = {
        e["pid"] for e in metadata
        if e.get("name") == "process_name" and e["args"]["name"].startswith("/device:")
    }  # fmt: skip
    streams = {
        (e["pid"], e["tid"]) for e in metadata
        if e.get("name") == "thread_name" and e["pid"] in devices
        and "stream" in e["args"]["name"].lower()
    }  # fmt: skip
    spans = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    kernels = outermost(
        [e for e in spans if (e["pid"], e["tid"]) in streams]
        or [e for e in spans if "hlo_op" in e.get("args", {})]
    )
    if not kernels:
        return {"error": f"{trace}: no device operation in the trace"}
    ordered = sorted(kernels, key=lambda e: e["ts"])
    busy, gaps, reached, last = 0.0, [], ordered[0]["ts"], ordered[0]
    for event in ordered:
        begin, end = event["ts"], event["ts"] + event["dur"]
        if begin > reached:
            gaps.append((begin - reached, last, event))
        if end > reached:
            busy += end - max(begin, reached)
            reached, last = end, event
    span = reached - ordered[0]["ts"]  # `reached`: the last kernel's end
    total = sum(e["dur"] for e in kernels)

    def largest(key) -> list[dict]:
        times: dict[str, float] = {}
        for e in kernels:
            name = key(e)
            times[name] = times.get(name, 0.0) + e["dur"]
        ranked = sorted(times.items(), key=lambda item: -item[1])[:top]
        return [
            {"name": name, "ms_per_step": round(t / steps / 1e3, 3), "share": round(t / total, 3)}
            for name, t in ranked
        ]

    def kind(event: dict) -> str:
        return re.sub(r"[.\d]+$", "", event.get("args", {}).get("hlo_op", event["name"]))

    short = [gap for gap, _, _ in gaps if gap < SHORT_GAP_US]
    return {
        "profiled_steps": steps,
        "device_busy_fraction": round(busy / span, 3),
        "device_busy_seconds_per_step": round(busy / steps / 1e6, 4),
        "by_kind": largest(kind),
        "by_kernel": largest(lambda event: event["name"][:120]),
        "idle": {
            "gaps_per_step": round(len(gaps) / steps, 1),
            "ms_per_step_in_short_gaps": round(sum(short) / steps / 1e3, 3),
            "ms_per_step_in_long_gaps": round((span - busy - sum(short)) / steps / 1e3, 3),
            "longest": [
                {"ms": round(gap / 1e3, 3), "after": kind(after), "before": kind(before)}
                for gap, after, before in sorted(gaps, key=lambda g: -g[0])[:top]
            ],
        },
    }


def planned_gib(compiled) -> float | None:
    """The device memory XLA plans for a compiled step: arguments, outputs and temporaries,
    less the donated arguments that outputs reuse (None where XLA gives no analysis)."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    planned = (
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        + analysis.temp_size_in_bytes
        - analysis.alias_size_in_bytes
    )
    return round(planned / 2**30, 2)


def device_peak_gib() -> float | None:
    """The peak GiB in use on the first accelerator during this process (JAX or TensorFlow);
    None on a CPU, which keeps no such count (`benchmarks/memory.py` reads the process's)."""
    import keras

    if keras.backend.backend() == "jax":
        import jax

        stats = jax.local_devices()[0].memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
    else:
        import tensorflow as tf

        if not tf.config.list_logical_devices("GPU"):
            return None
        peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]
    return None if peak is None else round(peak / 2**30, 2)


def gpu_in_use() -> dict | None:
    """Memory in use on the first GPU, by every process, and its utilisation, from nvidia-smi
    (None without it): a timing or an out-of-memory beside another process's work (a compile
    autotuning its convolutions can hold most of a GPU) is not the step's alone."""
    query = [
        "nvidia-smi",
        "--query-gpu=memory.used,utilization.gpu",
        "--format=csv,noheader,nounits",
    ]
    try:
        done = subprocess.run(query, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    used_mib, utilization = done.stdout.splitlines()[0].split(",")
    return {"memory_gib": round(float(used_mib) / 1024, 2), "utilization_percent": int(utilization)}


def measure_matmul(n: int, repeats: int = 20) -> dict:
    """FLOP/s of an n x n x n bfloat16 (and float32) matmul with JAX on this device."""
    import jax
    import jax.numpy as jnp

    figures = {}
    for dtype in ("bfloat16", "float32"):
        a = jax.random.normal(jax.random.key(0), (n, n), dtype)
        b = jax.random.normal(jax.random.key(1), (n, n), dtype)
        matmul = jax.jit(jnp.matmul)
        matmul(a, b).block_until_ready()
        start = time.perf_counter()
        for _ in range(repeats):
            c = matmul(a, b)
        c.block_until_ready()
        # Three decimals: a CPU smoke run reaches a few hundredths of a TFLOP/s.
        figures[f"{dtype}_matmul_tflops"] = round(
            2 * n**3 * repeats / (time.perf_counter() - start) / 1e12, 3
        )
    return figures


def learning_check(folder: Path, record: bool, noise_runs: int = 3) -> dict:
    """Train the exported minimax in `folder` (see the module docstring); its losses, and their
    comparison with `reference.json` (written instead with `record`, with `noise_runs`
    perturbed runs)."""
    import jax

    result = {
        "device": jax.local_devices()[0].device_kind,
        "losses": train_exported(folder),
    }
    reference_path = folder / "reference.json"
    if record:
        result["perturbed"] = [train_exported(folder, seed) for seed in range(noise_runs)]
        reference_path.write_text(json.dumps(result, indent=1))
        return result | {"recorded": str(reference_path)}
    if reference_path.is_file():
        result.update(compare_losses(result["losses"], json.loads(reference_path.read_text())))
    return result


def train_exported(folder: Path, perturbation_seed: int | None = None) -> dict[str, list[float]]:
    """The per-epoch logs of the minimax exported in `folder`, trained with `fit` from its
    arrays; with a seed, from starting weights perturbed by `PERTURBATION`."""
    import keras

    from keras_privacy.data.frames import frames_as_floats
    from keras_privacy.methods.batches import BatchList
    from keras_privacy.methods.spact import SPAct
    from keras_privacy.models import registry  # noqa: F401 (registers the models' layers)

    settings = json.loads((folder / "minimax.json").read_text())
    files = ("anonymizer.keras", "action_model.keras", "privacy_encoder.keras")
    models = [keras.saving.load_model(folder / name, compile=False) for name in files]
    if perturbation_seed is not None:
        rng = np.random.default_rng(perturbation_seed)
        for variable in (v for model in models for v in model.trainable_variables):
            value = keras.ops.convert_to_numpy(variable.value)
            noise = 1 + PERTURBATION * rng.standard_normal(value.shape)
            variable.assign((value * noise).astype(value.dtype))
    # A head the trainer builds itself (a variant's) starts from the same weights on every
    # machine, as the files' models do.
    keras.utils.set_random_seed(0)
    trainer = SPAct(*models, **settings["trainer"])
    trainer.compile(
        {group: keras.optimizers.Adam(lr) for group, lr in settings["learning_rates"].items()}
    )
    arrays = np.load(folder / "batches.npz")
    losses: dict[str, list[float]] = {}
    for epoch in range(settings["epochs"]):
        batches = [
            {key: frames_as_floats(arrays[key][epoch, step]) for key in arrays.files}
            for step in range(settings["steps_per_epoch"])
        ]
        history = trainer.fit(BatchList(batches), epochs=1, verbose=0, shuffle=False).history
        for name, values in history.items():
            losses.setdefault(name, []).append(round(float(values[-1]), 5))
    return losses


def compare_losses(losses: dict[str, list[float]], reference: dict) -> dict:
    """Each last-epoch loss's relative difference from the reference, its noise band (the
    farthest perturbed run's difference) and whether all are within noise."""
    names = [n for n in losses if n.endswith("loss") and n in reference["losses"]]

    def difference(values: list[float], name: str) -> float:
        expected = reference["losses"][name][-1]
        return abs(values[-1] - expected) / max(abs(expected), 1e-6)

    differences = {name: difference(losses[name], name) for name in names}
    compared = {
        "reference": reference,
        "relative_differences": {k: significant(v) for k, v in differences.items()},
    }
    perturbed = reference.get("perturbed")
    if not perturbed:
        compared["within_noise"] = all(v <= LEARNING_TOLERANCE for v in differences.values())
        return compared
    bands = {name: max(difference(run[name], name) for run in perturbed) for name in names}
    compared["noise_bands"] = {k: significant(v) for k, v in bands.items()}
    compared["within_noise"] = all(
        differences[name] <= NOISE_MARGIN * bands[name] + 1e-6 for name in names
    )
    return compared


def significant(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits: a relative difference of 2e-5 stays one (to
    four decimals it read as 0)."""
    return float(f"{value:.{digits}g}")


def without_autotune_level(xla_flags: str) -> str:
    """`xla_flags` less any `--xla_gpu_autotune_level`: XLA's default autotuning."""
    return without_flags(xla_flags, {"--xla_gpu_autotune_level"})


def without_flags(xla_flags: str, names: set[str]) -> str:
    """`xla_flags` less every flag named in `names` (`--name`, with or without `=value`)."""
    return " ".join(flag for flag in xla_flags.split() if flag.split("=")[0] not in names)


def with_gpu_in_use(measurement) -> dict:
    """`measurement()`'s figures, with the GPU's use by every process just before it
    (`gpu_in_use_before`, where nvidia-smi answers): that use should be near nothing."""
    before = gpu_in_use()
    return measurement() | ({"gpu_in_use_before": before} if before else {})


def run_worker(
    args: list[str], timeout: float, cache: str | None = None, xla_flags: str | None = None
) -> dict:
    """This script in a fresh process with `args`; its last JSON line, or why there is none.
    With `cache`, the process reads and writes JAX's persistent compilation cache there, XLA's
    per-fusion autotuning results with it (`jax_persistent_cache_enable_xla_caches`); with
    `xla_flags`, its `XLA_FLAGS` are those instead of this process's."""
    env = dict(os.environ, KERAS_BACKEND="jax", XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if xla_flags is not None:
        env["XLA_FLAGS"] = xla_flags
    if cache:
        Path(cache).mkdir(parents=True, exist_ok=True)
        env.update(
            JAX_COMPILATION_CACHE_DIR=cache,
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
            JAX_PERSISTENT_CACHE_ENABLE_XLA_CACHES="xla_gpu_per_fusion_autotune_cache_dir",
        )
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    return _last_json(command, env, timeout)


def _last_json(command: list[str], env: dict, timeout: float) -> dict:
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    lines = (done.stderr + done.stdout).strip().splitlines()
    last = lines[-1][:300] if lines else f"exit {done.returncode}"
    if any("RESOURCE_EXHAUSTED" in line or "out of memory" in line.lower() for line in lines):
        return {"error": "out of memory", "last_line": last}
    return {"error": last}


def torch_peer(
    sizes: dict, clips: int, images: int, steps: int, bf16: bool, detach: bool, timeout: float
):
    """The authors' PyTorch SPAct step at the same sizes (benchmarks/train_step_torch.py): as
    they wrote it, or with `detach` without the gradients it computes and discards (the work
    our step does)."""
    script = Path(__file__).resolve().parent / "train_step_torch.py"
    command = [
        sys.executable, str(script), "--device", "cuda", "--steps", str(steps),
        "--clips", str(clips), "--images", str(images),
        "--frames", str(sizes["frames"]), "--size", str(sizes["size"]),
    ]  # fmt: skip
    command += (["--bf16"] if bf16 else []) + (["--detach"] if detach else [])
    return _last_json(command, dict(os.environ), timeout)


def largest_batch(policy: str, args: argparse.Namespace, measure) -> dict:
    """SPAct's paper batch doubled (clips and images alike) up to `--largest_batch` times, until
    a step runs out of memory (`stopped_at_clips`) or is not measured for another reason (no
    time left, a compile cut short: `not_measured_at_clips`, which says nothing of the memory);
    `measure(job)` times one step. Each row is printed as it comes."""
    fits, figures = None, {}
    for clips, images in larger_batches(args):
        result = measure(("spact", policy, clips, images, ""), steps=3)
        print(json.dumps(result), flush=True)
        if result.get("error") == "out of memory":
            figures["stopped_at_clips"] = clips
            figures["stopped_because"] = result
            break
        if "error" in result:
            figures["not_measured_at_clips"] = clips
            figures["not_measured_because"] = result
            break
        fits, largest = result, clips
    if fits:
        figures.update(
            largest_clips_per_batch=largest,
            clips_per_second=fits["clips_per_second"],
            peak_gib=fits.get("peak_gib"),
        )
    return figures


def larger_batches(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(clips, images) of the batches `largest_batch` tries: 2x, 4x, ... up to the limit."""
    batches, factor = [], 2
    while factor <= args.largest_batch:
        batches.append((args.clips * factor, args.images * factor))
        factor *= 2
    return batches


def compile_all(
    jobs: list[tuple],
    args: argparse.Namespace,
    cache: str,
    timeout: Callable[[], float],
    why_not_started: Callable[[], str | None],
) -> dict:
    """Compile the step of every (method, policy, clips, images, variant flags) job into the
    persistent `cache`, `--compile_first` processes at a time, each within `timeout()` seconds
    as it starts, none started once `why_not_started()` says why; each compile's figures, by
    job."""

    def compile_one(job: tuple) -> dict:
        if reason := why_not_started():
            return {"error": reason}
        worker = _worker_args(args, *job, steps=0) + ["--compile_only"]
        return run_worker(worker, timeout(), job_cache(cache, job), job_xla_flags(job))

    with ThreadPoolExecutor(args.compile_first) as pool:
        return dict(zip(jobs, pool.map(compile_one, jobs)))


def job_cache(cache: str | None, job: tuple) -> str | None:
    """The compilation cache of a job's workers: a variant's has a folder of its own, so that
    no variant loads the autotuning results another one found (its compile time and its kernels
    are its own)."""
    variant = job[4]
    if not cache or not variant:
        return cache
    return str(Path(cache) / f"variant_{variant_slug(variant)}")


def variant_slug(variant: str) -> str:
    """Variant flags as a folder name."""
    return re.sub(r"\W+", "_", variant).strip("_")


def job_xla_flags(job: tuple) -> str | None:
    """The `XLA_FLAGS` of a job's worker: this process's plus the job's variant flags, a
    variant's flag replacing this process's flag of the same name; None (this process's,
    unchanged) for a job with none."""
    variant = job[4]
    if not variant:
        return None
    replaced = {flag.split("=")[0] for flag in variant.split()}
    return f"{without_flags(os.environ.get('XLA_FLAGS', ''), replaced)} {variant}".strip()


def _worker_args(
    args, method, policy, clips, images, variant, steps, profile: bool = False
) -> list[str]:
    worker = [
        "--worker", method, "--policies", policy, "--clips", str(clips),
        "--images", str(images), "--steps", str(steps),
        "--attack_models", str(args.attack_models),
    ] + (["--small"] if args.small else [])  # fmt: skip
    if profile and args.profile:
        folder = f"{method}_{policy}_{clips}" + ("_" + variant_slug(variant) if variant else "")
        worker += ["--profile", str(Path(args.profile) / folder)]
    return worker


def build_parser() -> argparse.ArgumentParser:
    """The command line (also read by the test of `benchmarks/gpu_lease.sh`'s commands)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument(
        "--jobs",
        default="",
        help="method:policy pairs to measure instead of every --methods x --policies pair "
        "(the larger batches: SPAct's policies among them)",
    )
    parser.add_argument("--clips", type=int, help="clips per batch (paper: 24)")
    parser.add_argument("--images", type=int, help="privacy images per batch (paper: 64)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps after the compiling one")
    parser.add_argument("--small", action="store_true", help="tiny models: a CPU smoke run")
    parser.add_argument("--no_torch", action="store_true", help="leave out the PyTorch peer")
    parser.add_argument(
        "--largest_batch", type=int, default=4, help="try up to this multiple of the batch (0: no)"
    )
    parser.add_argument("--timeout", type=float, default=400.0, help="seconds per measurement")
    parser.add_argument(
        "--compile_first",
        type=int,
        default=0,
        help="compile every step first, this many at a time, into a cache the timed runs load",
    )
    parser.add_argument(
        "--deadline", type=float, default=0.0, help="start nothing after these seconds (0: none)"
    )
    parser.add_argument(
        "--end",
        type=float,
        default=0.0,
        help="end every compile and measurement by these seconds, each given at most the time "
        "left, so that the report is printed before a command's limit (0: none)",
    )
    parser.add_argument(
        "--profile",
        help="trace two more steps of each paper-batch step with JAX's profiler (perfetto "
        "traces in this folder) and summarise where the device's time went",
    )
    parser.add_argument(
        "--cache",
        help="keep JAX's compilation cache in this folder, for a later run to load (default: a "
        "temporary one with --compile_first, removed at the end)",
    )
    parser.add_argument(
        "--variant_flags",
        default="",
        help="also measure every paper-batch step compiled with these XLA flags added (variants "
        "separated by ';'), and report each one's speedup (e.g. "
        "--variant_flags='--xla_gpu_force_conv_nhwc=true;--xla_gpu_autotune_level=0')",
    )
    parser.add_argument(
        "--attack_models",
        type=int,
        default=0,
        help="meta: the first this many of the eight attack models (0: all), a smaller program",
    )
    parser.add_argument("--learning_check", help="a folder exported by keras_privacy.data arrays")
    parser.add_argument("--record", action="store_true", help="keep its losses as the reference")
    parser.add_argument(
        "--noise_runs", type=int, default=3, help="perturbed runs that --record adds (noise band)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--compile_only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--lower_only",
        action="store_true",
        help="count each step's program (StableHLO operations, convolutions, distinct "
        "convolutions: what autotuning times) without compiling it; runs on a CPU",
    )
    return parser


def main() -> None:
    parser = build_parser()
    args = parser.parse_args()
    if args.learning_check:
        print(json.dumps(learning_check(Path(args.learning_check), args.record, args.noise_runs)))
        return
    if args.steps < 1 and not (args.compile_only or args.lower_only):
        parser.error(f"--steps: at least 1 timed step, got {args.steps}")
    attack_models = len(model_sizes(args.small)["attack_models"])
    if not 0 <= args.attack_models <= attack_models:
        parser.error(f"--attack_models: 0 (all) to {attack_models}, got {args.attack_models}")
    sizes = model_sizes(args.small, args.attack_models)
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; known: {', '.join(METHODS)}")
    policies = [p for p in args.policies.split(",") if p]
    pairs = [tuple(pair.split(":")) for pair in args.jobs.split(",") if pair]
    if any(len(pair) != 2 or pair[0] not in METHODS or pair[1] not in POLICIES for pair in pairs):
        parser.error(f"--jobs: each pair is method:policy, of {METHODS} and {POLICIES}")
    pairs = pairs or [(m, p) for m in methods for p in policies]
    spact_policies = [policy for method, policy in pairs if method == "spact"]
    args.clips = args.clips or sizes["clips"]
    args.images = args.images or sizes["images"]

    if args.worker == "matmul":
        print(json.dumps(measure_matmul(256 if args.small else 8192)))
        return
    if args.worker:
        figures = measure_step(
            args.worker, policies[0], sizes, args.clips, args.images, args.steps,
            args.compile_only, Path(args.profile) if args.profile else None, args.lower_only,
        )  # fmt: skip
        print(json.dumps(figures))
        return
    if args.lower_only:
        programs = []
        for method, policy in pairs:
            worker = _worker_args(args, method, policy, args.clips, args.images, "", 0)
            row = run_worker(worker + ["--lower_only"], args.timeout)
            row = {"method": method, "dtype_policy": policy} | row
            print(json.dumps(row), flush=True)
            programs.append(row)
        print(
            json.dumps(
                {"batch": {"clips": args.clips, "images": args.images}, "programs": programs}
            )
        )
        return

    start = time.perf_counter()

    def timeout() -> float:
        """A worker's limit: --timeout, or less where --end leaves less."""
        if not args.end:
            return args.timeout
        return min(args.timeout, args.end - (time.perf_counter() - start))

    def why_not_started() -> str | None:
        """Why no further worker starts (past --deadline, or too little left before --end);
        None while one may."""
        if args.deadline and time.perf_counter() - start > args.deadline:
            return f"not started: past the {args.deadline:.0f} s deadline"
        if timeout() < MIN_WORKER_SECONDS:
            return f"not started: less than {MIN_WORKER_SECONDS:.0f} s left before --end"
        return None

    report = {
        "batch": {"clips": args.clips, "images": args.images},
        "input": f"{sizes['frames']}x{sizes['size']}x{sizes['size']}",
        # The compiler's settings (e.g. --xla_gpu_autotune_level) change compile and step times.
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    variants = [""] + [v.strip() for v in args.variant_flags.split(";") if v.strip()]
    paper_jobs = [(m, p, args.clips, args.images, v) for m, p in pairs for v in variants]
    larger_jobs = [("spact", p, c, i, "") for c, i in larger_batches(args) for p in spact_policies]
    jobs = paper_jobs + larger_jobs
    cache, compiles = args.cache, {}
    if cache:
        Path(cache).mkdir(parents=True, exist_ok=True)
    elif args.compile_first:
        # Removed when the script exits.
        cache_folder = tempfile.TemporaryDirectory(prefix="gpu_benchmark_cache_")
        cache = cache_folder.name
    if args.compile_first:
        compiles = compile_all(jobs, args, cache, timeout, why_not_started)
        print(json.dumps({"compiled": [[*job, r] for job, r in compiles.items()]}), flush=True)

    def measure(job: tuple, steps: int = args.steps, profile: bool = False) -> dict:
        """One timed step in a fresh process (the step loaded from the cache, if compiled)."""
        method, policy, clips, images, variant = job
        first = compiles.get(job, {})
        if "error" in first:
            result = {"error": f"compile: {first['error']}"}
        elif reason := why_not_started():
            result = {"error": reason}
        else:
            result = with_gpu_in_use(
                lambda: run_worker(
                    _worker_args(args, *job, steps, profile), timeout(), job_cache(cache, job),
                    job_xla_flags(job),
                )
            )  # fmt: skip
        result = {"method": method, "dtype_policy": policy, "clips": clips} | result
        if variant:
            result["variant_flags"] = variant
        if method == "meta":
            result["attack_models"] = len(sizes["attack_models"])
        if "compile_seconds" in first:
            result["first_compile_seconds"] = first["compile_seconds"]
            result["first_compile_loaded_from_cache"] = first["compile_loaded_from_cache"]
        if "planned_gib" in first:
            result.setdefault("planned_gib", first["planned_gib"])
        return result

    # The peak is the GPU's: the matmul compiles with XLA's autotuning whatever the steps use
    # (without it, an H200's bf16 matmul ran at 10.5 TFLOP/s instead of about 800).
    report["matmul"] = with_gpu_in_use(
        lambda: run_worker(
            ["--worker", "matmul"] + (["--small"] if args.small else []),
            timeout(),
            xla_flags=without_autotune_level(report["xla_flags"]),
        )
    )
    peak = report["matmul"].get("bfloat16_matmul_tflops")
    report["steps"] = []
    default_rows = {}
    for job in paper_jobs:
        result = measure(job, profile=True)
        if peak and "model_tflops_per_second" in result:
            result["fraction_of_bf16_matmul_peak"] = round(
                result["model_tflops_per_second"] / peak, 3
            )
        default = default_rows.setdefault(job[:2], result)  # the row without variant flags
        if result is not default and "seconds_per_step" in result and "seconds_per_step" in default:
            result["speedup"] = round(default["seconds_per_step"] / result["seconds_per_step"], 3)
        print(json.dumps(result), flush=True)
        report["steps"].append(result)
    if not args.small and not args.no_torch and spact_policies:
        report["torch"] = []
        # The authors' step as they wrote it, then as lean as ours (`detach`).
        for bf16, detach in itertools.product((False, True), (False, True)):
            if why_not_started():
                break
            result = torch_peer(sizes, args.clips, args.images, args.steps, bf16, detach, timeout())
            ours = next(
                (
                    r
                    for r in report["steps"]
                    if r["method"] == "spact"
                    and r["dtype_policy"] == ("mixed_bfloat16" if bf16 else "float32")
                ),
                {},
            )
            if "seconds_per_minimax_step" in result and "seconds_per_step" in ours:
                result["jax_speedup"] = round(
                    result["seconds_per_minimax_step"] / ours["seconds_per_step"], 2
                )
            print(json.dumps(result), flush=True)
            report["torch"].append(result)
    if args.largest_batch and spact_policies:
        report["largest_batch"] = {
            policy: largest_batch(policy, args, measure) for policy in spact_policies
        }
    report["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
