"""TF-slim's ResNet-V1 (`nets/resnet_v1.py`), the ResNet-V1-50 / -101 of VITA's code: its
budget ensemble and the meta paper's test attackers.

Slim's layout differs from torchvision's (`resnet.py`, SPAct's f_B) in where a stage strides:
in its last unit, not its first, so a stage runs at the higher resolution until its end. The
strided 3x3 convolution pads as slim's `conv2d_same` (the same on both sides), the stem's
3x3/2 max-pool pads as TensorFlow's SAME, and a unit that keeps its width takes a strided
subsample of its input as the shortcut (a 1x1 max-pool), where a unit that widens it takes a
1x1 convolution. BatchNorm as slim's `resnet_arg_scope`: momentum 0.997, epsilon 1e-5.
"""

from __future__ import annotations

import keras
from keras import layers

from keras_privacy.models.layers import max_pooling_2d, slim_variance_scaling

BN = {"momentum": 0.997, "epsilon": 1e-5}
UNITS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
"""Units of the four blocks, by depth."""


def conv2d_same(
    x: keras.KerasTensor, filters: int, kernel: int, stride: int, name: str
) -> keras.KerasTensor:
    """Slim's `conv2d_same`: SAME padding at stride 1; at a larger stride, kernel - 1 zeros
    split evenly (the extra one at the end), then a VALID convolution, so that the output is
    the stride-1 output subsampled whatever the input's parity. No bias (BatchNorm follows);
    started as slim's `resnet_arg_scope` starts it (`slim_variance_scaling`)."""
    start = {"use_bias": False, "kernel_initializer": slim_variance_scaling(), "name": name}
    if stride == 1:
        return layers.Conv2D(filters, kernel, padding="same", **start)(x)
    begin = (kernel - 1) // 2
    x = layers.ZeroPadding2D((begin, kernel - 1 - begin), name=f"{name}_pad")(x)
    return layers.Conv2D(filters, kernel, strides=stride, **start)(x)


def conv_bn(
    x: keras.KerasTensor, filters: int, kernel: int, stride: int, name: str, relu: bool = True
) -> keras.KerasTensor:
    """`conv2d_same`, BatchNorm, optional ReLU."""
    x = conv2d_same(x, filters, kernel, stride, f"{name}_conv")
    x = layers.BatchNormalization(**BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def bottleneck_unit(x: keras.KerasTensor, depth: int, stride: int, name: str) -> keras.KerasTensor:
    """1x1 - 3x3 (strided) - 1x1 to `depth` channels, added to the shortcut, then ReLU."""
    if x.shape[-1] == depth:
        shortcut = x if stride == 1 else max_pooling_2d(1, stride, name=f"{name}_skip")(x)
    else:
        shortcut = conv_bn(x, depth, 1, stride, f"{name}_shortcut", relu=False)
    residual = conv_bn(x, depth // 4, 1, 1, f"{name}_conv1")
    residual = conv_bn(residual, depth // 4, 3, stride, f"{name}_conv2")
    residual = conv_bn(residual, depth, 1, 1, f"{name}_conv3", relu=False)
    added = layers.Add(name=f"{name}_add")([shortcut, residual])
    return layers.ReLU(name=f"{name}_out")(added)


def resnet_v1(
    depth: int = 50,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "resnet_v1",
) -> keras.Model:
    """Slim's ResNet-V1 of `depth` 50 or 101 on images (B, H, W, 3) in [0, 1] -> 2048 pooled
    features, or logits with `num_classes`: a 7x7/2 stem, a 3x3/2 max-pool, four blocks of
    bottleneck units whose last unit strides 2 (the fourth block's does not), global average
    pooling. Started as slim starts it: He normal on fan_in (truncated), biases 0."""
    if depth not in UNITS:
        raise ValueError(f"ResNet-V1 depth {depth} is not one of 50, 101")
    inputs = keras.Input(input_shape, name="images")
    x = conv_bn(inputs, 64, 7, 2, "conv1")
    x = max_pooling_2d(3, 2, padding="same", name="pool1")(x)
    strides = (2, 2, 2, 1)
    widths = (64, 128, 256, 512)
    for block, (count, width, stride) in enumerate(zip(UNITS[depth], widths, strides), 1):
        for unit in range(1, count + 1):
            unit_stride = stride if unit == count else 1
            x = bottleneck_unit(x, 4 * width, unit_stride, f"block{block}_unit{unit}")
    x = layers.GlobalAveragePooling2D(name="pool5")(x)
    if num_classes is not None:
        x = layers.Dense(
            num_classes, kernel_initializer=slim_variance_scaling(), dtype="float32", name="fc"
        )(x)
    return keras.Model(inputs, x, name=name)
