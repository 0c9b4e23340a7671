"""What differs between the TensorFlow and JAX backends, chosen once: the one backend-aware
place of the package.

Each part is a pair of modules offering the same functions, `jax_<part>` and
`tensorflow_<part>`:

* `step`: a trainer's step (`training_step`) and the backend's form of the operations a loss
  calls (`value_and_gradient`, `hessian_vector_product`, `gather_replicas`);
* `distribution`: data-parallel and multi-process training (`keras_privacy.distribute`);
* `export`: the anonymizer's SavedModel endpoint and ONNX file (`keras_privacy.export`).

The module of the running backend is imported on first use, as Keras picks its JAX or
TensorFlow trainer, so the JAX path never imports TensorFlow.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import keras

from keras_privacy.types import Tensor

if TYPE_CHECKING:
    from keras_privacy.backend.jax_step import JaxStep
    from keras_privacy.backend.tensorflow_step import TensorFlowStep
    from keras_privacy.methods.trainer import StatelessTrainer

BACKENDS = ("jax", "tensorflow")
"""The Keras backends keras-privacy runs on."""


@functools.cache
def _chosen(part: str) -> ModuleType:
    """`keras_privacy.backend.<backend>_<part>` of the running Keras backend."""
    name = keras.backend.backend()
    if name not in BACKENDS:
        raise NotImplementedError(
            f"keras-privacy runs on the tensorflow and jax backends, not {name}"
        )
    return importlib.import_module(f"keras_privacy.backend.{name}_{part}")


def distribution() -> ModuleType:
    """`jax_distribution` or `tensorflow_distribution`, the running backend's."""
    return _chosen("distribution")


def export() -> ModuleType:
    """`jax_export` or `tensorflow_export`, the running backend's."""
    return _chosen("export")


def training_step(trainer: StatelessTrainer) -> JaxStep | TensorFlowStep:
    """The step of the running backend for `trainer` (a `StatelessTrainer`): its
    `train_step`, `skips_updates` and `compile_kwargs`."""
    return _chosen("step").training_step(trainer)


def weights_kept_on_failure(model: keras.Model) -> contextlib.AbstractContextManager:
    """A context in which a failing `fit`, `evaluate` or `predict` of `model` leaves its
    variables' values as they were before it, rather than empty (JAX's loops empty them while
    they run)."""
    return _chosen("step").weights_kept_on_failure(model)


def value_and_gradient(
    fn: Callable[[list], Any], params: list, has_aux: bool = False
) -> tuple[Any, list]:
    """`fn(params)` and its gradient with respect to `params`, differentiable again.

    Called inside an update's loss function, this gives second-order (nested) gradients: on
    JAX a `jax.value_and_grad` inside the outer one, on TensorFlow a tape inside the outer tape.
    With `has_aux`, `fn` returns `(value, aux)` and so does the first result.
    """
    return _chosen("step").value_and_gradient(fn, params, has_aux)


def hessian_vector_product(fn: Callable[[list], Any], params: list, vector: list) -> list:
    """The Hessian of the scalar `fn` at `params` times `vector` (a list shaped as `params`),
    each backend's way that needs the least memory (`benchmarks/hessian_vector.py`): on JAX
    forward over reverse (`jax.jvp` of `jax.grad`), on TensorFlow reverse over reverse (the
    gradient of the gradient's inner product with `vector`). The pass runs after `vector` is
    computed, so it never overlaps the passes that made `vector`, nor is it merged with an
    earlier pass of `fn` at the same `params`. Used by the meta-generalisation update.
    """
    return _chosen("step").hessian_vector_product(fn, params, vector)


def checkpoint(fn: Callable) -> Callable:
    """`fn` (a pure function of tensors) as a unit the derivative passes recompute instead of
    storing its intermediates, where the backend can (a custom VJP on JAX; on TensorFlow `fn`
    itself). Chained over a model's blocks, a gradient or Hessian-vector pass holds one block's
    activations at a time (`models.segments`)."""
    return _chosen("step").checkpoint(fn)


def recomputes_checkpoints() -> bool:
    """Whether `checkpoint` recomputes (JAX) rather than stores (TensorFlow): the meta step's
    second-order pass needs far less memory where it does."""
    return _chosen("step").recomputes_checkpoints()


def max_pool_dtype() -> str | None:
    """The dtype max pools compute in: float32 on TensorFlow, whose XLA bridge differentiates a
    max pool twice in float32 only; None (the dtype policy's) on JAX. A max and the routing of
    its gradient are exact in any float, so either gives the same values."""
    return _chosen("step").max_pool_dtype()


def replica_position() -> tuple[Tensor | int, int]:
    """(this replica's index, the number of replicas) inside a TensorFlow data-parallel step;
    (0, 1) elsewhere (one device; JAX, whose step is already global)."""
    return _chosen("step").replica_position()


def gather_replicas(x: Tensor) -> Tensor:
    """`x` concatenated (axis 0) over the replicas of a TensorFlow data-parallel step.

    A loss over the whole batch (NT-Xent, whose negatives are every other example) computed on
    the gathered rows is the global one on every replica; the gradient flows back to each
    replica's own rows. Elsewhere (one device; JAX, whose step is already global) `x` itself.
    """
    return _chosen("step").gather_replicas(x)
