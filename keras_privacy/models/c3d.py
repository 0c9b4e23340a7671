"""C3D (Tran et al., 2015), the layout of the common PyTorch port (c3d-pytorch) used as a
target action model in SPAct's supplementary material."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

from keras_privacy.models.layers import max_pooling_3d


def c3d(
    num_classes: int = 487,
    widths: Sequence[int] = (64, 128, 256, 512, 512),
    fc_width: int = 4096,
    dropout: float = 0.5,
    flatten: bool = True,
    input_shape: tuple | None = None,
    name: str = "c3d",
) -> keras.Model:
    """C3D on clips (B, T, H, W, 3) in [0, 1]: 3x3x3 convolutions (with bias, padding 1) and
    ReLU, 1 - 1 - 2 - 2 - 2 per stage, each stage ending in a max-pool ((1, 2, 2) after the
    first, (2, 2, 2) after the others, the last padded (0, 1, 1)); then fc6, fc7 (Dense
    `fc_width`, ReLU, dropout) and the `num_classes` head.

    With `flatten` (C3D's own) the pooled volume is flattened into fc6: 8192 inputs at the
    default (16, 112, 112) clip, 79,991,015 parameters with Sports-1M's 487 classes; it needs a
    fixed `input_shape` (default (16, 112, 112, 3)). Without, fc6 takes the global average of
    the pooled volume, and any clip of at least 16 frames and 16 x 16 pixels fits.
    """
    if input_shape is None:
        input_shape = (16, 112, 112, 3) if flatten else (None, None, None, 3)
    if flatten and any(dim is None for dim in input_shape):
        raise ValueError(f"c3d with flatten needs a fixed clip shape, got {input_shape}")
    inputs = keras.Input(input_shape, name="clips")
    x = inputs
    convs = (1, 1, 2, 2, 2)
    for stage, (width, count) in enumerate(zip(widths, convs)):
        for conv in range(count):
            suffix = "ab"[conv] if count > 1 else ""
            x = layers.Conv3D(
                width, 3, padding="same", activation="relu", name=f"conv{stage + 1}{suffix}"
            )(x)
        if stage == len(widths) - 1:
            # Zeros pad like PyTorch's -inf here, as the input is post-ReLU (>= 0).
            x = layers.ZeroPadding3D((0, 1, 1), name=f"pool{stage + 1}_pad")(x)
        pool = (1, 2, 2) if stage == 0 else (2, 2, 2)
        x = max_pooling_3d(pool, name=f"pool{stage + 1}")(x)
    if flatten:
        x = layers.Flatten(name="flatten")(x)
    else:
        x = layers.GlobalAveragePooling3D(name="pool")(x)
    for fc in ("fc6", "fc7"):
        x = layers.Dense(fc_width, activation="relu", name=fc)(x)
        if dropout:
            x = layers.Dropout(dropout, name=f"{fc}_dropout")(x)
    outputs = layers.Dense(num_classes, dtype="float32", name="fc8")(x)
    return keras.Model(inputs, outputs, name=name)
