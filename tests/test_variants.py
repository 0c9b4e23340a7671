"""The papers' variants of SPAct: TeD-SPAD's temporal triplet term, RotNet and MoCo adversaries."""

import dataclasses

import keras
import numpy as np
import pytest
import tiny_models
from tiny_models import AdversaryHalfOnly, AnonymizerHalfOnly

from keras_privacy import losses
from keras_privacy.backend import value_and_gradient
from keras_privacy.methods.spact import SPAct, action_and_triplet
from keras_privacy.methods.steps import anonymize_batch, contrastive_views


def make_trainer(cls=SPAct, **kwargs):
    models = [tiny_models.anonymizer(), tiny_models.action_model(), tiny_models.privacy_encoder()]
    for seed, model in enumerate(models):
        tiny_models.deterministic_weights(model, seed)
    trainer = cls(*models, **kwargs)
    trainer.compile(
        {
            group: keras.optimizers.Adam(1e-2)
            for group, model in trainer.groups().items()
            if model.trainable_variables
        }
    )
    return trainer


def snapshot(model):
    return [np.array(v.numpy()) for v in model.weights]


def half(pair: dict, index: int) -> dict:
    return {key: value[:, index] for key, value in pair.items()}


# ------------------------------------------------------------------------ TeD-SPAD triplet term
def test_triplet_margin_matches_numpy():
    rng = np.random.default_rng(0)
    a, p, n = (rng.normal(size=(6, 5)).astype("float32") for _ in range(3))
    expected = np.mean(
        np.maximum(np.linalg.norm(a - p, axis=1) - np.linalg.norm(a - n, axis=1) + 0.7, 0)
    )
    np.testing.assert_allclose(float(losses.triplet_margin(a, p, n, 0.7)), expected, rtol=1e-5)
    # A triplet whose negative is already far enough costs nothing.
    assert float(losses.triplet_margin(a, a, a + 10.0, 1.0)) == 0.0


def _embed(trainer, clips):
    """The reference embeddings of `clips` (B, T, H, W, 3): each frame anonymized, then f_T's
    pooled features and the embedding head, in inference mode."""
    from keras_privacy.models.registry import with_pooled_features

    anonymized = trainer.anonymizer.predict(clips.reshape((-1,) + clips.shape[2:]), verbose=0)
    _, features = with_pooled_features(trainer.action_model).predict(
        anonymized.reshape(clips.shape), verbose=0
    )
    return trainer.embedding_head.predict(features, verbose=0)


def _triplet_reference(trainer, batch) -> float:
    anchor, positive, negative = (
        _embed(trainer, batch[key]) for key in ("clips", "positive_clips", "second_clips")
    )
    return np.mean(
        np.maximum(
            np.linalg.norm(anchor - positive, axis=1)
            - np.linalg.norm(anchor - negative, axis=1)
            + 1.0,
            0,
        )
    )


def test_the_triplet_compares_clip_positive_and_negative_and_reaches_the_anonymizer():
    """TeD-SPAD's triplet: the clip, its frames augmented again and another clip of the video,
    each anonymized, embedded by the head on f_T's pooled features."""
    trainer = make_trainer(triplet_weight=1.0)
    batch = tiny_models.batch(np.random.default_rng(0), triplets=True)
    values = trainer.current_values()

    def triplet_of(params):
        replaced = {**values, "anonymizer": (params, values["anonymizer"][1])}
        _, _, clips, _ = trainer._anonymize(replaced, batch, training=False)
        _, loss, _ = action_and_triplet(trainer, replaced, clips, 1.0, training=False)
        return loss

    value, grads = value_and_gradient(triplet_of, values["anonymizer"][0])
    expected = _triplet_reference(trainer, batch)
    np.testing.assert_allclose(float(value), expected, rtol=1e-4, atol=1e-6)
    assert expected > 0
    assert sum(float(np.abs(np.asarray(g)).sum()) for g in grads) > 0


@pytest.mark.parametrize("views", ["images", "frames", "both"])
def test_the_triplet_clips_leave_what_the_step_reads_of_its_clips_alone(views):
    """f_T's and f_B's losses read the step's clips as without the triplet, whatever the
    positive pairs of L_B (in the adversary half, where f_A's output does not depend on the
    batch; in f_A's half its BatchNorm statistics are those of all the clips of its call, as
    TeD-SPAD's); f_A's half runs with every kind of positive pair."""
    batch = tiny_models.batch(np.random.default_rng(4), triplets=True)
    plain = make_trainer(contrastive_views=views)
    triplet = make_trainer(triplet_weight=1.0, contrastive_views=views)
    _, plain_aux = plain._adversary_loss(plain.current_values(), batch)
    _, triplet_aux = triplet._adversary_loss(triplet.current_values(), batch)
    for name in ("action_loss", "privacy_loss", "action_accuracy"):
        np.testing.assert_allclose(
            float(triplet_aux["logs"][name]), float(plain_aux["logs"][name]), rtol=1e-5
        )
    loss, _ = triplet._anonymizer_loss(triplet.current_values(), batch)
    assert np.isfinite(float(loss))
    del batch["positive_clips"]
    with pytest.raises(ValueError, match="triplet_weight > 0 needs batches with positive_clips"):
        triplet._anonymizer_loss(triplet.current_values(), batch)


def test_the_embedding_head_is_ted_spads_mlp_in_numpy():
    """Dense(512) - BatchNorm - ReLU - Dense(128, no bias) - BatchNorm - L2 normalisation, as
    TeD-SPAD's `mlp`, here in inference mode with moving statistics that are not the defaults."""
    from keras_privacy.models.resnet import embedding_head

    head = embedding_head(6, hidden=5, output=4)
    rng = np.random.default_rng(0)
    for bn in (head.get_layer("hidden_bn"), head.get_layer("output_bn")):
        width = bn.gamma.shape[0]
        bn.moving_mean.assign(rng.normal(size=width).astype("float32"))
        bn.moving_variance.assign(rng.uniform(0.5, 2.0, size=width).astype("float32"))
        bn.gamma.assign(rng.uniform(0.5, 2.0, size=width).astype("float32"))
        bn.beta.assign(rng.normal(size=width).astype("float32"))
    assert head.get_layer("output").bias is None
    features = rng.normal(size=(3, 6)).astype("float32")

    def batch_norm(x, bn):
        mean, variance = np.asarray(bn.moving_mean), np.asarray(bn.moving_variance)
        return (x - mean) / np.sqrt(variance + 1e-5) * np.asarray(bn.gamma) + np.asarray(bn.beta)

    hidden = head.get_layer("hidden")
    x = features @ np.asarray(hidden.kernel) + np.asarray(hidden.bias)
    x = np.maximum(batch_norm(x, head.get_layer("hidden_bn")), 0)
    x = batch_norm(x @ np.asarray(head.get_layer("output").kernel), head.get_layer("output_bn"))
    expected = x / np.linalg.norm(x, axis=1, keepdims=True)
    np.testing.assert_allclose(head.predict(features, verbose=0), expected, rtol=1e-4, atol=1e-5)


def test_the_triplet_term_reads_f_ts_pooled_features_not_its_classifier():
    """TeD-SPAD's embeddings come from I3D's pooled features: f_T's classifier (or the scale
    of its logits) does not move the term, the term's gradient reaches f_T's trunk and not its
    classifier, and no variable of the trainer is counted (or saved) twice."""
    trainer = make_trainer(triplet_weight=1.0)
    batch = tiny_models.batch(np.random.default_rng(2), triplets=True)
    values = trainer.current_values()
    _, _, clips, _ = trainer._anonymize(values, batch, training=False)
    _, before, _ = action_and_triplet(trainer, values, clips, 1.0, training=False)

    def triplet_of(action_params):
        replaced = {**values, "action": (action_params, values["action"][1])}
        return action_and_triplet(trainer, replaced, clips, 1.0, training=True)[1]

    _, grads = value_and_gradient(triplet_of, values["action"][0])
    classifier = trainer.action_model.layers[-1]
    for variable, grad in zip(trainer.action_model.trainable_variables, grads):
        reached = float(np.abs(np.asarray(grad)).sum()) > 0
        assert reached == (variable.path.split("/")[0] != classifier.name), variable.path
    classifier.kernel.assign(np.asarray(classifier.kernel) * 10.0)
    classifier.bias.assign(np.asarray(classifier.bias) * 10.0)
    scaled = trainer.current_values()
    _, after, _ = action_and_triplet(trainer, scaled, clips, 1.0, training=False)
    assert float(before) > 0
    np.testing.assert_allclose(float(after), float(before), rtol=1e-5)
    groups = trainer.groups().values()
    assert len(trainer.trainable_variables) == sum(len(m.trainable_variables) for m in groups)
    assert len(trainer.weights) == sum(len(m.weights) for m in groups)


def test_in_f_ts_update_the_three_clips_pass_f_t_in_turn():
    """As TeD-SPAD's three calls of f_T: its BatchNorm statistics are updated by the anchor,
    then the positive, then the negative (a Keras f_T called on each in turn in training
    mode), and the anchor's logits give L_T."""
    trainer = make_trainer(triplet_weight=1.0)
    batch = tiny_models.batch(np.random.default_rng(6), triplets=True)
    values = trainer.current_values()
    _, aux = trainer._adversary_loss(values, batch)
    _, _, clips, _ = trainer._anonymize(values, batch, training=False)
    reference = keras.models.clone_model(trainer.action_model)
    reference.set_weights(trainer.action_model.get_weights())
    logits = reference(clips[0], training=True)
    for clip in clips[1:]:
        reference(clip, training=True)
    for expected, got in zip(reference.non_trainable_variables, aux["non_trainable"]["action"]):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-6)
    expected_loss = losses.softmax_cross_entropy(batch["labels"], logits)
    np.testing.assert_allclose(float(aux["logs"]["action_loss"]), float(expected_loss), rtol=1e-5)
    assert set(aux["non_trainable"]) >= {"action", "embedding"}


def test_with_pooled_features_reads_before_dropout_and_needs_a_dense_classifier():
    from keras_privacy.models.pretrained import with_input_normalization
    from keras_privacy.models.registry import with_pooled_features

    inputs = keras.Input((2, 4, 4, 3))
    pooled = keras.layers.GlobalAveragePooling3D(name="pool")(inputs)
    dropped = keras.layers.Dropout(0.5)(pooled)
    model = keras.Model(inputs, keras.layers.Dense(2)(dropped), name="f_t")
    clips = np.random.default_rng(0).uniform(size=(2, 2, 4, 4, 3)).astype("float32")
    # In training mode too: the features are the pooled ones, never dropped.
    logits, features = with_pooled_features(model)(clips, training=True)
    np.testing.assert_allclose(np.asarray(features), clips.mean(axis=(1, 2, 3)), rtol=1e-5)
    assert logits.shape == (2, 2)
    # Behind an input normalisation (a pretrained f_T): the features of the normalised clips.
    normalised = with_input_normalization(model, (0.4, 0.5, 0.6), (0.2, 0.25, 0.5))
    logits, features = with_pooled_features(normalised)(clips)
    expected = ((clips - [0.4, 0.5, 0.6]) / [0.2, 0.25, 0.5]).mean(axis=(1, 2, 3))
    np.testing.assert_allclose(np.asarray(features), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(logits), np.asarray(normalised(clips)), rtol=1e-5)
    no_classifier = keras.Model(inputs, pooled, name="trunk")
    with pytest.raises(ValueError, match="'trunk' is not a Functional model ending with a Dense"):
        with_pooled_features(no_classifier)


def test_an_f_t_behind_its_input_normalisation_takes_the_triplet_term():
    """A pretrained f_T (`--action_weights` of a normalised weight file) is wrapped: the term
    is that of its features of the normalised clips."""
    from keras_privacy.models.pretrained import with_input_normalization

    action = tiny_models.action_model()
    tiny_models.deterministic_weights(action, 1)
    normalised = with_input_normalization(action, (0.4, 0.5, 0.6), (0.2, 0.25, 0.5))
    trainer = SPAct(
        tiny_models.anonymizer(), normalised, tiny_models.privacy_encoder(), triplet_weight=1.0
    )
    batch = tiny_models.batch(np.random.default_rng(5), triplets=True)
    loss, aux = trainer._anonymizer_loss(trainer.current_values(), batch)
    assert np.isfinite(float(loss))
    values = trainer.current_values()
    _, _, clips, _ = trainer._anonymize(values, batch, training=False)
    _, triplet, _ = action_and_triplet(trainer, values, clips, 1.0, training=False)
    np.testing.assert_allclose(float(triplet), _triplet_reference(trainer, batch), rtol=1e-4)


def test_the_embedding_head_learns_with_f_t_and_stays_fixed_in_f_as_update():
    trainer = make_trainer(triplet_weight=1.0)
    # 4 clips: the head's BatchNorm over 2 would leave only the signs of its inputs.
    batch = tiny_models.batch(np.random.default_rng(3), clips=4, triplets=True)
    values = trainer.current_values()
    anonymizer_update, adversary_update = trainer.updates(
        {key: np.stack([value, value], axis=1) for key, value in batch.items()}
    )
    assert "embedding" in adversary_update.groups and "embedding" not in anonymizer_update.groups

    def adversary_loss(head_params):
        replaced = {**values, "embedding": (head_params, values["embedding"][1])}
        loss, _ = adversary_update.loss_fn(replaced)
        return loss

    _, head_grads = value_and_gradient(adversary_loss, values["embedding"][0])
    variables = trainer.embedding_head.trainable_variables
    assert len(head_grads) == len(variables)
    for variable, grad in zip(variables, head_grads):
        # A bias right before a training-mode BatchNorm has no gradient (as in TeD-SPAD's mlp).
        if not variable.path.endswith("hidden/bias"):
            assert float(np.abs(np.asarray(grad)).sum()) > 0, variable.path
    # f_T's update returns the head's new BatchNorm statistics; f_A's leaves them.
    _, aux = adversary_update.loss_fn(values)
    assert "embedding" in aux["non_trainable"]
    _, aux = anonymizer_update.loss_fn(values)
    assert "embedding" not in aux["non_trainable"]


def test_the_anonymizer_loss_adds_the_weighted_triplet_term():
    """f_A's loss is w_T * (L_T + w * L_temp) - w_B * L_B (TeD-SPAD: 0.7 * (L_T + 0.1 L_temp)
    - 1 * L_B), from the parts the same call logs."""
    trainer = make_trainer(triplet_weight=0.1, action_weight=0.7)
    batch = tiny_models.batch(np.random.default_rng(1), triplets=True)
    loss, aux = trainer._anonymizer_loss(trainer.current_values(), batch)
    logs = {name: float(value) for name, value in aux["logs"].items()}
    expected = 0.7 * (logs["anonymizer_action_loss"] + 0.1 * logs["anonymizer_triplet_loss"])
    expected -= logs["anonymizer_privacy_loss"]
    assert logs["anonymizer_triplet_loss"] > 0
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


def test_triplet_trainer_fits_and_logs_the_term():
    trainer = make_trainer(triplet_weight=0.5, triplet_margin=1.0)
    before = snapshot(trainer.embedding_head)
    data = tiny_models.paired_dataset(2, triplets=True)
    history = trainer.fit(data, epochs=1, verbose=0).history
    assert history["triplet_loss"][0] > 0 and history["anonymizer_triplet_loss"][0] > 0
    # The head's weights and BatchNorm statistics move with f_T's update (but the bias before
    # a training-mode BatchNorm, which has no gradient).
    after = snapshot(trainer.embedding_head)
    for variable, old, new in zip(trainer.embedding_head.weights, before, after):
        if not variable.path.endswith("hidden/bias"):
            assert not np.array_equal(old, new), variable.path


# ------------------------------------------------------------------------------------ RotNet
def test_rotation_labels_match_np_rot90_for_all_four_rotations():
    image = np.arange(5 * 5 * 3, dtype="float32").reshape(5, 5, 3)  # no rotation symmetry
    images = np.stack([image, image[::-1] * 2.0])
    rotated, labels = losses.rotations(images)
    rotated, labels = np.asarray(rotated), np.asarray(labels)
    assert labels.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    for i, label in enumerate(labels):
        np.testing.assert_array_equal(rotated[i], np.rot90(images[i % 2], k=int(label)))
    with pytest.raises(ValueError, match="square"):
        losses.rotations(np.zeros((1, 4, 5, 3), "float32"))


def test_rotnet_every_optimizer_advances_and_the_head_learns():
    trainer = make_trainer(ssl_adversary="rotnet")
    assert set(trainer.groups()) == {"anonymizer", "action", "privacy", "rotation"}
    head = snapshot(trainer.rotation_head)
    history = trainer.fit(tiny_models.paired_dataset(3), epochs=1, verbose=0).history
    for group in ("anonymizer", "action", "privacy", "rotation"):
        assert int(trainer.group_optimizer(group).iterations) == 3
    assert not np.array_equal(head[0], snapshot(trainer.rotation_head)[0])
    assert np.isfinite(history["privacy_loss"][0]) and history["privacy_loss"][0] > 0


def test_rotnet_loss_is_the_cross_entropy_of_the_rotations_and_reaches_its_players():
    """L_B of RotNet is the rotation head's cross-entropy on the four np.rot90 rotations of the
    anonymized views; f_A subtracts it, the adversary half moves f_T, f_B and the head."""
    trainer = make_trainer(ssl_adversary="rotnet", privacy_weight=2.0)
    tiny_models.deterministic_weights(trainer.rotation_head, 7)
    data = tiny_models.tinted(tiny_models.batch(np.random.default_rng(0)), np.random.default_rng(1))
    values = trainer.current_values()
    _, (first, second), _, _ = trainer._anonymize(values, data, False)
    first = np.asarray(first)
    rotated = np.concatenate([np.rot90(first, k, axes=(1, 2)) for k in range(4)])
    labels = np.repeat(np.arange(4), len(first))
    embeddings = trainer.privacy_encoder(rotated, training=False)
    logits = np.asarray(trainer.rotation_head(embeddings), "float64")
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -log_probabilities[np.arange(len(labels)), labels].mean()
    loss, _ = trainer._adversary_term(values, first, second, False)
    assert float(loss) == pytest.approx(expected, rel=1e-4)
    _, aux = trainer._anonymizer_loss(values, data)
    assert float(aux["logs"]["anonymizer_privacy_loss"]) == pytest.approx(expected, rel=1e-4)

    adversary = make_trainer(AdversaryHalfOnly, ssl_adversary="rotnet")
    before = tiny_models.snapshot(adversary)
    adversary.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    moved = tiny_models.changed_groups(before, tiny_models.snapshot(adversary))
    assert moved == {"action", "privacy", "rotation"}
    # With no action term, f_A moves by the gradient of the RotNet loss alone.
    anonymizer = make_trainer(AnonymizerHalfOnly, ssl_adversary="rotnet", action_weight=0.0)
    before = tiny_models.snapshot(anonymizer)
    anonymizer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    assert tiny_models.changed_groups(before, tiny_models.snapshot(anonymizer)) == {"anonymizer"}


# -------------------------------------------------------------------------------------- MoCo
def expected_keys(trainer, batch):
    """Normalised keys of the second sides of `batch` under the trainer's current weights."""
    values = trainer.current_values()
    frames, views, _ = anonymize_batch(trainer, values, batch, training=False)
    _, second = contrastive_views(frames, views, batch, trainer.contrastive_views)
    keys = np.asarray(trainer.momentum.key_encoder(second, training=False))
    return keys / np.linalg.norm(keys, axis=1, keepdims=True)


def test_moco_queue_and_momentum_encoder_update_as_specified():
    m, queue_size = 0.9, 8
    trainer = make_trainer(
        AdversaryHalfOnly,
        ssl_adversary="moco",
        moco_queue_size=queue_size,
        moco_momentum=m,
        contrastive_views="both",
    )
    momentum = trainer.momentum
    # MoCo's init: the key encoder is a copy of f_B.
    for key, query in zip(snapshot(momentum.key_encoder), snapshot(trainer.privacy_encoder)):
        np.testing.assert_array_equal(key, query)
    initial_queue = np.array(momentum.queue.numpy())
    dataset = tiny_models.paired_dataset(2)
    steps = [dataset.take(1), dataset.skip(1)]
    pairs = list(dataset.as_numpy_iterator())
    num_keys = 2 + 3  # one frame pair per clip, one view pair per image

    # Step 1: the EMA over every f_B weight, then the keys written at rows 0..4.
    key_before, query_before = snapshot(momentum.key_encoder), snapshot(trainer.privacy_encoder)
    trainer.fit(steps[0], epochs=1, verbose=0, shuffle=False)
    for key, old, query in zip(snapshot(momentum.key_encoder), key_before, query_before):
        np.testing.assert_allclose(key, m * old + (1 - m) * query, rtol=1e-6, atol=1e-7)
    keys = expected_keys(trainer, half(pairs[0], 1))
    queue = np.array(momentum.queue.numpy())
    assert int(momentum.pointer.numpy()) == num_keys
    np.testing.assert_allclose(queue[:num_keys], keys, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(queue[num_keys:], initial_queue[num_keys:])

    # Step 2: the pointer wraps (5 + 5) % 8 = 2; rows 5, 6, 7, 0, 1 (the oldest) are replaced.
    trainer.fit(steps[1], epochs=1, verbose=0, shuffle=False)
    keys = expected_keys(trainer, half(pairs[1], 1))
    new_queue = np.array(momentum.queue.numpy())
    assert int(momentum.pointer.numpy()) == (2 * num_keys) % queue_size
    np.testing.assert_allclose(new_queue[[5, 6, 7, 0, 1]], keys, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(new_queue[2:5], queue[2:5])


def test_moco_queue_starts_from_the_runs_seed():
    """The run's seed (SPAct's augment_seed, which train.py gives --seed) draws MoCo's initial
    queue of unit vectors, as it draws the rest of a run's randomness."""
    queues = [
        np.asarray(
            make_trainer(ssl_adversary="moco", moco_queue_size=16, augment_seed=seed).momentum.queue
        )
        for seed in (0, 0, 1)
    ]
    np.testing.assert_allclose(np.linalg.norm(queues[0], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(queues[0], queues[1])
    assert not np.allclose(queues[0], queues[2])


def test_moco_anonymizer_update_leaves_the_momentum_state_alone():
    trainer = make_trainer(AnonymizerHalfOnly, ssl_adversary="moco", moco_queue_size=16)
    before = snapshot(trainer.momentum)
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    for old, new in zip(before, snapshot(trainer.momentum)):
        np.testing.assert_array_equal(old, new)


def test_moco_state_is_fit_state_and_survives_save_and_load(tmp_path):
    trainer = make_trainer(ssl_adversary="moco", moco_queue_size=16, moco_momentum=0.5)
    initial = snapshot(trainer.momentum)
    history = trainer.fit(tiny_models.paired_dataset(2), epochs=1, verbose=0).history
    assert np.isfinite(history["privacy_loss"][0])
    for group in ("anonymizer", "action", "privacy"):
        assert int(trainer.group_optimizer(group).iterations) == 2
    state = snapshot(trainer.momentum)
    assert int(trainer.momentum.pointer.numpy()) == 6  # 2 steps of 3 image-view keys
    assert all(not np.array_equal(a, b) for a, b in zip(initial, state) if a.size > 1)
    path = tmp_path / "trainer.weights.h5"
    trainer.save_weights(path)
    restored = make_trainer(ssl_adversary="moco", moco_queue_size=16, moco_momentum=0.5)
    restored.load_weights(path)
    for old, new in zip(state, snapshot(restored.momentum)):
        np.testing.assert_array_equal(old, new)


def write_ted_spad_f_t(path, features: int) -> dict:
    """A saved TeD-SPAD f_T (`ft_model_state_dict`) at `path`: its `mlp` head on `features`
    with random weights and statistics, and an f_T key the head leaves out; its tensors."""
    import torch

    mlp = {"fc1.weight": (512, features), "fc1.bias": (512,), "fc2.weight": (128, 512)}
    for bn, width in (("bn1", 512), ("bn2", 128)):
        for part in ("weight", "bias", "running_mean", "running_var"):
            mlp[f"{bn}.{part}"] = (width,)
    rng = np.random.default_rng(0)
    tensors = {
        f"mlp.{key}": torch.from_numpy(rng.uniform(0.5, 1.5, size).astype("float32"))
        for key, size in mlp.items()
    }
    tensors["i3d.fc.weight"] = torch.zeros((2, features))
    torch.save({"epoch": 20, "ft_model_state_dict": tensors}, path)
    return tensors


def test_the_embedding_heads_start_is_read_whole_or_refused(tmp_path):
    """`--embedding_weights` is read as the run starts: the whole head, or an error naming
    what does not fit f_T's pooled features (a head trained on another f_T)."""
    from keras_privacy.config import ExperimentConfig
    from keras_privacy.models.pretrained import WeightsError
    from keras_privacy.models.registry import with_pooled_features
    from keras_privacy.training import embedding_head_start

    action = tiny_models.action_model()
    features = with_pooled_features(action).output_shape[1][-1]
    path = tmp_path / "model_20.pth"
    tensors = write_ted_spad_f_t(path, features)
    weights = embedding_head_start(ExperimentConfig(embedding_weights=str(path)), action)
    np.testing.assert_array_equal(weights[0], tensors["mlp.fc1.weight"].numpy().T)
    np.testing.assert_array_equal(weights[-1], tensors["mlp.bn2.running_var"].numpy())
    assert embedding_head_start(ExperimentConfig(), action) is None
    write_ted_spad_f_t(path, features + 1)
    with pytest.raises(WeightsError) as raised:
        embedding_head_start(ExperimentConfig(embedding_weights=str(path)), action)
    assert str(raised.value) == (
        f"--embedding_weights={path}: the file's head does not fit the one on f_T's {features} "
        f"pooled features (hidden: file [({features + 1}, 512), (512,)] vs model "
        f"[({features}, 512), (512,)])"
    )


# ----------------------------------------------------------------------- through train()
# Backend-independent: the run's checkpoints; the variants' JAX steps and state are tested above.
@pytest.mark.backend_independent
def test_variant_trains_through_train_and_checkpoints_its_own_groups(benchmark, tmp_path, capsys):
    # One run covers the flags' wiring (MoCo with the triplet term, on a model built for T
    # frames, its embedding head started from TeD-SPAD's saved f_T); RotNet's head is
    # checkpointed by the same code as MoCo's momentum group.
    from keras_privacy import checkpoint, training
    from keras_privacy.models import registry

    ted_spad_f_t = tmp_path / "model_20.pth"
    overrides = {"ssl_adversary": "moco", "moco_queue_size": 16, "triplet_weight": 0.5}
    config = tiny_models.variant_run_config(benchmark, tmp_path, **overrides)
    shape = (config.clip_length, config.image_size, config.image_size, 3)
    action = registry.build_action_model(config.action_model, 2, input_shape=shape)
    features = registry.with_pooled_features(action).output_shape[1][-1]
    tensors = write_ted_spad_f_t(ted_spad_f_t, features)
    config = dataclasses.replace(config, embedding_weights=str(ted_spad_f_t))
    config.validate()

    class HeadAtStart(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            if getattr(self.model, "embedding_head", None) is not None:
                self.weights = snapshot(self.model.embedding_head)

    head_at_start = HeadAtStart()
    result = training.train(config, callbacks=[head_at_start])
    assert f"{ted_spad_f_t} -> embedding_head: 4 layers loaded, 0 new" in capsys.readouterr().out
    expected = {key: tensor.numpy() for key, tensor in tensors.items() if key.startswith("mlp.")}
    for dense in ("mlp.fc1.weight", "mlp.fc2.weight"):
        expected[dense] = expected[dense].T
    assert sorted(array.tobytes() for array in head_at_start.weights) == sorted(
        array.tobytes() for array in expected.values()
    )
    minimax = result.history["minimax"]
    assert all(np.isfinite(minimax["privacy_loss"])) and all(np.isfinite(minimax["action_loss"]))
    state = checkpoint.latest_checkpoint(config.run_dir)
    assert state["phase"] == "minimax"
    assert minimax["triplet_loss"][0] > 0
    folder = tmp_path / "run" / "checkpoints" / state["folder"]
    assert (folder / "momentum.weights.h5").is_file()
    assert (folder / "embedding.weights.h5").is_file()
