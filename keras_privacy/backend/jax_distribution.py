"""Data-parallel and multi-process training on JAX: `keras.distribution.DataParallel` (one
program over the global batch, split by XLA) and `jax.distributed` for several processes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import jax
import keras

if TYPE_CHECKING:
    import tensorflow as tf


def join_processes(num_processes: int, process_id: int, coordinator_address: str) -> int:
    """Join process `process_id` of `num_processes` (0: all three from the cluster's
    environment) to one JAX job, CPU devices exchanging through Gloo; the number of processes.
    With 0 and no cluster found, a ValueError naming `--num_processes` (JAX's names neither)."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_processes == 0:
        try:
            jax.distributed.initialize()
        except ValueError as error:
            raise ValueError(
                "--num_processes=0 reads the job from the cluster's environment (SLURM, Open MPI, "
                f"Kubernetes' JobSet), and none was found ({error}): give --num_processes, "
                "--process_id and --coordinator_address"
            ) from error
    else:
        jax.distributed.initialize(coordinator_address, num_processes, process_id)
    return jax.process_count()


def use_compilation_cache(folder: str) -> None:
    """JAX's persistent compilation cache in `folder`, XLA's per-fusion autotuning results with
    it, for every compile from now on (`reset_cache`: also after earlier compiles)."""
    from jax.experimental.compilation_cache import compilation_cache

    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update(
        "jax_persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir"
    )
    compilation_cache.reset_cache()


def is_chief() -> bool:
    """Whether this is process 0 of the JAX job (the only process of a single-process one)."""
    return jax.process_index() == 0


def process_shard(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """This process's rows of every global batch of a `tf.data.Dataset`: process p of N keeps
    rows p * B / N .. (p + 1) * B / N; the dataset itself in a single-process job."""
    count, index = jax.process_count(), jax.process_index()
    if count == 1:
        return dataset
    import tensorflow as tf

    def rows(batch):
        def part(tensor):
            size = tf.shape(tensor)[0] // count
            return tensor[index * size : (index + 1) * size]

        return tf.nest.map_structure(part, batch)

    return dataset.map(rows)


def keep_input_pipelines_off_the_gpus(tf: ModuleType) -> tuple[int, str]:
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
    devices = data_parallel_devices()
    previous = keras.distribution.distribution()
    # Batches are sharded by `process_shard` (Keras' own sharding of a tf.data pipeline cannot
    # see the batch size of paired batches).
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
