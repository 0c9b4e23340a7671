import keras
import numpy as np
import pytest
import tiny_models

from keras_privacy.methods.vita import VITA, clip_budget_term, multilabel_accuracy, negative_entropy


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
    assert float(np.mean(negative_entropy(logits))) == pytest.approx(-np.log(2), rel=1e-4)
    labels = np.array([[1, 0]], "float32")
    assert float(multilabel_accuracy(labels, np.array([[2.0, 1.0]], "float32"))) == 0.5


def authors_budget_term(frame_logits, clip_length):
    """NumPy transcription of adv_training.py (create_architecture): per model, logits of the
    frames averaged per clip, sigmoid CE against ones averaged over attributes; the max over
    models per clip, then the batch mean."""
    per_model = []
    for logits in frame_logits:
        clip_logits = logits.reshape(-1, clip_length, logits.shape[-1]).mean(axis=1)
        per_model.append(np.log1p(np.exp(-clip_logits)).mean(axis=1))
    return np.stack(per_model).max(axis=0).mean()


def test_budget_term_is_the_authors_per_clip_max():
    rng = np.random.default_rng(0)
    # Two models, 3 clips of 4 frames, 5 attributes; model 0 is the larger term on some clips
    # and model 1 on others, so a max of batch means would differ.
    frame_logits = [rng.normal(0, 2, (12, 5)).astype("float32") for _ in range(2)]
    expected = authors_budget_term(frame_logits, 4)
    assert float(clip_budget_term(frame_logits, 4)) == pytest.approx(expected, rel=1e-5)
    probabilities = [1 / (1 + np.exp(-lg.reshape(3, 4, 5).mean(1))) for lg in frame_logits]
    entropy = np.stack(
        [(p * np.log(p) + (1 - p) * np.log(1 - p)).mean(axis=1) for p in probabilities]
    )
    got = float(clip_budget_term(frame_logits, 4, "entropy"))
    assert got == pytest.approx(entropy.max(axis=0).mean(), rel=1e-4)
    max_of_means = max(np.log1p(np.exp(-lg.reshape(3, 4, 5).mean(1))).mean() for lg in frame_logits)
    assert abs(expected - max_of_means) > 1e-3


def anonymize(trainer, frames, images):
    """f_A's output on the frames and images as one batch in training mode, as VITA's f_A
    update runs it."""
    batch = np.concatenate([frames, images])
    return keras.ops.convert_to_numpy(trainer.anonymizer(batch, training=True))


def test_anonymizer_budget_term_sees_the_anonymized_clip_frames():
    trainer = make_vita(action_threshold=2.0, budget_threshold=2.0)
    data = next(iter(tiny_models.labelled_dataset(1).batch(1).as_numpy_iterator()))
    clips = data["clips"][0]
    frames = clips.reshape(-1, *clips.shape[2:])
    # f_A runs in training mode on the clip frames and the images together.
    anonymized = anonymize(trainer, frames, data["images"][0])[: len(frames)]
    frame_logits = [
        keras.ops.convert_to_numpy(m(anonymized, training=False)) for m in trainer.budget_models
    ]
    expected = authors_budget_term(frame_logits, clips.shape[1])
    history = trainer.fit(tiny_models.labelled_dataset(1), epochs=1, verbose=0).history
    assert history["anonymizer_budget_term"][0] == pytest.approx(expected, rel=1e-4)


def test_image_max_bce_keeps_the_earlier_form():
    trainer = make_vita(budget_loss="image_max_bce", action_threshold=2.0, budget_threshold=2.0)
    data = next(iter(tiny_models.labelled_dataset(1).batch(1).as_numpy_iterator()))
    frames = data["clips"][0].reshape(-1, *data["clips"].shape[3:])
    anonymized = anonymize(trainer, frames, data["images"][0])[len(frames) :]
    expected = max(
        np.log1p(np.exp(-keras.ops.convert_to_numpy(m(anonymized, training=False)))).mean()
        for m in trainer.budget_models
    )
    history = trainer.fit(tiny_models.labelled_dataset(1), epochs=1, verbose=0).history
    assert history["anonymizer_budget_term"][0] == pytest.approx(expected, rel=1e-4)
