"""What differs between the TensorFlow and JAX backends in training, chosen once.

`jax_step` and `tensorflow_step` each hold a trainer's step (`JaxStep`, `TensorFlowStep`) and
the backend's form of the operations a loss calls (`value_and_gradient`, `gather_replicas`).
The module of the running backend is imported on first use, as Keras picks its JAX or
TensorFlow trainer, so the JAX path never imports TensorFlow.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

import keras


@functools.cache
def _chosen() -> tuple[ModuleType, type]:
    """The module of the running Keras backend and its trainer step class."""
    name = keras.backend.backend()
    if name == "jax":
        from keras_privacy.backend import jax_step

        return jax_step, jax_step.JaxStep
    if name == "tensorflow":
        from keras_privacy.backend import tensorflow_step

        return tensorflow_step, tensorflow_step.TensorFlowStep
    raise NotImplementedError(
        f"keras-privacy trains on the tensorflow and jax backends, not {name}"
    )


def training_step(trainer):
    """The step of the running backend for `trainer` (a `StatelessTrainer`): its
    `train_step`, `skips_updates` and `compile_kwargs`."""
    _, step = _chosen()
    return step(trainer)


def value_and_gradient(fn: Callable[[list], Any], params: list) -> tuple[Any, list]:
    """`fn(params)` and its gradient with respect to `params`, differentiable again.

    Called inside an update's loss function, this gives second-order (nested) gradients: on
    JAX a `jax.value_and_grad` inside the outer one, on TensorFlow a tape inside the outer tape.
    Used by the meta-generalisation update.
    """
    return _chosen()[0].value_and_gradient(fn, params)


def gather_replicas(x):
    """`x` concatenated (axis 0) over the replicas of a TensorFlow data-parallel step.

    A loss over the whole batch (NT-Xent, whose negatives are every other example) computed on
    the gathered rows is the global one on every replica; the gradient flows back to each
    replica's own rows. Elsewhere (one device; JAX, whose step is already global) `x` itself.
    """
    return _chosen()[0].gather_replicas(x)
