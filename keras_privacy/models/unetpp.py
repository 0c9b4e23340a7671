"""UNet++ anonymizer (Zhou et al., 2018), as TeD-SPAD builds it with segmentation_models_pytorch:
`UnetPlusPlus(encoder_name="resnet18", encoder_depth=4, decoder_channels=(256, 128, 64, 32),
classes=3)`, followed by a sigmoid so the output is a frame in [0, 1], as SPAct's UNet. TeD-SPAD's
and the penalty authors' UNet++ have no output activation (`activation=None`: unbounded), which
`output_activation=None` builds (the registry's `unetpp_unbounded`: what their trained f_A
checkpoints convert into). The penalty-driven paper (Aslam and Nasrollahi, 2025) uses a UNet++ as
f_A too, without more detail.

Encoder: torchvision's ResNet-18 (`resnet.py`) cut after `encoder_depth - 1` stages, its
features at 1/2 (stem), 1/4, 1/8, 1/16 of the input. Decoder: the nested, densely skip-connected
grid of decoder blocks X(d, l) of UNet++, each "nearest 2x up-sampling, concatenation with its
skips, two 3x3 convolution - BN - ReLU", block names `decoder_x_{d}_{l}` as smp's; a final block
back to full resolution and a 3x3 convolution to 3 channels (smp's segmentation head).
H and W must be multiples of 2 ** encoder_depth (16 by default). Started as smp starts it: the
encoder as torchvision's ResNet, the decoder's convolutions `smp_decoder_start`, the head
Glorot uniform with a zero bias (`initialize_head`, Keras' default).
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

from keras_privacy.models.layers import (
    NearestUpSampling2D,
    max_pooling_2d,
    redraw_kernels,
    smp_decoder_start,
)
from keras_privacy.models.resnet import basic_block, bottleneck_block, conv_bn


def decoder_block(x: keras.KerasTensor, skips: list, filters: int, name: str) -> keras.KerasTensor:
    """smp's UNet++ DecoderBlock: nearest 2x up-sampling, concatenation [x, *skips], then two
    3x3 convolutions (no bias) - BN - ReLU."""
    x = NearestUpSampling2D(2, name=f"{name}_upsample")(x)
    if skips:
        x = layers.Concatenate(name=f"{name}_concat")([x, *skips])
    x = conv_bn(x, filters, 3, 1, f"{name}_1")
    return conv_bn(x, filters, 3, 1, f"{name}_2")


def unet_plus_plus(
    encoder_depth: int = 4,
    encoder_widths: Sequence[int] = (64, 64, 128, 256, 512),
    encoder_blocks: Sequence[int] = (2, 2, 2, 2),
    bottleneck: bool = False,
    decoder_widths: Sequence[int] = (256, 128, 64, 32),
    input_shape: tuple = (None, None, 3),
    output_activation: str | None = "sigmoid",
    name: str = "anonymizer",
) -> keras.Model:
    """UNet++ with a ResNet encoder on frames (B, H, W, 3) in [0, 1] -> frames in [0, 1]
    (with `output_activation=None`, the segmentation head's unbounded output, as the authors').

    `encoder_widths` are the stem's width then the stages' widths (ResNet-18: 64, 64, 128,
    256, 512; stages beyond `encoder_depth - 1` are not built); `encoder_blocks` the blocks per
    stage (ResNet-18's (2, 2, 2, 2), ResNet-34's (3, 4, 6, 3) with `bottleneck=False`).
    `decoder_widths` has `encoder_depth` entries, the widths of X(0, l) from the deepest.
    """
    if len(decoder_widths) != encoder_depth:
        raise ValueError(
            f"decoder_widths needs encoder_depth={encoder_depth} entries, got {decoder_widths}"
        )
    inputs = keras.Input(input_shape, name="frames")
    x = conv_bn(inputs, encoder_widths[0], 7, 2, "encoder_stem")
    features = [x]
    # Zeros pad like PyTorch's -inf here, as the input is post-ReLU (>= 0).
    x = layers.ZeroPadding2D(1, name="encoder_pool_pad")(x)
    x = max_pooling_2d(3, strides=2, name="encoder_pool")(x)
    block_fn = bottleneck_block if bottleneck else basic_block
    for stage in range(encoder_depth - 1):
        for block in range(encoder_blocks[stage]):
            strides = 2 if block == 0 and stage > 0 else 1
            x = block_fn(
                x, encoder_widths[stage + 1], strides, name=f"encoder_layer{stage + 1}_{block}"
            )
        features.append(x)

    features = features[::-1]  # deepest first, as smp's decoder
    depth = encoder_depth - 1
    skip_widths = [f.shape[-1] for f in features[1:]]
    dense = {}
    for layer_idx in range(depth):
        for depth_idx in range(depth - layer_idx):
            level = depth_idx + layer_idx
            filters = decoder_widths[level] if depth_idx == 0 else skip_widths[level]
            if layer_idx == 0:
                x, skips = features[depth_idx], [features[depth_idx + 1]]
            else:
                x = dense[depth_idx, level - 1]
                skips = [dense[i, level] for i in range(depth_idx + 1, level + 1)]
                skips.append(features[level + 1])
            dense[depth_idx, level] = decoder_block(
                x, skips, filters, name=f"decoder_x_{depth_idx}_{level}"
            )
    x = decoder_block(dense[0, depth - 1], [], decoder_widths[-1], name=f"decoder_x_0_{depth}")
    outputs = layers.Conv2D(3, 3, padding="same", dtype="float32", name="segmentation_head")(x)
    if output_activation is not None:
        outputs = layers.Activation(
            output_activation, dtype="float32", name=f"output_{output_activation}"
        )(outputs)
    model = keras.Model(inputs, outputs, name=name)
    decoder = [layer.name for layer in model.layers if layer.name.startswith("decoder_")]
    redraw_kernels(model, smp_decoder_start, decoder)
    return model
