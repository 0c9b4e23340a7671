"""Shared test fixtures. The backend is chosen by KERAS_BACKEND (tensorflow or jax)."""

import gc
import os
import shutil
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ["KERAS_BACKEND"] == "tensorflow":
    # Two xdist workers on 2 cores: one TensorFlow thread per pool in each worker instead of one
    # per core, so the workers' spinning pools do not contend (the TensorFlow suite 18:25 to
    # 20:02 against 20:31: within the machine's noise). Tests only; the scripts they start
    # inherit it.
    os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

# Several tests run a script in a subprocess with cwd=tests/: it must import this checkout's
# package, not an installed one, whatever PYTHONPATH the suite was started with (a relative
# entry such as "." would name tests/ there).
_REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(_REPO_ROOT)]
    + [
        str(Path(entry).resolve())
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if entry
    ]
)

_OWN_COMPILATION_CACHE = None
if os.environ["KERAS_BACKEND"] == "jax":
    # The tests' models are tiny, so on JAX XLA's compile, not the run, is most of their time:
    # its cheapest CPU code generation compiles them faster (a train.py run in the tests 79 s
    # instead of 122 s; TensorFlow's tests gain nothing). Set before JAX is imported;
    # subprocesses inherit it. Not for training runs.
    fast_compile = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {fast_compile}".strip()
    # Many tests compile the same programs (the same tiny models and shapes), in this process,
    # in the other xdist workers and in subprocesses: one compilation cache for the whole run
    # compiles each once (the JAX suite 17:43 -> 14:50 on 2 cores). Made by the first process that
    # imports this file (pytest, before its xdist workers start) and removed when it ends.
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        _OWN_COMPILATION_CACHE = tempfile.mkdtemp(prefix="keras_privacy_tests_jax_cache_")
        os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_COMPILATION_CACHE
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

    import jax

    # Initial weights from the non-partitionable threefry PRNG: XLA compiles its per-shape
    # random kernels about 5x faster on a CPU (building unet_tiny: ~5 s instead of ~40 s).
    # Only which random values are drawn changes.
    jax.config.update("jax_threefry_partitionable", False)


def pytest_collection_modifyitems(config, items):
    """Skip the backend-independent tests on every run but TensorFlow's: the same code runs
    whatever KERAS_BACKEND says, so a second run would test nothing new."""
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        return
    once = pytest.mark.skip(reason="backend-independent: runs on the TensorFlow run only")
    for item in items:
        if item.get_closest_marker("backend_independent"):
            item.add_marker(once)


def pytest_unconfigure(config):
    """Remove the compilation cache this process made (in the process that made it)."""
    if _OWN_COMPILATION_CACHE:
        shutil.rmtree(_OWN_COMPILATION_CACHE, ignore_errors=True)


_FIXTURE_CANDIDATES = [
    os.environ.get("KERAS_PRIVACY_FIXTURES", ""),
    str(Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"),
    "/work/shared/fixtures",
]


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The real dataset files in ../shared/fixtures (read in place, never copied)."""
    for candidate in _FIXTURE_CANDIDATES:
        if candidate and (Path(candidate) / "README.md").is_file():
            return Path(candidate)
    pytest.fail("real fixtures not found: set KERAS_PRIVACY_FIXTURES to the shared/fixtures folder")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """After each test, free its garbage and freeze what survives: a worker that runs hundreds
    of tests keeps about a million objects alive, and Python's automatic full collections,
    which traverse them all and free many tests' TensorFlow graphs at once, had taken up to a
    quarter of a worker's time (test_training.py on 2 workers: 231 s, 195 s with this)."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _seed():
    import keras

    keras.utils.set_random_seed(0)


@pytest.fixture(scope="session")
def benchmark(tmp_path_factory) -> Path:
    """A tiny synthetic benchmark (complete, so it is used as it is): 6 classes x (2 train +
    1 test) videos of 12 frames at 32 x 32, and 12 / 2 / 8 privacy images."""
    from keras_privacy.data.synthetic import write_synthetic_benchmark

    root = tmp_path_factory.mktemp("synthetic")
    write_synthetic_benchmark(
        root, size=32, num_frames=12, videos_per_class=(2, 1), num_images=(12, 2, 8)
    )
    return root
