"""The data layer: readers of the official dataset formats, video decoding, the TFRecord cache,
per-clip augmentation, the `tf.data` pipelines and the built-in synthetic benchmark."""
