"""Inception-V1 and -V2 as TF-slim defines them: two of the meta-generalisation paper's test
attack models, as VITA's code builds them (`nets/inception_v1.py`, `nets/inception_v2.py`).

Every convolution is followed by slim's batch normalisation (no scale, epsilon 1e-3) and a
ReLU, and pads "same" as TensorFlow does. Slim's quirks are kept: Inception-V1's "5x5" branch
is a 3x3 convolution; Inception-V2 opens with a separable 7x7 convolution (depth multiplier 8)
that has a bias and no normalisation.
Both take images in [0, 1] as they are and end in global average pooling (1024 features).

Started as slim starts them (biases 0): Inception-V1's convolutions from a normal of std 0.01
truncated at two standard deviations (`inception_v1_base`'s arg scope); Inception-V2's 1x1
reductions std 0.09, its pool branches' 1x1 and stem 1x1 std 0.1, its separable stem std 1.0,
every other convolution `inception_arg_scope`'s variance scaling (`slim_variance_scaling`), as
the logits of both (`fc`).
"""

from __future__ import annotations

from typing import NamedTuple

import keras
from keras import layers

from keras_privacy.models.layers import max_pooling_2d, slim_variance_scaling

BN = {"momentum": 0.9997, "epsilon": 1e-3, "scale": False}  # slim's inception_arg_scope


class Mixed(NamedTuple):
    """An Inception module: a 1x1 branch, a 1x1 -> 3x3 branch, a 1x1 -> 3x3 branch (two 3x3
    with `double`), and a 3x3/1 pool -> 1x1 branch, concatenated."""

    name: str
    single: int
    narrow: tuple[int, int]
    wide: tuple[int, int]
    pool: str
    pool_width: int
    double: bool


class Reduction(NamedTuple):
    """An Inception-V2 grid reduction: 1x1 -> 3x3/2, 1x1 -> 3x3 -> 3x3/2 and a 3x3/2 max-pool."""

    name: str
    narrow: tuple[int, int]
    wide: tuple[int, int]


class Pool(NamedTuple):
    """A max-pool of `size` and stride 2 between modules."""

    name: str
    size: int


def _v1(name, single, narrow, wide, pool_width):
    return Mixed(name, single, narrow, wide, "max", pool_width, double=False)


def _v2(name, single, narrow, wide, pool_width, pool="avg"):
    return Mixed(name, single, narrow, wide, pool, pool_width, double=True)


INCEPTION_V1 = (
    _v1("mixed_3b", 64, (96, 128), (16, 32), 32),
    _v1("mixed_3c", 128, (128, 192), (32, 96), 64),
    Pool("pool_4a", 3),
    _v1("mixed_4b", 192, (96, 208), (16, 48), 64),
    _v1("mixed_4c", 160, (112, 224), (24, 64), 64),
    _v1("mixed_4d", 128, (128, 256), (24, 64), 64),
    _v1("mixed_4e", 112, (144, 288), (32, 64), 64),
    _v1("mixed_4f", 256, (160, 320), (32, 128), 128),
    Pool("pool_5a", 2),
    _v1("mixed_5b", 256, (160, 320), (32, 128), 128),
    _v1("mixed_5c", 384, (192, 384), (48, 128), 128),
)
"""slim's inception_v1_base after MaxPool_3a_3x3."""

INCEPTION_V2 = (
    _v2("mixed_3b", 64, (64, 64), (64, 96), 32),
    _v2("mixed_3c", 64, (64, 96), (64, 96), 64),
    Reduction("mixed_4a", (128, 160), (64, 96)),
    _v2("mixed_4b", 224, (64, 96), (96, 128), 128),
    _v2("mixed_4c", 192, (96, 128), (96, 128), 128),
    _v2("mixed_4d", 160, (128, 160), (128, 160), 96),
    _v2("mixed_4e", 96, (128, 192), (160, 192), 96),
    Reduction("mixed_5a", (128, 192), (192, 256)),
    _v2("mixed_5b", 352, (192, 320), (160, 224), 128),
    _v2("mixed_5c", 352, (192, 320), (192, 224), 128, pool="max"),
)
"""slim's inception_v2_base after MaxPool_3a_3x3."""


class Starts(NamedTuple):
    """The standard deviations slim draws a version's convolutions from (truncated normals;
    None: `inception_arg_scope`'s variance scaling)."""

    stem: float | None
    stem_1x1: float | None
    reduce_1x1: float | None
    pool_1x1: float | None
    other: float | None


V1_STARTS = Starts(0.01, 0.01, 0.01, 0.01, 0.01)
"""inception_v1.py:57-59: one arg scope of trunc_normal(0.01) over the whole base."""
V2_STARTS = Starts(1.0, 0.1, 0.09, 0.1, None)
"""inception_v2.py: Conv2d_1a_7x7 1.0, Conv2d_2b_1x1 0.1, each branch's 1x1 reduction 0.09,
each pool branch's 1x1 0.1, the rest the arg scope's variance scaling."""


def _start(stddev: float | None) -> keras.initializers.Initializer:
    """A new initializer of a slim start (one per layer: a Keras initializer fixes its seed)."""
    if stddev is None:
        return slim_variance_scaling()
    return keras.initializers.TruncatedNormal(stddev=stddev)


def conv_bn(
    x: keras.KerasTensor,
    filters: int,
    kernel: int,
    name: str,
    strides: int = 1,
    stddev: float | None = None,
) -> keras.KerasTensor:
    """Convolution ("same", started as `_start(stddev)`), slim's batch normalisation, ReLU."""
    x = layers.Conv2D(
        filters,
        kernel,
        strides=strides,
        padding="same",
        use_bias=False,
        kernel_initializer=_start(stddev),
        name=f"{name}_conv",
    )(x)
    x = layers.BatchNormalization(**BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x)


def mixed_block(x: keras.KerasTensor, block: Mixed, starts: Starts) -> keras.KerasTensor:
    """The four branches of `block`, concatenated on channels."""
    name, other, reduce = block.name, starts.other, starts.reduce_1x1
    single = conv_bn(x, block.single, 1, f"{name}_0", stddev=other)
    narrow = conv_bn(x, block.narrow[0], 1, f"{name}_1a", stddev=reduce)
    narrow = conv_bn(narrow, block.narrow[1], 3, f"{name}_1b", stddev=other)
    wide = conv_bn(x, block.wide[0], 1, f"{name}_2a", stddev=reduce)
    wide = conv_bn(wide, block.wide[1], 3, f"{name}_2b", stddev=other)
    if block.double:
        wide = conv_bn(wide, block.wide[1], 3, f"{name}_2c", stddev=other)
    pool_layer = max_pooling_2d if block.pool == "max" else layers.AveragePooling2D
    pooled = pool_layer(3, strides=1, padding="same", name=f"{name}_3_pool")(x)
    pooled = conv_bn(pooled, block.pool_width, 1, f"{name}_3", stddev=starts.pool_1x1)
    return layers.Concatenate(name=f"{name}_concat")([single, narrow, wide, pooled])


def reduction_block(x: keras.KerasTensor, block: Reduction, starts: Starts) -> keras.KerasTensor:
    """The three stride-2 branches of `block`, concatenated on channels."""
    name, other, reduce = block.name, starts.other, starts.reduce_1x1
    narrow = conv_bn(x, block.narrow[0], 1, f"{name}_0a", stddev=reduce)
    narrow = conv_bn(narrow, block.narrow[1], 3, f"{name}_0b", strides=2, stddev=other)
    wide = conv_bn(x, block.wide[0], 1, f"{name}_1a", stddev=reduce)
    wide = conv_bn(wide, block.wide[1], 3, f"{name}_1b", stddev=other)
    wide = conv_bn(wide, block.wide[1], 3, f"{name}_1c", strides=2, stddev=other)
    pooled = max_pooling_2d(3, strides=2, padding="same", name=f"{name}_2_pool")(x)
    return layers.Concatenate(name=f"{name}_concat")([narrow, wide, pooled])


def inception_net(
    version: int = 1,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "inception",
) -> keras.Model:
    """Inception-V1 (Szegedy et al., 2015) or -V2 (Ioffe & Szegedy, 2015, as slim builds it)
    on images (B, H, W, 3) in [0, 1] -> 1024 pooled features, or logits with `num_classes`:
    a 7x7/2 stem (V2: separable), 3x3/2 max-pool, 1x1 and 3x3 convolutions, 3x3/2 max-pool,
    then the modules of `INCEPTION_V1` or `INCEPTION_V2` (output stride 32)."""
    if version not in (1, 2):
        raise ValueError(f"Inception version {version} is not one of 1, 2")
    inputs = keras.Input(input_shape, name="images")
    starts = V1_STARTS if version == 1 else V2_STARTS
    if version == 1:
        x = conv_bn(inputs, 64, 7, "stem_1a", strides=2, stddev=starts.stem)
    else:
        # slim's arg scope normalises conv2d only: this layer has a bias and no BN.
        x = layers.SeparableConv2D(
            64,
            7,
            strides=2,
            padding="same",
            depth_multiplier=8,
            depthwise_initializer=_start(starts.stem),
            pointwise_initializer=_start(starts.stem),
            name="stem_1a_conv",
        )(inputs)
        x = layers.ReLU(name="stem_1a_relu")(x)
    x = max_pooling_2d(3, strides=2, padding="same", name="stem_2a_pool")(x)
    x = conv_bn(x, 64, 1, "stem_2b", stddev=starts.stem_1x1)
    x = conv_bn(x, 192, 3, "stem_2c", stddev=starts.other)
    x = max_pooling_2d(3, strides=2, padding="same", name="stem_3a_pool")(x)
    for block in INCEPTION_V1 if version == 1 else INCEPTION_V2:
        if isinstance(block, Pool):
            x = max_pooling_2d(block.size, strides=2, padding="same", name=block.name)(x)
        elif isinstance(block, Reduction):
            x = reduction_block(x, block, starts)
        else:
            x = mixed_block(x, block, starts)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    if num_classes is not None:
        x = layers.Dense(
            num_classes, kernel_initializer=slim_variance_scaling(), dtype="float32", name="fc"
        )(x)
    return keras.Model(inputs, x, name=name)
