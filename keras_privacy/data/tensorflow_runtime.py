"""TensorFlow as the runtime of the input pipelines: the data layer imports it from here.

Where Keras trains on JAX, TensorFlow only runs `tf.data`, on the CPU. A GPU build of
TensorFlow that sees a GPU would still reserve most of that GPU's memory when its runtime
starts, leaving JAX too little (JAX's own preallocation, or its growth with
XLA_PYTHON_CLIENT_PREALLOCATE=false, then fails). So on import, before any TensorFlow operation
runs, the backend hides the GPUs from TensorFlow unless it is TensorFlow
(`keep_input_pipelines_off_the_gpus`), as JAX programs that read with `tf.data` do.
"""

from __future__ import annotations

import warnings

import keras
import tensorflow as tf

from keras_privacy import backend


def keep_tensorflow_off_the_gpus() -> None:
    """Hide every GPU from TensorFlow where another backend trains; warn where TensorFlow's
    runtime had already started with them (it may hold memory the training needs)."""
    seen, failure = backend.distribution().keep_input_pipelines_off_the_gpus(tf)
    if failure:
        warnings.warn(
            f"TensorFlow's runtime started with {seen} GPU(s) before keras-privacy's input "
            f"pipelines were imported ({failure}): it may hold GPU memory that the "
            f"{keras.backend.backend()} backend needs. Import keras_privacy's data modules "
            "before running any TensorFlow operation, or call "
            "tf.config.set_visible_devices([], 'GPU') first.",
            stacklevel=2,
        )


keep_tensorflow_off_the_gpus()
