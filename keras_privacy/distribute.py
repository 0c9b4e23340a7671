"""Data-parallel training and mixed precision, set up once around building and fitting models.

`--distribution=data_parallel` uses each backend's own engine: `keras.distribution.DataParallel`
on JAX (one program over the global batch, split by XLA), `tf.distribute.MirroredStrategy` on
TensorFlow (the train step per replica, not XLA-compiled; `methods.engine` makes it sum to the
global step). Both replicate the models on every local accelerator (every CPU device when there
is none) and split each batch along its first axis, so the batch sizes of the config are
*global*: each device takes `batch_size / devices` clips. `--mixed_precision` sets Keras' global
dtype policy before the models are built; the losses cast to float32 and `mixed_float16` adds
dynamic loss scaling.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import keras

DISTRIBUTIONS = ("none", "data_parallel")
"""Values of `--distribution`."""
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
"""Values of `--mixed_precision` (Keras dtype policy names)."""


def data_parallel_devices() -> list[str]:
    """The local devices data-parallel training replicates on: accelerators, else CPUs."""
    if keras.backend.backend() == "jax":
        return keras.distribution.list_devices()
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return [device.name for device in devices]
    raise NotImplementedError(f"no data-parallel training on the {keras.backend.backend()} backend")


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
        elif keras.backend.backend() == "jax":
            devices = data_parallel_devices()
            previous = keras.distribution.distribution()
            keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
            try:
                yield len(devices)
            finally:
                keras.distribution.set_distribution(previous)
        else:
            import tensorflow as tf

            strategy = tf.distribute.MirroredStrategy(data_parallel_devices())
            with strategy.scope():
                yield strategy.num_replicas_in_sync
    finally:
        keras.config.set_dtype_policy(policy)


def check_batch_sizes(replicas: int, **batch_sizes: int) -> None:
    """Raise ValueError naming the first global batch size that the replicas cannot share."""
    for name, size in batch_sizes.items():
        if size % replicas:
            raise ValueError(
                f"--{name}={size} is the global batch, split over {replicas} devices: "
                f"make it a multiple of {replicas}"
            )
