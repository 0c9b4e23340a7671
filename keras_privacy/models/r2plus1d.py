"""R(2+1)D-18: torchvision's `video.r2plus1d_18` layout in Keras.

Every 3x3x3 convolution of R3D-18 is factorised into a (1, 3, 3) spatial convolution to
`mid` channels, BatchNorm, ReLU and a (3, 1, 1) temporal convolution, where
mid = (in * out * 27) // (in * 9 + 3 * out) keeps the parameter count of the 3x3x3 one
(Tran et al., 2018). Layer names follow `r3d.r3d_18` with `_spatial` / `_temporal` parts, so
`keras_privacy.convert` maps torchvision's state dict onto them one to one.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

from keras_privacy.models.layers import torch_padded_conv
from keras_privacy.models.r3d import BN, classification_head
from keras_privacy.models.resnet import residual_blocks


def mid_width(in_width: int, out_width: int) -> int:
    """torchvision's intermediate width of a (2+1)D convolution from `in_width` to `out_width`."""
    return (in_width * out_width * 27) // (in_width * 9 + 3 * out_width)


def conv2plus1d(
    x: keras.KerasTensor, filters: int, mid: int, stride: int, name: str
) -> keras.KerasTensor:
    """torchvision's Conv2Plus1D: (1, 3, 3) conv stride (1, s, s), BN, ReLU, (3, 1, 1) conv
    stride (s, 1, 1); padding (0, 1, 1) then (1, 0, 0), PyTorch's (`torch_padded_conv`); no bias."""
    x = torch_padded_conv(x, mid, (1, 3, 3), (1, stride, stride), (0, 1, 1), name=f"{name}_spatial")
    x = layers.BatchNormalization(**BN, name=f"{name}_spatial_bn")(x)
    x = layers.ReLU(name=f"{name}_spatial_relu")(x)
    return torch_padded_conv(
        x, filters, (3, 1, 1), (stride, 1, 1), (1, 0, 0), name=f"{name}_temporal"
    )


def basic_block(x: keras.KerasTensor, filters: int, stride: int, name: str) -> keras.KerasTensor:
    """torchvision's BasicBlock with Conv2Plus1D: both convolutions use the mid width computed
    from the block's input and output widths."""
    mid = mid_width(x.shape[-1], filters)
    shortcut = x
    if stride > 1 or x.shape[-1] != filters:
        shortcut = torch_padded_conv(x, filters, (1, 1, 1), stride, name=f"{name}_downsample")
        shortcut = layers.BatchNormalization(**BN, name=f"{name}_downsample_bn")(shortcut)
    x = conv2plus1d(x, filters, mid, stride, name=f"{name}_1")
    x = layers.BatchNormalization(**BN, name=f"{name}_1_bn")(x)
    x = layers.ReLU(name=f"{name}_1_relu")(x)
    x = conv2plus1d(x, filters, mid, 1, name=f"{name}_2")
    x = layers.BatchNormalization(**BN, name=f"{name}_2_bn")(x)
    x = layers.Add(name=f"{name}_add")([shortcut, x])
    return layers.ReLU(name=f"{name}_out")(x)


def r2plus1d_18(
    num_classes: int = 400,
    widths: Sequence[int] = (64, 128, 256, 512),
    blocks: Sequence[int] = (2, 2, 2, 2),
    stem_width: int = 64,
    stem_mid_width: int = 45,
    include_top: bool = True,
    dropout: float = 0.0,
    input_shape: tuple = (None, None, None, 3),
    name: str = "r2plus1d_18",
) -> keras.Model:
    """R(2+1)D-18 on clips (B, T, H, W, 3) in [0, 1], torchvision's exact layout: stem
    (1, 7, 7) conv stride (1, 2, 2) to 45 channels, BN, ReLU, (3, 1, 1) conv to 64, BN, ReLU;
    four stages of (2+1)D BasicBlocks (first stride 1, then 2 in time and space; 1x1x1
    convolution + BN shortcut where the shape changes); global average pooling; a Dense head
    (pooled features when `include_top=False`). At the defaults it has torchvision's
    31,505,325 parameters.
    """
    inputs = keras.Input(input_shape, name="clips")
    x = torch_padded_conv(
        inputs, stem_mid_width, (1, 7, 7), (1, 2, 2), (0, 3, 3), name="stem_spatial"
    )
    x = layers.BatchNormalization(**BN, name="stem_spatial_bn")(x)
    x = layers.ReLU(name="stem_spatial_relu")(x)
    x = torch_padded_conv(x, stem_width, (3, 1, 1), padding=(1, 0, 0), name="stem_temporal")
    x = layers.BatchNormalization(**BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for block in residual_blocks(widths, blocks):
        x = basic_block(x, block.width, block.stride, name=block.name)
    x = classification_head(x, num_classes, include_top, dropout)
    return keras.Model(inputs, x, name=name)
