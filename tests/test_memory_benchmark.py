"""benchmarks/memory.py: a smoke run at tiny sizes, and its memory guard ending what passes
the cap (from outside, and from inside the measured process)."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import keras
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = str(ROOT / "benchmarks" / "memory.py")
ALLOCATE = "x = bytearray(400 * 2**20); import time; time.sleep(30)"
GLIBC = platform.libc_ver()[0] == "glibc"


def run(args, timeout=600):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, SCRIPT, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


# One smoke run per backend: the second-order step on JAX, where the memory question is (each
# JAX run is a 50 s compile); on TensorFlow the first-order one, which shows that
# `--meta_first_order` reaches the trainer (the report reads the trainer's own setting). The
# second-order step on TensorFlow trains in test_training and test_meta.
ORDERS = [True] if keras.backend.backend() == "tensorflow" else [False]


@pytest.mark.parametrize("first_order", ORDERS)
def test_small_meta_step_reports_its_peak_memory(first_order):
    backend = keras.backend.backend()
    args = ["--small", "--methods", "meta", "--steps", "1", "--backend", backend]
    args += ["--attack_models", "2"]  # of the smoke run's three: a smaller program, one split
    if backend == "tensorflow":
        args += ["--jit_compile", "false"]  # XLA's compile of it takes 80 of TensorFlow's 120 s
    done = run(args + (["--meta_first_order"] if first_order else []))
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == backend and report["input"] == "4x16x16"
    (step,) = report["steps"]
    assert "error" not in step, step
    assert step["method"] == "meta" and step["backend"] == backend and step["finite_logs"]
    assert step["first_order"] is first_order and step["attack_models"] == 2
    assert step["jit_compile"] is (backend == "jax")
    assert step["tensorflow_imported"] is (backend == "tensorflow")  # a JAX worker blocks it
    assert (step["batch_size"], step["privacy_batch_size"]) == (2, 4)
    assert 0 < step["models_rss_gib"] <= step["peak_rss_gib"] < report["max_gib"]
    if GLIBC:
        heap = step["heap_at_peak_gib"]
        assert set(heap) == {"rss", "anon", "file", "mapped", "in_use", "free"}
        assert heap["anon"] + heap["file"] == pytest.approx(heap["rss"], abs=0.02)
        assert step["models_rss_gib"] <= heap["rss"] <= step["peak_rss_gib"]
        assert heap["in_use"] > 0 and min(heap.values()) >= 0


@pytest.mark.skipif(not GLIBC, reason="mallinfo2 is glibc's")
def test_heap_count_sees_a_block_malloc_maps():
    code = (
        "import json, memory; before = memory.heap_gib(); block = bytearray(300 * 2**20); "
        "print(json.dumps([before, memory.heap_gib()]))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "benchmarks"))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert after["mapped"] - before["mapped"] == pytest.approx(300 / 1024, abs=0.01)


def test_guard_kills_a_command_past_the_cap():
    done = run(["--max_gib", "0.2", "--guard", "--", sys.executable, "-c", ALLOCATE], 60)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["killed_because"] == "exceeded 0.2 GiB"
    # The guard stops the command at its first sample past the cap; the report rounds that
    # sample to two decimals, so one just past 0.2 GiB reads 0.2.
    assert done.returncode == 75 and result["peak_tree_rss_gib"] >= 0.2


def test_measured_process_ends_itself_past_the_cap():
    code = f"import memory; memory.start_self_guard(0.2); {ALLOCATE}"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "benchmarks"))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 75
    assert json.loads(done.stdout.strip().splitlines()[-1])["error"] == "exceeded 0.2 GiB"


def test_cap_above_the_hard_limit_is_refused():
    done = run(["--max_gib", "23", "--small"], 60)
    assert done.returncode == 2 and "--max_gib must lie in (0, 22]" in done.stderr


def test_hessian_vector_benchmark_measures_each_way_against_a_gradient():
    backend = keras.backend.backend()
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "hessian_vector.py"), "--small", "--backend",
         backend],
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["backend"] == backend and report["images"] == 8
    ways = {figures["way"]: figures for figures in report["ways"]}
    assert set(ways) == {
        "gradient", "reverse_over_reverse", "forward_over_reverse", "forward_over_reverse_blocks"
    }  # fmt: skip
    for figures in ways.values():
        assert "error" not in figures, figures
        assert figures["finite"] and figures["peak_rss_gib"] > 0 and figures["ratio"] > 0
    assert ways["gradient"]["ratio"] == 1.0
