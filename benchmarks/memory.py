"""Peak memory of one minimax step of each method at the paper's model sizes, under a cap.

    python benchmarks/memory.py                                   # every method, TensorFlow
    python benchmarks/memory.py --backend jax --batch_size 4 --privacy_batch_size 8
    python benchmarks/memory.py --methods meta --jit_compile true --max_gib 10
    python benchmarks/memory.py --methods meta --meta_first_order  # without the second order
    python benchmarks/memory.py --methods meta --attack_models 2    # the first 2 attack models
    python benchmarks/memory.py --small                           # tiny models: a smoke run
    python benchmarks/memory.py --max_gib 10 --guard -- python train.py --flagfile=...

Every measurement runs in a fresh process of its own (this script with `--worker`) that builds
the models of `benchmarks/gpu.py` (`build_trainer`: the configs/ucf101_vispr*.cfg models, 16 x
112 x 112 clips; SPAct and the penalty take a minimax iteration of two batches a step, VITA and
meta one batch), compiles the step as training does (`--jit_compile`, whose `auto` is
`distribute.choose_jit_compile`'s), and fits it for `--steps` steps (the first compiles).
Figures per method:
- `peak_rss_gib`: the process's peak resident set size (models, compilation, step): `VmHWM`,
  or the guard's highest `VmRSS` reading where that is higher (the kernel updates `VmHWM`
  lazily, so it can lag a `VmRSS` read just before: 1.16 against 1.17 GiB was seen);
- `models_rss_gib`: its resident set size after building the models, before the step;
- `heap_at_peak_gib` (glibc): where the memory was at the highest resident set size the guard
  read (`resident_gib`: the process's own memory and mapped files' pages; `heap_gib`: malloc's
  mapped blocks, the heap in use, the heap freed but kept);
- `device_peak_gib`: on a GPU, the device's peak bytes in use (`gpu.device_peak_gib`);
- `seconds`: wall-clock seconds of the fit, compilation included;
- `tensorflow_imported`: whether TensorFlow was in the process. A JAX worker runs without it
  (`import tensorflow` fails there, as on the GPU machines): Keras's `set_random_seed` imports
  it wherever it is installed, about 0.43 GiB resident that a JAX step does not use
  (`train.py` imports it for its `tf.data` input pipelines).

The guard: a thread in the worker reads its own resident set size every `POLL_SECONDS` and ends
the process past `--max_gib` (at most `HARD_CAP_GIB`) or when the machine's available memory
falls below `MIN_AVAILABLE_GIB`; this script also watches the worker (and any process it
starts) from outside and kills it in the same cases, so a step that would exhaust a shared
machine ends as `{"error": "exceeded N GiB"}` for that measurement alone. `--guard -- COMMAND`
runs any command (a training run) under that outer watch. Linux only (it reads /proc).
`--largest_batch` doubles the batch until a step no longer fits under the cap. The last line
of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/gpu.py

METHODS = ("spact", "penalty", "vita", "meta")
DEFAULT_CAP_GIB = 10.0
HARD_CAP_GIB = 22.0
"""The largest `--max_gib` accepted: a 24 GiB machine less room for the system; the floor on
the machine's available memory (`MIN_AVAILABLE_GIB`) keeps a shared machine safe below it."""
MIN_AVAILABLE_GIB = 1.0
"""Below this much available memory on the machine a guarded process is ended, whatever its
own size, so that it never starves its neighbours."""
POLL_SECONDS = 0.2
GUARD_EXIT_CODE = 75
PEAK_STEP_GIB = 0.05
"""The guard reads the heap again each time the resident set size passes its highest reading
by this much, so `heap_at_peak` is read within this of the peak."""
HEAP_AT_PEAK: dict = {}


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost",
        )
    ]  # fmt: skip


_MALLINFO2 = getattr(ctypes.CDLL(None), "mallinfo2", None)
"""glibc's `mallinfo2` (2.33 or later), looked up once; None under another C library."""
if _MALLINFO2 is not None:
    _MALLINFO2.restype = _MallInfo2


def heap_gib() -> dict | None:
    """The C library's own count of the heap (glibc's `mallinfo2`), GiB: `mapped`, the large
    blocks malloc maps one by one (XLA's buffers, on JAX); `in_use` and `free`, the rest of the
    heap in use and freed but kept by malloc (fragmented memory that counts as resident). None
    where the C library is not glibc 2.33 or later."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return {
        "mapped": round(info.hblkhd / 2**30, 2),
        "in_use": round(info.uordblks / 2**30, 2),
        "free": round(info.fordblks / 2**30, 2),
    }


def proc_kib(path: str, field: str) -> int:
    """A `field:  N kB` line of a /proc file, in KiB (0 where absent, e.g. a zombie)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def resident_gib() -> dict:
    """This process's resident set size split as the kernel counts it, GiB: `anon`, memory of
    its own (malloc's heap and mapped blocks); `file`, pages of mapped files (the code of the
    shared libraries: jaxlib's, TensorFlow's)."""
    status = "/proc/self/status"
    return {
        "anon": round(proc_kib(status, "RssAnon") / 2**20, 2),
        "file": round(proc_kib(status, "RssFile") / 2**20, 2),
    }


def available_gib() -> float:
    """The machine's available memory (`MemAvailable`), GiB."""
    return proc_kib("/proc/meminfo", "MemAvailable") / 2**20


def process_tree_rss_gib(pid: int) -> float:
    """Resident set size of `pid` and every process descended from it, GiB."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += proc_kib(f"/proc/{current}/status", "VmRSS")
        todo.extend(children.get(current, []))
    return total / 2**20


def over_limit(rss_gib: float, max_gib: float) -> str | None:
    """Why a process of `rss_gib` must end under a cap of `max_gib`, or None."""
    if rss_gib > max_gib:
        return f"exceeded {max_gib:g} GiB"
    if available_gib() < MIN_AVAILABLE_GIB:
        return f"the machine's available memory fell below {MIN_AVAILABLE_GIB:g} GiB"
    return None


def start_self_guard(max_gib: float) -> None:
    """End this process (one JSON line, exit `GUARD_EXIT_CODE`) once its resident set size
    passes `max_gib` GiB or the machine runs short (a daemon thread). On the way, keep the heap's
    count at the highest resident set size seen in `HEAP_AT_PEAK`."""

    def watch():
        highest = 0.0
        while True:
            rss = proc_kib("/proc/self/status", "VmRSS") / 2**20
            if rss > highest + PEAK_STEP_GIB:
                highest = rss
                HEAP_AT_PEAK.update(rss=round(rss, 2), **resident_gib(), **(heap_gib() or {}))
            why = over_limit(rss, max_gib)
            if why:
                print(json.dumps({"error": why, "rss_gib": round(rss, 2)}), flush=True)
                os._exit(GUARD_EXIT_CODE)
            time.sleep(POLL_SECONDS)

    threading.Thread(target=watch, daemon=True).start()


def run_guarded(command: list[str], max_gib: float, timeout: float, env=None) -> dict:
    """Run `command` (in a process group of its own) while watching its process tree's
    resident set size; kill it past `max_gib` GiB, on the machine running short, or after
    `timeout` s. Its stdout, return code, peak tree RSS and why it was ended, if it was."""
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    start, peak, why = time.perf_counter(), 0.0, None
    while process.poll() is None:
        rss = process_tree_rss_gib(process.pid)
        peak = max(peak, rss)
        why = over_limit(rss, max_gib)
        if why is None and time.perf_counter() - start > timeout:
            why = f"no result within {timeout:.0f} s"
        if why:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            break
        time.sleep(POLL_SECONDS)
    reader.join(timeout=10)
    return {
        "output": "".join(lines),
        "returncode": process.returncode,
        "peak_tree_rss_gib": round(peak, 2),
        "killed_because": why,
    }


def measure(method: str, sizes: dict, args: argparse.Namespace) -> dict:
    """Build `method`'s trainer, fit `args.steps` steps; its memory figures (in this process)."""
    import keras
    from gpu import build_trainer, device_peak_gib

    from keras_privacy.methods.batches import BatchList

    clips, images = args.batch_size, args.privacy_batch_size
    trainer, batch = build_trainer(
        method, sizes, clips, images, args.jit_compile, args.meta_first_order
    )
    models_rss = proc_kib("/proc/self/status", "VmRSS") / 2**20
    start = time.perf_counter()
    history = trainer.fit(BatchList([batch] * args.steps), epochs=1, verbose=0).history
    seconds = time.perf_counter() - start
    figures = {
        "method": method,
        "backend": keras.backend.backend(),
        "jit_compile": bool(trainer.jit_compile),
        "batch_size": clips,
        "privacy_batch_size": images,
        **(
            {"first_order": trainer.first_order, "attack_models": len(sizes["attack_models"])}
            if method == "meta"
            else {}
        ),
        "peak_rss_gib": max(
            round(proc_kib("/proc/self/status", "VmHWM") / 2**20, 2), HEAP_AT_PEAK.get("rss", 0)
        ),
        "models_rss_gib": round(models_rss, 2),
        "seconds": round(seconds, 1),
        "finite_logs": all(v[-1] == v[-1] for v in history.values()),
        "tensorflow_imported": sys.modules.get("tensorflow") is not None,
    }
    if "mapped" in HEAP_AT_PEAK:
        figures["heap_at_peak_gib"] = dict(HEAP_AT_PEAK)
    peak = device_peak_gib()
    if peak is not None:
        figures["device_peak_gib"] = peak
    return figures


def run_worker(method: str, args: argparse.Namespace, clips: int, images: int) -> dict:
    """`measure` in a fresh guarded process; its JSON, or why there is none."""
    command = [
        sys.executable, str(Path(__file__).resolve()), "--worker", method,
        "--batch_size", str(clips), "--privacy_batch_size", str(images),
        "--jit_compile", args.jit_compile, "--steps", str(args.steps),
        "--max_gib", str(args.max_gib), "--attack_models", str(args.attack_models),
    ] + (["--small"] if args.small else []) + (
        ["--meta_first_order"] if args.meta_first_order else []
    )  # fmt: skip
    env = dict(os.environ, KERAS_BACKEND=args.backend, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    done = run_guarded(command, args.max_gib, args.timeout, env)
    results = [line for line in done["output"].splitlines() if line.startswith("{")]
    result = json.loads(results[-1]) if results else {}
    if done["killed_because"]:
        result.setdefault("error", done["killed_because"])
    elif done["returncode"] != 0 and "error" not in result:
        lines = done["output"].strip().splitlines()
        result["error"] = lines[-1][:300] if lines else f"exit {done['returncode']}"
    result.update(method=method, batch_size=clips, privacy_batch_size=images)
    result["peak_tree_rss_gib"] = done["peak_tree_rss_gib"]
    return result


def largest_batch(method: str, args: argparse.Namespace) -> dict:
    """The batch (clips and privacy images alike) doubled until a step passes the cap."""
    fits, factor = None, 2
    while True:
        clips, images = args.batch_size * factor, args.privacy_batch_size * factor
        result = run_worker(method, args, clips, images)
        if "error" in result:
            return {"largest_batch_size": fits, "stopped_at": clips, "because": result["error"]}
        fits, factor = clips, factor * 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--backend", choices=("tensorflow", "jax"), default="tensorflow")
    parser.add_argument("--jit_compile", choices=("auto", "true", "false"), default="auto")
    parser.add_argument("--batch_size", type=int, help="clips per batch (default 4)")
    parser.add_argument("--privacy_batch_size", type=int, help="privacy images (default 8)")
    parser.add_argument("--steps", type=int, default=2, help="steps fitted (the first compiles)")
    parser.add_argument("--max_gib", type=float, default=DEFAULT_CAP_GIB, help="RSS cap, GiB")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per measurement")
    parser.add_argument("--largest_batch", action="store_true", help="double until over the cap")
    parser.add_argument(
        "--meta_first_order", action="store_true", help="meta: first-order meta-gradient"
    )
    parser.add_argument(
        "--attack_models",
        type=int,
        default=0,
        help="meta: the first this many of its attack models (0: all; the paper's eight)",
    )
    parser.add_argument("--small", action="store_true", help="tiny models: a smoke run")
    parser.add_argument("--guard", action="store_true", help="-- COMMAND: run it under the cap")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not 0 < args.max_gib <= HARD_CAP_GIB:
        parser.error(f"--max_gib must lie in (0, {HARD_CAP_GIB:g}], not {args.max_gib:g}")
    if args.guard:
        if not command:
            parser.error("--guard needs a command after --")
        done = run_guarded(command, args.max_gib, args.timeout)
        print(done.pop("output"), end="")
        print(json.dumps(done))
        sys.exit(done["returncode"] if done["killed_because"] is None else GUARD_EXIT_CODE)
    args.batch_size = args.batch_size or (2 if args.small else 4)
    args.privacy_batch_size = args.privacy_batch_size or (4 if args.small else 8)
    from gpu import model_sizes

    if args.attack_models < 0:
        parser.error(f"--attack_models cannot be negative, got {args.attack_models}")
    sizes = model_sizes(args.small, args.attack_models)
    if args.worker:
        if os.environ.get("KERAS_BACKEND") == "jax":
            sys.modules["tensorflow"] = None  # `import tensorflow` fails, as on a GPU machine
        start_self_guard(args.max_gib)
        print(json.dumps(measure(args.worker, sizes, args)))
        return
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; known: {', '.join(METHODS)}")
    report = {
        "backend": args.backend,
        "jit_compile": args.jit_compile,
        "input": f"{sizes['frames']}x{sizes['size']}x{sizes['size']}",
        "max_gib": args.max_gib,
        "steps": [],
    }
    for method in methods:
        result = run_worker(method, args, args.batch_size, args.privacy_batch_size)
        if args.largest_batch and "error" not in result:
            result["largest"] = largest_batch(method, args)
        print(json.dumps(result), flush=True)
        report["steps"].append(result)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
