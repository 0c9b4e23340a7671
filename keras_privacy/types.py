"""Type aliases of the library's hints."""

from typing import Any

Tensor = Any
"""A backend tensor (`tf.Tensor`, `jax.Array`) or NumPy array: what `keras.ops` takes and
returns. Named for readers, as Flax names `Array = Any`."""
