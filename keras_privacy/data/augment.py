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

from keras_privacy.data.tensorflow_runtime import tf
from keras_privacy.types import Tensor

# One stream of random numbers per parameter, so that changing one op leaves the others alone.
_SIDE, _ASPECT, _Y, _X, _FLIP = 0, 1, 2, 3, 4
_JITTER, _BRIGHTNESS, _CONTRAST, _SATURATION, _HUE = 5, 6, 7, 8, 9
_GRAY, _ERASE, _ERASE_AREA, _ERASE_ASPECT, _ERASE_Y, _ERASE_X, _ERASE_FILL = range(10, 17)
_EACH = {"brightness": 17, "contrast": 18, "saturation": 19, "hue": 20}
_GAMMA, _GAMMA_ON = 21, 22
_NEXT_ERASE = 23  # the seed of rectangle k > 0: the clip's seed folded with _NEXT_ERASE + k


@dataclasses.dataclass(frozen=True)
class AugmentConfig:
    """Strengths of the per-clip augmentations.

    Attributes:
        crop_side: Range of the crop's side as a fraction of the short side (drawn uniformly).
        crop_aspect: Range of the crop's width / height (drawn log-uniformly); (1, 1) = square.
        crop_keeps_aspect: Instead, the crop is the same fraction (drawn in `crop_side`) of
            the frame's height and of its width: the frame's aspect, squeezed to a square by
            the resize (SPAct's image loaders).
        crop_area: Instead of `crop_side`, the range of the crop's area as a fraction of the
            frame's (drawn uniformly), its aspect in `crop_aspect`: the random resized crop of
            Inception and SimCLR (torchvision's RandomResizedCrop), see `area_crop_size`.
        views_share_corner: For a pair of views of one image (`privacy_pair_dataset`): the
            second view's crop starts at the first's corner, with a fraction of its own, and
            what overruns the frame is black (the authors' minimax loaders draw one corner,
            inside the frame for the first view's crop; torchvision pads the other with zeros).
        flip: Probability of a horizontal flip.
        jitter: Probability of applying colour jitter at all.
        brightness, contrast, saturation: Factors drawn from [1 - s, 1 + s].
        contrast_per_frame: Contrast pulls each frame to its own mean luminance (SPAct's
            loaders adjust each frame as a PIL image); False: to the clip's.
        hue: Hue shift drawn from [-h, h] (fraction of the colour circle), in HSV.
        jitter_each: Probability of each of brightness, contrast, saturation and hue (in that
            order), drawn on its own once the jitter applies.
        grayscale: Probability of replacing colour by luminance.
        gamma: Range of the gamma drawn for a grayscale clip (pixel ** gamma).
        gamma_probability: Probability that a grayscale clip gets that gamma.
        erase: Probability of erasing a rectangle.
        erase_count: Rectangles erased, each with probability `erase` on a draw of its own.
        erase_area: Range of the erased area as a fraction of the frame (aspect 0.3-3.3, the
            rectangle inside the frame).
        erase_side: Instead, the range of each side as a fraction of the frame's side (drawn
            on their own), the corner anywhere in the frame and the rectangle cut at its edges.
        erase_width_by_aspect: With `erase_side`, the width's fraction is `erase_side`'s times
            the clip's width over its height before the crop (the penalty authors' loader
            sizes the two sides by the video's height and width in pixels).
        erase_fill: The erased value; None: one random colour.
        erase_spares_flipped: The first rectangle's erase is decided by the flip's draw, from
            its other end: a clip is flipped or erased, not both, while flip + erase <= 1
            (SPAct's loaders flip where their draw is above 0.5 and erase where it is below
            0.25; each keeps its own probability).
    """

    crop_side: tuple[float, float] = (0.6, 1.0)
    crop_aspect: tuple[float, float] = (1.0, 1.0)
    crop_keeps_aspect: bool = False
    crop_area: tuple[float, float] | None = None
    views_share_corner: bool = False
    flip: float = 0.5
    jitter: float = 0.8
    brightness: float = 0.2
    contrast: float = 0.2
    contrast_per_frame: bool = False
    saturation: float = 0.2
    hue: float = 0.05
    jitter_each: tuple[float, float, float, float] = (1.0, 1.0, 1.0, 1.0)
    grayscale: float = 0.1
    gamma: tuple[float, float] = (1.0, 1.0)
    gamma_probability: float = 0.0
    erase: float = 0.25
    erase_count: int = 1
    erase_area: tuple[float, float] = (0.02, 0.2)
    erase_side: tuple[float, float] | None = None
    erase_width_by_aspect: bool = False
    erase_fill: float | None = None
    erase_spares_flipped: bool = False


SUPERVISED = AugmentConfig()
"""Supervised branches (action f_T, privacy attackers) by default: square crop of side 0.6-1.0
of the short side, flip, colour jitter (all four ops on 80 % of clips), 10 % grayscale, 25 %
random erase (2-20 % of the frame, one random colour). SUPERVISED_SPACT_CODE is SPAct's."""

SUPERVISED_SPACT_CODE = dataclasses.replace(
    SUPERVISED,
    jitter=1.0,
    brightness=0.1,
    contrast=0.1,
    contrast_per_frame=True,
    saturation=0.1,
    hue=0.05,
    jitter_each=(0.15, 0.125, 0.15, 0.15),
    gamma=(0.85, 1.15),
    gamma_probability=0.75,
    erase_side=(9 / 128, 19 / 128),
    erase_fill=0.0,
    erase_spares_flipped=True,
)
"""SUPERVISED with the colour and erase of SPAct's supervised loaders (anonymization_training/
dl_ft_nov.py:117-133, 177-197; dl_vispr.py the same; the penalty code's ucf101_dl.py has the
same colour and erases more): contrast on 12.5 % of clips (towards each frame's mean
luminance, as their per-frame PIL ops), hue, saturation and brightness each on 15 %, factors
in [0.9, 1.1] (hue +-0.05), 10 % grayscale, and a gamma in [0.85, 1.15] on 3/4 of those; the
erased rectangle black, each side 9-18 px of their 128 (parameters_BL.py), its corner anywhere
in the frame, never on a flipped clip (the erase reads the flip's draw, dl_ft_nov.py:191, 196;
dl_vispr.py:150, 155). The clips' crop is square (dl_ft_nov.py:174); for images see
SPACT_CODE_IMAGES."""

SUPERVISED_PENALTY_CODE = dataclasses.replace(
    SUPERVISED_SPACT_CODE,
    crop_keeps_aspect=True,
    erase=0.4,
    erase_count=2,
    erase_side=(40 / 224, 80 / 224),
    erase_width_by_aspect=True,
    erase_spares_flipped=False,
)
"""SUPERVISED_SPACT_CODE with the crop and erase of the penalty authors' clip loader
(aux_code/ucf101_dl.py:96-121, 150-182; hmdb51_dl.py the same), which both their anonymizer
and their target action model train on: the crop keeps the frame's aspect; two black
rectangles, each on its own 40 % of clips, heights of 1/6-1/3 of the video's height and widths
of 1/6-1/3 of its width, in pixels at 224 (ucf101_dl.py:120-121, hmdb51_dl.py:132-133: 40-79 x
53-105 px for a 240 x 320 video, 40-79 x 71-141 px for a 240 x 426 one; here for videos 240 px
high, as every UCF101 and HMDB51 video, the widths from the frame's aspect), each corner
anywhere in the frame, each on a draw of its own (flipped clips too)."""

SPACT_CODE_IMAGES = dataclasses.replace(
    SUPERVISED_SPACT_CODE, crop_keeps_aspect=True, views_share_corner=True
)
"""SUPERVISED_SPACT_CODE for privacy images, whose crop keeps the image's aspect (the same
fraction, 0.6-1.0, of its height and width) before the resize to a square: SPAct's labelled
loader (dl_vispr.py:133) and the views of its minimax (dl_vispr_ssl.py:95-97, 111-112, 138),
whose two crops start at one corner, each with a fraction and the rest of its ops drawn on
its own."""

PENALTY_CODE_IMAGES = dataclasses.replace(SPACT_CODE_IMAGES, erase_side=(9 / 224, 19 / 224))
"""SPACT_CODE_IMAGES as the penalty authors' image loader (aux_code/vispr_dl_edit.py:74-123,
their target privacy model's) has it at 224: the erased rectangle's sides 9-18 px of 224."""

CONTRASTIVE = AugmentConfig(
    crop_area=(0.08, 1.0),
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
SimCLR's random resized crop (area 8-100 % of the frame, aspect 3/4-4/3), colour jitter
0.8/0.8/0.8/0.2 with probability 0.8, 20 % colour drop (grayscale), and random cut-out (erase)
with probability 0.5."""


def _uniform(seed, stream: int, low=0.0, high=1.0, shape=()):
    """A scalar (or `shape` of them) drawn uniformly in [low, high) from `seed`'s stream
    `stream`."""
    stream_seed = tf.random.experimental.stateless_fold_in(tf.cast(seed, tf.int64), stream)
    return tf.random.stateless_uniform(shape, stream_seed, low, high)


AREA_CROP_TRIES = 10
"""Draws of the random resized crop before it falls back to the centred crop (torchvision's)."""


def area_crop_size(
    seed: Tensor,
    height: Tensor,
    width: Tensor,
    area: tuple[float, float],
    aspect: tuple[float, float],
) -> tuple[Tensor, Tensor, Tensor]:
    """The (height, width, centred) of a random resized crop, as torchvision's
    RandomResizedCrop.get_params draws it: an area uniform in `area` (fractions of the
    frame's) and an aspect (width / height) log-uniform in `aspect`, the first of
    AREA_CROP_TRIES draws that fits in the frame; where none does, the whole frame with its
    aspect clipped to `aspect`, centred (`centred` True)."""
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    areas = _uniform(seed, _SIDE, *area, shape=[AREA_CROP_TRIES]) * height * width
    log_low, log_high = math.log(aspect[0]), math.log(aspect[1])
    aspects = tf.exp(_uniform(seed, _ASPECT, log_low, log_high, shape=[AREA_CROP_TRIES]))
    crop_w, crop_h = tf.sqrt(areas * aspects), tf.sqrt(areas / aspects)
    fits = (crop_w <= width) & (crop_h <= height)
    first = tf.argmax(tf.cast(fits, tf.int32))
    frame_aspect = width / height
    whole_w = tf.where(frame_aspect > aspect[1], height * aspect[1], width)
    whole_h = tf.where(frame_aspect < aspect[0], width / aspect[0], height)
    found = tf.reduce_any(fits)
    return (
        tf.where(found, tf.gather(crop_h, first), whole_h),
        tf.where(found, tf.gather(crop_w, first), whole_w),
        tf.logical_not(found),
    )


def crop_box(
    seed: Tensor,
    height: Tensor,
    width: Tensor,
    config: AugmentConfig = SUPERVISED,
    corner: Tensor | None = None,
) -> Tensor:
    """A random crop as normalised [y1, x1, y2, x2]: side (geometric mean of height and width)
    a random fraction of the short side, aspect in `config.crop_aspect`, random position; with
    `config.crop_keeps_aspect`, that fraction of the height and of the width; with
    `config.crop_area`, the random resized crop (`area_crop_size`). `corner`: the normalised
    (y1, x1) to start from instead (the box may then overrun the frame)."""
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    centred = tf.constant(False)
    if config.crop_area is not None:
        crop_h, crop_w, centred = area_crop_size(
            seed, height, width, config.crop_area, config.crop_aspect
        )
    elif config.crop_keeps_aspect:
        fraction = _uniform(seed, _SIDE, *config.crop_side)
        crop_h, crop_w = fraction * height, fraction * width
    else:
        side = _uniform(seed, _SIDE, *config.crop_side) * tf.minimum(height, width)
        log_low, log_high = math.log(config.crop_aspect[0]), math.log(config.crop_aspect[1])
        aspect = tf.exp(_uniform(seed, _ASPECT, log_low, log_high))
        crop_h = tf.minimum(side / tf.sqrt(aspect), height)
        crop_w = tf.minimum(side * tf.sqrt(aspect), width)
    if corner is not None:
        y, x = corner[0], corner[1]
        return tf.stack([y, x, y + crop_h / height, x + crop_w / width])
    y = tf.where(centred, 0.5, _uniform(seed, _Y)) * (height - crop_h)
    x = tf.where(centred, 0.5, _uniform(seed, _X)) * (width - crop_w)
    return tf.stack([y / height, x / width, (y + crop_h) / height, (x + crop_w) / width])


def centre_box(
    height: Tensor, width: Tensor, fraction: float = 1.0, keeps_aspect: bool = False
) -> Tensor:
    """The centred square crop (normalised box) whose side is `fraction` of the short side;
    with `keeps_aspect`, the centred `fraction` of the height and of the width."""
    if keeps_aspect:
        low, high = (1.0 - fraction) / 2, (1.0 + fraction) / 2
        return tf.constant([low, low, high, high], tf.float32)
    height, width = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
    side = fraction * tf.minimum(height, width)
    y, x = (height - side) / 2, (width - side) / 2
    return tf.stack([y / height, x / width, (y + side) / height, (x + side) / width])


def crop_and_resize(clip: Tensor, box: Tensor, size: int) -> Tensor:
    """Cut the same normalised box out of every frame and resize it to size x size as PIL and
    torchvision resize, in the authors' loaders' `resized_crop`: bilinear, antialiased where it
    shrinks, pixel centres at half integers. The box is rounded to whole pixels (torchvision
    draws whole ones); a box with x1 > x2 gives the mirrored crop; what lies outside the frame
    is black, as PIL's crop pads it. float32 in [0, 1] out."""
    height, width = tf.shape(clip)[1], tf.shape(clip)[2]

    def whole_pixels(low, high, extent):
        extent = tf.cast(extent, tf.float32)
        first = tf.cast(tf.round(low * extent), tf.int32)
        return first, tf.maximum(tf.cast(tf.round(high * extent), tf.int32), first + 1)

    top, bottom = whole_pixels(box[0], box[2], height)
    left, right = whole_pixels(tf.minimum(box[1], box[3]), tf.maximum(box[1], box[3]), width)
    pads = [
        [0, 0],
        [tf.maximum(-top, 0), tf.maximum(bottom - height, 0)],
        [tf.maximum(-left, 0), tf.maximum(right - width, 0)],
        [0, 0],
    ]
    overruns = tf.reduce_any(tf.stack(pads[1] + pads[2]) > 0)
    padded = tf.cond(overruns, lambda: tf.pad(clip, pads), lambda: clip)
    top, bottom = top + pads[1][0], bottom + pads[1][0]
    left, right = left + pads[2][0], right + pads[2][0]
    crop = padded[:, top:bottom, left:right]
    crop = tf.cond(box[3] < box[1], lambda: tf.reverse(crop, [2]), lambda: crop)
    # Enlarging, the antialiased filter is plain bilinear: the faster op gives the same pixels.
    enlarges = tf.logical_and(bottom - top <= size, right - left <= size)
    resized = tf.cond(
        enlarges,
        lambda: tf.image.resize(crop, [size, size], method="bilinear"),
        lambda: tf.image.resize(crop, [size, size], method="bilinear", antialias=True),
    )
    return resized / 255.0 if clip.dtype == tf.uint8 else resized


def maybe_mirror(box: Tensor, seed: Tensor, probability: float) -> Tensor:
    """The box with its x coordinates swapped with `probability`: crop_and_resize then
    mirrors the crop left-right, at no extra cost."""
    mirrored = tf.gather(box, [0, 3, 2, 1])
    return tf.where(_uniform(seed, _FLIP) < probability, mirrored, box)


# RGB luminance weights (ITU-R 601, as tf.image.rgb_to_grayscale), for pixels as row vectors.
_LUMA = tf.constant([[0.2989], [0.587], [0.114]])


def _affine(matrix, offset=None):
    return matrix, tf.zeros([3]) if offset is None else offset


def _then(first, second):
    """The affine colour map `second` after `first` (row-vector pixels: rgb @ M + v; the
    offsets' leading axes, if any, broadcast over the clip)."""
    (m1, v1), (m2, v2) = first, second
    return m1 @ m2, tf.linalg.matvec(m2, v1, transpose_a=True) + v2


def _drawn(seed: Tensor, config: AugmentConfig, name: str, stream: int, low, high, neutral):
    """A jitter op's value drawn in [low, high], or `neutral` where its own draw (its rate in
    `config.jitter_each`) leaves it out."""
    rate = config.jitter_each[list(_EACH).index(name)]  # _EACH lists the ops in their order
    value = _uniform(seed, stream, low, high)
    if rate >= 1:
        return value
    return tf.where(_uniform(seed, _EACH[name]) < rate, value, neutral)


def _jitters(seed: Tensor, config: AugmentConfig) -> Tensor:
    """Whether the clip's colour jitter applies at all (probability `config.jitter`): one draw
    that the hue and the linear ops share."""
    return _uniform(seed, _JITTER) < config.jitter


def hue_turns(seed: Tensor, config: AugmentConfig) -> Tensor:
    """The clip's hue shift, in turns of the colour circle: drawn in [-hue, hue] where the
    jitter and the hue's own draw apply, else 0."""
    turns = _drawn(seed, config, "hue", _HUE, -config.hue, config.hue, 0.0)
    return tf.where(_jitters(seed, config), turns, 0.0)


def random_hue(clip: Tensor, seed: Tensor, config: AugmentConfig) -> Tensor:
    """The clip's hue shifted by `hue_turns` in HSV (`tf.image.adjust_hue`), as torchvision's
    adjust_hue shifts it in the SPAct authors' loaders and in SimCLR's ColorJitter. Not a
    linear map of RGB, so a pass of its own before `colour_transform`'s, taken only where the
    shift is not 0. It keeps each pixel's largest and smallest channel, so the linear ops
    after it (scalings and blends towards grey) give what they give before it, but for the
    luminance they read."""
    if config.hue <= 0:
        return clip
    turns = hue_turns(seed, config)
    return tf.cond(tf.equal(turns, 0.0), lambda: clip, lambda: tf.image.adjust_hue(clip, turns))


def colour_transform(clip: Tensor, seed: Tensor, config: AugmentConfig) -> tuple[Tensor, Tensor]:
    """The clip's linear colour augmentation as ONE affine map of RGB (3 x 3 matrix, offset),
    drawn once per clip: with probability `config.jitter` brightness, contrast (towards the
    clip's mean luminance, or each frame's with `config.contrast_per_frame`: then the offset
    is (T, 1, 1, 3), one per frame) and saturation, each kept with its own probability in
    `config.jitter_each`, then grayscale with probability `config.grayscale`. One fused map
    instead of four image passes (the pipeline's hot spot); the result is clipped to [0, 1]
    once, at the end. The hue is `random_hue`'s, on the clip given here."""
    identity = tf.eye(3)
    brightness = _drawn(
        seed, config, "brightness", _BRIGHTNESS, 1 - config.brightness, 1 + config.brightness, 1
    )
    contrast = _drawn(
        seed, config, "contrast", _CONTRAST, 1 - config.contrast, 1 + config.contrast, 1
    )
    saturation = _drawn(
        seed, config, "saturation", _SATURATION, 1 - config.saturation, 1 + config.saturation, 1
    )
    if config.contrast_per_frame:
        mean_luma = tf.reduce_mean(clip, axis=[1, 2], keepdims=True) @ _LUMA  # (T, 1, 1, 1)
    else:
        mean_luma = tf.reduce_sum(tf.reduce_mean(clip, axis=[0, 1, 2]) * _LUMA[:, 0])
    mean_luma = brightness * mean_luma
    gray = _LUMA @ tf.ones([1, 3])
    jitter = _affine(brightness * identity)
    jitter = _then(jitter, _affine(contrast * identity, (1 - contrast) * mean_luma * tf.ones([3])))
    jitter = _then(jitter, _affine(saturation * identity + (1 - saturation) * gray))
    use_jitter = _jitters(seed, config)
    matrix, offset = (tf.where(use_jitter, a, b) for a, b in zip(jitter, _affine(identity)))
    use_gray = _uniform(seed, _GRAY) < config.grayscale
    grayed = matrix @ gray, tf.linalg.matvec(gray, offset, transpose_a=True)
    return tf.where(use_gray, grayed[0], matrix), tf.where(use_gray, grayed[1], offset)


def random_gamma(clip: Tensor, seed: Tensor, config: AugmentConfig) -> Tensor:
    """A grayscale clip (the same draw as `colour_transform`'s) raised to a gamma drawn in
    `config.gamma`, with `config.gamma_probability`; any other clip as it is."""
    if config.gamma_probability <= 0:
        return clip
    gamma = _uniform(seed, _GAMMA, *config.gamma)
    applies = (_uniform(seed, _GRAY) < config.grayscale) & (
        _uniform(seed, _GAMMA_ON) < config.gamma_probability
    )
    return tf.cond(applies, lambda: tf.pow(clip, gamma), lambda: clip)


def apply_colour(clip: Tensor, matrix: Tensor, offset: Tensor) -> Tensor:
    """Apply an affine colour map to every pixel of a float clip and clip to [0, 1]."""
    coloured = tf.reshape(tf.reshape(clip, [-1, 3]) @ matrix, tf.shape(clip)) + offset
    return tf.clip_by_value(coloured, 0.0, 1.0)


def random_colour(clip: Tensor, seed: Tensor, config: AugmentConfig) -> Tensor:
    """The clip's colour augmentation: the hue (`random_hue`), then brightness, contrast,
    saturation and grayscale as one map (`colour_transform`), clipped to [0, 1]."""
    clip = random_hue(clip, seed, config)
    return apply_colour(clip, *colour_transform(clip, seed, config))


def random_erase(
    clip: Tensor,
    seed: Tensor,
    probability: float,
    area: tuple[float, float],
    side: tuple[float, float] | None = None,
    fill: float | None = None,
    width_scale: float | Tensor = 1.0,
    draw: float | Tensor | None = None,
) -> Tensor:
    """With `probability`, fill one random rectangle, the same in every frame, with `fill`
    (None: one random colour). Its area is a fraction in `area` with an aspect of 0.3-3.3,
    inside the frame; or, with `side`, its height a fraction in `side` of the frame's height,
    its width one in `side` times `width_scale` of the frame's width, and its corner anywhere
    in the frame, cut at the frame's edges (SPAct's loaders). `draw`: the uniform number that
    decides (erase where it is below `probability`); None: one of the erase's own."""

    def erase():
        height, width = tf.shape(clip)[1], tf.shape(clip)[2]
        h, w = tf.cast(height, tf.float32), tf.cast(width, tf.float32)
        if side is None:
            target = _uniform(seed, _ERASE_AREA, *area) * h * w
            aspect = tf.exp(_uniform(seed, _ERASE_ASPECT, math.log(0.3), math.log(1 / 0.3)))
            erase_h = tf.minimum(tf.sqrt(target / aspect), h)
            erase_w = tf.minimum(tf.sqrt(target * aspect), w)
            y0 = _uniform(seed, _ERASE_Y) * (h - erase_h)
            x0 = _uniform(seed, _ERASE_X) * (w - erase_w)
        else:
            erase_h = _uniform(seed, _ERASE_AREA, *side) * h
            erase_w = _uniform(seed, _ERASE_ASPECT, *side) * width_scale * w
            y0, x0 = _uniform(seed, _ERASE_Y) * h, _uniform(seed, _ERASE_X) * w
        ys = tf.cast(tf.range(height), tf.float32)[:, None]
        xs = tf.cast(tf.range(width), tf.float32)[None, :]
        inside = (ys >= y0) & (ys < y0 + erase_h) & (xs >= x0) & (xs < x0 + erase_w)
        if fill is None:
            fill_seed = tf.random.experimental.stateless_fold_in(
                tf.cast(seed, tf.int64), _ERASE_FILL
            )
            value = tf.random.stateless_uniform([3], fill_seed)
        else:
            value = tf.fill([3], tf.cast(fill, clip.dtype))
        return tf.where(inside[None, :, :, None], value, clip)

    if probability <= 0:
        return clip
    decider = _uniform(seed, _ERASE) if draw is None else draw
    return tf.cond(decider < probability, erase, lambda: clip)


def augment_clip(
    clip: Tensor,
    seed: Tensor,
    size: int,
    config: AugmentConfig = SUPERVISED,
    corner: Tensor | None = None,
) -> Tensor:
    """Training augmentation of one clip (T, H, W, 3), parameters drawn once per clip: random
    resized crop (from `corner`, see `crop_box`, where given) with flip, colour jitter and
    grayscale, gamma, erase. Returns float32 (T, size, size, 3)."""
    height, width = tf.shape(clip)[1], tf.shape(clip)[2]
    width_scale = tf.cast(width, tf.float32) / tf.cast(height, tf.float32)
    box = crop_box(seed, height, width, config, corner)
    clip = crop_and_resize(clip, maybe_mirror(box, seed, config.flip), size)
    clip = random_colour(clip, seed, config)
    clip = random_gamma(clip, seed, config)
    for rectangle in range(config.erase_count):
        rectangle_seed = (
            seed
            if rectangle == 0
            else tf.random.experimental.stateless_fold_in(
                tf.cast(seed, tf.int64), _NEXT_ERASE + rectangle
            )
        )
        clip = random_erase(
            clip,
            rectangle_seed,
            config.erase,
            config.erase_area,
            config.erase_side,
            config.erase_fill,
            width_scale if config.erase_width_by_aspect else 1.0,
            draw=1.0 - _uniform(seed, _FLIP)
            if rectangle == 0 and config.erase_spares_flipped
            else None,
        )
    return clip


def evaluation_clip(
    clip: Tensor, size: int, fraction: float = 1.0, keeps_aspect: bool = False
) -> Tensor:
    """The evaluation view: the centred square of `fraction` of the short side (with
    `keeps_aspect`, `fraction` of the height and of the width), resized to size x size.
    Returns float32 (T, size, size, 3) in [0, 1]."""
    box = centre_box(tf.shape(clip)[1], tf.shape(clip)[2], fraction, keeps_aspect)
    return crop_and_resize(clip, box, size)
