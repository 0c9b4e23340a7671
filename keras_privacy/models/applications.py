"""Image models as `keras.applications` builds them (weights=None): MobileNet-V1 (padded as
TF-slim pads it) and -V2 at any width multiplier, and the pre-activation ResNet-V2-50 / -101.

The attack models of the meta-generalisation paper (after VITA) are MobileNet-V2 at several
width multipliers for training and MobileNet-V1 0.25 - 1.0, ResNet-V2-50 / -101 among those
for testing; VITA's budget ensemble holds a ResNet-V2-50 and MobileNet-V1s; SPAct evaluates
against a MobileNet-V1 (a PyTorch port, with ReLU and symmetric padding: `mobilenet_v1_*` is
slim's). As the ResNets of `resnet.py`, these take images in [0, 1] as they are (no
input scaling layer: Keras' `preprocess_input` maps to [-1, 1], which only matters for
ImageNet weights, and none are loaded here).
"""

from __future__ import annotations

import keras
from keras import layers

from keras_privacy.models.layers import (
    redraw_kernels,
    slim_mobilenet_start,
    slim_variance_scaling,
)


def _with_head(
    base: keras.Model,
    num_classes: int | None,
    name: str,
    kernel_initializer: keras.initializers.Initializer | str = "glorot_uniform",
) -> keras.Model:
    """`base`'s graph (pooled features) under `name`, with a Dense head when `num_classes`."""
    x = base.output
    if num_classes is not None:
        x = layers.Dense(
            num_classes, kernel_initializer=kernel_initializer, dtype="float32", name="fc"
        )(x)
    return keras.Model(base.input, x, name=name)


MOBILENET_V1_BLOCKS = (
    (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
    (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
)  # fmt: skip
"""MobileNet-V1's depthwise-separable blocks: (pointwise width at alpha 1, depthwise stride)."""


def _bn_relu6(x: keras.KerasTensor, name: str) -> keras.KerasTensor:
    x = layers.BatchNormalization(name=f"{name}_bn")(x)
    return layers.ReLU(6.0, name=f"{name}_relu")(x)


def mobilenet_v1(
    alpha: float = 1.0,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "mobilenet_v1",
) -> keras.Model:
    """MobileNet-V1 (Howard et al., 2017) at width multiplier `alpha` on images (B, H, W, 3)
    in [0, 1] -> pooled features (1024 * alpha), or logits with `num_classes`. H and W of at
    least 32. Keras' MobileNet (its layer names, BatchNorm and widths) with TF-slim's "SAME"
    padding for the strided convolutions, as VITA's budget models and slim's nets pad: Keras'
    pads one pixel after, which differs on odd sizes (at 112 pixels the last map is 4 x 4 in
    slim, 3 x 3 in Keras'). Started as TF-slim starts it (`slim_mobilenet_start`, biases 0), as
    VITA's budget models and the meta paper's attackers are. BatchNorm keeps Keras' momentum
    0.99 (VITA's budget MobileNets 0.999, slim's 0.9997), which moves only the statistics
    that inference uses."""
    inputs = keras.Input(input_shape)
    x = layers.Conv2D(int(32 * alpha), 3, strides=2, padding="same", use_bias=False, name="conv1")(
        inputs
    )
    x = _bn_relu6(x, "conv1")
    for block_id, (width, strides) in enumerate(MOBILENET_V1_BLOCKS, 1):
        x = layers.DepthwiseConv2D(
            3, strides=strides, padding="same", use_bias=False, name=f"conv_dw_{block_id}"
        )(x)
        x = _bn_relu6(x, f"conv_dw_{block_id}")
        x = layers.Conv2D(int(width * alpha), 1, use_bias=False, name=f"conv_pw_{block_id}")(x)
        x = _bn_relu6(x, f"conv_pw_{block_id}")
    x = layers.GlobalAveragePooling2D(name="global_average_pooling2d")(x)
    base = keras.Model(inputs, x, name=f"{name}_trunk")
    redraw_kernels(base, slim_mobilenet_start)
    return _with_head(base, num_classes, name, slim_mobilenet_start())


def mobilenet_v2(
    alpha: float = 1.0,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "mobilenet_v2",
) -> keras.Model:
    """MobileNet-V2 (Sandler et al., 2018) at width multiplier `alpha` on images (B, H, W, 3)
    in [0, 1] -> pooled features (1280, or 1280 * alpha above 1), or logits with
    `num_classes`. H and W of at least 32."""
    base = keras.applications.MobileNetV2(
        input_shape=input_shape, alpha=alpha, include_top=False, weights=None, pooling="avg"
    )
    return _with_head(base, num_classes, name)


def resnet_v2(
    depth: int = 50,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "resnet_v2",
) -> keras.Model:
    """Pre-activation ResNet-V2 (He et al., 2016) of `depth` 50 or 101 on images (B, H, W, 3)
    in [0, 1] -> 2048 pooled features, or logits with `num_classes`. Keras' ResNetV2 is
    TF-slim's resnet_v2, the one VITA's code builds: a biased 7x7/2 stem without
    normalisation, bottleneck units that normalise their input (BN-ReLU) and stride on the
    last unit of a stage, BN-ReLU after the last stage. H and W of at least 32. Started as
    slim starts it (`slim_variance_scaling`, biases 0)."""
    builders = {50: keras.applications.ResNet50V2, 101: keras.applications.ResNet101V2}
    if depth not in builders:
        raise ValueError(f"ResNet-V2 depth {depth} is not one of 50, 101")
    base = builders[depth](input_shape=input_shape, include_top=False, weights=None, pooling="avg")
    redraw_kernels(base, slim_variance_scaling)
    return _with_head(base, num_classes, name, slim_variance_scaling())
