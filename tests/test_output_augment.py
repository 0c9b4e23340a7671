import keras
import numpy as np
import pytest
import tiny_models
from tiny_models import AdversaryHalfOnly, AnonymizerHalfOnly, changed_groups, snapshot

from keras_privacy.methods.output_augment import (
    ColourJitter,
    RandomResizedCrop,
    hashed_uniform,
    jitter_colours,
)
from keras_privacy.methods.spact import SPAct

RNG = np.random.default_rng(0)
IMAGES = RNG.uniform(0.1, 0.9, (3, 5, 6, 3)).astype("float32")


def reference_jitter(image, brightness, contrast, saturation, hue, grayscale):
    """One image, pixel by pixel: brightness, then hue and saturation in NTSC's YIQ, then
    contrast around the mean luma, clipped."""
    out = np.empty_like(image)
    for index in np.ndindex(image.shape[:2]):
        r, g, b = brightness * image[index]
        y = 0.299 * r + 0.587 * g + 0.114 * b
        i = 0.596 * r - 0.274 * g - 0.322 * b
        q = 0.211 * r - 0.523 * g + 0.312 * b
        angle = 2 * np.pi * hue
        i, q = i * np.cos(angle) - q * np.sin(angle), i * np.sin(angle) + q * np.cos(angle)
        chroma = 0.0 if grayscale else saturation
        i, q = chroma * i, chroma * q
        # The inverse of the matrix above (NTSC's YIQ -> RGB, rounded to 4 digits).
        out[index] = (
            y + 0.9563 * i + 0.6210 * q,
            y - 0.2721 * i - 0.6474 * q,
            y - 1.1070 * i + 1.7046 * q,
        )
    luma = out @ np.array([0.299, 0.587, 0.114])
    return np.clip((out - luma.mean()) * contrast + luma.mean(), 0.0, 1.0)


def factors(*values):
    return [np.full(len(IMAGES), v, "float32") for v in values]


def test_neutral_factors_leave_images_unchanged():
    out = jitter_colours(IMAGES, *factors(1.0, 1.0, 1.0, 0.0, 0.0))
    np.testing.assert_allclose(out, IMAGES, atol=1e-5)


def test_a_full_hue_turn_is_the_identity():
    out = jitter_colours(IMAGES, *factors(1.0, 1.0, 1.0, 1.0, 0.0))
    np.testing.assert_allclose(out, IMAGES, atol=1e-5)


def test_grayscale_gives_equal_channels_of_the_same_luma():
    out = keras.ops.convert_to_numpy(jitter_colours(IMAGES, *factors(1.0, 1.0, 1.0, 0.0, 1.0)))
    np.testing.assert_allclose(out[..., 0], out[..., 2], atol=1e-5)
    luma = np.array([0.299, 0.587, 0.114])
    np.testing.assert_allclose(out @ luma, IMAGES @ luma, atol=1e-4)


@pytest.mark.parametrize(
    "values", [(1.3, 0.7, 1.5, 0.1, 0.0), (0.6, 1.4, 0.3, -0.15, 0.0), (1.1, 1.2, 1.0, 0.05, 1.0)]
)
def test_jitter_matches_a_per_pixel_reference(values):
    out = keras.ops.convert_to_numpy(jitter_colours(IMAGES, *factors(*values)))
    for image, result in zip(IMAGES, out):
        np.testing.assert_allclose(result, reference_jitter(image, *values), atol=2e-3)


def reference_hashed_uniform(seed: int, counter: int, count: int) -> np.ndarray:
    """The layer's draws in NumPy: lowbias32 of (position ^ key) * golden + key, the key the
    hash of the counter plus the seed's hash."""

    def mix(x):
        x = x ^ (x >> 16)
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> 15)
        x = x * np.uint32(0x846CA68B)
        return x ^ (x >> 16)

    with np.errstate(over="ignore"):
        key = mix(np.uint32(counter) + mix(np.uint32(seed)))
        bits = mix((np.arange(count, dtype=np.uint32) ^ key) * np.uint32(0x9E3779B9) + key)
    return (bits >> 8).astype(np.float32) / 2**24


def test_draws_match_a_numpy_reference_so_both_backends_draw_the_same():
    for seed, counter in ((0, 0), (7, 3), (2**31 + 5, 1000)):
        expected = reference_hashed_uniform(seed, counter, 1000)
        drawn = keras.ops.convert_to_numpy(hashed_uniform(seed, counter, 1000))
        np.testing.assert_array_equal(drawn, expected)
    assert 0.45 < expected.mean() < 0.55 and expected.min() >= 0 and expected.max() < 1


def test_neighbouring_seeds_draw_unrelated_streams():
    """Seed s + 1 at call c is not seed s at call c + 1 (the crop layer takes the jitter's seed
    + 1, and --seeds runs neighbouring seeds)."""
    for counter in range(3):
        later = keras.ops.convert_to_numpy(hashed_uniform(1, counter + 1, 64))
        neighbour = keras.ops.convert_to_numpy(hashed_uniform(2, counter, 64))
        assert not np.allclose(later, neighbour)


def test_layer_draws_new_factors_per_image_and_per_call_and_repeats_with_its_seed():
    same = np.repeat(IMAGES[:1], 4, axis=0)
    layer = ColourJitter(1.0, seed=5)
    first = keras.ops.convert_to_numpy(layer(same))
    second = keras.ops.convert_to_numpy(layer(same))
    assert not np.allclose(first[0], first[1])
    assert not np.allclose(first, second)
    assert first.min() >= 0.0 and first.max() <= 1.0
    np.testing.assert_allclose(ColourJitter(1.0, seed=5)(same), first, atol=1e-6)


def test_zero_strength_without_grayscale_is_the_identity():
    layer = ColourJitter(0.0, grayscale_probability=0.0, seed=1)
    np.testing.assert_allclose(layer(IMAGES), IMAGES, atol=1e-5)


def test_config_round_trip_and_bad_arguments():
    layer = ColourJitter(0.5, grayscale_probability=0.3, seed=2)
    assert ColourJitter.from_config(layer.get_config()).get_config() == layer.get_config()
    with pytest.raises(ValueError, match="strength"):
        ColourJitter(-1.0)
    with pytest.raises(ValueError, match="grayscale_probability"):
        ColourJitter(1.0, grayscale_probability=1.5)


def reference_crop(image, side, x0, y0, flip):
    """One image, pixel by pixel: the crop of `side` x (size - 1) pixels from (y0, x0),
    sampled bilinearly on the output grid, mirrored when `flip`."""
    size = image.shape[0]
    out = np.empty_like(image)
    for o in range(size):
        for p in range(size):
            y, x = y0 + side * o, x0 + side * (size - 1 - p if flip else p)
            y1, x1 = min(int(y), size - 2), min(int(x), size - 2)
            dy, dx = y - y1, x - x1
            out[o, p] = (
                image[y1, x1] * (1 - dy) * (1 - dx)
                + image[y1 + 1, x1] * dy * (1 - dx)
                + image[y1, x1 + 1] * (1 - dy) * dx
                + image[y1 + 1, x1 + 1] * dy * dx
            )
    return out


def test_crop_matches_a_per_pixel_reference_with_the_layers_draws():
    images = RNG.uniform(0, 1, (3, 6, 6, 3)).astype("float32")
    out = keras.ops.convert_to_numpy(RandomResizedCrop(0.3, seed=4)(images))
    draws = reference_hashed_uniform(4, 0, 12).reshape(4, 3)
    for i, image in enumerate(images):
        side = np.sqrt(0.3 + 0.7 * draws[0, i])
        x0, y0 = (draws[1:3, i] * (1 - side) * 5).astype(np.float64)
        expected = reference_crop(image, side, x0, y0, draws[3, i] < 0.5)
        np.testing.assert_allclose(out[i], expected, atol=1e-5)


def test_full_crop_keeps_or_mirrors_each_image_as_drawn_and_redraws_per_call():
    """With the whole image kept, each image is itself or its mirror as the call's fourth row
    of draws says, and every call draws anew (its counter in the draws' key)."""
    layer = RandomResizedCrop(1.0, seed=0)
    flips = set()
    for call in range(4):
        out = keras.ops.convert_to_numpy(layer(IMAGES))
        flip = reference_hashed_uniform(0, call, 4 * len(IMAGES)).reshape(4, -1)[3] < 0.5
        for image, result, mirrored in zip(IMAGES, out, flip, strict=True):
            np.testing.assert_allclose(result, image[:, ::-1] if mirrored else image, atol=1e-5)
        flips.add(tuple(flip))
    assert len(flips) > 1
    assert int(layer.calls.numpy()) == 4
    assert RandomResizedCrop.from_config(layer.get_config()).get_config() == layer.get_config()
    with pytest.raises(ValueError, match="min_area"):
        RandomResizedCrop(0.0)


def make_trainer(cls=SPAct, **kwargs):
    kwargs = {"adversary_jitter": 1.0, **kwargs}
    trainer = cls(
        tiny_models.anonymizer(),
        tiny_models.action_model(),
        tiny_models.privacy_encoder(),
        augment_seed=0,
        **kwargs,
    )
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in ("anonymizer", "action", "privacy")})
    return trainer


def augment_calls(trainer) -> list[int]:
    return [int(layer.calls.numpy()) for layer in trainer.augment.layers]


@pytest.mark.parametrize("crop", [0.0, 0.5])
@pytest.mark.parametrize(
    "cls, trained",
    [
        (AnonymizerHalfOnly, {"anonymizer", "augment"}),
        (AdversaryHalfOnly, {"action", "privacy", "augment"}),
        (SPAct, {"anonymizer", "action", "privacy", "augment"}),
    ],
)
def test_each_half_advances_the_augmentations_and_trains_only_its_groups(cls, trained, crop):
    trainer = make_trainer(cls, adversary_crop=crop)
    before, calls_before = snapshot(trainer), augment_calls(trainer)
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == trained
    steps = 2 if cls is SPAct else 1
    assert augment_calls(trainer) == [calls + steps for calls in calls_before]


def test_with_a_crop_both_sides_of_a_pair_come_from_one_anonymized_image():
    data = tiny_models.batch(np.random.default_rng(0))
    for crop, same in ((0.0, False), (0.5, True)):
        trainer = make_trainer(adversary_crop=crop)
        _, (first, second), _, _ = trainer._anonymize(trainer.current_values(), data, False)
        assert np.array_equal(np.asarray(first), np.asarray(second)) == same


def test_the_adversary_loss_is_taken_on_the_augmented_sides():
    data = tiny_models.batch(np.random.default_rng(0))
    trainer = make_trainer(adversary_crop=0.5)
    values = trainer.current_values()
    _, (first, second), _, _ = trainer._anonymize(values, data, False)
    augmented_loss, _ = trainer._privacy_term(values, first, second, False)
    unaugmented_loss, _ = trainer._adversary_term(values, first, second, False)
    # Both sides are one image before the augmentations, two different views after them.
    assert abs(float(augmented_loss) - float(unaugmented_loss)) > 1e-3


@pytest.mark.parametrize("augment", [{}, {"adversary_crop": 0.5}])
def test_the_augmentations_pass_the_privacy_gradient_to_the_anonymized_frames(augment):
    """f_A's privacy gradient flows through the jitter (and the crop): the gradient of L_B with
    respect to the anonymized views is not zero and equals its finite difference."""
    from keras_privacy.backend import value_and_gradient

    trainer = make_trainer(**augment)
    tiny_models.deterministic_weights(trainer.privacy_encoder, 3)
    values = trainer.current_values()
    data = tiny_models.tinted(tiny_models.batch(np.random.default_rng(0)), np.random.default_rng(1))
    _, (first, second), _, _ = trainer._anonymize(values, data, False)
    first, second = np.asarray(first), np.asarray(second)

    def privacy_loss(sides):
        return trainer._privacy_term(values, sides[0], second, False)[0]

    _, (gradient,) = value_and_gradient(privacy_loss, [keras.ops.convert_to_tensor(first)])
    gradient = np.asarray(gradient, "float64")
    assert np.abs(gradient).max() > 1e-4
    # Along the gradient the loss changes most, well above float32's rounding.
    direction = (gradient / np.linalg.norm(gradient)).astype("float32")
    eps = 1e-2
    ahead, behind = (float(privacy_loss([first + e * direction])) for e in (eps, -eps))
    assert (ahead - behind) / (2 * eps) == pytest.approx(np.linalg.norm(gradient), rel=5e-2)


def test_jitter_reaches_the_anonymizer_gradient_and_the_seed_state_is_saved(tmp_path):
    """L_B's gradient with respect to f_A's weights is taken through the jitter: at the same
    weights and batch it is not the gradient without the jitter. A trained and reloaded
    trainer keeps its augmentations' call counters."""
    from keras_privacy.backend import value_and_gradient

    data = tiny_models.tinted(tiny_models.batch(np.random.default_rng(0)), np.random.default_rng(1))
    gradients = {}
    for strength in (0.0, 1.0):
        trainer = make_trainer(adversary_jitter=strength)
        tiny_models.deterministic_weights(trainer.anonymizer, 1)
        tiny_models.deterministic_weights(trainer.privacy_encoder, 3)
        values = trainer.current_values()

        def privacy_loss(phi, trainer=trainer, values=values):
            values = {**values, "anonymizer": (phi, values["anonymizer"][1])}
            _, (first, second), _, _ = trainer._anonymize(values, data, False)
            return trainer._privacy_term(values, first, second, False)[0]

        _, grads = value_and_gradient(privacy_loss, values["anonymizer"][0])
        gradients[strength] = np.concatenate([np.ravel(g) for g in grads])
    assert np.abs(gradients[1.0]).max() > 1e-6
    assert not np.allclose(gradients[1.0], gradients[0.0], rtol=1e-2, atol=1e-8)

    trainer = make_trainer()
    trainer.fit(tiny_models.paired_dataset(2), epochs=1, verbose=0)
    assert np.isfinite(trainer.history.history["anonymizer_privacy_loss"][0])
    trainer.save(tmp_path / "trainer.keras")
    reloaded = keras.saving.load_model(tmp_path / "trainer.keras", compile=False)
    assert reloaded.adversary_jitter == 1.0
    assert augment_calls(reloaded) == augment_calls(trainer) == [4]


def test_jitter_refuses_a_video_adversary():
    with pytest.raises(ValueError, match="spatiotemporal"):
        SPAct(
            tiny_models.anonymizer(),
            tiny_models.action_model(),
            tiny_models.video_privacy_encoder(),
            ssl_adversary="spatiotemporal",
            adversary_crop=0.5,
        )
