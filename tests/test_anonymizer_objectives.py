"""Each method's anonymizer loss is its paper's, term by term, with the signs and weights of
the paper: SPAct's f_A maximises the adversary's NT-Xent (Eq. 6), VITA's minimises the budget
term that makes the budget models' predictions uninformative, the meta objective's L(phi, D)
subtracts the attack models' BCE. Each term is computed here with NumPy from the models'
outputs, so a flipped sign or a dropped weight fails (the logs alone would not show it)."""

import keras
import numpy as np
import pytest
import tiny_models
from test_losses import nt_xent_reference
from test_vita import authors_budget_term, budget_logits, entropy_budget_term

from keras_privacy.methods.meta import MetaGeneralization
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.steps import anonymize_batch, contrastive_views
from keras_privacy.methods.vita import VITA


def half_identity() -> keras.Model:
    """An f_A without BatchNorm whose output is half its input: it changes the frames (so the
    penalty is positive) and keeps each example's content (so f_B tells them apart)."""
    model = tiny_models.identity_anonymizer()
    model.get_layer("identity").set_weights(
        [0.5 * np.eye(3, dtype="float32")[None, None], np.zeros(3, "float32")]
    )
    return model


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> float:
    logits = logits.astype("float64")
    top = logits.max(axis=1, keepdims=True)
    log_sum = np.log(np.exp(logits - top).sum(axis=1)) + top[:, 0]
    return float(np.mean(log_sum - logits[np.arange(len(labels)), labels]))


def rms_penalty(clips: np.ndarray, anonymized: np.ndarray, budget: float) -> float:
    diff = (clips - anonymized).reshape(len(clips), -1).astype("float64")
    return float(np.mean(np.maximum(np.sqrt(np.mean(diff**2, axis=1)) - budget, 0.0)))


def action_loss(trainer, anonymized_clips: np.ndarray, labels: np.ndarray) -> float:
    logits = trainer.action_model(anonymized_clips, training=False)
    return cross_entropy(keras.ops.convert_to_numpy(logits), labels)


def anonymized(trainer, clips: np.ndarray) -> np.ndarray:
    frames = clips.reshape(-1, *clips.shape[2:])
    out = keras.ops.convert_to_numpy(trainer.anonymizer(frames, training=True))
    return out.reshape(clips.shape)


def test_spact_anonymizer_loss_subtracts_the_weighted_nt_xent():
    rng = np.random.default_rng(3)
    data = tiny_models.tinted(tiny_models.batch(rng), rng)
    encoder = tiny_models.privacy_encoder()
    tiny_models.deterministic_weights(encoder, 11)
    trainer = SPAct(
        half_identity(),
        tiny_models.action_model(),
        encoder,
        action_weight=0.5,
        privacy_weight=2.0,
        temperature=0.5,
        penalty_weight=0.25,
        penalty_budget=0.1,
    )
    loss, aux = trainer._anonymizer_loss(trainer.current_values(), data)
    frames, views, _ = anonymize_batch(trainer, trainer.current_values(), data, training=False)
    first, second = contrastive_views(frames, views, data)
    contrastive = nt_xent_reference(
        np.asarray(encoder(first, training=False)), np.asarray(encoder(second, training=False)), 0.5
    )
    clips = anonymized(trainer, data["clips"])
    action = action_loss(trainer, clips, data["labels"])
    penalty = rms_penalty(data["clips"], clips, 0.1)
    assert contrastive > 0.1 and penalty > 0.01  # every term counts in the sum
    expected = 0.5 * action - 2.0 * contrastive + 0.25 * penalty
    assert float(loss) == pytest.approx(expected, rel=1e-4)
    assert float(aux["logs"]["anonymizer_privacy_loss"]) == pytest.approx(contrastive, rel=1e-4)


@pytest.mark.parametrize("budget_loss", ["max_bce", "entropy"])
def test_vita_anonymizer_loss_adds_the_weighted_budget_term(budget_loss):
    budget_models = [tiny_models.budget_model(width=4), tiny_models.budget_model(width=6)]
    for seed, model in enumerate(budget_models):
        tiny_models.deterministic_weights(model, 20 + seed)
    trainer = VITA(
        half_identity(),
        tiny_models.action_model(),
        budget_models,
        budget_weight=0.7,
        budget_loss=budget_loss,
        budget_batch_statistics=False,
        penalty_weight=0.25,
        penalty_budget=0.1,
    )
    data = next(iter(tiny_models.vita_dataset(1).as_numpy_iterator()))
    loss, _ = trainer._anonymizer_loss(trainer.current_values(), data)
    clips = anonymized(trainer, data["clips"])
    frames = clips.reshape(-1, *clips.shape[2:])
    frame_logits = [budget_logits(model, frames, False) for model in budget_models]
    term = authors_budget_term if budget_loss == "max_bce" else entropy_budget_term
    budget = term(frame_logits, clips.shape[1])
    action = action_loss(trainer, clips, data["labels"])
    penalty = rms_penalty(data["clips"], clips, 0.1)
    assert abs(budget) > 0.1 and penalty > 0.01
    expected = action + 0.7 * budget + 0.25 * penalty
    assert float(loss) == pytest.approx(expected, rel=1e-4)


def test_meta_anonymizer_loss_subtracts_the_attack_models_masked_bce():
    attack_models = [tiny_models.budget_model(width=w) for w in (3, 4, 5)]
    for seed, model in enumerate(attack_models):
        tiny_models.deterministic_weights(model, 30 + seed)
    trainer = MetaGeneralization(
        half_identity(), tiny_models.action_model(), attack_models, privacy_weight=1.5
    )
    data = tiny_models.meta_batch()
    rng = np.random.default_rng(4)
    label_mask = (rng.random(data["privacy"].shape) < 0.5).astype("float32")
    model_mask = np.array([1.0, 0.0, 1.0], "float32")
    loss, _ = trainer.anonymizer_loss(trainer.current_values(), data, label_mask, model_mask)
    images = keras.ops.convert_to_numpy(trainer.anonymizer(data["images"], training=True))
    labels = data["privacy"].astype("float64")
    attack = []
    for model, used in zip(trainer.attack_models, model_mask):
        if used:
            logits = keras.ops.convert_to_numpy(model(images, training=False)).astype("float64")
            entries = np.maximum(logits, 0) - logits * labels + np.log1p(np.exp(-np.abs(logits)))
            attack.append((entries * label_mask).sum() / label_mask.sum())
    action = action_loss(trainer, anonymized(trainer, data["clips"]), data["labels"])
    expected = action - 1.5 * np.mean(attack)
    assert float(loss) == pytest.approx(expected, rel=1e-4)
