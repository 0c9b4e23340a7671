import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tiny_models

from keras_privacy.methods.meta import attribute_masks, epoch_splits


def flat(arrays):
    return np.concatenate([np.ravel(np.asarray(a, "float64")) for a in arrays])


def test_meta_gradient_matches_finite_differences():
    trainer = tiny_models.meta_trainer()
    values = trainer.current_values()
    values["meta_iteration"] = ([], [np.int32(1)])  # an attribute split, as meta_gradient's
    data = tiny_models.meta_batch()
    phi = [np.asarray(v, "float32") for v in values["anonymizer"][0]]
    grad = flat(tiny_models.meta_gradient())
    direction = [np.random.default_rng(5).normal(size=p.shape).astype("float32") for p in phi]

    def objective_at(step):
        replaced = dict(values)
        replaced["anonymizer"] = (
            [p + step * d for p, d in zip(phi, direction)],
            values["anonymizer"][1],
        )
        return float(trainer.meta_objective(replaced, data)[0])

    eps = 1e-2
    numeric = (objective_at(eps) - objective_at(-eps)) / (2 * eps)
    analytic = float(grad @ flat(direction))
    assert analytic == pytest.approx(numeric, rel=1e-3, abs=1e-5)
    # close enough to tell it from the first-order approximation (2 % off here)
    first_order = float(flat(tiny_models.meta_gradient(first_order=True)) @ flat(direction))
    assert first_order != pytest.approx(numeric, rel=1e-3, abs=1e-5)


def test_second_order_meta_gradient_differs_from_first_order():
    second = flat(tiny_models.meta_gradient(first_order=False))
    first = flat(tiny_models.meta_gradient(first_order=True))
    assert np.abs(second - first).sum() > 1e-3 * np.abs(second).sum()


@pytest.mark.parametrize("first_order", [False, True])
@pytest.mark.parametrize("iteration", [1, 2])
def test_meta_gradient_in_passes_equals_the_nested_gradient_of_the_objective(
    first_order, iteration
):
    passes = flat(tiny_models.meta_gradient(first_order, iteration))
    nested = flat(tiny_models.meta_gradient(first_order, iteration, nested=True))
    np.testing.assert_allclose(passes, nested, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("first_order", [False, True])
@pytest.mark.parametrize("iteration", [1, 2])
def test_meta_gradient_with_unet_blocks_recomputed_equals_it_without(first_order, iteration):
    assert len(tiny_models.meta_trainer(blocks=True)._anonymizer_blocks) == 4
    args = dict(first_order=first_order, iteration=iteration, blocks=True)
    recomputed = flat(tiny_models.meta_gradient(**args))
    stored = flat(tiny_models.meta_gradient(**args, recompute=False))
    np.testing.assert_allclose(recomputed, stored, rtol=1e-4, atol=1e-6)
    nested = flat(tiny_models.meta_gradient(**args, nested=True))
    np.testing.assert_allclose(recomputed, nested, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_second_order_meta_update_compiles_with_xla_in_16_bits(precision):
    """XLA compiles the meta update of a max-pooling f_A in 16 bits, as `--jit_compile=auto`
    compiles it on a TensorFlow GPU: TensorFlow's XLA bridge has the pool's second derivative
    (MaxPoolGradGrad) in float32 only, so its pools compute in float32 (JAX's in 16 bits)."""
    import tensorflow as tf

    from keras_privacy.distribute import training_scope

    with training_scope("none", precision):
        trainer = tiny_models.meta_trainer(blocks=True, action_threshold=-1, attack_threshold=-1)
        trainer.compile({g: keras.optimizers.SGD(1e-2) for g in trainer.groups()}, jit_compile=True)
        anonymizer = trainer.groups()["anonymizer"]
        pools = [layer for layer in anonymizer.layers if "pool" in layer.name]
        on_tensorflow = keras.backend.backend() == "tensorflow"
        assert pools and all(
            pool.compute_dtype == ("float32" if on_tensorflow else precision.split("_")[1])
            for pool in pools
        )
        before = [np.array(v.numpy()) for v in anonymizer.trainable_variables]
        dataset = tf.data.Dataset.from_tensors(tiny_models.meta_batch())
        history = trainer.fit(dataset, epochs=1, verbose=0).history
    assert history["meta_updates"] == [1.0]
    assert all(np.isfinite(history["meta_test_loss"]))
    after = [np.array(v.numpy()) for v in anonymizer.trainable_variables]
    assert any(not np.array_equal(b, a) for b, a in zip(before, after))


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="compares both backends once, from the JAX run"
)
def test_meta_gradient_agrees_between_backends():
    here = flat(tiny_models.meta_gradient())
    code = "import json, tiny_models; print(json.dumps(tiny_models.meta_gradient()))"
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent,
        env=dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    there = flat(json.loads(output.strip().splitlines()[-1]))
    np.testing.assert_allclose(here, there, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize(
    "thresholds, updated",
    [
        ((2.0, 2.0), {"action"}),
        ((-1.0, 2.0), {"attack_0", "attack_1", "attack_2"}),
        ((-1.0, -1.0), {"anonymizer"}),
    ],
)
def test_threshold_schedule_picks_the_player_of_algorithm_1(thresholds, updated):
    import tensorflow as tf

    trainer = tiny_models.meta_trainer(
        action_threshold=thresholds[0], attack_threshold=thresholds[1]
    )
    trainer.compile({g: keras.optimizers.SGD(1e-2) for g in trainer.groups()})
    before = {
        g: [np.array(v.numpy()) for v in m.trainable_variables] for g, m in trainer.groups().items()
    }
    batch = tiny_models.meta_batch()
    dataset = tf.data.Dataset.from_tensors(batch)
    history = trainer.fit(dataset, epochs=1, verbose=0).history
    changed = {
        g
        for g, m in trainer.groups().items()
        if any(
            not np.array_equal(b, np.array(v.numpy()))
            for b, v in zip(before[g], m.trainable_variables)
        )
    }
    assert changed == updated
    for group in trainer.groups():
        assert int(trainer.group_optimizer(group).iterations) == (group in updated)
    # the logs say which player updated, so a 0 loss of a player that did not reads as such
    assert history["action_updates"] == [float("action" in updated)]
    assert history["attack_updates"] == [sum(g.startswith("attack") for g in updated)]
    assert history["meta_updates"] == [float("anonymizer" in updated)]


def test_the_action_and_attack_updates_anonymize_only_what_they_read():
    """f_T's update passes only the clips' frames through f_A, an attack model's only the
    images (f_A runs in inference mode there, so each output is the one it gives in any
    batch), and each loss equals its loss on f_A's output for the frames and images together,
    as the measurement runs it."""
    from keras_privacy import losses
    from keras_privacy.methods.steps import action_logits

    trainer = tiny_models.meta_trainer()
    values = trainer.current_values()
    data = tiny_models.meta_batch()
    frames, images, _ = trainer._anonymize(values, data)
    logits, _ = action_logits(trainer, values, frames, data["clips"].shape[1], True)
    expected_action = losses.softmax_cross_entropy(data["labels"], logits)
    expected_attack = losses.masked_binary_cross_entropy(
        data["privacy"], trainer.run("attack_1", values, images, training=True)[0]
    )

    anonymized = []
    run = trainer.run

    def recorded(group, values, inputs, training=False):
        if group == "anonymizer":
            anonymized.append(int(inputs.shape[0]))
        return run(group, values, inputs, training)

    trainer.run = recorded
    action_loss, _ = trainer._action_loss(values, data)
    attack_loss, _ = trainer._attack_loss(values, data, "attack_1")
    clips, frames_per_clip = data["clips"].shape[:2]
    assert anonymized == [clips * frames_per_clip, len(data["images"])]
    np.testing.assert_allclose(float(action_loss), float(expected_action), rtol=1e-5)
    np.testing.assert_allclose(float(attack_loss), float(expected_attack), rtol=1e-5)


def test_epoch_splits_draw_attributes_and_models_once_per_epoch():
    splits = epoch_splits(seed=0, epoch=3, steps=4, num_images=10, num_attributes=5, num_models=8)
    assert (splits["attribute_split"] == splits["attribute_split"][0]).all()
    assert splits["attribute_split"][0].sum() == 3
    assert splits["support_models"][0].sum() == 5 and splits["query_models"][0].sum() == 3
    assert not (splits["support_models"] * splits["query_models"]).any()
    assert splits["sample_keys"].shape == (4, 10)
    assert not np.array_equal(splits["sample_keys"][0], splits["sample_keys"][1])


def reference_attribute_masks(privacy, attr1, keys, fraction):
    """Supplement Sec. 4, steps 1-5, sample by sample (no positive at all counts as mixed)."""
    attr1 = attr1.astype(bool)
    only1 = [i for i, y in enumerate(privacy) if y[attr1].any() and not y[~attr1].any()]
    only2 = [i for i, y in enumerate(privacy) if y[~attr1].any() and not y[attr1].any()]
    mixed = sorted(set(range(len(privacy))) - set(only1) - set(only2), key=lambda i: keys[i])
    chosen = round(fraction * len(mixed))
    support, query = np.zeros(privacy.shape), np.zeros(privacy.shape)
    for i in only1 + mixed[:chosen]:
        support[i] = attr1
    for i in only2 + mixed[chosen:]:
        query[i] = ~attr1
    return support, query


def test_attribute_split_places_each_sample_by_its_positives():
    attr1 = np.array([1, 1, 1, 0, 0], "float32")
    privacy = np.array(
        [
            [1, 0, 0, 0, 0],  # only Attr1 -> X1
            [0, 1, 1, 0, 0],  # only Attr1 -> X1
            [0, 0, 0, 1, 0],  # only Attr2 -> X2
            [0, 0, 0, 1, 1],  # only Attr2 -> X2
            [1, 0, 0, 1, 0],  # mixed
            [0, 1, 0, 0, 1],  # mixed
            [1, 1, 1, 1, 1],  # mixed
            [0, 0, 0, 0, 0],  # no positive: split as mixed
            [0, 0, 1, 1, 0],  # mixed
        ],
        "float32",
    )
    keys = np.random.default_rng(0).random(len(privacy)).astype("float32")
    support, query = (np.asarray(m) for m in attribute_masks(privacy, attr1, keys, 0.6))
    expected_support, expected_query = reference_attribute_masks(privacy, attr1, keys, 0.6)
    np.testing.assert_array_equal(support, expected_support)
    np.testing.assert_array_equal(query, expected_query)
    assert support[:2].any(axis=1).all() and not query[:2].any()
    assert query[2:4].any(axis=1).all() and not support[2:4].any()
    mixed = support[4:].any(axis=1)
    assert mixed.sum() == 3 and (query[4:].any(axis=1) == ~mixed).all()  # 60 % of 5 to X1
    assert not (support[:, 3:].any() or query[:, :3].any())  # the other group's labels: NA


def test_meta_iteration_alternates_splits_and_resets_each_epoch():
    import tensorflow as tf

    trainer = tiny_models.meta_trainer(action_threshold=-1.0, attack_threshold=-1.0)
    trainer.compile({g: keras.optimizers.SGD(1e-3) for g in trainer.groups()})
    batches = [tiny_models.meta_batch(seed) for seed in range(3)]
    stacked = {key: np.stack([b[key] for b in batches]) for key in batches[0]}
    history = trainer.fit(tf.data.Dataset.from_tensor_slices(stacked), epochs=2, verbose=0)
    # Each epoch's meta updates split models, attributes, models (I = 0, 1, 2), then I resets.
    np.testing.assert_allclose(history.history["attribute_split"], [1 / 3, 1 / 3], rtol=1e-6)
    assert int(trainer.meta_iteration.count.numpy()) == 3
