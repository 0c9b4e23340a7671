import keras
import numpy as np
import pytest
import tiny_models

from keras_privacy.methods.vita import VITA, multilabel_accuracy, negative_entropy


def make_vita(**kwargs):
    trainer = VITA(
        tiny_models.anonymizer(),
        tiny_models.action_model(),
        [tiny_models.budget_model(width=4), tiny_models.budget_model(width=6)],
        **kwargs,
    )
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in trainer.groups()})
    return trainer


def weights(model):
    return [np.array(v.numpy()) for v in model.weights]


def test_every_optimizer_advances_when_thresholds_allow():
    trainer = make_vita(action_threshold=2.0, budget_threshold=2.0)
    trainer.fit(tiny_models.labelled_dataset(3), epochs=1, verbose=0)
    for group in trainer.groups():
        assert int(trainer.group_optimizer(group).iterations) == 3, group


def test_thresholds_decide_which_player_updates():
    trainer = make_vita(action_threshold=-1.0, budget_threshold=2.0)
    action_before = weights(trainer.action_model)
    budget_before = weights(trainer.budget_models[0])
    trainer.fit(tiny_models.labelled_dataset(2), epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(action_before, weights(trainer.action_model)))
    assert int(trainer.group_optimizer("action").iterations) == 0
    assert not all(
        np.array_equal(a, b) for a, b in zip(budget_before, weights(trainer.budget_models[0]))
    )


def test_budget_models_restart_to_their_initial_weights():
    trainer = make_vita(action_threshold=2.0, budget_threshold=2.0, restart_every=2)
    initial = weights(trainer.budget_models[1])
    trainer.fit(tiny_models.labelled_dataset(2), epochs=1, verbose=0)
    assert not all(np.array_equal(a, b) for a, b in zip(initial, weights(trainer.budget_models[1])))
    # Step 3 starts with a restart, then one update: weights differ from the initial ones by
    # exactly one Adam step, far less than after two steps without restart.
    trainer.fit(tiny_models.labelled_dataset(1), epochs=1, verbose=0)
    after = weights(trainer.budget_models[1])
    kernel_change = np.abs(after[0] - initial[0]).max()
    assert kernel_change <= 1e-2 * 1.01


def test_budget_term_helpers():
    logits = np.array([[0.0, 0.0]], "float32")
    assert float(negative_entropy(logits)) == pytest.approx(-np.log(2), rel=1e-4)
    labels = np.array([[1, 0]], "float32")
    assert float(multilabel_accuracy(labels, np.array([[2.0, 1.0]], "float32"))) == 0.5
