"""Per-clip augmentation ops in TensorFlow, usable inside tf.data on every Keras backend.

Every random parameter is drawn ONCE per clip from a stateless seed (a shape-[2] integer
tensor) and applied to all of its frames, so a clip never flickers; Keras' augmentation
layers would treat the frames as a batch and draw new parameters for each. An image is a
clip of one frame. Clips are (T, H, W, 3): uint8 in [0, 255] or float in [0, 1] going in,
float32 in [0, 1] coming out.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

# One stream of random numbers per parameter, so that changing one op leaves the others alone.
_SIDE, _ASPECT, _Y, _X, _FLIP = 0, 1, 2, 3, 4
_JITTER, _BRIGHTNESS, _CONTRAST, _SATURATION, _HUE = 5, 6, 7, 8, 9
_GRAY, _ERASE, _ERASE_AREA, _ERASE_ASPECT, _ERASE_Y, _ERASE_X, _ERASE_FILL = range(10, 17)


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Strengths of the per-clip augmentations.

    Attributes:
        crop_side: Range of the crop's side as a fraction of the short side (drawn uniformly).
        crop_aspect: Range of the crop's width / height (drawn log-uniformly); (1, 1) = square.
        flip: Probability of a horizontal flip.
        jitter: Probability of applying colour jitter at all.
        brightness, contrast, saturation: Factors drawn from [1 - s, 1 + s].
        hue: Hue shift drawn from [-h, h] (fraction of the colour circle).
        grayscale: Probability of replacing colour by luminance.
        erase: Probability of erasing one rectangle.
        erase_area: Range of the erased area as a fraction of the frame.
    """

    crop_side: tuple[float, float] = (0.6, 1.0)
    crop_aspect: tuple[float, float] = (1.0, 1.0)
    flip: float = 0.5
    jitter: float = 0.8
    brightness: float = 0.2
    contrast: float = 0.2
    saturation: float = 0.2
    hue: float = 0.05
    grayscale: float = 0.1
    erase: float = 0.25
    erase_area: tuple[float, float] = (0.02, 0.2)


SUPERVISED = AugmentConfig()
"""Supervised branches (action f_T, privacy attackers), as SPAct's clips: square crop of side
0.6-1.0 of the short side, flip, light colour jitter, 10 % grayscale, 25 % random erase."""

CONTRASTIVE = AugmentConfig(
    crop_side=(math.sqrt(0.08), 1.0),
    crop_aspect=(3 / 4, 4 / 3),
    brightness=0.8,
    contrast=0.8,
    saturation=0.8,
    hue=0.2,
    grayscale=0.2,
    erase=0.5,
    erase_area=(0.02, 0.33),
)
"""The contrastive privacy branch f_B, with SimCLR's strengths (SPAct supplementary C.2):
crop area 8-100 % with aspect 3/4-4/3, colour jitter 0.8/0.8/0.8/0.2 with probability 0.8,
20 % colour drop (grayscale), and random cut-out (erase) with probability 0.5."""


def _uniform(seed, stream: int, low=0.0, high=1.0):
    """A scalar drawn uniformly in [low, high) from `seed`'s stream `stream`."""
    stream_seed = tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), stream)
    return tf.random.stateless_uniform([], stream_seed, low, high)


def crop_box(seed, height, width, config: AugmentConfig = SUPERVISED):
    """A random crop as normalised [y1, x1, y2, x2]: side (geometric mean of height and width)
    a random fraction of the short side, aspect in `config.crop_aspect`, random position."""
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    side = _uniform(seed, _SIDE, *config.crop_side) * tf.minimum(height, width)
    log_low, log_high = math.log(config.crop_aspect[0]), math.log(config.crop_aspect[1])
    aspect = tf.exp(_uniform(seed, _ASPECT, log_low, log_high))
    crop_h = tf.minimum(side / tf.sqrt(aspect), height)
    crop_w = tf.minimum(side * tf.sqrt(aspect), width)
    y = _uniform(seed, _Y) * (height - crop_h)
    x = _uniform(seed, _X) * (width - crop_w)
    return tf.stack([y / height, x / width, (y + crop_h) / height, (x + crop_w) / width])


def centre_box(height, width, fraction: float = 1.0):
    """The centred square crop (normalised box) whose side is `fraction` of the short side."""
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    side = fraction * tf.minimum(height, width)
    y, x = (height - side) / 2, (width - side) / 2
    return tf.stack([y / height, x / width, (y + side) / height, (x + side) / width])


def crop_and_resize(clip, box, size: int):
    """Cut the same normalised box out of every frame and resize it to size x size (bilinear);
    float32 in [0, 1] out."""
    frames = tf.shape(clip)[0]
    boxes = tf.tile(box[None], [frames, 1])
    resized = tf.image.crop_and_resize(clip, boxes, tf.range(frames), [size, size])
    return resized / 255.0 if clip.dtype == tf.uint8 else resized


def random_flip(clip, seed, probability: float):
    """Mirror every frame left-right with `probability`."""
    return tf.cond(_uniform(seed, _FLIP) < probability, lambda: tf.reverse(clip, [2]), lambda: clip)


def colour_jitter(clip, seed, config: AugmentConfig):
    """With probability `config.jitter`: brightness, contrast, saturation, then hue, each with
    one factor for the whole clip (contrast pulls towards the clip's mean luminance)."""

    def jitter():
        out = clip * _uniform(seed, _BRIGHTNESS, 1 - config.brightness, 1 + config.brightness)
        out = tf.clip_by_value(out, 0.0, 1.0)
        mean = tf.reduce_mean(tf.image.rgb_to_grayscale(out))
        contrast = _uniform(seed, _CONTRAST, 1 - config.contrast, 1 + config.contrast)
        out = tf.clip_by_value((out - mean) * contrast + mean, 0.0, 1.0)
        gray = tf.image.rgb_to_grayscale(out)
        saturation = _uniform(seed, _SATURATION, 1 - config.saturation, 1 + config.saturation)
        out = tf.clip_by_value((out - gray) * saturation + gray, 0.0, 1.0)
        return tf.image.adjust_hue(out, _uniform(seed, _HUE, -config.hue, config.hue))

    if config.jitter <= 0:
        return clip
    return tf.cond(_uniform(seed, _JITTER) < config.jitter, jitter, lambda: clip)


def random_grayscale(clip, seed, probability: float):
    """Replace colour by luminance (kept as 3 channels) with `probability`."""
    return tf.cond(
        _uniform(seed, _GRAY) < probability,
        lambda: tf.tile(tf.image.rgb_to_grayscale(clip), [1, 1, 1, 3]),
        lambda: clip,
    )


def random_erase(clip, seed, probability: float, area: tuple[float, float]):
    """With `probability`, fill one random rectangle (area fraction in `area`, aspect
    0.3-3.3, the same in every frame) with one random colour."""

    def erase():
        height, width = tf.shape(clip)[1], tf.shape(clip)[2]
        h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
        target = _uniform(seed, _ERASE_AREA, *area) * h * w
        aspect = tf.exp(_uniform(seed, _ERASE_ASPECT, math.log(0.3), math.log(1 / 0.3)))
        erase_h = tf.minimum(tf.sqrt(target / aspect), h)
        erase_w = tf.minimum(tf.sqrt(target * aspect), w)
        y0 = _uniform(seed, _ERASE_Y) * (h - erase_h)
        x0 = _uniform(seed, _ERASE_X) * (w - erase_w)
        ys = tf.cast(tf.range(height), tf.float32)[:, None]
        xs = tf.cast(tf.range(width), tf.float32)[None, :]
        inside = (ys >= y0) & (ys < y0 + erase_h) & (xs >= x0) & (xs < x0 + erase_w)
        fill_seed = tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), _ERASE_FILL)
        fill = tf.random.stateless_uniform([3], fill_seed)
        return tf.where(inside[None, :, :, None], fill, clip)

    if probability <= 0:
        return clip
    return tf.cond(_uniform(seed, _ERASE) < probability, erase, lambda: clip)


def augment_clip(clip, seed, size: int, config: AugmentConfig = SUPERVISED):
    """Training augmentation of one clip (T, H, W, 3), parameters drawn once per clip: random
    resized crop, flip, colour jitter, grayscale, erase. Returns float32 (T, size, size, 3)."""
    box = crop_box(seed, tf.shape(clip)[1], tf.shape(clip)[2], config)
    clip = crop_and_resize(clip, box, size)
    clip = random_flip(clip, seed, config.flip)
    clip = colour_jitter(clip, seed, config)
    clip = random_grayscale(clip, seed, config.grayscale)
    return random_erase(clip, seed, config.erase, config.erase_area)


def evaluation_clip(clip, size: int, fraction: float = 1.0):
    """The evaluation view: the centred square of `fraction` of the short side, resized to
    size x size. Returns float32 (T, size, size, 3) in [0, 1]."""
    box = centre_box(tf.shape(clip)[1], tf.shape(clip)[2], fraction)
    return crop_and_resize(clip, box, size)
