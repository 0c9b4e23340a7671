"""3D ResNets: R3D-18 and MC3-18 (torchvision's `video.r3d_18` / `video.mc3_18` layouts),
SPAct's variant of R3D-18, and R3D-50 (the bottleneck 3D ResNet-50 of Hara et al.'s
3D-ResNets-PyTorch)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
from keras import layers

from keras_privacy.models.layers import (
    SpatialSubsample,
    max_pooling_3d,
    redraw_kernels,
    torch_default_weights,
    torch_linear,
    torch_padded_conv,
)
from keras_privacy.models.resnet import residual_blocks

BN = {"momentum": 0.9, "epsilon": 1e-5}  # PyTorch's BatchNorm defaults


def conv3x3x3(
    x: keras.KerasTensor,
    filters: int,
    strides: Sequence[int] = (1, 1, 1),
    dilation: Sequence[int] = (1, 1, 1),
    name: str = "",
    temporal: bool = True,
) -> keras.KerasTensor:
    """3x3x3 convolution padded like PyTorch's Conv3DSimple (symmetric padding = dilation),
    no bias; with `temporal=False` torchvision's Conv3DNoTemporal, 1x3x3 padded (0, 1, 1).

    Keras refuses a convolution both strided and dilated, so one strided in space and dilated
    in time (SPAct's) runs at stride 1 and is then subsampled in space: the same outputs, at
    the cost of computing the skipped positions.
    """
    if not temporal:
        return torch_padded_conv(x, filters, (1, 3, 3), strides, (0, 1, 1), name=name)
    if max(dilation) > 1 and max(strides) > 1:
        if strides[0] > 1 or strides[1] != strides[2]:
            raise ValueError(f"dilation {dilation} needs strides (1, s, s), got {strides}")
        x = torch_padded_conv(x, filters, (3, 3, 3), 1, dilation, dilation, name=name)
        return SpatialSubsample(strides[1], name=f"{name}_subsample")(x)
    return torch_padded_conv(x, filters, (3, 3, 3), strides, dilation, dilation, name=name)


def basic_block(
    x: keras.KerasTensor,
    filters: int,
    strides: Sequence[int],
    first_dilation: Sequence[int],
    name: str,
    temporal: bool = True,
) -> keras.KerasTensor:
    """The BasicBlock of torchvision's video ResNet: conv-BN-ReLU-conv-BN plus shortcut.

    `first_dilation` dilates the first convolution only (SPAct's change to layer4);
    `temporal=False` makes both convolutions 1x3x3 (MC3's later stages).
    """
    shortcut = x
    if max(strides) > 1 or x.shape[-1] != filters:
        shortcut = torch_padded_conv(x, filters, (1, 1, 1), strides, name=f"{name}_downsample")
        shortcut = layers.BatchNormalization(**BN, name=f"{name}_downsample_bn")(shortcut)
    x = conv3x3x3(x, filters, strides, first_dilation, name=f"{name}_1", temporal=temporal)
    x = layers.BatchNormalization(**BN, name=f"{name}_1_bn")(x)
    x = layers.ReLU(name=f"{name}_1_relu")(x)
    x = conv3x3x3(x, filters, name=f"{name}_2", temporal=temporal)
    x = layers.BatchNormalization(**BN, name=f"{name}_2_bn")(x)
    x = layers.Add(name=f"{name}_add")([shortcut, x])
    return layers.ReLU(name=f"{name}_out")(x)


def r3d_18(
    num_classes: int = 400,
    widths: Sequence[int] = (64, 128, 256, 512),
    blocks: Sequence[int] = (2, 2, 2, 2),
    stem_width: int = 64,
    last_stage_temporal_stride: int = 2,
    last_stage_temporal_dilation: int = 1,
    temporal_stages: int = 4,
    include_top: bool = True,
    dropout: float = 0.0,
    input_shape: tuple = (None, None, None, 3),
    name: str = "r3d_18",
) -> keras.Model:
    """An 18-layer 3D ResNet on clips (B, T, H, W, 3) in [0, 1] with torchvision's exact
    `video.r3d_18` layout: stem Conv3D (3, 7, 7) stride (1, 2, 2) padding (1, 3, 3), four
    stages of BasicBlocks (first stride 1, then 2 in time and space; 1x1x1 convolution + BN
    shortcut where the shape changes), global average pooling and a Dense head (pooled
    features when `include_top=False`). Padding is PyTorch's (`torch_padded_conv`), so every
    output position matches its. At the defaults it has torchvision's 33,371,472 parameters.

    `last_stage_temporal_stride` and `last_stage_temporal_dilation` set the temporal stride of
    the last stage and the temporal dilation of its first convolution: (1, 2) is SPAct's f_T
    (see `r3d_18_spact`). Neither changes a weight shape. Stages after the first
    `temporal_stages` convolve in space only (1x3x3, stride (1, 2, 2), as MC3: `mc3_18`).
    """
    inputs = keras.Input(input_shape, name="clips")
    x = torch_padded_conv(inputs, stem_width, (3, 7, 7), (1, 2, 2), (1, 3, 3), name="stem")
    x = layers.BatchNormalization(**BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    for block in residual_blocks(widths, blocks):
        last = block.stage == len(widths) - 1
        temporal = block.stage < temporal_stages
        strides, dilation = (1, 1, 1), (1, 1, 1)
        if block.stride > 1:
            time_stride = (last_stage_temporal_stride if last else 2) if temporal else 1
            strides = (time_stride, block.stride, block.stride)
        if block.index == 0 and last:
            dilation = (last_stage_temporal_dilation, 1, 1)
        x = basic_block(x, block.width, strides, dilation, name=block.name, temporal=temporal)
    x = classification_head(x, num_classes, include_top, dropout)
    return keras.Model(inputs, x, name=name)


def r3d_18_spact(num_classes: int = 400, name: str = "r3d_18_spact", **kwargs: Any) -> keras.Model:
    """SPAct's f_T: R3D-18 whose last stage keeps the temporal resolution.

    As in SPAct's official code, layer4's first convolution has stride (1, 2, 2), dilation
    (2, 1, 1) and padding (2, 1, 1), and its shortcut stride (1, 2, 2); every other layer is
    torchvision's. A 16-frame clip reaches layer4 with 4 time steps instead of 2. Those two
    convolutions, which SPAct's code replaces after torchvision has started the model
    (model.py:106-111), start as a new `nn.Conv3d` does (`torch_default_weights`).
    """
    model = r3d_18(
        num_classes,
        last_stage_temporal_stride=1,
        last_stage_temporal_dilation=2,
        name=name,
        **kwargs,
    )
    redraw_kernels(model, torch_default_weights, ["layer4_0_1_conv", "layer4_0_downsample_conv"])
    return model


def mc3_18(num_classes: int = 400, name: str = "mc3_18", **kwargs: Any) -> keras.Model:
    """torchvision's `video.mc3_18` (Tran et al.'s mixed convolutions): R3D-18 whose first stage
    convolves 3x3x3 and whose later stages convolve 1x3x3 only, their shortcuts striding
    (1, 2, 2). At the defaults it has torchvision's 11,695,440 parameters."""
    return r3d_18(num_classes, temporal_stages=1, name=name, **kwargs)


def conv_bn_3d(
    x: keras.KerasTensor,
    filters: int,
    kernel: int | Sequence[int],
    strides: int | Sequence[int],
    name: str,
    relu: bool = True,
) -> keras.KerasTensor:
    """Conv3D padded like PyTorch (kernel // 2 on each side), no bias, BatchNorm, optional ReLU."""
    kernel = (kernel,) * 3 if isinstance(kernel, int) else tuple(kernel)
    x = torch_padded_conv(x, filters, kernel, strides, tuple(k // 2 for k in kernel), name=name)
    x = layers.BatchNormalization(**BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def bottleneck_block_3d(
    x: keras.KerasTensor,
    width: int,
    strides: int | Sequence[int],
    name: str,
    first_kernel: int | Sequence[int] = 1,
    second_kernel: int | Sequence[int] = 3,
) -> keras.KerasTensor:
    """1x1x1 - 3x3x3 (strided) - 1x1x1 x4 with a 1x1x1 strided convolution + BN shortcut where
    the shape changes (shortcut type B). I3D's bottleneck is the same with a (t, 1, 1)
    `first_kernel`, a (1, 3, 3) `second_kernel` and strides in space only."""
    strides = (strides,) * 3 if isinstance(strides, int) else tuple(strides)
    shortcut = x
    if max(strides) > 1 or x.shape[-1] != 4 * width:
        shortcut = conv_bn_3d(x, 4 * width, 1, strides, f"{name}_downsample", relu=False)
    x = conv_bn_3d(x, width, first_kernel, 1, f"{name}_1")
    x = conv_bn_3d(x, width, second_kernel, strides, f"{name}_2")
    x = conv_bn_3d(x, 4 * width, 1, 1, f"{name}_3", relu=False)
    return layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([shortcut, x]))


def classification_head(
    x: keras.KerasTensor, num_classes: int, include_top: bool, dropout: float
) -> keras.KerasTensor:
    """Global average pooling, then (with `include_top`) dropout and a float32 Dense head, as
    the video ResNets end; the pooled features alone without it."""
    x = layers.GlobalAveragePooling3D(name="pool")(x)
    if include_top:
        if dropout:
            x = layers.Dropout(dropout, name="dropout")(x)
        x = torch_linear(x, num_classes, name="fc", dtype="float32")
    return x


def r3d_50(
    num_classes: int = 400,
    widths: Sequence[int] = (64, 128, 256, 512),
    blocks: Sequence[int] = (3, 4, 6, 3),
    stem_width: int = 64,
    include_top: bool = True,
    dropout: float = 0.0,
    input_shape: tuple = (None, None, None, 3),
    name: str = "r3d_50",
) -> keras.Model:
    """R3D-50 on clips (B, T, H, W, 3) in [0, 1], in the layout of Hara et al.'s
    3D-ResNets-PyTorch `resnet.generate_model(50)` (the usual Kinetics R3D-50; torchvision has
    none): stem Conv3D (7, 7, 7) stride (1, 2, 2) padding (3, 3, 3), BN, ReLU, 3x3x3 max-pool
    stride 2 (time included) padding 1; four stages of bottleneck blocks (3, 4, 6, 3), stride
    2 from the second stage on (on the 3x3x3 convolution, in time and space); global average
    pooling and a Dense head (pooled 2048 features when `include_top=False`). Padding is
    PyTorch's. At the defaults it has 47,018,576 parameters.
    """
    inputs = keras.Input(input_shape, name="clips")
    x = torch_padded_conv(inputs, stem_width, (7, 7, 7), (1, 2, 2), 3, name="stem")
    x = layers.BatchNormalization(**BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    # Zeros pad like PyTorch's -inf here, as the input is post-ReLU (>= 0).
    x = layers.ZeroPadding3D(1, name="stem_pool_pad")(x)
    x = max_pooling_3d(3, strides=2, name="stem_pool")(x)
    for block in residual_blocks(widths, blocks):
        x = bottleneck_block_3d(x, block.width, block.stride, name=block.name)
    x = classification_head(x, num_classes, include_top, dropout)
    return keras.Model(inputs, x, name=name)
