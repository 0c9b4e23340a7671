"""Data-parallel training and mixed precision, set up once around building and fitting models.

`--distribution=data_parallel` uses each backend's own engine: `keras.distribution.DataParallel`
on JAX (one program over the global batch, split by XLA), `tf.distribute.MirroredStrategy` on
TensorFlow (the train step per replica, not XLA-compiled; `backend.tensorflow_step` makes it sum
to the global step). Both replicate the models on every local accelerator (every CPU device when
there is none) and split each batch along its first axis, so the batch sizes of the config are
*global*: each device takes `batch_size / devices` clips. `--mixed_precision` sets Keras' global
dtype policy before the models are built; the losses cast to float32 and `mixed_float16` adds
dynamic loss scaling. `--jit_compile=auto` picks XLA where it is the faster path
(`choose_jit_compile`).

Training across processes (JAX only, `--num_processes`): every process runs `train.py` with the
same flags; `initialize_processes` joins them into one JAX job (`jax.distributed.initialize`),
after which `data_parallel` spans the devices of every process. Each process feeds its own
part of each global batch (`process_shard`: process p of N keeps rows p * B / N .. (p + 1) *
B / N of every batch; every process still decodes the whole batch), the step is one program
over the global batch, and only process 0 (`is_chief`) writes checkpoints, images and
models into the run folder, which every process must see (a shared file system).
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


def initialize_processes(
    num_processes: int, process_id: int = 0, coordinator_address: str = ""
) -> int:
    """Join this process to a multi-process JAX job before anything runs on JAX; returns the
    number of processes.

    `num_processes` 1 does nothing; N > 1 joins process `process_id` of N whose process 0
    listens at `coordinator_address` (host:port); 0 reads all three from the cluster's
    environment (SLURM, Open MPI, Kubernetes' JobSet and the others `jax.distributed` knows).
    CPU devices exchange their data through Gloo.
    """
    if num_processes == 1:
        return 1
    if keras.backend.backend() != "jax":
        raise ValueError(
            f"--num_processes={num_processes}: training across processes runs on JAX; "
            f"this is {keras.backend.backend()} (use --backend=jax)"
        )
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if num_processes == 0:
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(coordinator_address, num_processes, process_id)
    return jax.process_count()


def is_chief() -> bool:
    """Whether this process writes the run's files: always, except in processes 1, 2, ... of a
    multi-process JAX job."""
    if keras.backend.backend() != "jax":
        return True
    import jax

    return jax.process_index() == 0


def process_shard(dataset):
    """This process's rows of every global batch of a `tf.data.Dataset` (batch axis first) in a
    multi-process JAX job; the dataset itself otherwise."""
    if keras.backend.backend() != "jax":
        return dataset
    import jax

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


def data_parallel_devices() -> list[str]:
    """The devices data-parallel training replicates on: accelerators, else CPUs; on JAX those
    of every process of a multi-process job."""
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
            # Batches are sharded by `process_shard` (Keras' own sharding of a tf.data pipeline
            # cannot see the batch size of paired batches).
            keras.distribution.set_distribution(
                keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False)
            )
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
