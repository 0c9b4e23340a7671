"""Behaviour tests of the per-clip augmentation ops (keras_privacy.data.augment).

Every op is checked against a NumPy reference or an exact property on tiny clips.
"""

import colorsys
import dataclasses
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_privacy.data import augment
from keras_privacy.data.augment import CONTRASTIVE, SUPERVISED, AugmentConfig

pytestmark = pytest.mark.backend_independent

# Nothing random but what a test turns on.
PLAIN = AugmentConfig(
    crop_side=(1.0, 1.0), flip=0.0, jitter=0.0, grayscale=0.0, erase=0.0, erase_area=(0.0, 0.0)
)
LUMA = np.array([0.2989, 0.587, 0.114], np.float32)  # tf.image.rgb_to_grayscale's weights
PRESETS = [
    SUPERVISED,
    CONTRASTIVE,
    augment.SUPERVISED_SPACT_CODE,
    augment.SPACT_CODE_IMAGES,
    augment.SUPERVISED_PENALTY_CODE,
    augment.PENALTY_CODE_IMAGES,
]
PRESET_NAMES = [
    "supervised", "contrastive", "spact_clips", "spact_images", "penalty_clips", "penalty_images"
]  # fmt: skip


def _seed(*values):
    return tf.constant(values, tf.int64)


def _over_seeds(function, count, stream=0):
    """function(seed) for seeds (0, stream) ... (count - 1, stream), traced once (fast)."""
    seeds = tf.stack(
        [tf.range(count, dtype=tf.int64), tf.fill([count], tf.constant(stream, tf.int64))], 1
    )
    run = tf.function(lambda s: tf.map_fn(function, s, fn_output_signature=tf.float32))
    return run(seeds).numpy()


def _random_clip(frames=4, height=24, width=32, seed=0, dtype=np.uint8):
    """A blocky random clip (4x upscaled noise), uint8 in [0, 255] or float in [0, 1]."""
    rng = np.random.default_rng(seed)
    coarse = rng.uniform(0, 1, (frames, height // 4, width // 4, 3)).astype(np.float32)
    clip = np.repeat(np.repeat(coarse, 4, axis=1), 4, axis=2)
    return (clip * 255).round().astype(np.uint8) if dtype == np.uint8 else clip


def _static_clip(frames=4, height=24, width=32, seed=0):
    """A clip whose frames are all the same random image."""
    return np.repeat(_random_clip(1, height, width, seed), frames, axis=0)


def _ramp(height, width):
    """A float image: red ramps 0 -> 1 along x, green along y, blue in raster order."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    red = xx / (width - 1)
    green = yy / (height - 1)
    blue = (xx + width * yy) / (height * width - 1)
    return np.stack([red, green, blue], axis=-1)


# ---------------------------------------------------------------------------- augment_clip


@pytest.mark.parametrize("config", PRESETS, ids=PRESET_NAMES)
def test_static_clip_stays_static(config):
    # One draw of every parameter per clip: a clip of identical frames keeps identical frames.
    clip = _static_clip(frames=5)
    outs = _over_seeds(lambda seed: augment.augment_clip(clip, seed, 16, config), 40, 7)
    assert outs.shape == (40, 5, 16, 16, 3)
    for out in outs:
        for frame in out[1:]:
            np.testing.assert_array_equal(frame, out[0])
    assert len({out.tobytes() for out in outs}) == 40


@pytest.mark.parametrize("config", PRESETS, ids=PRESET_NAMES)
def test_uniform_clip_stays_constant_across_time(config):
    # A uniformly coloured clip stays one colour in every frame; frames never differ.
    clip = np.full((6, 20, 30, 3), [200, 60, 30], np.uint8)
    outs = _over_seeds(lambda seed: augment.augment_clip(clip, seed, 8, config), 40, 1)
    for out in outs:
        np.testing.assert_array_equal(out, np.broadcast_to(out[:1], out.shape))
    assert len({tuple(out[0, 0, 0].round(4)) for out in outs}) > 1  # but the colour is augmented


@pytest.mark.parametrize("config", PRESETS, ids=PRESET_NAMES)
def test_augment_clip_is_seeded(config):
    clip = _random_clip(frames=3)
    first = augment.augment_clip(clip, _seed(3, 4), 16, config).numpy()
    again = augment.augment_clip(clip, _seed(3, 4), 16, config).numpy()
    np.testing.assert_array_equal(first, again)
    for other in (_seed(3, 5), _seed(4, 4)):
        assert not np.allclose(first, augment.augment_clip(clip, other, 16, config).numpy())


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("config", PRESETS, ids=PRESET_NAMES)
def test_augment_clip_output_type_shape_range(dtype, config):
    clip = _random_clip(frames=3, height=20, width=36, dtype=dtype)
    if dtype == np.float32:  # the full [0, 1] range going in
        clip[0, 0, 0] = [0.0, 1.0, 0.0]
    out = augment.augment_clip(clip, _seed(0, 0), 12, config)
    assert out.dtype == tf.float32 and out.shape == (3, 12, 12, 3)
    outs = _over_seeds(lambda seed: augment.augment_clip(clip, seed, 12, config), 40)
    assert outs.min() >= 0.0 and outs.max() <= 1.0
    assert outs.max() > 0.9 and outs.min() < 0.1


def test_uint8_and_float_inputs_give_the_same_clip():
    clip = _random_clip(frames=2)
    as_uint8 = augment.augment_clip(clip, _seed(1, 2), 16, CONTRASTIVE).numpy()
    as_float = augment.augment_clip(clip / np.float32(255), _seed(1, 2), 16, CONTRASTIVE).numpy()
    np.testing.assert_allclose(as_uint8, as_float, atol=1e-5)


def test_plain_config_is_a_resize():
    clip = _random_clip(frames=2, height=16, width=16, dtype=np.float32)
    out = augment.augment_clip(clip, _seed(0, 0), 16, PLAIN).numpy()
    np.testing.assert_allclose(out, clip, atol=1e-6)


def test_flip_in_augment_clip_mirrors_the_clip():
    clip = _random_clip(frames=2, height=16, width=16, dtype=np.float32)
    mirrored = dataclasses.replace(PLAIN, flip=1.0)
    out = augment.augment_clip(clip, _seed(5, 5), 16, mirrored).numpy()
    np.testing.assert_allclose(out, clip[:, :, ::-1], atol=1e-6)


# ---------------------------------------------------------------------------- geometry


def test_maybe_mirror_swaps_x_and_mirrors_the_crop():
    full = tf.constant([0.0, 0.0, 1.0, 1.0])
    kept = augment.maybe_mirror(full, _seed(0, 1), 0.0)
    mirrored = augment.maybe_mirror(full, _seed(0, 1), 1.0)
    np.testing.assert_array_equal(kept.numpy(), full)
    np.testing.assert_array_equal(mirrored.numpy(), [0.0, 1.0, 1.0, 0.0])
    # crop_and_resize of the full box at the clip's size is the clip, of the swapped box its flip
    clip = np.stack([_ramp(8, 8), _ramp(8, 8)[::-1]])
    as_is = augment.crop_and_resize(clip, kept, 8).numpy()
    flipped = augment.crop_and_resize(clip, mirrored, 8).numpy()
    np.testing.assert_allclose(as_is, clip, atol=1e-6)
    np.testing.assert_allclose(flipped, np.flip(clip, axis=2), atol=1e-6)
    assert not np.allclose(flipped, clip)


_CROP_IN_A_PIPELINE = """
import tensorflow as tf
from keras_privacy.data import augment
box = tf.constant([0.1, 0.1, 0.9, 0.9])
clips = tf.data.Dataset.from_tensors(tf.zeros([4, 16, 16, 3], tf.uint8)).repeat(2)
for batch in clips.map(lambda clip: augment.crop_and_resize(clip, box, 8)).batch(2):
    tf.function(tf.reduce_sum)(batch)
"""


def test_crop_and_resize_in_a_pipeline_logs_no_cost_model_error():
    # A box count Grappler could not infer logged "Error in PredictCost()" for every traced
    # crop: 138 lines in the quick start's log.
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "KERAS_BACKEND": "tensorflow"}
    result = subprocess.run(
        [sys.executable, "-c", _CROP_IN_A_PIPELINE], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "PredictCost" not in result.stderr


def test_maybe_mirror_probability():
    box = tf.constant([0.1, 0.2, 0.7, 0.9])
    boxes = {
        p: _over_seeds(lambda seed, p=p: augment.maybe_mirror(box, seed, p), 200)
        for p in (0, 0.5, 1)
    }
    np.testing.assert_array_equal(boxes[0], np.broadcast_to(box, (200, 4)))
    np.testing.assert_allclose(boxes[1], np.broadcast_to([0.1, 0.9, 0.7, 0.2], (200, 4)))
    flipped = boxes[0.5][:, 1] > boxes[0.5][:, 3]
    assert 60 < flipped.sum() < 140


@pytest.mark.parametrize("height, width", [(30, 50), (50, 30), (40, 40)])
@pytest.mark.parametrize(
    "config", [PRESETS[0], PRESETS[2]], ids=[PRESET_NAMES[0], PRESET_NAMES[2]]
)  # the area crop and the aspect kept: below
def test_crop_box_inside_frame_with_side_in_range(config, height, width):
    short = min(height, width)
    sides, aspects = [], []
    for box in _over_seeds(lambda seed: augment.crop_box(seed, height, width, config), 100, 9):
        y1, x1, y2, x2 = box
        assert 0.0 <= y1 < y2 <= 1.0 + 1e-6 and 0.0 <= x1 < x2 <= 1.0 + 1e-6
        crop_h, crop_w = (y2 - y1) * height, (x2 - x1) * width
        side = np.sqrt(crop_h * crop_w) / short
        assert config.crop_side[0] - 1e-4 <= side <= config.crop_side[1] + 1e-4
        sides.append(side)
        if crop_h < height - 1e-3 and crop_w < width - 1e-3:  # not cut by the frame
            aspect = crop_w / crop_h
            assert config.crop_aspect[0] - 1e-4 <= aspect <= config.crop_aspect[1] + 1e-4
            aspects.append(aspect)
    # the whole range is used, and the position varies
    low, high = config.crop_side
    assert min(sides) < low + 0.1 * (high - low) and max(sides) > high - 0.1 * (high - low)
    if config.crop_aspect == (1.0, 1.0):
        np.testing.assert_allclose(aspects, 1.0, atol=1e-4)
    else:
        assert min(aspects) < 0.85 and max(aspects) > 1.2


def _random_resized_crop(rng, height, width, area, aspect):
    """(height, width) of torchvision's RandomResizedCrop.get_params in NumPy (sizes not
    rounded to pixels): the first of 10 draws that fits, else the frame, aspect clipped."""
    for _ in range(10):
        target = rng.uniform(*area) * height * width
        ratio = math.exp(rng.uniform(math.log(aspect[0]), math.log(aspect[1])))
        crop_w, crop_h = math.sqrt(target * ratio), math.sqrt(target / ratio)
        if crop_w <= width and crop_h <= height:
            return crop_h, crop_w
    if width / height < aspect[0]:
        return width / aspect[0], width
    if width / height > aspect[1]:
        return height, height * aspect[1]
    return height, width


@pytest.mark.parametrize("height, width", [(30, 40), (40, 30), (10, 100)])
def test_area_crop_draws_as_torchvisions_random_resized_crop(height, width):
    boxes = _over_seeds(lambda seed: augment.crop_box(seed, height, width, CONTRASTIVE), 2000, 5)
    assert np.all((boxes[:, :2] >= -1e-6) & (boxes[:, 2:] <= 1 + 1e-6))
    crop_h, crop_w = (boxes[:, 2] - boxes[:, 0]) * height, (boxes[:, 3] - boxes[:, 1]) * width
    rng = np.random.default_rng(0)
    reference = np.array(
        [
            _random_resized_crop(rng, height, width, CONTRASTIVE.crop_area, CONTRASTIVE.crop_aspect)
            for _ in range(20000)
        ]
    )
    quantiles = [0.1, 0.25, 0.5, 0.75, 0.9]
    for ours, theirs in (
        (crop_h * crop_w, reference[:, 0] * reference[:, 1]),
        (crop_w / crop_h, reference[:, 1] / reference[:, 0]),
    ):
        np.testing.assert_allclose(
            np.quantile(ours, quantiles), np.quantile(theirs, quantiles), rtol=0.08
        )
    # and the crop's position is random within the frame, but for the fallback
    assert np.ptp(boxes[:, 1]) > 0.1


def test_area_crop_that_never_fits_is_the_centred_frame_with_its_aspect_clipped():
    config = dataclasses.replace(CONTRASTIVE, crop_area=(0.9, 1.0))
    boxes = _over_seeds(lambda seed: augment.crop_box(seed, 10, 100, config), 20)
    side = 10 * 4 / 3 / 100  # the frame's height, and a width of 4/3 of it
    np.testing.assert_allclose(
        boxes, np.broadcast_to([0, 0.5 - side / 2, 1, 0.5 + side / 2], (20, 4)), atol=1e-6
    )


def test_crop_box_position_varies():
    boxes = _over_seeds(lambda seed: augment.crop_box(seed, 40, 60), 50, 2)
    assert np.ptp(boxes[:, 0]) > 0.1 and np.ptp(boxes[:, 1]) > 0.1


def _torch_resized_crop(frames, top, left, bottom, right, size):
    """The authors' resize of a crop (TeD-SPAD's and the penalty code's `Resize(antialias=True)`,
    PIL's bilinear in SPAct's): PyTorch's antialiased bilinear interpolation, NHWC in and out."""
    import torch

    crop = np.ascontiguousarray(frames[:, top:bottom, left:right].transpose(0, 3, 1, 2))
    resized = torch.nn.functional.interpolate(
        torch.from_numpy(crop), (size, size), mode="bilinear", align_corners=False, antialias=True
    )
    return resized.numpy().transpose(0, 2, 3, 1)


@pytest.mark.parametrize(
    "box, size",
    [
        ((0, 10, 40, 50), 20),  # shrinks by 2
        ((4, 6, 36, 54), 20),  # shrinks by 1.6 and 2.4, squeezed to a square
        ((5, 7, 17, 30), 32),  # enlarges
        ((3, 3, 33, 40), 13),
    ],
)
def test_crop_and_resize_equals_torchs_antialiased_resize_of_the_crop(box, size):
    top, left, bottom, right = box
    frames = np.random.default_rng(4).random((2, 40, 60, 3), dtype="float32")
    normalised = tf.constant([top / 40, left / 60, bottom / 40, right / 60])
    out = augment.crop_and_resize(frames, normalised, size).numpy()
    expected = _torch_resized_crop(frames, *box, size)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    mirrored = augment.crop_and_resize(frames, tf.gather(normalised, [0, 3, 2, 1]), size)
    np.testing.assert_allclose(mirrored.numpy(), expected[:, :, ::-1], atol=1e-6)
    as_uint8 = (frames * 255).round().astype(np.uint8)
    np.testing.assert_allclose(
        augment.crop_and_resize(as_uint8, normalised, size).numpy(),
        _torch_resized_crop(as_uint8 / np.float32(255), *box, size),
        atol=1e-6,
    )


def test_crop_and_resize_pads_black_where_the_box_overruns_the_frame():
    # PIL's crop of a box past the image's edge fills the rest with zeros, then resizes.
    frames = np.random.default_rng(5).random((1, 40, 60, 3), dtype="float32")
    out = augment.crop_and_resize(frames, tf.constant([0.5, 0.5, 1.5, 1.5]), 40).numpy()
    padded = np.pad(frames, [(0, 0), (0, 20), (0, 30), (0, 0)])
    np.testing.assert_allclose(out, _torch_resized_crop(padded, 20, 30, 60, 90, 40), atol=1e-6)
    assert np.all(out[0, -15:, -15:] == 0.0)


@pytest.mark.parametrize("height, width", [(40, 60), (60, 40)])
def test_evaluation_clip_takes_the_centred_square(height, width):
    clip = np.stack([_ramp(height, width)] * 2)
    out = augment.evaluation_clip(clip, 20).numpy()
    assert out.shape == (2, 20, 20, 3) and out.dtype == np.float32
    short = min(height, width)
    top, left = (height - short) // 2, (width - short) // 2
    expected = _torch_resized_crop(clip, top, left, top + short, left + short, 20)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    np.testing.assert_array_equal(out[0], out[1])
    # Half the short side, 20 px, at 20 px: the centred pixels themselves.
    half = augment.evaluation_clip(clip, 20, fraction=0.5).numpy()
    top, left = (height - 20) // 2, (width - 20) // 2
    np.testing.assert_allclose(half, clip[:, top : top + 20, left : left + 20], atol=1e-6)


@pytest.mark.parametrize("height, width", [(40, 60), (60, 40)])
def test_evaluation_clip_that_keeps_the_aspect_takes_the_centre_of_both_sides(height, width):
    # The penalty authors' test view: 0.8 of the height and of the width, squeezed to a square.
    clip = np.stack([_ramp(height, width)] * 2)
    out = augment.evaluation_clip(clip, 20, fraction=0.8, keeps_aspect=True).numpy()
    assert out.shape == (2, 20, 20, 3)
    top, left = height // 10, width // 10
    expected = _torch_resized_crop(clip, top, left, height - top, width - left, 20)
    np.testing.assert_allclose(out, expected, atol=1e-6)
    whole = augment.evaluation_clip(clip, 20, keeps_aspect=True).numpy()
    np.testing.assert_allclose(whole, _torch_resized_crop(clip, 0, 0, height, width, 20), atol=1e-6)


def test_eval_action_crop_setting_is_checked():
    from keras_privacy.config import ExperimentConfig

    assert ExperimentConfig().eval_action_crop == 1.0
    for wrong in (0.0, 1.2):
        with pytest.raises(
            ValueError, match=f"--eval_action_crop must be in \\(0, 1\\], got {wrong}"
        ):
            ExperimentConfig(eval_action_crop=wrong).validate()


def test_evaluation_clip_of_uint8_is_scaled_to_unit_range():
    clip = np.zeros((3, 10, 14, 3), np.uint8)
    clip[..., 0] = 255
    clip[1] = 51
    out = augment.evaluation_clip(clip, 6).numpy()
    assert out.dtype == np.float32 and out.shape == (3, 6, 6, 3)
    np.testing.assert_allclose(out[0], np.broadcast_to([1.0, 0.0, 0.0], (6, 6, 3)), atol=1e-6)
    np.testing.assert_allclose(out[1], 0.2, atol=1e-6)


# ---------------------------------------------------------------------------- colour


def _colour(clip, seed, config):
    return augment.random_colour(tf.constant(clip, tf.float32), _seed(*seed), config).numpy()


def test_grayscale_only_is_luminance_in_every_channel():
    config = AugmentConfig(jitter=0.0, grayscale=1.0)
    clip = _random_clip(frames=3, dtype=np.float32)
    expected = tf.image.rgb_to_grayscale(clip).numpy()
    for seed in range(5):
        out = _colour(clip, (seed, 0), config)
        np.testing.assert_allclose(out, np.repeat(expected, 3, axis=-1), atol=1e-5)


def test_no_jitter_no_grayscale_is_identity():
    config = AugmentConfig(jitter=0.0, grayscale=0.0)
    clip = _random_clip(frames=2, dtype=np.float32)
    np.testing.assert_allclose(_colour(clip, (4, 4), config), clip, atol=1e-6)


def _reference_jitter(clip, brightness, contrast, saturation):
    """Brightness, then contrast towards the mean luminance of the brightness-scaled clip, then
    saturation (no clipping in between), then one clip to [0, 1]."""
    scaled = brightness * clip
    mean_luma = (scaled @ LUMA).mean()
    contrasted = contrast * scaled + (1 - contrast) * mean_luma
    luma = (contrasted @ LUMA)[..., None]
    saturated = saturation * contrasted + (1 - saturation) * luma
    return np.clip(saturated, 0.0, 1.0)


def _drawn(seed, stream, strength):
    return float(augment._uniform(_seed(*seed), stream, 1 - strength, 1 + strength))


@pytest.mark.parametrize("strength", [0.2, 0.8])
def test_jitter_matches_numpy_reference(strength):
    config = AugmentConfig(
        jitter=1.0,
        brightness=strength,
        contrast=strength,
        saturation=strength,
        hue=0.0,
        grayscale=0.0,
    )
    clip = _random_clip(frames=3, dtype=np.float32)
    changed = 0
    for seed in [(s, 11) for s in range(6)]:
        factors = [
            _drawn(seed, stream, strength)
            for stream in (augment._BRIGHTNESS, augment._CONTRAST, augment._SATURATION)
        ]
        expected = _reference_jitter(clip, *factors)
        out = _colour(clip, seed, config)
        np.testing.assert_allclose(out, expected, atol=2e-5)
        changed += not np.allclose(out, clip, atol=1e-3)
    assert changed == 6


def test_jitter_probability_zero_keeps_colours_and_one_changes_them():
    clip = _random_clip(frames=2, dtype=np.float32)
    never = dataclasses.replace(SUPERVISED, jitter=0.0, grayscale=0.0)
    always = dataclasses.replace(SUPERVISED, jitter=1.0, grayscale=0.0)
    for seed in range(5):
        np.testing.assert_allclose(_colour(clip, (seed, 2), never), clip, atol=1e-6)
        assert not np.allclose(_colour(clip, (seed, 2), always), clip, atol=1e-3)


def _hsv_shifted(clip: np.ndarray, turns: float) -> np.ndarray:
    """Each pixel's HSV hue shifted by `turns`, by Python's colorsys (torchvision's adjust_hue)."""
    pixels = [colorsys.rgb_to_hsv(*rgb) for rgb in clip.reshape(-1, 3)]
    shifted = [colorsys.hsv_to_rgb((h + turns) % 1.0, s, v) for h, s, v in pixels]
    return np.array(shifted, np.float32).reshape(clip.shape)


def test_hue_is_the_hsv_shift_of_torchvision():
    config = AugmentConfig(
        jitter=1.0, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.5, grayscale=0.0
    )
    clip = _random_clip(frames=2, dtype=np.float32)
    moved = 0
    for seed in range(8):
        turns = float(augment.hue_turns(_seed(seed, 3), config))
        out = _colour(clip, (seed, 3), config)
        np.testing.assert_allclose(out, _hsv_shifted(clip, turns), atol=1e-5)
        moved += np.abs(out - clip).max() > 0.01
    assert moved >= 6  # the hue did change (the shift is 0 only by chance)


def test_hue_comes_first_and_the_linear_ops_read_its_colours():
    """Hue, then brightness, contrast towards the hue-shifted clip's mean luminance, saturation
    towards each shifted pixel's luminance: SPAct's loaders' order (hue before saturation and
    brightness)."""
    config = AugmentConfig(
        jitter=1.0, brightness=0.3, contrast=0.3, saturation=0.3, hue=0.3, grayscale=0.0
    )
    clip = 0.2 + 0.6 * _random_clip(frames=2, dtype=np.float32)
    for seed in [(s, 13) for s in range(4)]:
        turns = float(augment.hue_turns(_seed(*seed), config))
        factors = [
            _drawn(seed, stream, 0.3)
            for stream in (augment._BRIGHTNESS, augment._CONTRAST, augment._SATURATION)
        ]
        expected = _reference_jitter(_hsv_shifted(clip, turns), *factors)
        np.testing.assert_allclose(_colour(clip, seed, config), expected, atol=2e-5)


def test_hue_applies_on_its_own_rate_and_only_with_the_jitter():
    config = dataclasses.replace(augment.SUPERVISED_SPACT_CODE, jitter_each=(0, 0, 0, 0.15))
    turns = _over_seeds(lambda seed: augment.hue_turns(seed, config), 400, 6)
    assert abs((turns != 0).mean() - 0.15) < 0.05
    assert np.abs(turns).max() <= 0.05
    never = dataclasses.replace(config, jitter=0.0, jitter_each=(0, 0, 0, 1))
    assert not _over_seeds(lambda seed: augment.hue_turns(seed, never), 50, 6).any()


def test_hue_zero_is_identity():
    config = AugmentConfig(
        jitter=1.0, brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0, grayscale=0.0
    )
    clip = _random_clip(frames=2, dtype=np.float32)
    np.testing.assert_allclose(_colour(clip, (1, 1), config), clip, atol=1e-5)


def test_colour_map_is_shared_by_all_frames():
    # Contrast uses the mean luminance of the WHOLE clip: frame 0 alone is mapped differently.
    config = dataclasses.replace(CONTRASTIVE, jitter=1.0, grayscale=0.0, hue=0.0)
    clip = _random_clip(frames=3, dtype=np.float32)
    clip[1:] *= 0.5
    seed = (7, 7)
    whole = _colour(clip, seed, config)
    matrix, offset = augment.colour_transform(tf.constant(clip), _seed(*seed), config)
    per_pixel = np.clip(clip @ matrix.numpy() + offset.numpy(), 0, 1)
    np.testing.assert_allclose(whole, per_pixel, atol=1e-5)


def test_spacts_contrast_pulls_each_frame_to_its_own_mean_luminance():
    # SPAct's loaders adjust each frame as a PIL image (dl_ft_nov.py:177-190), so contrast
    # blends every frame with its own mean grey; the rest of the map is the clip's.
    config = dataclasses.replace(
        PLAIN,
        jitter=1.0,
        brightness=0.3,
        contrast=0.3,
        saturation=0.0,
        hue=0.0,
        contrast_per_frame=True,
    )
    clip = 0.3 + 0.4 * _random_clip(frames=3, dtype=np.float32)
    clip[1] *= 0.5  # a darker frame: its own mean differs from the clip's
    for seed in [(s, 12) for s in range(4)]:
        brightness = _drawn(seed, augment._BRIGHTNESS, 0.3)
        contrast = _drawn(seed, augment._CONTRAST, 0.3)
        scaled = brightness * clip
        frame_luma = (scaled @ LUMA).mean(axis=(1, 2))[:, None, None, None]
        expected = np.clip(contrast * scaled + (1 - contrast) * frame_luma, 0.0, 1.0)
        np.testing.assert_allclose(_colour(clip, seed, config), expected, atol=2e-5)
        per_clip = _colour(clip, seed, dataclasses.replace(config, contrast_per_frame=False))
        assert np.abs(per_clip - expected).max() > 1e-3
    # A static clip: the frames' means are the clip's, and so are both maps.
    static = _static_clip(frames=3).astype(np.float32) / 255
    np.testing.assert_allclose(
        _colour(static, (1, 12), config),
        _colour(static, (1, 12), dataclasses.replace(config, contrast_per_frame=False)),
        atol=1e-6,
    )
    for preset in (augment.SUPERVISED_SPACT_CODE, augment.SUPERVISED_PENALTY_CODE):
        assert preset.contrast_per_frame
    assert not SUPERVISED.contrast_per_frame and not CONTRASTIVE.contrast_per_frame


# ---------------------------------------------------------------------------- erase


def _erased_mask(before, after):
    return np.any(before != after, axis=-1)


@pytest.mark.parametrize("area", [(0.02, 0.2), (0.1, 0.33)])
def test_random_erase_fills_one_rectangle_in_every_frame(area):
    height, width = 48, 64
    clip = _random_clip(frames=3, height=height, width=width, dtype=np.float32) * 0.9 + 0.05
    fractions = []
    for seed in range(15):
        out = augment.random_erase(tf.constant(clip), _seed(seed, 5), 1.0, area).numpy()
        mask = _erased_mask(clip, out)
        # the same pixels in every frame ...
        assert mask.any()
        np.testing.assert_array_equal(mask, np.broadcast_to(mask[:1], mask.shape))
        # ... form a filled rectangle ...
        rows, cols = np.flatnonzero(mask[0].any(axis=1)), np.flatnonzero(mask[0].any(axis=0))
        assert rows.size == rows[-1] - rows[0] + 1 and cols.size == cols[-1] - cols[0] + 1
        assert mask[0].sum() == rows.size * cols.size
        # ... of one colour, the same in every frame, in [0, 1]
        fill = out[0, rows[0], cols[0]]
        np.testing.assert_array_equal(out[:, mask[0]], np.broadcast_to(fill, (3, mask[0].sum(), 3)))
        assert np.all((fill >= 0) & (fill <= 1))
        # the rest untouched
        np.testing.assert_array_equal(out[:, ~mask[0]], clip[:, ~mask[0]])
        # area in range, up to whole-pixel rounding of each side
        fraction = rows.size * cols.size / (height * width)
        slack = (rows.size + cols.size + 1) / (height * width)
        assert area[0] - slack <= fraction <= area[1] + slack
        fractions.append(fraction)
    assert max(fractions) - min(fractions) > 0.3 * (area[1] - area[0])


def test_random_erase_probability():
    clip = tf.constant(_random_clip(frames=2, dtype=np.float32))
    for seed in range(10):
        np.testing.assert_array_equal(
            augment.random_erase(clip, _seed(seed, 0), 0.0, (0.1, 0.2)).numpy(), clip
        )
    outs = _over_seeds(lambda seed: augment.random_erase(clip, seed, 0.5, (0.1, 0.2)), 100)
    erased = np.any(outs != clip.numpy(), axis=(1, 2, 3, 4))
    assert 25 < erased.sum() < 75


def test_grayscale_rate_in_augment_clip():
    # SUPERVISED drops colour in 10 % of the clips, CONTRASTIVE in 20 %.
    clip = _static_clip(frames=1, height=32, width=32)
    for config in (SUPERVISED, CONTRASTIVE):
        config = dataclasses.replace(config, erase=0.0)
        outs = _over_seeds(lambda seed, c=config: augment.augment_clip(clip, seed, 16, c), 200, 8)
        gray = np.all(np.abs(outs - outs[..., :1]) < 1e-5, axis=(1, 2, 3, 4))
        assert abs(gray.mean() - config.grayscale) < 0.07


def test_each_jitter_op_keeps_its_own_probability():
    # Brightness alone on every clip, then on none: the map is brightness * I, then I.
    clip = _random_clip(frames=2, dtype=np.float32)
    only = dataclasses.replace(PLAIN, jitter=1.0, brightness=0.3, jitter_each=(1, 0, 0, 0))
    for seed in [(s, 5) for s in range(4)]:
        matrix, offset = augment.colour_transform(clip, _seed(*seed), only)
        expected = _drawn(seed, augment._BRIGHTNESS, 0.3) * np.eye(3)
        np.testing.assert_allclose(matrix.numpy(), expected, atol=1e-6)
        np.testing.assert_allclose(offset.numpy(), 0.0, atol=1e-6)
    none = dataclasses.replace(only, jitter_each=(0, 0, 0, 0))
    np.testing.assert_allclose(_colour(clip, (1, 5), none), clip, atol=1e-6)


def test_spacts_supervised_colour_changes_as_many_clips_as_its_loaders():
    # Each op on its own 15 / 12.5 / 15 / 15 %: some op on 1 - 0.85 * 0.875 * 0.85 * 0.85.
    config = dataclasses.replace(augment.SUPERVISED_SPACT_CODE, grayscale=0.0)
    clip = tf.constant(_random_clip(frames=1, dtype=np.float32))

    def distance(seed):
        matrix, offset = augment.colour_transform(clip, seed, config)
        hue = tf.abs(augment.hue_turns(seed, config))
        return tf.reduce_sum(tf.abs(matrix - tf.eye(3))) + tf.reduce_sum(tf.abs(offset)) + hue

    changed = _over_seeds(distance, 400, 6) > 1e-6
    assert abs(changed.mean() - (1 - 0.85 * 0.875 * 0.85 * 0.85)) < 0.07


def test_gamma_reaches_grayscale_clips_only():
    clip = tf.constant(_random_clip(frames=2, dtype=np.float32))
    squared = dataclasses.replace(PLAIN, grayscale=1.0, gamma=(2.0, 2.0), gamma_probability=1.0)
    out = augment.random_gamma(clip, _seed(0, 0), squared)
    np.testing.assert_allclose(out.numpy(), clip.numpy() ** 2, rtol=1e-5)
    colour = dataclasses.replace(squared, grayscale=0.0)
    np.testing.assert_array_equal(augment.random_gamma(clip, _seed(0, 0), colour).numpy(), clip)
    rate = dataclasses.replace(squared, gamma_probability=0.75)
    outs = _over_seeds(lambda seed: augment.random_gamma(clip, seed, rate), 200, 9)
    gamma = np.any(np.abs(outs - clip.numpy()) > 1e-6, axis=(1, 2, 3, 4))
    assert abs(gamma.mean() - 0.75) < 0.08


def test_supervised_augmentation_setting_picks_the_preset():
    from keras_privacy.config import ExperimentConfig

    spact = ExperimentConfig(supervised_augmentation="spact", flip_probability=0.0)
    assert spact.image_augmentation() == augment.SPACT_CODE_IMAGES
    assert spact.action_augmentation().jitter_each == (0.15, 0.125, 0.15, 0.15)
    assert spact.action_augmentation().flip == 0.0
    assert ExperimentConfig().image_augmentation() == SUPERVISED
    with pytest.raises(ValueError, match="--supervised_augmentation"):
        ExperimentConfig(supervised_augmentation="strong").validate()


def test_spacts_erase_is_a_small_black_rectangle_cut_at_the_edges():
    # At the authors' 128 px (parameters_BL.py): sides of 9-18 px, a pixel of rounding either way.
    clip = tf.ones([2, 128, 128, 3])
    config = augment.SUPERVISED_SPACT_CODE
    cut = 0
    for seed in range(40):
        out = augment.random_erase(
            clip, _seed(seed, 7), 1.0, config.erase_area, config.erase_side, config.erase_fill
        ).numpy()
        erased = np.all(out == 0.0, axis=-1)
        np.testing.assert_array_equal(erased[0], erased[1])  # the same in every frame
        assert np.all((out == 0.0) | (out == 1.0))  # black, nothing else touched
        rows, cols = np.nonzero(erased[0].any(axis=1))[0], np.nonzero(erased[0].any(axis=0))[0]
        assert erased[0][rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all()  # a rectangle
        height, width = len(rows), len(cols)
        assert 1 <= height <= 19 and 1 <= width <= 19
        at_edge = rows[-1] == 127 or cols[-1] == 127
        cut += at_edge
        if not at_edge:
            assert height >= 8 and width >= 8
    assert 0 < cut < 40  # some rectangles run off the frame, as the authors' do


def _flipped_and_erased(config, seeds):
    """Per seed, whether augment_clip flipped and whether it erased a clip whose red rises
    left to right (0.2 to 1) on a grey ground, so that black pixels can only be erased ones."""
    red = np.linspace(0.2, 1.0, 32, dtype=np.float32)
    clip = np.full((2, 24, 32, 3), 0.5, np.float32)
    clip[..., 0] = red
    outs = _over_seeds(lambda seed: augment.augment_clip(clip, seed, 24, config), seeds, 13)
    # crop_and_resize of the whole frame at a new size keeps the columns' order, or mirrors it
    flipped = outs[:, 0, :, :12, 0].mean(axis=(1, 2)) > outs[:, 0, :, -12:, 0].mean(axis=(1, 2))
    erased = np.any(np.all(outs == 0.0, axis=-1), axis=(1, 2, 3))
    return flipped, erased


def test_spacts_loaders_never_erase_a_flipped_clip():
    # SPAct's loaders flip where their draw is above 0.5 and erase where the same draw is below
    # 0.25 (dl_ft_nov.py:191, 196): each keeps its own probability, never the two together.
    spact = augment.SUPERVISED_SPACT_CODE
    coupled = dataclasses.replace(
        PLAIN,
        crop_side=(1.0, 1.0),
        flip=0.5,
        erase=0.25,
        erase_side=spact.erase_side,
        erase_fill=0.0,
        erase_spares_flipped=True,
    )
    flipped, erased = _flipped_and_erased(coupled, 400)
    assert not np.any(flipped & erased)
    assert abs(flipped.mean() - 0.5) < 0.07 and abs(erased.mean() - 0.25) < 0.06
    # Drawn on their own, a clip is both on about 0.5 x 0.25 of the seeds.
    flipped, erased = _flipped_and_erased(
        dataclasses.replace(coupled, erase_spares_flipped=False), 400
    )
    assert abs((flipped & erased).mean() - 0.125) < 0.05
    # SPAct's clips, its images and views, and the penalty code's images share the coupling;
    # the penalty code's clip loader draws its two rectangles on their own (ucf101_dl.py:179-182).
    for preset in (spact, augment.SPACT_CODE_IMAGES, augment.PENALTY_CODE_IMAGES):
        assert preset.erase_spares_flipped
    assert not augment.SUPERVISED_PENALTY_CODE.erase_spares_flipped
    assert not SUPERVISED.erase_spares_flipped and not CONTRASTIVE.erase_spares_flipped


def test_a_crop_that_keeps_the_aspect_takes_one_fraction_of_both_sides():
    config = dataclasses.replace(PLAIN, crop_side=(0.6, 1.0), crop_keeps_aspect=True)
    for seed in range(20):
        y1, x1, y2, x2 = augment.crop_box(_seed(seed, 3), 60, 200, config).numpy()
        assert y2 - y1 == pytest.approx(x2 - x1, abs=1e-6)  # the same normalised fraction
        assert 0.6 - 1e-6 <= y2 - y1 <= 1.0 + 1e-6
        assert 0 <= y1 and y2 <= 1 + 1e-6 and 0 <= x1 and x2 <= 1 + 1e-6


def test_contrastive_augmentation_setting_picks_the_views_preset():
    from keras_privacy.config import ExperimentConfig

    assert ExperimentConfig().view_augmentation() == CONTRASTIVE
    spact = ExperimentConfig(contrastive_augmentation="spact", supervised_augmentation="spact")
    assert spact.view_augmentation() == augment.SPACT_CODE_IMAGES
    assert spact.image_augmentation().crop_keeps_aspect
    assert not spact.action_augmentation().crop_keeps_aspect  # the clips' crop is square
    with pytest.raises(ValueError, match="--contrastive_augmentation"):
        ExperimentConfig(contrastive_augmentation="strong").validate()


def _erased(config, seeds, size=112, stream=11, frame=None):
    """Masks (seed, H, W) of the pixels `config`'s augment_clip blacks out in a white clip of
    `frame` (height, width; None: size x size)."""
    clip = np.ones((2, *(frame or (size, size)), 3), np.float32)
    outs = _over_seeds(lambda seed: augment.augment_clip(clip, seed, size, config), seeds, stream)
    # black, nothing else touched (the resize's weights sum to 1 within float rounding)
    assert np.all((outs == 0.0) | np.isclose(outs, 1.0, rtol=0, atol=1e-6))
    np.testing.assert_array_equal(outs[:, 0], outs[:, 1])  # the same in every frame
    return np.all(outs[:, 0] == 0.0, axis=-1)


def test_penaltys_clips_lose_up_to_two_black_rectangles_each_on_its_own_draw():
    # The penalty loader's erase alone: the first rectangle is the one-rectangle draw, the second
    # adds to it; each of 40-79 x 53-105 px at 224 for a 4:3 video (here 20-40 x 26.5-53 at 112).
    penalty = augment.SUPERVISED_PENALTY_CODE
    erase_only = dataclasses.replace(
        PLAIN,
        erase=1.0,
        erase_count=2,
        erase_side=penalty.erase_side,
        erase_width_by_aspect=penalty.erase_width_by_aspect,
        erase_fill=0.0,
    )
    two = _erased(erase_only, 60, frame=(96, 128))
    one = _erased(dataclasses.replace(erase_only, erase_count=1), 60, frame=(96, 128))
    assert np.all(two >= one) and np.any(two.sum((1, 2)) > one.sum((1, 2)))
    for mask in one:
        rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
        assert mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all()  # a rectangle
        if rows[-1] < 111:  # not cut by the frame's edge
            assert 20 <= len(rows) <= 41
        if cols[-1] < 111:
            assert 26 <= len(cols) <= 54
    # Two rectangles that do not overlap leave an erased area below their bounding box's.
    boxes = [m[np.ix_(m.any(axis=1), m.any(axis=0))] for m in two]
    assert any(not box.all() for box in boxes)

    # At p = 0.4 each: some rectangle on 1 - 0.6^2 of the clips, a second on 0.4 of those with
    # a first; the rectangles' draws are independent of the preset's colour and crop.
    rated = dataclasses.replace(erase_only, erase=0.4)
    two = _erased(rated, 400, frame=(96, 128))
    one = _erased(dataclasses.replace(rated, erase_count=1), 400, frame=(96, 128))
    assert abs(two.any(axis=(1, 2)).mean() - 0.64) < 0.07
    assert abs(one.any(axis=(1, 2)).mean() - 0.4) < 0.07


def test_penaltys_clip_erase_is_as_wide_as_the_video_is():
    # The authors size the widths by the video's width in pixels (ucf101_dl.py:121): a
    # 240 x 426 HMDB51 video's are 71-141 px at 224 (here 35.5-70.5 at 112), its heights still
    # 40-79 px (20-40); the same rectangles on a square frame are 20-40 px wide.
    penalty = augment.SUPERVISED_PENALTY_CODE
    erase_only = dataclasses.replace(
        PLAIN,
        erase=1.0,
        erase_side=penalty.erase_side,
        erase_width_by_aspect=True,
        erase_fill=0.0,
    )
    for frame, widths in (((96, 170), (35, 72)), ((96, 96), (19, 41))):
        seen = []
        for mask in _erased(erase_only, 60, frame=frame):
            rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
            if rows[-1] < 111:
                assert 20 <= len(rows) <= 41
            if cols[-1] < 111:
                assert widths[0] <= len(cols) <= widths[1], frame
                seen.append(len(cols))
        assert max(seen) - min(seen) > (widths[1] - widths[0]) / 2  # the range, not one width


def test_penaltys_images_lose_one_rectangle_of_9_to_18_pixels_at_224():
    config = dataclasses.replace(PLAIN, **{
        name: getattr(augment.PENALTY_CODE_IMAGES, name)
        for name in ("erase_count", "erase_side", "erase_width_by_aspect", "erase_fill")
    }, erase=1.0)  # fmt: skip
    for mask in _erased(config, 40, size=224):
        rows, cols = np.nonzero(mask.any(axis=1))[0], np.nonzero(mask.any(axis=0))[0]
        assert mask[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all()
        assert 1 <= len(rows) <= 19 and 1 <= len(cols) <= 19
        if rows[-1] < 223 and cols[-1] < 223:
            assert len(rows) >= 8 and len(cols) >= 8


def test_penalty_augmentation_setting_picks_the_penalty_loaders():
    from keras_privacy.config import ExperimentConfig

    penalty = ExperimentConfig(supervised_augmentation="penalty", erase_probability=0.4)
    clips = penalty.action_augmentation()
    assert (clips.erase, clips.erase_count, clips.erase_fill) == (0.4, 2, 0.0)
    assert clips.crop_keeps_aspect and clips.jitter_each == (0.15, 0.125, 0.15, 0.15)
    assert penalty.image_augmentation() == augment.PENALTY_CODE_IMAGES
    assert penalty.image_augmentation().erase_count == 1
    views = ExperimentConfig(contrastive_augmentation="penalty").view_augmentation()
    assert views == augment.PENALTY_CODE_IMAGES
