"""Data-parallel training on TensorFlow: `tf.distribute.MirroredStrategy` (the train step per
replica, which `tensorflow_step` makes sum to the global step); one process only."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import TypeVar

import keras
import tensorflow as tf

from keras_privacy.spelling import SettingError

Result = TypeVar("Result")


def join_processes(num_processes: int, process_id: int, coordinator_address: str) -> int:
    """Refuse: training across processes runs on JAX."""
    raise SettingError(
        f"<num_processes>={num_processes}: training across processes runs on JAX; "
        "this is tensorflow (use <backend>=jax)"
    )


def run_stopping_together(run: Callable[[], int]) -> int:
    """`run()`: a TensorFlow run is one process, with no other to stop."""
    return run()


def uninterrupted_writes() -> contextlib.AbstractContextManager[None]:
    """Nothing to hold off: a TensorFlow run is one process."""
    return contextlib.nullcontext()


def use_compilation_cache(folder: str) -> None:
    """Refuse: TensorFlow's own XLA cache (`--tf_xla_persistent_cache_directory`) reloaded a
    CPU step with parse errors and a warning of illegal instructions (TensorFlow 2.21)."""
    raise SettingError(
        f"<compilation_cache>={folder}: a cache of compiled steps is kept on JAX; this is "
        "tensorflow (use <backend>=jax, or leave <compilation_cache> empty)"
    )


def chief_first(run: Callable[[], Result]) -> Result:
    """`run()`: a TensorFlow run is one process."""
    return run()


def process_0s_value(name: str, value: str) -> str:
    """`value`: a TensorFlow run is one process."""
    return value


def is_chief() -> bool:
    """Always: a TensorFlow run is one process."""
    return True


def process_position() -> tuple[int, int]:
    """(0, 1): one process feeds every replica."""
    return 0, 1


def set_up_tensorflow_gpus(tf: ModuleType) -> tuple[int, str]:
    """Let each GPU's memory grow as TensorFlow needs it (`set_memory_growth`): TensorFlow
    trains on its GPUs, and would otherwise map nearly all the memory of every GPU it sees as
    its runtime starts (all of a machine's GPUs for a one-GPU run, none left for another
    process or for evaluate.py's ONNX face detector). Call before any TensorFlow operation
    runs. Returns how many GPUs TensorFlow saw and, where its runtime had already started,
    why their memory could not be set (else "")."""
    gpus = tf.config.list_physical_devices("GPU")
    try:
        for gpu in gpus:
            tf.config.experimental.set_memory_growth(gpu, True)
    except RuntimeError as error:  # the runtime has started: too late
        return len(gpus), str(error)
    return len(gpus), ""


def accelerator_names() -> list[str]:
    """The name of each GPU TensorFlow sees (such as "NVIDIA H200"); [] on a CPU."""
    return [
        tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
        for gpu in tf.config.list_physical_devices("GPU")
    ]


def data_parallel_devices() -> list[str]:
    """The logical GPUs, else the logical CPUs."""
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return [device.name for device in devices]


@contextlib.contextmanager
def data_parallel() -> Iterator[int]:
    """A MirroredStrategy scope over `data_parallel_devices`; yields the number of replicas."""
    strategy = tf.distribute.MirroredStrategy(data_parallel_devices())
    with strategy.scope():
        yield strategy.num_replicas_in_sync


def auto_jit_compile(models: Iterable[keras.Model]) -> tuple[bool, str]:
    """XLA on a GPU; on a CPU, XLA unless a model holds a 3-D convolution: XLA:CPU runs those
    several times slower than TensorFlow's graph with oneDNN (SPAct's step at the paper's sizes:
    about 80 s against 18.8 s on 2 cores, `benchmarks/train_step.py`), while the 2-D
    convolutions of the synthetic benchmark's models are faster under XLA. Never under a
    `tf.distribute` strategy: XLA cannot compile its replica step (`TensorFlowStep`)."""
    if tf.distribute.has_strategy():
        return False, "auto: TensorFlow graph without XLA under data parallelism"
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
