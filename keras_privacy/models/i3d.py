"""I3D-ResNet-50: the inflated 3D ResNet-50 of the non-local networks' Caffe2 I3D baseline, in
the PyTorch layout of Tushar-N/pytorch-resnet3d's `I3Res50`, which TeD-SPAD and the penalty
paper use as f_T (`largei3d`: TeD-SPAD aux_code/models/large_i3d.py:130-171, the same file in
the penalty paper's repository) with the Kinetics-400 weights `i3d_r50_kinetics.pth`."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

from keras_privacy.models.layers import max_pooling_3d, torch_padded_conv
from keras_privacy.models.r3d import BN, bottleneck_block_3d, classification_head
from keras_privacy.models.resnet import residual_blocks

TEMPORAL_KERNELS = ((3, 3, 3), (3, 1, 3, 1), (3, 1, 3, 1, 3, 1), (1, 3, 1))
"""The temporal kernel of each bottleneck's first convolution, per stage and block:
`I3Res50`'s `temp_conv` lists (large_i3d.py:142-145), 1 + 2 * temp_conv."""


def i3d_bottleneck(
    x: keras.KerasTensor, width: int, spatial_stride: int, temporal_kernel: int, name: str
) -> keras.KerasTensor:
    """`I3Res50`'s bottleneck (large_i3d.py:47-51): a (t, 1, 1) convolution (t = 3 inflates
    it in time, t = 1 leaves it 2-D), a (1, 3, 3) convolution strided in space, a 1x1x1
    convolution to 4 * width, each with BN; a 1x1x1 strided convolution + BN shortcut where the
    shape changes. No block strides in time."""
    strides = (1, spatial_stride, spatial_stride)
    return bottleneck_block_3d(x, width, strides, name, (temporal_kernel, 1, 1), (1, 3, 3))


def i3d_stem(x: keras.KerasTensor, width: int) -> keras.KerasTensor:
    """Conv3D (5, 7, 7) stride 2 padding (2, 3, 3), BN, ReLU, then a (2, 3, 3) max-pool of
    stride 2 without padding (large_i3d.py:135-138): a 16 x 224 x 224 clip leaves it as
    4 x 55 x 55."""
    x = torch_padded_conv(x, width, (5, 7, 7), 2, (2, 3, 3), name="stem")
    x = layers.BatchNormalization(**BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    return max_pooling_3d((2, 3, 3), strides=2, name="stem_pool")(x)


def i3d_r50(
    num_classes: int = 400,
    widths: Sequence[int] = (64, 128, 256, 512),
    blocks: Sequence[int] = (3, 4, 6, 3),
    stem_width: int = 64,
    include_top: bool = True,
    dropout: float = 0.5,
    input_shape: tuple = (None, None, None, 3),
    name: str = "i3d_r50",
) -> keras.Model:
    """I3D-ResNet-50 on clips (B, T, H, W, 3) in [0, 1] (T >= 7), with `I3Res50`'s layout
    (no non-local blocks): the stem above; four stages of bottlenecks (3, 4, 6, 3) whose first
    convolutions have the temporal kernels of `TEMPORAL_KERNELS`, stride 2 in space from the
    second stage on; a (2, 1, 1) max-pool of stride (2, 1, 1) after the first stage; global
    average pooling, dropout 0.5 and a Dense head (pooled 2048 features when
    `include_top=False`). A 16-frame clip ends with 2 time steps, a 224-px one with 7 x 7.
    At the defaults it has 28,043,472 parameters, as `I3Res50(num_classes=400)`.

    `blocks` may be shorter per stage than (3, 4, 6, 3) (for small test models); each block
    takes its temporal kernel from `TEMPORAL_KERNELS`.
    """
    inputs = keras.Input(input_shape, name="clips")
    x = i3d_stem(inputs, stem_width)
    for block in residual_blocks(widths, blocks):
        kernel = TEMPORAL_KERNELS[block.stage][block.index]
        x = i3d_bottleneck(x, block.width, block.stride, kernel, name=block.name)
        if block.stage == 0 and block.index == blocks[0] - 1:
            x = max_pooling_3d((2, 1, 1), strides=(2, 1, 1), name="layer1_pool")(x)
    x = classification_head(x, num_classes, include_top, dropout)
    return keras.Model(inputs, x, name=name)
