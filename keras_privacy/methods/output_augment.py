"""Random augmentations of the anonymized images that a self-supervised adversary sees.

With the authors' views, the two sides of a positive pair are two different inputs (two
frames of a clip, two augmented copies of an image), each anonymized; f_A can then raise f_B's
contrastive loss by amplifying their differences (an input-dependent colour remapping, for
one) while every private cue stays visible, and a fresh attacker recovers them all (README,
"Why the authors' SPAct stops near 12 %"). Augmenting f_A's *output* instead, two random
resized crops of one anonymized image (`RandomResizedCrop`) under a random colour distortion
(`ColourJitter`, SimCLR's: brightness, contrast, saturation, hue, random grayscale), leaves
f_A only one way to raise the loss: make its outputs of different images alike.

Both are smooth in the images (a crop is two small bilinear interpolation matrices, a jitter
one 3 x 3 colour matrix per image and a contrast blend), so the gradient reaches f_A. Their
random draws are a hash of (seed, number of earlier calls, position): the count is a
non-trainable weight of the layer, which a stateless call returns advanced, so the trainer
threads it through both halves of a step, checkpoints save it, and both backends draw the same
numbers.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from keras_privacy.backend import replica_position
from keras_privacy.types import Tensor

RGB_TO_YIQ = np.array(
    [[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]], np.float32
)
"""Rows: luma Y and the two chroma axes I, Q of an RGB colour (NTSC)."""
LUMA = RGB_TO_YIQ[0]


def colour_matrices(
    brightness: Tensor, saturation: Tensor, hue: Tensor, grayscale: Tensor
) -> Tensor:
    """Per image (each argument (N,)), the (N, 3, 3) matrix that maps an RGB colour to its
    jittered colour: the chroma plane (I, Q) rotated by `hue` turns, scaled by `saturation`,
    dropped where `grayscale` is 1, and everything multiplied by `brightness`."""
    angle = 2.0 * math.pi * hue
    chroma = saturation * (1.0 - grayscale)
    cos, sin = chroma * ops.cos(angle), chroma * ops.sin(angle)
    ones, zeros = ops.ones_like(cos), ops.zeros_like(cos)
    yiq = ops.stack(
        [
            ops.stack([ones, zeros, zeros], axis=-1),
            ops.stack([zeros, cos, -sin], axis=-1),
            ops.stack([zeros, sin, cos], axis=-1),
        ],
        axis=-2,
    )
    to_yiq = ops.convert_to_tensor(RGB_TO_YIQ)
    from_yiq = ops.convert_to_tensor(np.linalg.inv(RGB_TO_YIQ).astype(np.float32))
    return ops.matmul(ops.matmul(from_yiq, yiq), to_yiq) * brightness[:, None, None]


def jitter_colours(
    images: Tensor,
    brightness: Tensor,
    contrast: Tensor,
    saturation: Tensor,
    hue: Tensor,
    grayscale: Tensor,
) -> Tensor:
    """(N, H, W, 3) images in [0, 1] with per-image factors (each (N,)): brightness and
    contrast multiply (1 = unchanged), saturation scales the chroma, hue rotates it (turns),
    grayscale (0 or 1) removes it. Returns the jittered images clipped to [0, 1]."""
    matrices = colour_matrices(brightness, saturation, hue, grayscale)
    images = ops.einsum("nhwc,ndc->nhwd", images, ops.cast(matrices, images.dtype))
    luma = ops.einsum("nhwc,c->nhw", images, ops.convert_to_tensor(LUMA, images.dtype))
    mean = ops.mean(luma, axis=(1, 2))[:, None, None, None]
    contrast = ops.cast(contrast, images.dtype)[:, None, None, None]
    return ops.clip((images - mean) * contrast + mean, 0.0, 1.0)


def _mix(x):
    """A 32-bit integer hash (lowbias32) of uint32 `x`: nearby inputs give unrelated outputs."""
    x = ops.bitwise_xor(x, ops.right_shift(x, 16))
    x = ops.multiply(x, ops.convert_to_tensor(0x7FEB352D, "uint32"))
    x = ops.bitwise_xor(x, ops.right_shift(x, 15))
    x = ops.multiply(x, ops.convert_to_tensor(0x846CA68B, "uint32"))
    return ops.bitwise_xor(x, ops.right_shift(x, 16))


def hashed_uniform(seed: int, counter: Tensor, count: int) -> Tensor:
    """`count` numbers uniform in [0, 1) (24-bit), a function of (seed, counter) only. The seed
    is hashed before the counter is added, so seeds s and s + 1 draw unrelated streams (not
    one stream shifted by a call)."""
    seed_key = _mix(ops.convert_to_tensor(seed % 2**32, "uint32"))
    key = _mix(ops.cast(counter, "uint32") + seed_key)
    golden = ops.convert_to_tensor(0x9E3779B9, "uint32")
    positions = ops.cast(ops.arange(count, dtype="int32"), "uint32")
    bits = _mix(ops.bitwise_xor(positions, key) * golden + key)
    return ops.cast(ops.right_shift(bits, 8), "float32") / float(2**24)


class CountedRandomLayer(keras.layers.Layer):
    """Base of the augmentation layers: a `seed` and a non-trainable call counter `calls`, from
    which `draws` makes each call's random numbers (see the module docstring)."""

    def __init__(self, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.calls = self.add_weight(
            shape=(), initializer="zeros", dtype="int32", trainable=False, name="calls"
        )

    def draws(self, rows: int, count: int) -> Tensor:
        """(rows, count) numbers uniform in [0, 1), new at every call; counts the call. In a
        TensorFlow data-parallel step, where `count` is a replica's share of the batch, each
        replica takes its own columns of draws for the global batch, so no two replicas draw
        alike (one device lays its rows out otherwise: its draws differ)."""
        replica, replicas = replica_position()
        values = hashed_uniform(self.seed, self.calls.value, rows * count * replicas)
        self.calls.assign(self.calls.value + 1)
        values = ops.reshape(values, (rows, count * replicas))
        if replicas == 1:
            return values
        return ops.slice(values, (0, replica * count), (rows, count))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "seed": self.seed}


@keras.saving.register_keras_serializable(package="keras_privacy")
class ColourJitter(CountedRandomLayer):
    """SimCLR-style colour distortion of (N, H, W, 3) images in [0, 1], per image.

    With `strength` s, brightness, contrast and saturation factors are uniform in
    [1 - 0.8 s, 1 + 0.8 s], the hue shift uniform in +-0.2 s turns, and an image turns gray with
    probability `grayscale_probability` (SimCLR: s = 1 for ImageNet, 0.2). Always active: the
    trainer calls it only where the adversary's inputs are jittered. Every call draws new
    factors and counts itself in the non-trainable weight `calls`.

    Args:
        strength: s, the jitter strength (0 leaves colours unchanged).
        grayscale_probability: chance that an image loses its colour.
        seed: seed of the layer's random draws.
    """

    def __init__(
        self,
        strength: float = 1.0,
        grayscale_probability: float = 0.2,
        seed: int = 0,
        **kwargs,
    ):
        super().__init__(seed=seed, **kwargs)
        if strength < 0 or not 0 <= grayscale_probability <= 1:
            raise ValueError(
                "ColourJitter needs strength >= 0 and grayscale_probability in [0, 1], got "
                f"{strength} and {grayscale_probability}"
            )
        self.strength = strength
        self.grayscale_probability = grayscale_probability

    def call(self, images):
        draws = self.draws(5, ops.shape(images)[0])
        spread = 0.8 * self.strength
        factors = [1.0 + spread * (2.0 * draws[i] - 1.0) for i in range(3)]
        hue = 0.2 * self.strength * (2.0 * draws[3] - 1.0)
        grayscale = ops.cast(draws[4] < self.grayscale_probability, draws.dtype)
        return jitter_colours(images, *factors, hue, grayscale)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "strength": self.strength,
            "grayscale_probability": self.grayscale_probability,
        }


def _interpolation(start, step, size: int):
    """(N, size, size) bilinear weights that sample, for output index o, the input position
    `start + step * o` of each of N rows (positions inside [0, size - 1])."""
    positions = start[:, None] + step[:, None] * ops.arange(size, dtype="float32")[None]
    distance = ops.abs(positions[:, :, None] - ops.arange(size, dtype="float32")[None, None])
    return ops.relu(1.0 - distance)


@keras.saving.register_keras_serializable(package="keras_privacy")
class RandomResizedCrop(CountedRandomLayer):
    """A random crop of each (N, H, W, 3) image, resized back to H x W (bilinear, as two small
    interpolation matrices, which XLA compiles), and flipped left-right with probability 1/2:
    SimCLR's geometric augmentation, differentiable in the images. The crop is square, its
    area a uniform fraction in [`min_area`, 1] of the image, at a uniform position. Every call
    draws anew and counts itself in the weight `calls`.

    Args:
        min_area: the smallest crop, as a fraction of the image area (SimCLR: 0.08).
        seed: seed of the layer's random draws.
    """

    def __init__(self, min_area: float = 0.25, seed: int = 0, **kwargs):
        super().__init__(seed=seed, **kwargs)
        if not 0 < min_area <= 1:
            raise ValueError(f"RandomResizedCrop needs min_area in (0, 1], got {min_area}")
        self.min_area = min_area

    def call(self, images):
        height, width = images.shape[1], images.shape[2]
        draws = self.draws(4, ops.shape(images)[0])
        side = ops.sqrt(self.min_area + (1.0 - self.min_area) * draws[0])
        x0 = draws[1] * (1.0 - side) * (width - 1)
        y0 = draws[2] * (1.0 - side) * (height - 1)
        flip = ops.cast(draws[3] < 0.5, "float32")
        scale_x = side * (1.0 - 2.0 * flip)
        offset_x = x0 + flip * side * (width - 1)
        rows = _interpolation(y0, side, height)
        columns = _interpolation(offset_x, scale_x, width)
        return ops.einsum("noh,nhwc,npw->nopc", rows, images, columns)

    def get_config(self) -> dict:
        return {**super().get_config(), "min_area": self.min_area}
