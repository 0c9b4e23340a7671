"""Data-parallel training and mixed precision, set up once around building and fitting models.

`--distribution=data_parallel` uses each backend's own engine (`backend.jax_distribution`,
`backend.tensorflow_distribution`): `keras.distribution.DataParallel` on JAX (one program over
the global batch, split by XLA), `tf.distribute.MirroredStrategy` on TensorFlow (the train step
per replica, not XLA-compiled; `backend.tensorflow_step` makes it sum to the global step). Both
replicate the models on every local accelerator (every CPU device when there is none) and split
each batch along its first axis, so the batch sizes of the config are *global*: each device
takes `batch_size / devices` clips. `--mixed_precision` sets Keras' global dtype policy before
the models are built; the losses cast to float32 and `mixed_float16` adds dynamic loss scaling.
`--jit_compile=auto` picks XLA where it is the faster path (`choose_jit_compile`).

Training across processes (JAX only, `--num_processes`): every process runs `train.py` with the
same flags; `initialize_processes` joins them into one JAX job (`jax.distributed.initialize`),
after which `data_parallel` spans the devices of every process. Each process decodes and
feeds only its own part of each global batch (`process_position`, given to the input
pipelines: process p of N takes rows p * B / N .. (p + 1) * B / N of every batch, or of each
run of it, as VITA's step clips and extra action clips), the step is one program over the
global batch, and only process 0 (`is_chief`) writes checkpoints, images and models into the
run folder, which every process must see (a shared file system), and the built-in benchmark
before the others read it (`chief_first`). A process that fails stops the others at once
(`run_stopping_together`).
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import keras

from keras_privacy import backend
from keras_privacy.spelling import SettingError, spell

DISTRIBUTIONS = ("none", "data_parallel")
"""Values of `--distribution`."""
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
"""Values of `--mixed_precision` (Keras dtype policy names)."""
JIT_COMPILE = ("auto", "true", "false")
"""Values of `--jit_compile`."""
Result = TypeVar("Result")


def initialize_processes(
    num_processes: int, process_id: int = 0, coordinator_address: str = ""
) -> int:
    """Join this process to a multi-process JAX job before anything runs on JAX; returns the
    number of processes.

    `num_processes` 1 does nothing; N > 1 joins process `process_id` of N whose process 0
    listens at `coordinator_address` (host:port); 0 reads all three from the cluster's
    environment (SLURM, Open MPI, Kubernetes with jax[k8s], the others `jax.distributed` knows).
    CPU devices exchange their data through Gloo. TensorFlow refuses N != 1.
    """
    if num_processes == 1:
        return 1
    return backend.distribution().join_processes(num_processes, process_id, coordinator_address)


def run_stopping_together(run: Callable[[], int]) -> int:
    """Run `run` (a command, its errors reported: `cli.run_command`) and return its exit status;
    in a multi-process JAX job, a process that fails stops the others at once, each with a
    message naming it, and leaves without waiting for them (`backend.jax_distribution`)."""
    return backend.distribution().run_stopping_together(run)


def uninterrupted_writes() -> contextlib.AbstractContextManager[None]:
    """A scope for writing the run's files: a failure in another process of a multi-process
    JAX job stops this one only once they are written whole."""
    return backend.distribution().uninterrupted_writes()


def chief_first(run: Callable[[], Result]) -> Result:
    """`run()`, in a multi-process JAX job first in process 0 and then in the others, so that
    files that `run` writes when they are missing (the built-in benchmark and its caches) are
    written by process 0 alone and found by the others."""
    return backend.distribution().chief_first(run)


def process_0s_value(name: str, value: str) -> str:
    """Process 0's `value` of `name`, in every process of a multi-process JAX job (this
    process's own elsewhere, and where that JAX gives no key-value store): what every process
    must agree on (its settings, the checkpoint it resumes) is compared with process 0's
    before the processes take a step together, where a difference would train mixed settings
    or stop in a collective with no word of why. Every process calls it in the same order."""
    return backend.distribution().process_0s_value(name, value)


def process_name() -> str:
    """This process's name in a multi-process JAX job (`process P of N on HOST`), "" elsewhere:
    for the lines each process writes where the processes' output and files mix."""
    process, count = process_position()
    return f"process {process} of {count} on {socket.gethostname()}" if count > 1 else ""


def is_chief() -> bool:
    """Whether this process writes the run's files: always, except in processes 1, 2, ... of a
    multi-process JAX job."""
    return backend.distribution().is_chief()


def process_position() -> tuple[int, int]:
    """(this process's index, the number of processes): (0, 1) except in a multi-process JAX
    job, whose processes each read their own rows of every global batch."""
    return backend.distribution().process_position()


def data_parallel_devices() -> list[str]:
    """The devices data-parallel training replicates on: accelerators, else CPUs; on JAX those
    of every process of a multi-process job."""
    return backend.distribution().data_parallel_devices()


@contextlib.contextmanager
def training_scope(distribution: str = "none", precision: str = "float32") -> Iterator[int]:
    """Build, compile and fit models inside this scope; yields the number of replicas.

    Sets the dtype policy and, for `data_parallel`, the distribution (JAX) or enters a
    MirroredStrategy scope (TensorFlow); both are put back as they were on exit.
    """
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution!r} is not one of {', '.join(DISTRIBUTIONS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    policy = keras.config.dtype_policy()
    keras.config.set_dtype_policy(precision)
    try:
        if distribution == "none":
            yield 1
        else:
            with backend.distribution().data_parallel() as replicas:
                yield replicas
    finally:
        keras.config.set_dtype_policy(policy)


def use_compilation_cache(folder: str) -> None:
    """Keep the compiled training steps in `folder`, and load them from there, from the next
    compile on (JAX's persistent compilation cache, with XLA's autotuning results of each
    fusion); a SettingError on TensorFlow (`backend.tensorflow_distribution`)."""
    backend.distribution().use_compilation_cache(folder)


def check_batch_sizes(replicas: int, **batch_sizes: int) -> None:
    """Raise ValueError naming the first global batch size that the replicas cannot share."""
    for name, size in batch_sizes.items():
        if size % replicas:
            raise SettingError(
                f"<{name}>={size} is the global batch, split over {replicas} devices: "
                f"make it a multiple of {replicas}"
            )


def choose_jit_compile(setting: str | bool, models: Iterable[keras.Model]) -> tuple[bool, str]:
    """Whether to XLA-compile a step that trains `models` under `--jit_compile=setting`, and why.

    `auto`: the backend's choice (`auto_jit_compile` of `backend.jax_distribution` and
    `backend.tensorflow_distribution`): XLA on JAX (its only compiled path) and on a TensorFlow
    GPU; on a TensorFlow CPU, XLA unless a model holds a 3-D convolution.
    """
    value = str(setting).lower()
    if value not in JIT_COMPILE:
        raise SettingError(f"<jit_compile>={setting!r} is not one of {', '.join(JIT_COMPILE)}")
    if value != "auto":
        return value == "true", spell(f"<jit_compile>={value}")
    return backend.distribution().auto_jit_compile(models)
