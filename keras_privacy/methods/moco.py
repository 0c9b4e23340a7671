"""MoCo's state for SPAct's momentum-contrast adversary: a momentum (key) encoder and a queue.

Both are non-trainable variables of one model, `MomentumQueue`, which SPAct puts in a group of
its own ("momentum") that no optimizer updates: the adversary update returns their new values as
that group's non-trainable values, so `fit` carries them on JAX and checkpoints save them.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from keras_privacy.methods.trainer import deserialize_models, serialize_models
from keras_privacy.types import Tensor


@keras.saving.register_keras_serializable(package="keras_privacy")
class MomentumQueue(keras.Model):
    """A copy of f_B updated by EMA (the key encoder) and a FIFO queue of K key embeddings.

    Args:
        encoder: f_B; the key encoder starts as a copy of its current weights (MoCo's init).
        queue_size: K, the number of negatives kept.
        momentum: m of the EMA `key <- m * key + (1 - m) * f_B` (MoCo: 0.999).
        seed: seed of the queue's initial random unit vectors.
    """

    def __init__(
        self,
        encoder: keras.Model,
        queue_size: int = 4096,
        momentum: float = 0.999,
        seed: int = 0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.queue_size = queue_size
        self.momentum = momentum
        self.seed = seed
        self.key_encoder = keras.models.clone_model(encoder)
        for key, source in zip(self.key_encoder.weights, encoder.weights, strict=True):
            key.assign(source.numpy())  # a copy: two variables sharing one JAX buffer break fit
        # Trainable False: no optimizer sees the key encoder, and its BatchNorm layers run in
        # inference mode on the moving statistics the EMA gives them.
        self.key_encoder.trainable = False
        dim = encoder.output_shape[-1]
        initial = np.random.default_rng(seed).normal(size=(queue_size, dim))
        initial /= np.linalg.norm(initial, axis=1, keepdims=True)
        self.queue = self.add_weight(
            shape=(queue_size, dim), initializer="zeros", trainable=False, name="queue"
        )
        self.queue.assign(initial.astype("float32"))
        self.pointer = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False, name="pointer"
        )
        self.built = True
        # Where each state lies in this model's non-trainable values.
        position = {id(v): i for i, v in enumerate(self.non_trainable_variables)}
        self._key_positions = [position[id(v)] for v in self.key_encoder.weights]
        self._queue_position = position[id(self.queue)]
        self._pointer_position = position[id(self.pointer)]
        # Where each of f_B's weights lies in f_B's (trainable, non-trainable) values.
        sources = {id(v): ("trainable", i) for i, v in enumerate(encoder.trainable_variables)}
        for i, v in enumerate(encoder.non_trainable_variables):
            sources[id(v)] = ("non_trainable", i)
        self._sources = [sources[id(v)] for v in encoder.weights]

    def call(self, images, training=False):
        """Key embeddings of `images` (the key encoder, in inference mode)."""
        return self.key_encoder(images, training=False)

    def keys(self, values: list, images: Tensor) -> Tensor:
        """Key embeddings of `images` from the state `values` (this model's non-trainables)."""
        key_weights = [values[i] for i in self._key_positions]
        outputs, _ = self.key_encoder.stateless_call([], key_weights, images, training=False)
        return outputs

    def queue_of(self, values: list) -> Tensor:
        """The queue (K, D) held in `values`."""
        return values[self._queue_position]

    def momentum_update(self, values: list, encoder_values: tuple[list, list]) -> list:
        """`values` with the key encoder moved towards f_B: `key <- m * key + (1 - m) * f_B`,
        over every weight of f_B (BatchNorm statistics included); f_B gets no gradient."""
        values = list(values)
        by_kind = {"trainable": encoder_values[0], "non_trainable": encoder_values[1]}
        for position, (kind, index) in zip(self._key_positions, self._sources):
            source = ops.stop_gradient(by_kind[kind][index])
            values[position] = self.momentum * values[position] + (1.0 - self.momentum) * source
        return values

    def enqueue(self, values: list, keys: Tensor) -> list:
        """`values` with `keys` (N <= K rows) written over the oldest N rows of the queue,
        from the pointer on (wrapping around), and the pointer advanced by N modulo K."""
        values = list(values)
        queue = values[self._queue_position]
        pointer = values[self._pointer_position]
        num_keys = ops.shape(keys)[0]
        rows = (pointer + ops.arange(num_keys, dtype="int32")) % self.queue_size
        written = ops.one_hot(rows, self.queue_size, dtype=queue.dtype)  # (N, K)
        kept = 1.0 - ops.max(written, axis=0)
        keys = ops.stop_gradient(ops.cast(keys, queue.dtype))
        values[self._queue_position] = queue * kept[:, None] + ops.matmul(
            ops.transpose(written), keys
        )
        values[self._pointer_position] = ops.cast((pointer + num_keys) % self.queue_size, "int32")
        return values

    def get_config(self) -> dict:
        return {
            "encoder": serialize_models(self.key_encoder),
            "queue_size": self.queue_size,
            "momentum": self.momentum,
            "seed": self.seed,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config: dict) -> MomentumQueue:
        return cls(**deserialize_models(config, "encoder"))
