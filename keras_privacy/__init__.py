"""keras-privacy: privacy-preserving action recognition in Keras 3 (TensorFlow and JAX)."""

import importlib.util
import os

__version__ = "0.1.0"


def _use_memory_aware_xla_cpu_scheduler() -> None:
    """Have XLA:CPU schedule with its depth-first memory scheduler, not its default, which runs
    independent operations side by side and holds their buffers at once: on a CPU the JAX meta
    step at the paper's sizes and batch 4 / 8 plans far less memory with it (`docs/memory.md`).
    Added to XLA_FLAGS unless XLA_FLAGS already sets the option or a JAX accelerator plugin is
    installed (`jax_plugins`: there the CPU backend does not train, and an XLA of another
    version might not know the option); it takes effect where JAX's CPU backend starts after
    this import (before the first array is made)."""
    option = "--xla_cpu_enable_concurrency_optimized_scheduler"
    flags = os.environ.get("XLA_FLAGS", "")
    if option not in flags and importlib.util.find_spec("jax_plugins") is None:
        os.environ["XLA_FLAGS"] = f"{flags} {option}=false".strip()


_use_memory_aware_xla_cpu_scheduler()
