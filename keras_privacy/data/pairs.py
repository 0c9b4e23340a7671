"""Pairs of batches for the alternating minimax trainers (SPAct, the penalty): a `fit` step takes
two batches, the f_A half and the adversary half, laid out (B, 2, ...) so that data-parallel
training splits the batch axis as usual. `pair_batches` pairs a `tf.data.Dataset` (TensorFlow
imported only there); `pair_arrays` pairs NumPy arrays, for the JAX path without TensorFlow."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import tensorflow as tf


def pair_batches(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Group consecutive batches of a `tf.data.Dataset` in twos, for the alternating trainer.

    Every tensor (B, ...) of a batch becomes (B, 2, ...): the batch axis stays first, where
    `keras.distribution.DataParallel` and `tf.distribute.MirroredStrategy` split it.
    """
    from keras_privacy.data.tensorflow_runtime import tf

    def batch_axis_first(pair: dict) -> dict:
        return {key: tf.experimental.numpy.swapaxes(value, 0, 1) for key, value in pair.items()}

    return dataset.batch(2, drop_remainder=True).map(batch_axis_first)


def pair_arrays(first: dict, second: dict) -> dict:
    """Pair two equally long dicts of NumPy arrays for the alternating trainer, as `pair_batches`
    pairs a `tf.data.Dataset`: every array (N, ...) becomes (N, 2, ...), `first` at index 0
    (the f_A half) and `second` at index 1 (the adversary half). `fit(x=pairs, batch_size=B)`
    then takes B pairs a step, with TensorFlow absent too."""
    if first.keys() != second.keys():
        raise ValueError(
            f"pair_arrays: the two halves hold different keys: {sorted(first)} and {sorted(second)}"
        )
    for key in first:
        if len(first[key]) != len(second[key]):
            raise ValueError(
                f"pair_arrays: {key!r} has {len(first[key])} examples in the first half and "
                f"{len(second[key])} in the second"
            )
    return {key: np.stack([first[key], second[key]], axis=1) for key in first}
