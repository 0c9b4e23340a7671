"""Data-parallel and multi-process training on JAX: `keras.distribution.DataParallel` (one
program over the global batch, split by XLA) and `jax.distributed` for several processes."""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import jax
import keras


def join_processes(num_processes: int, process_id: int, coordinator_address: str) -> int:
    """Join process `process_id` of `num_processes` (0: all three from the cluster's
    environment) to one JAX job, CPU devices exchanging through Gloo; the number of processes.
    With 0 and no cluster found, a ValueError naming `--num_processes` (JAX's names neither).
    Given all three, the cluster's environment is not read: each process keeps every device it
    sees, where JAX would otherwise give a process under SLURM or Open MPI the one GPU of its
    local rank, and a coordinator's port that process 0 cannot take, or that another process
    cannot reach within JAX's wait, is a ValueError naming `--coordinator_address` (JAX ends
    the process without a Python error: a crash, or blaming another process)."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_processes == 0:
        try:
            jax.distributed.initialize()
        except ValueError as error:
            raise ValueError(
                "--num_processes=0 reads the job from the cluster's environment (SLURM, Open MPI, "
                f"Kubernetes with jax[k8s]), and none was found ({error}): give --num_processes, "
                "--process_id and --coordinator_address"
            ) from error
        except RuntimeError as error:
            hint = ""
            if "forbidden" in str(error).lower():  # Kubernetes: no right to list the pods
                hint = "; the pod's service account must be allowed to list pods and read jobs"
            raise ValueError(
                f"--num_processes=0: reading the job from the cluster's environment failed "
                f"({error}){hint}"
            ) from error
    else:
        host, _, port = coordinator_address.rpartition(":")
        if process_id == 0:
            _require_free_port(int(port), coordinator_address)
        else:
            _wait_for_coordinator(host, int(port), coordinator_address, COORDINATOR_WAIT_SECONDS)
        jax.distributed.initialize(
            coordinator_address,
            num_processes,
            process_id,
            cluster_detection_method="deactivate",
            initialization_timeout=COORDINATOR_WAIT_SECONDS,
        )
    return jax.process_count()


COORDINATOR_WAIT_SECONDS = 300
"""How long a process waits for process 0's coordinator, and JAX for every process to join
(JAX's own default)."""


def _require_free_port(port: int, coordinator_address: str) -> None:
    """Raise ValueError unless this host's `port` can be taken, on every interface, as JAX's
    coordinator takes it (a port left in TIME_WAIT by an earlier job can, as it can for JAX)."""
    try:
        probe = socket.socket(socket.AF_INET6)  # [::], IPv4 too on a dual-stack host
    except OSError:  # IPv6 turned off
        probe = socket.socket(socket.AF_INET)
    with probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError as error:
            raise ValueError(
                f"--coordinator_address={coordinator_address}: process 0 cannot listen on port "
                f"{port} ({error.strerror or error}): another program (or job) holds it; give "
                "every process another port"
            ) from error


def _wait_for_coordinator(
    host: str, port: int, coordinator_address: str, wait_seconds: float
) -> None:
    """Return once `host:port` accepts a connection (process 0 started, maybe after this one);
    a ValueError naming `--coordinator_address` if it does not within `wait_seconds`."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with socket.create_connection((host.strip("[]"), port), timeout=5):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise ValueError(
                    f"--coordinator_address={coordinator_address}: process 0 did not answer "
                    f"there within {wait_seconds:.0f} s ({error.strerror or error}): is process "
                    "0 running, and is that its host, reachable from this one?"
                ) from error
            time.sleep(1)


def _check_equal_devices(process_of_each_device: list[int]) -> None:
    """Raise ValueError unless every process of the job holds as many devices (given the
    process index of each device): each process reads an equal share of every global batch,
    where JAX would take a share in proportion to its devices, and fail with a shape error."""
    counts = collections.Counter(process_of_each_device)
    if len(set(counts.values())) > 1:
        held = ", ".join(f"process {p} has {counts[p]}" for p in sorted(counts))
        raise ValueError(
            f"every process of a multi-process job needs as many devices ({held}): each one "
            "reads an equal share of every batch; give each the same number of GPUs (e.g. "
            "CUDA_VISIBLE_DEVICES)"
        )


STOP_KEY = "keras_privacy/stop/"
"""+ a process index, in the job's key-value store: the index of the process whose failure
stops that one, or "" once that one has ended (well, or alone in failing at the end)."""
STOPPED_KEY = "keras_privacy/stopped/"
"""+ a process index: set by a process as a failure elsewhere stops it."""
CHIEF_DONE_KEY = "keras_privacy/chief_done/"
"""+ the number of the `chief_first` call: set by process 0 once its part is done."""
PROCESS_0_VALUE_KEY = "keras_privacy/process_0_value/"
"""+ the number of the `process_0s_value` call and its name: process 0's value."""
LEFT_KEY = "keras_privacy/left/"
"""+ a process index: set by a process other than 0 as it leaves after a failure."""
STOPPED_WAIT_SECONDS = 10
"""How long a failed process waits for the others to stop before it leaves (and process 0
for the others to leave)."""
LEAVE_GRACE_SECONDS = 1.0
"""How long process 0 waits, once another process said it leaves, for it to be gone."""
_writing = threading.Lock()
_chief_first_calls = itertools.count()
_process_0_value_calls = itertools.count()
Result = TypeVar("Result")


def run_stopping_together(run: Callable[[], int]) -> int:
    """Run `run` (a command, its errors reported: `cli.run_command`); its exit status.

    In a job of several processes, a process that fails (a non-zero status, or any exception,
    whose traceback is printed) tells the others through the job's key-value store, waits up
    to `STOPPED_WAIT_SECONDS` for them to stop and leaves. Each other process stops as soon as
    it is told (`uninterrupted_writes` aside), with a message naming the failed one. Left to
    JAX, the others would wait in a collective for the failed one's data, and it at JAX's exit
    barrier for them, until the barrier's 5-minute timeout aborted them all. Only where every
    other process has already ended well does it leave through that barrier, where they wait.
    """
    if not jax.distributed.is_initialized():
        return run()
    client = _coordination_client()
    if client is None:  # a JAX without the handle this reads: failures are left to JAX
        return run()
    process, count = jax.process_index(), jax.process_count()
    watcher = threading.Thread(target=_stop_when_told, args=(client, process, count), daemon=True)
    watcher.start()
    try:
        status = run()
    except BaseException:  # a bug, or any error under --verbose: its traceback, then leave
        traceback.print_exc()
        status = 1
    if status:
        _stop_the_others_and_leave(client, process, count, status)
    _set_if_unset(client, f"{STOP_KEY}{process}", "")
    watcher.join()  # it returns, or stops this process if another one failed first
    return status


@contextlib.contextmanager
def uninterrupted_writes() -> Iterator[None]:
    """While inside, a failure elsewhere waits to stop this process: the files being written
    (a checkpoint, the models) are written whole."""
    with _writing:
        yield


def _stop_when_told(client: Any, process: int, count: int) -> None:
    """Wait until this process ends well (returns) or another one fails (stops this one)."""
    try:
        failed = client.blocking_key_value_get(f"{STOP_KEY}{process}", 2**62)  # ms: no end
    except jax.errors.JaxRuntimeError:  # the coordinator is gone: JAX stops this process
        return
    if failed == "":
        return
    with _writing:
        print(
            f"error: process {failed} of {count} failed (its own output says why); "
            f"process {process} stops too",
            file=sys.stderr,
        )
        _set_if_unset(client, f"{STOPPED_KEY}{process}", "")
        _leave(client, process, count, 1)


def _stop_the_others_and_leave(client: Any, process: int, count: int, status: int) -> None:
    """Tell the other processes that this one failed, wait up to `STOPPED_WAIT_SECONDS` for
    them to stop, then end this process with `status`. Returns, leaving nothing to stop,
    where every other process has already ended well: they wait at JAX's exit barrier."""
    others = [other for other in range(count) if other != process]
    try:
        stops = dict(client.key_value_dir_get(STOP_KEY))
    except jax.errors.JaxRuntimeError:  # the coordinator is gone: no one to tell
        _leave(client, process, count, status)
    if all(stops.get(f"{STOP_KEY}{other}") == "" for other in others):
        return
    told = [o for o in others if _set_if_unset(client, f"{STOP_KEY}{o}", str(process))]
    _wait_for_keys(client, [f"{STOPPED_KEY}{other}" for other in told], STOPPED_WAIT_SECONDS)
    _leave(client, process, count, status)


def _wait_for_keys(client: Any, keys: list[str], seconds: float) -> None:
    """Wait until every one of `keys` is set in the job's key-value store, for `seconds` in
    all at most; a key not set in time (or a coordinator gone) is waited for no longer."""
    deadline = time.monotonic() + seconds
    for key in keys:
        wait_ms = max(1, int(1000 * (deadline - time.monotonic())))
        try:
            client.blocking_key_value_get(key, wait_ms)
        except jax.errors.JaxRuntimeError:
            pass


def _set_if_unset(client: Any, key: str, value: str) -> bool:
    """Set `key` of the job's key-value store to `value`; False where it was set already (or
    the coordinator is gone)."""
    try:
        client.key_value_set(key, value)
    except jax.errors.JaxRuntimeError:
        return False
    return True


def _coordination_client() -> Any:
    """The client of the job's coordination service, whose key-value store the processes
    share: JAX keeps it in `jax._src.distributed` (no public name), as JAX's own Gloo
    collectives and compilation cache read it (there in 0.10.2 and 0.11.2); None where a JAX
    keeps it elsewhere."""
    from jax._src import distributed

    return getattr(getattr(distributed, "global_state", None), "client", None)


def _leave(client: Any, process: int, count: int, status: int) -> NoReturn:
    """End this process with `status` once its output is out, without Python's exit: JAX's
    exit barrier would wait for processes that a failure has stopped. Process 0 leaves last:
    it hosts the coordination service, whose end makes JAX abort every process still
    connected, so it waits (up to `STOPPED_WAIT_SECONDS`) for the others to say they leave."""
    sys.stdout.flush()
    sys.stderr.flush()
    if process != 0:
        _set_if_unset(client, f"{LEFT_KEY}{process}", "")
        os._exit(status)
    _wait_for_keys(
        client, [f"{LEFT_KEY}{other}" for other in range(1, count)], STOPPED_WAIT_SECONDS
    )
    time.sleep(LEAVE_GRACE_SECONDS)
    os._exit(status)


def use_compilation_cache(folder: str) -> None:
    """JAX's persistent compilation cache in `folder`, XLA's per-fusion autotuning results with
    it, for every compile from now on (`reset_cache`: also after earlier compiles)."""
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update(
        "jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir"
    )
    compilation_cache.reset_cache()


def chief_first(run: Callable[[], Result]) -> Result:
    """`run()` in process 0 first, then in the other processes at once, each returning its own
    result: what process 0 writes (the built-in benchmark, its caches) the others then find
    written, rather than writing the same files beside it. A failure of process 0 stops the
    waiting ones (`run_stopping_together`); where this JAX keeps no coordination client, they
    wait in a collective instead, until JAX's own timeout."""
    if jax.process_count() == 1:
        return run()
    key = f"{CHIEF_DONE_KEY}{next(_chief_first_calls)}"
    client = _coordination_client()
    if client is None:  # a JAX without the handle: a collective over every device instead
        from jax.experimental import multihost_utils

        result = run() if is_chief() else None
        multihost_utils.sync_global_devices(key)
        return result if is_chief() else run()
    if is_chief():
        result = run()
        client.key_value_set(key, "")
        return result
    _wait_for_key(client, key)
    return run()


def process_0s_value(name: str, value: str) -> str:
    """Process 0's `value` of `name` in every process, through the job's key-value store (this
    process's own where it is process 0, alone, or without the store's handle)."""
    if jax.process_count() == 1:
        return value
    client = _coordination_client()
    if client is None:
        return value
    key = f"{PROCESS_0_VALUE_KEY}{next(_process_0_value_calls)}/{name}"
    if is_chief():
        client.key_value_set(key, value)
        return value
    return _wait_for_key(client, key)


def _wait_for_key(client: Any, key: str) -> str:
    """Wait, as long as it takes, until `key` is set in the job's key-value store, and return
    its value: a second at a time, so that Ctrl-C (which Python handles between calls) still
    stops this process."""
    while True:
        try:
            return client.blocking_key_value_get(key, 1000)
        except jax.errors.JaxRuntimeError as error:
            if "DEADLINE_EXCEEDED" not in str(error):
                raise


def is_chief() -> bool:
    """Whether this is process 0 of the JAX job (the only process of a single-process one)."""
    return jax.process_index() == 0


def process_position() -> tuple[int, int]:
    """(this process's index, the number of processes) of the JAX job: (0, 1) alone."""
    return jax.process_index(), jax.process_count()


def set_up_tensorflow_gpus(tf: ModuleType) -> tuple[int, str]:
    """Hide every GPU from `tf` (the TensorFlow module of the input pipelines), which on JAX
    only runs `tf.data`, on the CPU: a GPU build of TensorFlow would otherwise reserve most of
    a GPU's memory when its runtime starts. Call before any TensorFlow operation runs. Returns
    how many GPUs TensorFlow saw and, where they could not be hidden, why (else "")."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return 0, ""
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError as error:  # the runtime has started: too late
        return len(gpus), str(error)
    return len(gpus), ""


def accelerator_names() -> list[str]:
    """The kind of each of this process's accelerators (such as "NVIDIA H200"); [] on a CPU."""
    return [device.device_kind for device in jax.local_devices() if device.platform != "cpu"]


def data_parallel_devices() -> list[str]:
    """Keras' devices of every process of the job: accelerators, else CPUs."""
    return keras.distribution.list_devices()


@contextlib.contextmanager
def data_parallel() -> Iterator[int]:
    """`keras.distribution.DataParallel` over `data_parallel_devices` while inside; yields the
    number of devices and puts the previous distribution back on exit."""
    _check_equal_devices([device.process_index for device in jax.devices()])
    devices = data_parallel_devices()
    previous = keras.distribution.distribution()
    # Each process reads its own rows of every batch (`TrainingData.dataset`'s `process`;
    # Keras' own sharding of a tf.data pipeline cannot see the batch size of paired batches).
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
    )
    try:
        yield len(devices)
    finally:
        keras.distribution.set_distribution(previous)


def auto_jit_compile(models: Iterable[keras.Model]) -> tuple[bool, str]:
    """XLA, JAX's only compiled path, whatever the models."""
    return True, "auto: XLA on jax"
