import json
import os
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
import tiny_models

from keras_privacy.methods.meta import split_masks


def flat(arrays):
    return np.concatenate([np.ravel(np.asarray(a, "float64")) for a in arrays])


def test_meta_gradient_matches_finite_differences():
    trainer = tiny_models.meta_trainer()
    values = trainer.current_values()
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
    assert analytic == pytest.approx(numeric, rel=2e-2, abs=2e-3)


def test_second_order_meta_gradient_differs_from_first_order():
    second = flat(tiny_models.meta_gradient(first_order=False))
    first = flat(tiny_models.meta_gradient(first_order=True))
    assert np.abs(second - first).sum() > 1e-3 * np.abs(second).sum()


def test_meta_gradient_agrees_between_backends():
    here = flat(tiny_models.meta_gradient())
    other = "jax" if keras.backend.backend() == "tensorflow" else "tensorflow"
    code = "import json, tiny_models; print(json.dumps(tiny_models.meta_gradient()))"
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent,
        env=dict(os.environ, KERAS_BACKEND=other, TF_CPP_MIN_LOG_LEVEL="3"),
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
    trainer.fit(dataset, epochs=1, verbose=0)
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


def test_split_masks_separate_attributes_and_models():
    rng = np.random.default_rng(0)
    attribute = split_masks(rng, 1, 10, 5, 8, rng.permutation(5), rng.permutation(8))
    assert not (attribute["support_mask"] * attribute["query_mask"]).any()
    assert attribute["support_mask"].any(axis=0).sum() == 3
    assert attribute["query_mask"].any(axis=0).sum() == 2
    model = split_masks(rng, 2, 10, 5, 8, rng.permutation(5), rng.permutation(8))
    assert model["support_models"].sum() == 5 and model["query_models"].sum() == 3
    assert not (model["support_models"] * model["query_models"]).any()
