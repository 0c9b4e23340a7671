"""keras-privacy: privacy-preserving action recognition in Keras 3 (TensorFlow and JAX)."""

__version__ = "0.1.0"
