"""The JAX path with TensorFlow absent: every trainer fits, the GPU benchmark's smoke run runs."""

import argparse
import functools
import gzip
import importlib.util
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

IMPORT_BLOCK = '''
import sys

BLOCKED = PACKAGES


class BlockImports:
    """Fail every import of a BLOCKED package, as in a Python where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)")
        return None


sys.meta_path.insert(0, BlockImports())
'''

jax_only = pytest.mark.skipif(
    os.environ["KERAS_BACKEND"] != "jax", reason="the TensorFlow-free path is JAX's"
)


def without_packages(folder: Path, *packages: str) -> dict:
    """The environment of a Python in which importing any of `packages` fails: a
    sitecustomize.py written in `folder`, first on its path before the repository and tests."""
    (folder / "sitecustomize.py").write_text(IMPORT_BLOCK.replace("PACKAGES", repr(packages)))
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(ROOT), str(ROOT / "tests")])
    )


def run_without_tensorflow(tmp_path: Path, args: list[str], timeout: float):
    """Run `python args` with JAX and `import tensorflow` failing; the finished process."""
    env = without_packages(tmp_path, "tensorflow") | {
        "KERAS_BACKEND": "jax",
        "JAX_THREEFRY_PARTITIONABLE": "false",
    }
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def last_json(done) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_block_works(tmp_path):
    done = run_without_tensorflow(tmp_path, ["-c", "import tensorflow"], 60)
    assert done.returncode != 0
    assert "No module named 'tensorflow' (blocked by the test)" in done.stderr


@jax_only
def test_every_trainer_fits_without_tensorflow(tmp_path):
    script = str(ROOT / "tests" / "no_tensorflow_fit.py")
    results = last_json(run_without_tensorflow(tmp_path, [script], 600))
    assert results.pop("tensorflow_imported") is False
    assert set(results) == {
        "identity", "action", "privacy", "supervised_privacy", "spact", "penalty", "vita", "meta"
    }  # fmt: skip
    for name, result in results.items():
        assert all(math.isfinite(v) for v in result["logs"].values()), (name, result)
        # Two steps: every trained group's optimizer advanced twice (fit's state carried it).
        assert set(result["iterations"].values()) == {2}, (name, result)
    assert results["meta"]["logs"]["meta_test_loss"] > 0
    assert results["penalty"]["logs"]["penalty"] > 0


@jax_only
def test_gpu_benchmark_smoke_run_without_tensorflow(tmp_path):
    args = [
        str(ROOT / "benchmarks" / "gpu.py"), "--small", "--jobs", "spact:float32,meta:float32",
        "--steps", "1", "--largest_batch", "0", "--attack_models", "2",
        "--cache", str(tmp_path / "cache"), "--profile", str(tmp_path / "profile"),
        "--compile_first", "1",
    ]  # fmt: skip
    report = last_json(run_without_tensorflow(tmp_path, args, 900))
    # The steps' compiles and their autotuning results stay for a later command to load.
    assert any(path.is_file() for path in (tmp_path / "cache").rglob("*"))
    assert report["matmul"]["bfloat16_matmul_tflops"] > 0
    assert report["xla_flags"] == os.environ.get("XLA_FLAGS", "")
    steps = {row["method"]: row for row in report["steps"]}
    assert set(steps) == {"spact", "meta"}
    for row in steps.values():
        assert "error" not in row, row
        # Compiled first into the empty cache, then loaded from it by the timed run.
        assert row["first_compile_loaded_from_cache"] is False, row
        assert row["compile_loaded_from_cache"] is True, row
        assert row["seconds_per_step"] > 0 and row["clips_per_second"] > 0
        assert all(math.isfinite(v) for v in row["logs"].values())
        profile = row["profile"]  # the profiled steps, summarised
        assert 0 < profile["device_busy_fraction"] <= 1
        assert 0 < sum(op["share"] for op in profile["by_kind"]) <= 1.001
        assert profile["by_kind"][0]["ms_per_step"] > 0
    assert steps["spact"]["clips_per_step"] == 2 * report["batch"]["clips"]
    assert steps["spact"]["model_gflops_per_step"] > 0
    assert steps["meta"]["logs"]["meta_train_loss"] > 0
    assert steps["meta"]["attack_models"] == 2  # of the small sizes' three
    # The largest batch is a step's worker at other sizes: its search is tested with fakes below.
    assert "largest_batch" not in report


@jax_only
def test_gpu_benchmark_prints_its_report_by_its_end_whatever_a_measurement_takes(tmp_path):
    """--end gives a started measurement only the time left, so a command's report comes
    before its limit (a step of 100000 iterations would run for hours)."""
    args = [
        str(ROOT / "benchmarks" / "gpu.py"), "--small", "--jobs", "spact:float32",
        "--steps", "100000", "--largest_batch", "0", "--timeout", "600", "--end", "20",
    ]  # fmt: skip
    started = time.perf_counter()
    report = last_json(run_without_tensorflow(tmp_path, args, 120))
    assert time.perf_counter() - started < 40
    (row,) = report["steps"]
    assert re.fullmatch(r"no result within \d+ s", row["error"])


def test_a_measurement_with_no_time_left_before_end_is_not_started_and_says_so(monkeypatch, capsys):
    gpu = gpu_benchmark()
    started = []

    def fake_worker(args, timeout, cache=None, xla_flags=None):
        started.append(args[1])
        return {"bfloat16_matmul_tflops": 100.0}

    monkeypatch.setattr(gpu, "run_worker", fake_worker)
    monkeypatch.setattr(gpu, "gpu_in_use", lambda: None)
    argv = ["gpu.py", "--small", "--jobs", "spact:float32", "--largest_batch", "0", "--end", "3"]
    monkeypatch.setattr(sys, "argv", argv)
    gpu.main()
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert started == ["matmul"]  # the step's worker is never started
    (row,) = report["steps"]
    assert row["error"] == "not started: less than 5 s left before --end"


def test_no_compile_starts_past_the_deadline(monkeypatch, capsys):
    """--deadline starts nothing after it, compiles of --compile_first included: a compile
    queued behind another one that ran past it is left out, and says why."""
    gpu = gpu_benchmark()
    compiled = []

    def fake_worker(args, timeout, cache=None, xla_flags=None):
        if "--compile_only" in args:
            compiled.append(int(args[args.index("--clips") + 1]))
            time.sleep(1.2)
            return {"compile_seconds": 1.2, "compile_loaded_from_cache": False}
        return {"bfloat16_matmul_tflops": 100.0}

    monkeypatch.setattr(gpu, "run_worker", fake_worker)
    monkeypatch.setattr(gpu, "gpu_in_use", lambda: None)
    argv = ["gpu.py", "--small", "--jobs", "spact:float32", "--largest_batch", "2"]
    monkeypatch.setattr(sys, "argv", argv + ["--compile_first", "1", "--deadline", "1"])
    gpu.main()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    first, second = lines[0]["compiled"]
    assert len(compiled) == 1 and first[1:3] == ["float32", compiled[0]]
    assert second[2] == 2 * compiled[0]
    assert second[-1] == {"error": "not started: past the 1 s deadline"}


def test_largest_batch_is_one_that_ran_out_of_memory_not_one_left_untimed(capsys):
    gpu = gpu_benchmark()
    args = gpu_parser().parse_args(["--largest_batch", "8"])
    args.clips, args.images = 24, 64  # the paper's, as main sets them
    fits = {"clips_per_second": 50.0, "peak_gib": 30.0}
    past = {"error": "not started: past the 380 s deadline"}
    outcomes = iter([fits, past])
    figures = gpu.largest_batch("float32", args, lambda job, steps: next(outcomes))
    assert figures == {
        "not_measured_at_clips": 4 * args.clips,
        "not_measured_because": past,
        "largest_clips_per_batch": 2 * args.clips,
        "clips_per_second": 50.0,
        "peak_gib": 30.0,
    }
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == [fits, past]
    memory = {"error": "out of memory", "last_line": "RESOURCE_EXHAUSTED"}
    outcomes = iter([memory])
    figures = gpu.largest_batch("float32", args, lambda job, steps: next(outcomes))
    assert figures == {"stopped_at_clips": 2 * args.clips, "stopped_because": memory}


def test_gpu_benchmark_names_a_malformed_job():
    wrong = {
        ("--jobs", jobs): "--jobs: each pair is method:policy"
        for jobs in ("spact", "spact:float16", "swin:float32")
    } | {
        ("--steps", "0"): "--steps: at least 1 timed step, got 0",
        ("--attack_models", "-1"): "--attack_models: 0 (all) to 8, got -1",
        ("--attack_models", "9"): "--attack_models: 0 (all) to 8, got 9",
    }
    for argv, message in wrong.items():
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), *argv],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and message in done.stderr


def test_pair_arrays_lays_out_pairs_as_pair_batches():
    from keras_privacy.data.pairs import pair_arrays

    rng = np.random.default_rng(0)
    first = {"clips": rng.random((3, 2, 4)), "labels": np.arange(3)}
    second = {"clips": rng.random((3, 2, 4)), "labels": np.arange(3, 6)}
    pairs = pair_arrays(first, second)
    assert pairs["clips"].shape == (3, 2, 2, 4)
    np.testing.assert_array_equal(pairs["labels"], [[0, 3], [1, 4], [2, 5]])
    np.testing.assert_array_equal(pairs["clips"][:, 1], second["clips"])
    with pytest.raises(ValueError, match="'labels' has 3 examples in the first half and 2"):
        pair_arrays(first, {"clips": second["clips"], "labels": np.arange(2)})
    with pytest.raises(ValueError, match="different keys"):
        pair_arrays(first, {"clips": second["clips"]})


@jax_only
def test_an_exported_minimax_trains_from_arrays_without_tensorflow(benchmark, tmp_path):
    from keras_privacy.data.__main__ import main

    folder = tmp_path / "arrays"
    config = str(ROOT / "configs" / "synthetic.cfg")
    sizes = ["--frame_size=32", "--image_size=16", "--clip_length=4", "--batch_size=4"]
    flags = [f"--synthetic_dir={benchmark}", "--steps_per_epoch=4", *sizes]
    code = main(["arrays", "--flagfile", config, "--out", str(folder), "--epochs", "2", *flags])
    assert code == 0
    with np.load(folder / "batches.npz") as arrays:
        assert arrays["clips"].shape == (2, 2, 4, 2, 4, 16, 16, 3)  # epochs, steps, batch, half
        assert arrays["clips"].dtype == np.uint8 and arrays["labels"].dtype != np.uint8
    check = [str(ROOT / "benchmarks" / "gpu.py"), "--learning_check", str(folder)]
    record = [*check, "--record", "--noise_runs", "1"]
    recorded = last_json(run_without_tensorflow(tmp_path, record, 600))
    assert len(recorded["losses"]["privacy_loss"]) == 2
    (perturbed,) = recorded["perturbed"]
    assert perturbed.keys() == recorded["losses"].keys()
    # Float noise in the starting weights moves the minimax's losses, a little.
    assert perturbed["privacy_loss"] != recorded["losses"]["privacy_loss"]
    assert perturbed["privacy_loss"] == pytest.approx(recorded["losses"]["privacy_loss"], rel=0.2)
    again = last_json(run_without_tensorflow(tmp_path, check, 600))
    assert again["within_noise"] is True
    assert again["losses"] == recorded["losses"]  # the same device: the same numbers
    assert set(again["relative_differences"]) >= {"action_loss", "privacy_loss"}
    assert again["noise_bands"]["privacy_loss"] > 0


def test_array_export_refuses_what_it_cannot_hold(tmp_path, capsys):
    from keras_privacy.data.__main__ import main

    vita = str(ROOT / "configs" / "synthetic_vita.cfg")
    assert main(["arrays", "--flagfile", vita, "--out", str(tmp_path)]) == 2
    assert "--method=vita: the array export holds a SPAct" in capsys.readouterr().err


def gpu_benchmark():
    """benchmarks/gpu.py as a module (it is a script, not in the package)."""
    spec = importlib.util.spec_from_file_location("gpu", ROOT / "benchmarks" / "gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    return gpu


def test_learning_check_counts_a_loss_as_noise_within_the_perturbed_runs_band():
    gpu = gpu_benchmark()
    reference = {
        "losses": {"privacy_loss": [2.0, 1.0], "action_loss": [1.0, 0.5], "accuracy": [0.5, 0.6]},
        "perturbed": [
            {"privacy_loss": [2.0, 1.1], "action_loss": [1.0, 0.5]},
            {"privacy_loss": [2.0, 0.96], "action_loss": [1.0, 0.51]},
        ],
    }
    # Bands: privacy 10 %, action 2 %; 1.5 times them is noise.
    near = gpu.compare_losses({"privacy_loss": [9.0, 1.14], "action_loss": [0, 0.514]}, reference)
    assert near["noise_bands"] == {"privacy_loss": 0.1, "action_loss": 0.02}
    assert near["relative_differences"] == {"privacy_loss": 0.14, "action_loss": 0.028}
    assert near["within_noise"] is True
    far = gpu.compare_losses({"privacy_loss": [2.0, 1.0], "action_loss": [1.0, 0.52]}, reference)
    assert far["within_noise"] is False  # 4 % off an action loss whose band is 2 %
    unperturbed = {"losses": reference["losses"]}
    assert gpu.compare_losses({"privacy_loss": [2.0, 1.04]}, unperturbed)["within_noise"]
    assert not gpu.compare_losses({"privacy_loss": [2.0, 1.06]}, unperturbed)["within_noise"]


def test_gpu_benchmark_records_what_else_used_the_gpu(tmp_path, monkeypatch):
    gpu = gpu_benchmark()
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu.gpu_in_use() is None  # no nvidia-smi: a CPU
    assert gpu.with_gpu_in_use(lambda: {"seconds_per_step": 1.0}) == {"seconds_per_step": 1.0}
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '137216, 100'\n")
    fake.chmod(0o755)
    in_use = {"memory_gib": 134.0, "utilization_percent": 100}
    assert gpu.gpu_in_use() == in_use
    figures = gpu.with_gpu_in_use(lambda: {"error": "out of memory"})
    assert figures == {"error": "out of memory", "gpu_in_use_before": in_use}


def test_a_gpu_benchmark_variant_flag_replaces_the_runs_flag_of_that_name(monkeypatch):
    gpu = gpu_benchmark()
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=1 --xla_dump_to=/tmp/dump")
    job = ("meta", "mixed_bfloat16", 24, 64, "--xla_gpu_autotune_level=0 --xla_gpu_x=false")
    assert gpu.job_xla_flags(job) == (
        "--xla_dump_to=/tmp/dump --xla_gpu_autotune_level=0 --xla_gpu_x=false"
    )
    assert gpu.job_xla_flags(job[:4] + ("",)) is None


def test_gpu_benchmark_counts_a_programs_distinct_convolutions():
    def convolution(result, lhs, shape, layout="[b, 0, 1, f]"):
        return (
            f"    %{result} = stablehlo.convolution(%{lhs}, %arg0) dim_numbers = {layout}x"
            f"[0, 1, i, o]->{layout} : (tensor<{shape}xbf16>, tensor<3x3x8x8xbf16>) -> "
            f"tensor<{shape}xbf16>"
        )

    program = "\n".join(
        [
            "module @jit_train_step {",
            "  func.func public @main(%arg0: tensor<3x3x8x8xbf16>) -> tensor<f32> {",
            "    %cst = stablehlo.constant dense<0.0> : tensor<f32>",
            convolution(1, "a", "4x16x16x8"),
            convolution(2, "1", "4x16x16x8"),  # the same convolution on other operands
            convolution(3, "2", "8x16x16x8"),  # another batch
            convolution(4, "3", "4x16x16x8", "[b, f, 0, 1]"),  # another layout
            "    %5 = call @relu(%4) : (tensor<4x16x16x8xbf16>) -> tensor<4x16x16x8xbf16>",
            "    return %cst : tensor<f32>",
            "  }",
            "}",
        ]
    )
    assert gpu_benchmark().program_counts(program) == {
        "stablehlo_operations": 5,
        "convolutions": 4,
        "distinct_convolutions": 3,
    }


def test_gpu_benchmark_times_its_matmul_peak_with_autotuning(monkeypatch, capsys, tmp_path):
    """The run's XLA flags turn autotuning off; the matmul peak is timed without that flag, the
    steps with the run's flags (None: the environment's, unchanged)."""
    gpu = gpu_benchmark()
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=0 --xla_dump_to=/tmp/dump")
    flags_by_worker = {}

    def fake_worker(args, timeout, cache=None, xla_flags=None):
        flags_by_worker.setdefault(args[1], []).append(xla_flags)
        if args[1] == "matmul":
            return {"bfloat16_matmul_tflops": 100.0}
        return {"seconds_per_step": 1.0, "model_tflops_per_second": 10.0}

    monkeypatch.setattr(gpu, "run_worker", fake_worker)
    monkeypatch.setattr(gpu, "gpu_in_use", lambda: None)
    argv = ["gpu.py", "--small", "--jobs", "spact:mixed_bfloat16", "--largest_batch", "0"]
    monkeypatch.setattr(sys, "argv", argv + ["--compile_first", "1", "--cache", str(tmp_path)])
    gpu.main()
    assert flags_by_worker["matmul"] == ["--xla_dump_to=/tmp/dump"]
    assert flags_by_worker["spact"] == [None, None]  # compiled first, then timed
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert report["steps"][0]["fraction_of_bf16_matmul_peak"] == 0.1


def test_gpu_benchmark_measures_variant_flags_against_the_default_step(
    monkeypatch, capsys, tmp_path
):
    gpu = gpu_benchmark()
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/dump")
    nhwc, untuned = "--xla_gpu_force_conv_nhwc=true", "--xla_gpu_autotune_level=0"
    calls = []

    def fake_worker(args, timeout, cache=None, xla_flags=None):  # nhwc 2x, untuned 4x slower
        calls.append((args[1], "--compile_only" in args, xla_flags, cache))
        if args[1] == "matmul":
            return {"bfloat16_matmul_tflops": 100.0}
        seconds = {nhwc: 0.5, untuned: 4.0}.get((xla_flags or "").split(" ")[-1], 1.0)
        return {"seconds_per_step": seconds, "model_tflops_per_second": 10 / seconds}

    monkeypatch.setattr(gpu, "run_worker", fake_worker)
    monkeypatch.setattr(gpu, "gpu_in_use", lambda: None)
    argv = ["gpu.py", "--small", "--jobs", "spact:mixed_bfloat16", "--largest_batch", "0"]
    variants = f"--variant_flags={nhwc}; {untuned}"
    monkeypatch.setattr(
        sys, "argv", argv + ["--compile_first", "1", variants, "--cache", str(tmp_path)]
    )
    gpu.main()
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    default, faster, slower = report["steps"]
    assert "variant_flags" not in default and "speedup" not in default
    assert faster["variant_flags"] == nhwc and faster["speedup"] == 2.0
    assert slower["variant_flags"] == untuned and slower["speedup"] == 0.25
    fractions = [row["fraction_of_bf16_matmul_peak"] for row in report["steps"]]
    assert fractions == [0.1, 0.2, 0.025]
    # Each variant compiles and runs with the run's flags plus its own; the default with the run's.
    run = "--xla_dump_to=/tmp/dump "
    flags = [None, run + nhwc, run + untuned]
    assert [(c, f) for w, c, f, _ in calls if w == "spact"] == [(True, f) for f in flags] + [
        (False, f) for f in flags
    ]
    # A variant compiles into, and loads from, a cache of its own (autotuning results apart).
    folders = ["", "variant_xla_gpu_force_conv_nhwc_true", "variant_xla_gpu_autotune_level_0"]
    caches = [str(tmp_path / folder) if folder else str(tmp_path) for folder in folders]
    assert [cache for w, _, _, cache in calls if w == "spact"] == caches + caches


def test_gpu_benchmark_times_the_authors_torch_step_as_written_and_as_lean_as_ours(
    monkeypatch, capsys
):
    """The authors' step computes gradients it discards (1.42x the FLOPs ours needs): its ratio
    to ours is timed both as they wrote it and without them (`--detach`), for each precision."""
    gpu = gpu_benchmark()

    def fake_worker(args, timeout, cache=None, xla_flags=None):
        if args[1] == "matmul":
            return {"bfloat16_matmul_tflops": 100.0}
        seconds = 0.2 if "mixed_bfloat16" in args else 0.4
        return {"seconds_per_step": seconds, "model_tflops_per_second": 1.0}

    peers = []

    def fake_peer(sizes, clips, images, steps, bf16, detach, timeout):
        peers.append((bf16, detach))
        seconds = (0.8 if bf16 else 1.2) / (1.4 if detach else 1.0)
        return {"seconds_per_minimax_step": seconds, "bf16_autocast": bf16, "detach": detach}

    monkeypatch.setattr(gpu, "run_worker", fake_worker)
    monkeypatch.setattr(gpu, "torch_peer", fake_peer)
    monkeypatch.setattr(gpu, "gpu_in_use", lambda: None)
    jobs = "spact:float32,spact:mixed_bfloat16"
    monkeypatch.setattr(sys, "argv", ["gpu.py", "--jobs", jobs, "--largest_batch", "0"])
    gpu.main()
    report = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert peers == [(False, False), (False, True), (True, False), (True, True)]
    speedups = [(r["bf16_autocast"], r["detach"], r["jax_speedup"]) for r in report["torch"]]
    assert speedups == [
        (False, False, 3.0),
        (False, True, 2.14),
        (True, False, 4.0),
        (True, True, 2.86),
    ]


def test_gpu_benchmark_summarises_a_gpu_trace_by_its_stream_kernels(tmp_path):
    def kernel(start, duration, op, thread=7):  # microseconds, as traces count
        return {"ph": "X", "pid": 1, "tid": thread, "ts": start, "dur": duration,
                "name": f"kernel_{op}", "args": {"hlo_op": op}}  # fmt: skip

    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7"}},
        {"ph": "M", "pid": 1, "tid": 9, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CPU"}},
        kernel(0, 10_000, "fusion.1"),
        kernel(20_000, 30_000, "convolution.4"),
        kernel(50_000, 10_000, "fusion.2"),
        kernel(60_005, 1_000, "fusion.3"),  # after a 5 us launch gap
        kernel(20_000, 30_000, "convolution.4", thread=9),  # a derived line, not a stream: left out
        {"ph": "X", "pid": 2, "tid": 1, "ts": 0, "dur": 100_000, "name": "host work"},
    ]
    trace = tmp_path / "perfetto_trace.json.gz"
    with gzip.open(trace, "wt") as file:
        json.dump({"traceEvents": events}, file)
    summary = gpu_benchmark().summarize_trace(trace, steps=2)
    assert summary["device_busy_fraction"] == round(51 / 61.005, 3)  # idle 10 ms and 5 us
    assert summary["device_busy_seconds_per_step"] == 0.0255
    assert summary["by_kind"] == [
        {"name": "convolution", "ms_per_step": 15.0, "share": round(30 / 51, 3)},
        {"name": "fusion", "ms_per_step": 10.5, "share": round(21 / 51, 3)},
    ]
    assert [op["name"] for op in summary["by_kernel"]] == [
        "kernel_convolution.4", "kernel_fusion.1", "kernel_fusion.2", "kernel_fusion.3"
    ]  # fmt: skip
    assert summary["idle"] == {
        "gaps_per_step": 1.0,
        "ms_per_step_in_short_gaps": 0.003,  # 5 us over 2 steps, rounded
        "ms_per_step_in_long_gaps": 5.0,
        "longest": [
            {"ms": 10.0, "after": "fusion", "before": "convolution"},
            {"ms": 0.005, "after": "fusion", "before": "fusion"},
        ],
    }


LEASE = ROOT / "benchmarks" / "gpu_lease.sh"
LEASE_MODES = [
    "meta", "variants", "nhwc", "graphs", "largest", "peer", "meta_start", "learning",
    "learning_highest",
]  # fmt: skip


def lease_command(
    mode: str, limit: int, extra_xla_flags: str = "", factor: str = ""
) -> tuple[dict, argparse.Namespace]:
    """The environment and the parsed gpu.py arguments of one `gpu_lease.sh` mode, with
    `extra_xla_flags` as EXTRA_XLA_FLAGS and `factor` as LARGEST_FACTOR."""
    env = {k: v for k, v in os.environ.items() if k not in ("EXTRA_XLA_FLAGS", "LARGEST_FACTOR")}
    if extra_xla_flags:
        env["EXTRA_XLA_FLAGS"] = extra_xla_flags
    if factor:
        env["LARGEST_FACTOR"] = factor
    printed = subprocess.run(
        ["bash", str(LEASE), "--print", mode, str(limit)], env=env, capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    words = shlex.split(printed.stdout)
    env = dict(word.split("=", 1) for word in words[: words.index("python")])
    script, *args = words[words.index("python") + 1 :]
    assert script == "benchmarks/gpu.py" and env["KERAS_BACKEND"] == "jax"
    return env, gpu_parser().parse_args(args)


@functools.cache
def gpu_parser() -> argparse.ArgumentParser:
    return gpu_benchmark().build_parser()


def test_every_gpu_lease_mode_runs_a_gpu_benchmark_command_that_parses_within_its_limit():
    """The lease's commands are ready before a device is lent: each one's flags are gpu.py's,
    and every compile and measurement ends inside the command's limit (meta_start apart: it
    outlives its command on purpose)."""
    fusion_autotuner_off = "--xla_gpu_experimental_enable_fusion_autotuner=false"
    level1 = "--xla_gpu_autotune_level=1"
    for mode in LEASE_MODES:
        env, args = lease_command(mode, 585)
        if mode.startswith("learning"):
            assert args.learning_check == "gpu_check"
            assert (env.get("JAX_DEFAULT_MATMUL_PRECISION") == "highest") == (
                mode == "learning_highest"
            )
            continue
        # The PyTorch peer runs in its own mode only: the others need every second for XLA.
        assert args.no_torch == (mode != "peer") and args.steps >= 3
        if mode != "meta_start":
            # A started measurement gets only the time left (--end): the report comes in time.
            assert args.deadline < args.end < 585
        if args.compile_first:
            # Compiles end a minute before the deadline, leaving time to time them.
            assert args.timeout + 60 <= args.deadline
        tuned_fast = f"{level1} {fusion_autotuner_off}"  # meta's compile ended in a command
        tuned_modes = ("meta", "nhwc", "graphs", "largest", "peer")
        assert env["XLA_FLAGS"] == (tuned_fast if mode in tuned_modes else "")
    _, variants = lease_command("variants", 420)
    assert variants.variant_flags.split(";") == [
        fusion_autotuner_off, "--xla_gpu_force_conv_nhwc=true", level1
    ]  # fmt: skip
    assert variants.compile_first == 4
    assert variants.profile.startswith("/tmp/")  # a device brings back few files, none deep
    # The meta step compiled inside a command only this way (2026-12-04): one process compiles
    # it and times it, with every second the matmul leaves it before --end.
    _, meta = lease_command("meta", 585)
    assert meta.jobs == "meta:mixed_bfloat16" and meta.variant_flags == ""
    assert meta.compile_first == 0 and meta.timeout >= meta.end
    # The NHWC lead at the batch that came nearest 40 %: two compiles, the plain step's and
    # the variant's, each into a cache of its own, then the variant's speedup over the plain.
    _, nhwc = lease_command("nhwc", 585)
    assert nhwc.jobs == "spact:mixed_bfloat16" and (nhwc.clips, nhwc.images) == (48, 128)
    assert nhwc.compile_first == 2 and nhwc.variant_flags == "--xla_gpu_force_conv_nhwc=true"
    # The idle-time lead, alike: cuDNN's convolutions added to XLA's command buffers.
    _, graphs = lease_command("graphs", 585)
    assert vars(graphs) == vars(nhwc) | {
        "cache": "/tmp/gpu_lease_cache/graphs",
        "variant_flags": "--xla_gpu_enable_command_buffer=+CONVOLUTION",
    }
    # The PyTorch peer beside SPAct at the paper's batch (gpu.py's default), one process
    # compiling and timing it.
    _, peer = lease_command("peer", 420)
    assert peer.jobs == "spact:mixed_bfloat16" and (peer.clips, peer.images) == (None, None)
    assert peer.compile_first == 0 and peer.deadline == 360
    # One batch compiled alone (three side by side did not finish in 435 s on 2026-12-04).
    _, largest = lease_command("largest", 585)
    assert largest.jobs == "spact:mixed_bfloat16" and largest.compile_first == 1
    assert (largest.clips, largest.images, largest.largest_batch) == (96, 256, 0)
    _, largest = lease_command("largest", 585, factor="8")
    assert (largest.clips, largest.images) == (192, 512)
    # A winning variant's flags reach a mode through EXTRA_XLA_FLAGS, before its own.
    env, _ = lease_command("variants", 420, "--xla_gpu_force_conv_nhwc=true")
    assert env["XLA_FLAGS"] == "--xla_gpu_force_conv_nhwc=true"
    env, _ = lease_command("meta", 585, "--xla_gpu_enable_command_buffer=")
    assert env["XLA_FLAGS"] == f"--xla_gpu_enable_command_buffer= {level1} {fusion_autotuner_off}"
    _, meta = lease_command("meta_start", 585)
    assert meta.jobs == "meta:mixed_bfloat16" and meta.attack_models == 0 and meta.timeout > 600


def test_xla_accepts_every_flag_of_the_lease():
    """XLA parses every flag a lease mode sets, its variants' too, before any GPU option is
    used: a misspelt value would stop the lease's workers on their first line (XLA_FLAGS are
    read by a CPU's JAX alike, and a value it does not know makes the process exit)."""
    flags = set()
    for mode in LEASE_MODES:
        env, args = lease_command(mode, 585)
        flags.update(env.get("XLA_FLAGS", "").split())
        flags.update(args.variant_flags.replace(";", " ").split() if args.variant_flags else [])
    assert "--xla_gpu_enable_command_buffer=+CONVOLUTION" in flags
    check = "import jax.numpy as jnp; print(float(jnp.ones(3).sum()))"
    for extra in (" ".join(sorted(flags)), "--xla_gpu_enable_command_buffer=+NOT_A_KIND"):
        env = dict(os.environ, XLA_FLAGS=extra, JAX_PLATFORMS="cpu")
        done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True)
        assert (done.returncode == 0) == ("NOT_A_KIND" not in extra), done.stderr[-500:]


def test_gpu_lease_names_a_missing_wheel_and_an_unknown_mode(tmp_path):
    env = dict(os.environ, WHEEL_DIR=str(tmp_path), OUT=str(tmp_path / "out"))
    lease = ["bash", str(LEASE), "meta", "150"]
    done = subprocess.run(lease, env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert "meta needs a limit of at least 180 s, got 150" in done.stderr
    (tmp_path / "namex-0.1.0-py3-none-any.whl").touch()
    done = subprocess.run(["bash", str(LEASE), "variants"], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert f"missing wheels in {tmp_path}: keras==3.15.1 optree==0.20.0" in done.stderr
    unknown = subprocess.run(
        ["bash", str(LEASE), "--print", "fast"], capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "unknown mode: fast" in unknown.stderr
    env = dict(os.environ, LARGEST_FACTOR="0")
    factor = subprocess.run(
        ["bash", str(LEASE), "--print", "largest"], env=env, capture_output=True, text=True
    )
    assert factor.returncode == 2
    assert "LARGEST_FACTOR must be a positive whole number, got '0'" in factor.stderr
    other = subprocess.run(  # only `largest` reads it
        ["bash", str(LEASE), "--print", "meta"], env=env, capture_output=True, text=True
    )
    assert other.returncode == 0
