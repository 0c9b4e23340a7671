"""TensorFlow as the runtime of the input pipelines: the data layer imports it from here.

Where Keras trains on JAX, TensorFlow only runs `tf.data`, on the CPU. A GPU build of
TensorFlow that sees a GPU would still reserve most of that GPU's memory when its runtime
starts, leaving JAX too little (JAX's own preallocation, or its growth with
XLA_PYTHON_CLIENT_PREALLOCATE=false, then fails). So on import, before any TensorFlow operation
runs, the backend sets up TensorFlow's GPUs (`set_up_tensorflow_gpus`): hidden from it unless
it trains, as JAX programs that read with `tf.data` do; where it trains, each GPU's memory
grows as needed instead of being reserved whole.
"""

from __future__ import annotations

import warnings

import keras
import tensorflow as tf

from keras_privacy import backend


def set_up_the_gpus() -> None:
    """Set up TensorFlow's GPUs for the backend; warn where TensorFlow's runtime had already
    started with them (it may hold memory the training or another process needs)."""
    seen, failure = backend.distribution().set_up_tensorflow_gpus(tf)
    if failure:
        warnings.warn(
            f"TensorFlow's runtime started with {seen} GPU(s) before keras-privacy's input "
            f"pipelines were imported ({failure}): it may hold most of their memory, which "
            f"{keras.backend.backend()} training or another process needs. Import "
            "keras_privacy's data modules before running any TensorFlow operation.",
            stacklevel=2,
        )


set_up_the_gpus()
