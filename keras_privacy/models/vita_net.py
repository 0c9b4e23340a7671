"""VITA's anonymizer f_d: the residual image-transformation network of Johnson et al. (2016),
as in the authors' TensorFlow code (Privacy-AdversarialLearning, `degradNet.fd`).

9x9 convolution to 32 channels, two stride-2 3x3 convolutions (64, 128), five residual blocks
of two 3x3 convolutions, two stride-2 3x3 transposed convolutions (64, 32) and a 9x9
convolution to 3 channels. Every convolution has no bias and is followed by instance
normalisation (epsilon 1e-3, learned scale and shift) and ReLU, except the second of each
residual block and the last (no ReLU). The output, (tanh + 1) / 2, is a frame in [0, 1] (the
original scales by 127.5 to 0..255). Padding is TensorFlow's "same", as the original; H and W
must be multiples of 4 for the output to have the input's size.

The original reads frames in 0..255, ours in [0, 1]: only the first normalisation sees that
scale (the first convolution's output is 255 times smaller, its variance 255^2), so its epsilon
is the original's divided by 255^2 (`FIRST_EPSILON`), and the network computes the original's
function of the same frame, divided by 255.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import layers

EPSILON = 1e-3
"""The instance normalisations' epsilon, as `degradNet._instance_norm`."""
FIRST_EPSILON = EPSILON / 255**2
"""The first normalisation's: the original's on 0..255 frames, for frames in [0, 1]."""


def conv_in(
    x: keras.KerasTensor,
    filters: int,
    kernel: int,
    strides: int,
    name: str,
    relu: bool = True,
    transpose: bool = False,
    epsilon: float = EPSILON,
) -> keras.KerasTensor:
    """A (transposed) convolution without bias, instance normalisation, optional ReLU."""
    conv = layers.Conv2DTranspose if transpose else layers.Conv2D
    x = conv(filters, kernel, strides=strides, padding="same", use_bias=False, name=name)(x)
    x = layers.GroupNormalization(groups=-1, epsilon=epsilon, name=f"{name}_norm")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def vita_transform(
    widths: Sequence[int] = (32, 64, 128),
    residual_blocks: int = 5,
    input_shape: tuple = (None, None, 3),
    name: str = "anonymizer",
) -> keras.Model:
    """VITA's f_d on frames (B, H, W, 3) in [0, 1] -> frames in [0, 1]; `widths` are the
    widths of the three down-sampling convolutions (mirrored by the up-sampling ones)."""
    inputs = keras.Input(input_shape, name="frames")
    x = conv_in(inputs, widths[0], 9, 1, "conv1", epsilon=FIRST_EPSILON)
    x = conv_in(x, widths[1], 3, 2, "conv2")
    x = conv_in(x, widths[2], 3, 2, "conv3")
    for block in range(residual_blocks):
        y = conv_in(x, widths[2], 3, 1, f"resid{block + 1}_1")
        y = conv_in(y, widths[2], 3, 1, f"resid{block + 1}_2", relu=False)
        x = layers.Add(name=f"resid{block + 1}_add")([x, y])
    x = conv_in(x, widths[1], 3, 2, "conv_t1", transpose=True)
    x = conv_in(x, widths[0], 3, 2, "conv_t2", transpose=True)
    x = conv_in(x, 3, 9, 1, "conv_t3", relu=False)
    x = layers.Activation("tanh", dtype="float32", name="output_tanh")(x)
    outputs = layers.Rescaling(0.5, offset=0.5, dtype="float32", name="output_rescale")(x)
    return keras.Model(inputs, outputs, name=name)
