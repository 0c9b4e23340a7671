"""2D ResNets (torchvision layout) for the privacy branch, with SimCLR's projection head."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import keras
from keras import layers

from keras_privacy.models.layers import L2Normalize, max_pooling_2d, torch_linear, torch_padded_conv

BN = {"momentum": 0.9, "epsilon": 1e-5}  # PyTorch's BatchNorm defaults


class ResidualBlock(NamedTuple):
    """Where a block sits in torchvision's ResNet layout, and what that layout gives it."""

    stage: int
    """The stage, from 0."""
    index: int
    """The block within its stage, from 0."""
    width: int
    stride: int
    """2 for the first block of every stage after the first, else 1."""
    name: str
    """`layer{stage + 1}_{index}`: the names PyTorch's `layer1.0` ... convert onto."""


def residual_blocks(widths: Sequence[int], blocks: Sequence[int]) -> Iterator[ResidualBlock]:
    """The blocks of the stages of a ResNet, 2-D or video, in order: stage s holds `blocks[s]`
    blocks of width `widths[s]`."""
    for stage, (width, count) in enumerate(zip(widths, blocks)):
        for index in range(count):
            stride = 2 if index == 0 and stage > 0 else 1
            yield ResidualBlock(stage, index, width, stride, f"layer{stage + 1}_{index}")


def conv_bn(
    x: keras.KerasTensor, filters: int, kernel: int, strides: int, name: str, relu: bool = True
) -> keras.KerasTensor:
    """Convolution padded like PyTorch (kernel // 2 on each side), BatchNorm, optional ReLU."""
    x = torch_padded_conv(x, filters, (kernel, kernel), strides, kernel // 2, name=name)
    x = layers.BatchNormalization(**BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def basic_block(x: keras.KerasTensor, width: int, strides: int, name: str) -> keras.KerasTensor:
    """Two 3x3 convolutions with a shortcut (ResNet-18/34)."""
    shortcut = x
    if strides > 1 or x.shape[-1] != width:
        shortcut = conv_bn(x, width, 1, strides, f"{name}_downsample", relu=False)
    x = conv_bn(x, width, 3, strides, f"{name}_1")
    x = conv_bn(x, width, 3, 1, f"{name}_2", relu=False)
    return layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([shortcut, x]))


def bottleneck_block(
    x: keras.KerasTensor, width: int, strides: int, name: str
) -> keras.KerasTensor:
    """1x1 - 3x3 (strided, torchvision v1.5) - 1x1 x4 with a shortcut (ResNet-50/101/152)."""
    shortcut = x
    if strides > 1 or x.shape[-1] != 4 * width:
        shortcut = conv_bn(x, 4 * width, 1, strides, f"{name}_downsample", relu=False)
    x = conv_bn(x, width, 1, 1, f"{name}_1")
    x = conv_bn(x, width, 3, strides, f"{name}_2")
    x = conv_bn(x, 4 * width, 1, 1, f"{name}_3", relu=False)
    return layers.ReLU(name=f"{name}_out")(layers.Add(name=f"{name}_add")([shortcut, x]))


def resnet(
    blocks: Sequence[int],
    widths: Sequence[int] = (64, 128, 256, 512),
    bottleneck: bool = True,
    stem_width: int | None = None,
    small_images: bool = False,
    num_classes: int | None = None,
    input_shape: tuple = (None, None, 3),
    name: str = "resnet",
) -> keras.Model:
    """A ResNet on images (B, H, W, 3) with torchvision's layout: 7x7/2 stem, 3x3/2 max-pool,
    stages of basic or bottleneck blocks (stride 2 from the second stage on, on the 3x3
    convolution as torchvision's v1.5), global average pooling, and a Dense head when
    `num_classes` is given (else pooled features: widths[-1], times 4 with bottlenecks).
    Padding is PyTorch's (`torch_padded_conv`), so every output position matches its. With
    `small_images` the stem is a 3x3/1 convolution without max-pool (the CIFAR ResNets of He et
    al.), so the first stage sees 32-px images at full resolution and fine textures are not
    lost in the stem.

    ResNet-18: blocks (2, 2, 2, 2), basic; -34: (3, 4, 6, 3), basic; -50: (3, 4, 6, 3),
    bottleneck; -101: (3, 4, 23, 3); -152: (3, 8, 36, 3).
    """
    inputs = keras.Input(input_shape, name="images")
    if small_images:
        x = conv_bn(inputs, stem_width or widths[0], 3, 1, "stem")
    else:
        x = conv_bn(inputs, stem_width or widths[0], 7, 2, "stem")
        # Zeros pad like PyTorch's -inf here, as the input is post-ReLU (>= 0).
        x = layers.ZeroPadding2D(1, name="stem_pool_pad")(x)
        x = max_pooling_2d(3, strides=2, name="stem_pool")(x)
    block_fn = bottleneck_block if bottleneck else basic_block
    for block in residual_blocks(widths, blocks):
        x = block_fn(x, block.width, block.stride, name=block.name)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    if num_classes is not None:
        x = torch_linear(x, num_classes, name="fc", dtype="float32")
    return keras.Model(inputs, x, name=name)


def projection_head(
    input_dim: int, hidden: int = 2048, output: int = 128, name: str = "projection_head"
) -> keras.Model:
    """SimCLR's head as SPAct uses it: Dense(hidden) - ReLU - Dense(output) - L2 normalisation.

    The output layer and the normalisation run in float32 under mixed precision.
    """
    inputs = keras.Input((input_dim,), name="features")
    x = torch_linear(inputs, hidden, name="hidden", activation="relu")
    x = torch_linear(x, output, name="output", dtype="float32")
    return keras.Model(inputs, L2Normalize(dtype="float32", name="l2_normalize")(x), name=name)


def embedding_head(
    input_dim: int, hidden: int = 512, output: int = 128, name: str = "embedding_head"
) -> keras.Model:
    """TeD-SPAD's embedding head (`mlp` in its model_loaders.py), which f_T trains beside its
    classifier for the temporal triplet term: Dense(hidden) - BatchNorm - ReLU -
    Dense(output, no bias) - BatchNorm - L2 normalisation, on f_T's pooled features (TeD-SPAD:
    I3D's 2048, 512, 128). PyTorch's BatchNorm1d settings; the last Dense, BatchNorm and the
    normalisation run in float32 under mixed precision."""
    inputs = keras.Input((input_dim,), name="features")
    x = torch_linear(inputs, hidden, name="hidden")
    x = layers.BatchNormalization(**BN, name="hidden_bn")(x)
    x = layers.ReLU(name="hidden_relu")(x)
    x = torch_linear(x, output, name="output", use_bias=False, dtype="float32")
    x = layers.BatchNormalization(**BN, dtype="float32", name="output_bn")(x)
    return keras.Model(inputs, L2Normalize(dtype="float32", name="l2_normalize")(x), name=name)


def privacy_encoder(
    backbone: keras.Model, head: keras.Model, name: str = "privacy_encoder"
) -> keras.Model:
    """f_B of SPAct: images -> L2-normalised embeddings (backbone then projection head); clips
    for a video backbone (the spatio-temporal branch, `registry.build_video_privacy_encoder`)."""
    video = len(backbone.input_shape) == 5
    inputs = keras.Input(backbone.input_shape[1:], name="clips" if video else "images")
    return keras.Model(inputs, head(backbone(inputs)), name=name)


def privacy_classifier(
    backbone: keras.Model,
    num_attributes: int,
    name: str = "privacy_classifier",
    head_initializer: keras.initializers.Initializer | None = None,
    dropout: float = 0.0,
) -> keras.Model:
    """A multi-label attribute classifier: images -> (N, num_attributes) logits. The head
    starts as PyTorch's nn.Linear, or with `head_initializer` weights and zero biases (TF-slim's
    logits: `registry.build_privacy_classifier` gives the backbone's), after a dropout of rate
    `dropout` when it is above 0 (TF-slim's Inception logits)."""
    inputs = keras.Input(backbone.input_shape[1:], name="images")
    features = backbone(inputs)
    if dropout > 0:
        features = layers.Dropout(dropout, name="attributes_dropout")(features)
    if head_initializer is None:
        logits = torch_linear(features, num_attributes, name="attributes", dtype="float32")
    else:
        logits = layers.Dense(
            num_attributes,
            kernel_initializer=head_initializer,
            dtype="float32",
            name="attributes",
        )(features)
    return keras.Model(inputs, logits, name=name)
