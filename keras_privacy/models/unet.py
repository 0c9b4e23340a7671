"""The SPAct UNet anonymizer f_A: frames in [0, 1] -> frames in [0, 1]."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import keras
from keras import layers, ops

from keras_privacy.models.layers import BilinearUpSampling2D, SpatialSubsample, max_pooling_2d
from keras_privacy.types import Tensor

BN = {"momentum": 0.9, "epsilon": 1e-5}  # PyTorch's BatchNorm defaults


def double_conv(
    x: keras.KerasTensor, filters: int, name: str, mid_filters: int | None = None
) -> keras.KerasTensor:
    """Two 3x3 convolutions, each followed by BatchNorm and ReLU (the UNet block).

    The convolutions have no bias: the BatchNorm after each cancels it (a PyTorch bias is
    folded into the moving mean when importing weights).
    """
    for i, width in ((1, mid_filters or filters), (2, filters)):
        x = layers.Conv2D(width, 3, padding="same", use_bias=False, name=f"{name}_conv{i}")(x)
        x = layers.BatchNormalization(**BN, name=f"{name}_bn{i}")(x)
        x = layers.ReLU(name=f"{name}_relu{i}")(x)
    return x


def unet(
    widths: Sequence[int] = (64, 128, 256, 512, 512),
    input_shape: tuple = (None, None, 3),
    name: str = "anonymizer",
) -> keras.Model:
    """The UNet of SPAct (milesial's Pytorch-UNet, `bilinear=True`) followed by a sigmoid.

    Encoder: a double conv per level, 2x2 max-pooling between levels. Decoder: bilinear
    up-sampling with aligned corners (as PyTorch's `align_corners=True`), concatenation
    [skip, up-sampled], and a double conv whose first convolution halves the concatenated
    width; a 1x1 convolution to 3 channels and a sigmoid keep the output a frame in [0, 1].

    `widths` are the encoder widths, deepest last (SPAct: 64-128-256-512-512, 17,263,107
    parameters; SPAct's copy of the UNet gives its 18 convolutions biases, 17,267,523, which
    `convert` folds into the BatchNorm that follows each); the decoder mirrors them. H and W
    must be divisible by 2 ** (len(widths) - 1).
    """
    inputs = keras.Input(input_shape, name="frames")
    skips = []
    x = inputs
    for level, width in enumerate(widths):
        if level > 0:
            x = max_pooling_2d(2, name=f"down{level}_pool")(x)
        x = double_conv(x, width, name=f"down{level}")
        skips.append(x)
    for level in range(len(widths) - 2, -1, -1):
        x = BilinearUpSampling2D(2, name=f"up{level}_upsample")(x)
        x = layers.Concatenate(name=f"up{level}_concat")([skips[level], x])
        out_width = widths[max(level - 1, 0)]
        x = double_conv(x, out_width, name=f"up{level}", mid_filters=x.shape[-1] // 2)
    x = layers.Conv2D(3, 1, dtype="float32", name="output_conv")(x)
    outputs = layers.Activation("sigmoid", dtype="float32", name="output_sigmoid")(x)
    return keras.Model(inputs, outputs, name=name)


def downsampling_factor(anonymizer: keras.Model) -> int:
    """The factor H and W must be divisible by: the largest down-sampling of any feature map
    relative to the input (2 ** pooling layers for the UNet, 16 for UNet++, 4 for VITA's net).

    Follows the graph from the input, multiplying by the strides of convolutions and pooling
    layers and dividing by up-sampling sizes and transposed-convolution strides.
    """
    scale = {id(tensor): Fraction(1) for tensor in anonymizer.inputs}
    factor = Fraction(1)
    for layer in anonymizer.layers:
        for node in layer._inbound_nodes:
            inputs = [scale.get(id(tensor)) for tensor in node.input_tensors]
            if not inputs or any(value is None for value in inputs):
                continue
            value = max(inputs) * _layer_scale(layer)
            factor = max(factor, value)
            if isinstance(layer, keras.Model):  # e.g. an anonymizer under its input normalisation
                factor = max(factor, max(inputs) * downsampling_factor(layer))
            for tensor in node.output_tensors:
                scale[id(tensor)] = value
    return math.ceil(factor)


def _layer_scale(layer) -> Fraction:
    """How much `layer` down-samples H and W (a fraction below 1 for up-sampling)."""
    if isinstance(layer, layers.Conv2DTranspose):
        return Fraction(1, max(layer.strides))
    if isinstance(layer, (layers.UpSampling2D, BilinearUpSampling2D)):
        size = layer.size
        return Fraction(1, max(size) if isinstance(size, (tuple, list)) else size)
    if isinstance(layer, SpatialSubsample):
        return Fraction(layer.factor)
    strides = getattr(layer, "strides", None)
    if strides is None:
        return Fraction(1)
    return Fraction(max(strides) if isinstance(strides, (tuple, list)) else strides)


def apply_per_frame(model: Callable, clips: Tensor) -> Tensor:
    """Apply a frame-wise model to clips (B, T, H, W, C) -> (B, T, H', W', C').

    Time is folded into the batch, (B * T, H, W, C), and unfolded after the model: axes are
    only merged and split, never transposed, so channels and time never mix.
    """
    batch, frames, height, width, channels = ops.shape(clips)
    outputs = model(ops.reshape(clips, (-1, height, width, channels)))
    _, out_height, out_width, out_channels = ops.shape(outputs)
    return ops.reshape(outputs, (-1, frames, out_height, out_width, out_channels))
