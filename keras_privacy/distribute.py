"""Data-parallel training and mixed precision, set up once around building and fitting models.

`--distribution=data_parallel` uses each backend's own engine: `keras.distribution.DataParallel`
on JAX (one program over the global batch, split by XLA), `tf.distribute.MirroredStrategy` on
TensorFlow (the train step per replica, not XLA-compiled; `methods.engine` makes it sum to the
global step). Both replicate the models on every local accelerator (every CPU device when there
is none) and split each batch along its first axis, so the batch sizes of the config are
*global*: each device takes `batch_size / devices` clips. `--mixed_precision` sets Keras' global
dtype policy before the models are built; the losses cast to float32 and `mixed_float16` adds
dynamic loss scaling. `--jit_compile=auto` picks XLA where it is the faster path
(`choose_jit_compile`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import keras

DISTRIBUTIONS = ("none", "data_parallel")
"""Values of `--distribution`."""
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
"""Values of `--mixed_precision` (Keras dtype policy names)."""
JIT_COMPILE = ("auto", "true", "false")
"""Values of `--jit_compile`."""


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


def choose_jit_compile(setting: str | bool, models: Iterable[keras.Model]) -> tuple[bool, str]:
    """Whether to XLA-compile a step that trains `models` under `--jit_compile=setting`, and why.

    `auto`: XLA on JAX (its only compiled path) and on a TensorFlow GPU; on a TensorFlow CPU,
    XLA unless a model holds a 3-D convolution: XLA:CPU runs those several times slower than
    TensorFlow's graph with oneDNN (SPAct's step at the paper's sizes: about 80 s against 18.8 s
    on 2 cores, `benchmarks/train_step.py`), while the 2-D convolutions of the synthetic
    benchmark's models are faster under XLA.
    """
    value = str(setting).lower()
    if value not in JIT_COMPILE:
        raise ValueError(f"--jit_compile={setting!r} is not one of {', '.join(JIT_COMPILE)}")
    if value != "auto":
        return value == "true", f"--jit_compile={value}"
    if keras.backend.backend() != "tensorflow":
        return True, f"auto: XLA on {keras.backend.backend()}"
    import tensorflow as tf

    if tf.config.list_logical_devices("GPU"):
        return True, "auto: XLA on a TensorFlow GPU"
    conv3d = [model.name for model in models if _has_conv3d(model)]
    if conv3d:
        return False, f"auto: TensorFlow graph without XLA on a CPU (3-D convolutions in {conv3d})"
    return True, "auto: XLA on a TensorFlow CPU (no 3-D convolution)"


def _has_conv3d(layer) -> bool:
    """Whether `layer` or a layer nested in it is a 3-D convolution."""
    if isinstance(layer, (keras.layers.Conv3D, keras.layers.Conv3DTranspose)):
        return True
    return any(_has_conv3d(inner) for inner in getattr(layer, "layers", []))
