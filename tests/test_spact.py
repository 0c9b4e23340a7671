import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tiny_models
from test_losses import nt_xent_reference
from tiny_models import AdversaryHalfOnly, AnonymizerHalfOnly, changed_groups, snapshot

from keras_privacy.methods.batches import BatchList
from keras_privacy.methods.init import ActionInit, IdentityInit, PrivacyInit
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.steps import (
    anonymize_batch,
    contrastive_views,
    privacy_loss,
    run_parts,
)

GROUPS = ("anonymizer", "action", "privacy")


def make_trainer(cls=SPAct, **kwargs):
    trainer = cls(
        tiny_models.anonymizer(),
        tiny_models.action_model(),
        tiny_models.privacy_encoder(),
        **kwargs,
    )
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in GROUPS})
    return trainer


def test_every_optimizer_advances_each_minimax_step():
    trainer = make_trainer()
    trainer.fit(tiny_models.paired_dataset(3), epochs=1, verbose=0)
    assert [int(trainer.group_optimizer(g).iterations) for g in GROUPS] == [3, 3, 3]
    assert int(trainer.optimizer.iterations) == 3


def test_anonymizer_step_changes_only_the_anonymizer():
    trainer = make_trainer(AnonymizerHalfOnly)
    before = snapshot(trainer)
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == {"anonymizer"}


def test_adversary_step_changes_only_the_action_model_and_privacy_encoder():
    trainer = make_trainer(AdversaryHalfOnly)
    before = snapshot(trainer)
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == {"action", "privacy"}


def test_logs_hold_both_halves_losses_and_accuracy():
    trainer = make_trainer()
    history = trainer.fit(tiny_models.paired_dataset(2), epochs=1, verbose=0).history
    for name in ("action_loss", "privacy_loss", "action_accuracy", "anonymizer_privacy_loss"):
        assert np.isfinite(history[name][0])
    assert 0.0 <= history["action_accuracy"][0] <= 1.0
    # The triplet term is off (ted-spad's variant turns it on): it is not logged as zeros.
    assert "triplet_loss" not in history and "anonymizer_triplet_loss" not in history
    assert {metric.name for metric in trainer.metrics} == set(history)


@pytest.mark.parametrize(
    "phase, trained",
    [(IdentityInit, "anonymizer"), (ActionInit, "action"), (PrivacyInit, "privacy")],
)
def test_init_phase_trains_only_its_group(phase, trained):
    models = {
        "anonymizer": tiny_models.anonymizer(),
        "action": tiny_models.action_model(),
        "privacy": tiny_models.privacy_encoder(),
    }
    trainer = phase(*[models[g] for g in GROUPS if g == "anonymizer" or g == trained])
    trainer.compile({trained: keras.optimizers.Adam(1e-2)})
    before = snapshot(trainer)
    trainer.fit(tiny_models.single_dataset(4), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == {trained}
    assert int(trainer.group_optimizer(trained).iterations) == 4


def test_init_losses_match_numpy_references():
    batch = tiny_models.batch(np.random.default_rng(4))
    anonymizer, action = tiny_models.anonymizer(), tiny_models.action_model()
    identity, action_init = IdentityInit(anonymizer), ActionInit(anonymizer, action)
    identity.compile({"anonymizer": keras.optimizers.Adam(1e-3)})
    action_init.compile({"action": keras.optimizers.Adam(1e-3)})
    clips = batch["clips"]
    frame_shape = clips.shape[2:]

    # f_A's identity: L1 on both views of each image and the two frames of each clip's pair
    # (one call in training mode: batch normalisation by their joint statistics).
    paired = clips[np.arange(len(clips))[:, None], batch["frame_pairs"]]
    targets = np.concatenate([batch["views"], paired]).reshape((-1, *frame_shape))
    expected = np.abs(np.asarray(anonymizer(targets, training=True)) - targets).mean()
    loss, _ = identity._loss(identity.current_values(), batch)
    assert float(loss) == pytest.approx(expected, rel=1e-5)

    # f_T's: cross-entropy of f_T (training mode) on every frame anonymized by the frozen f_A
    anonymized = np.asarray(anonymizer(clips.reshape((-1, *frame_shape)), training=False))
    logits = np.asarray(action(anonymized.reshape(clips.shape), training=True), "float64")
    log_softmax = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    expected = -log_softmax[np.arange(len(clips)), batch["labels"]].mean()
    loss, _ = action_init._loss(action_init.current_values(), batch)
    assert float(loss) == pytest.approx(expected, rel=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "jax", reason="compares both backends once, from the JAX run"
)
def test_same_first_steps_on_both_backends():
    here = tiny_models.first_steps_history()
    code = "import json, tiny_models; print(json.dumps(tiny_models.first_steps_history()))"
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    output = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).parent,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    there = json.loads(output.strip().splitlines()[-1])
    assert set(here) == set(there)
    # the NT-Xent losses carry information: off log(2N - 1) = log 5, where identical
    # embeddings put them whatever the pairing
    assert all(abs(loss - np.log(5)) > 1e-2 for loss in here["privacy_loss"])
    for key in here:
        np.testing.assert_allclose(here[key], there[key], rtol=2e-4, atol=2e-5, err_msg=key)


def test_saved_trainer_and_anonymizer_reload_to_the_same_outputs(tmp_path):
    trainer = make_trainer()
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)
    clips = np.random.default_rng(3).random((2, 4, 8, 8, 3), dtype="float32")
    trainer.save(tmp_path / "trainer.keras")
    trainer.anonymizer.save(tmp_path / "anonymizer.keras")
    reloaded = keras.saving.load_model(tmp_path / "trainer.keras", compile=False)
    np.testing.assert_allclose(reloaded(clips), trainer(clips), atol=1e-5)
    anonymizer = keras.saving.load_model(tmp_path / "anonymizer.keras")
    np.testing.assert_allclose(anonymizer(clips[0]), trainer.anonymizer(clips[0]), atol=1e-5)


def test_a_trainer_saved_before_compile_reloads_built_with_its_weights(tmp_path):
    """A trainer is built as soon as it holds its (built) models: saving one before `compile`
    raises no "not yet built" warning, and it reloads uncompiled with the same weights."""
    trainer = SPAct(
        tiny_models.anonymizer(), tiny_models.action_model(), tiny_models.privacy_encoder()
    )
    assert trainer.built
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        trainer.save(tmp_path / "trainer.keras")
    reloaded = keras.saving.load_model(tmp_path / "trainer.keras")
    assert reloaded.built and not reloaded.compiled
    for kept, original in zip(reloaded.weights, trainer.weights, strict=True):
        np.testing.assert_array_equal(kept.numpy(), original.numpy())


def test_an_initialisation_phase_saved_whole_reloads_in_a_fresh_python(tmp_path):
    """`import keras_privacy.methods` registers the initialisation phases' trainers too."""
    identity = IdentityInit(tiny_models.anonymizer())
    identity.compile({"anonymizer": keras.optimizers.Adam(1e-3)})
    identity.fit(tiny_models.single_dataset(1), epochs=1, verbose=0)
    identity.save(tmp_path / "identity.keras")
    code = (
        "import sys, keras, keras_privacy.models, keras_privacy.methods; "
        "trainer = keras.saving.load_model(sys.argv[1]); "
        "print(type(trainer).__name__, trainer.update_counts())"
    )
    output = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "identity.keras")],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert output.strip().splitlines()[-1] == "IdentityInit {'anonymizer': 1}"


def test_a_failed_first_fit_keeps_the_weights_of_the_models_it_shares():
    """On JAX, Keras' fit empties the variables while it runs and, where its first step fails,
    never fills them again: the anonymizer an earlier phase trained would be lost."""
    trainer = make_trainer()
    before = [np.array(v) for v in trainer.anonymizer.weights]
    unpaired = tiny_models.single_dataset(1)  # a batch, not a pair: the step cannot be traced
    with pytest.raises(Exception) as failed:
        trainer.fit(unpaired, epochs=1, verbose=0)
    assert not isinstance(failed.value, TypeError)  # not a NoneType weight being called
    for kept, variable in zip(before, trainer.anonymizer.weights, strict=True):
        np.testing.assert_array_equal(np.array(variable), kept)
    trainer.fit(tiny_models.paired_dataset(1), epochs=1, verbose=0)  # and it trains on
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1


def test_evaluation_is_refused_naming_what_to_use_instead():
    trainer = make_trainer()
    with pytest.raises(NotImplementedError, match="SPAct has no evaluation step.*evaluate.py"):
        trainer.evaluate(tiny_models.paired_dataset(1), verbose=0)
    with pytest.raises(ValueError, match="no fit's validation_data"):
        trainer.fit(tiny_models.paired_dataset(1), validation_data=tiny_models.paired_dataset(1))
    assert int(trainer.group_optimizer("anonymizer").iterations) == 0  # before any step


def test_array_batches_of_uint8_frames_or_labels_beyond_the_classes_are_refused_by_key():
    from keras_privacy.data.pairs import pair_arrays

    rng = np.random.default_rng(0)
    halves = [tiny_models.batch(rng, clips=2, images=3) for _ in range(2)]
    trainer = make_trainer()
    with pytest.raises(ValueError, match="different numbers of rows .*clips 2.*views 3.*BatchList"):
        trainer.fit(pair_arrays(*halves), batch_size=2, verbose=0)
    good = pair_arrays(tiny_models.batch(rng, images=2), tiny_models.batch(rng, images=2))
    as_video = dict(good, clips=(good["clips"] * 255).astype(np.uint8))
    with pytest.raises(ValueError, match=r"x\['clips'\] holds uint8 frames .* divide by 255"):
        trainer.fit(as_video, batch_size=2, verbose=0)
    counted_from_one = dict(good, labels=good["labels"] + 1)  # 3 classes: 1 to 3
    counted_from_one["labels"][0, 0] = 3
    with pytest.raises(ValueError, match=r"x\['labels'\] holds action labels from 1 to 3, "):
        trainer.fit(counted_from_one, batch_size=2, verbose=0)
    # Whole batches (the NumPy path where arrays cannot be sliced by rows) are checked too.
    with pytest.raises(ValueError, match=r"^batch 1 of the BatchList: x\['clips'\] holds uint8"):
        trainer.fit(BatchList([good, as_video]), verbose=0)
    with pytest.raises(ValueError, match=r"^batch 0 of the BatchList: x\['labels'\] holds action"):
        trainer.fit(BatchList([counted_from_one]), verbose=0)
    with pytest.raises(TypeError, match=r"one optimizer per group, as a dict .*'anonymizer'"):
        trainer.compile(keras.optimizers.Adam())
    # One instance for two groups: TensorFlow counted each step twice in its Adam step count.
    shared = {group: keras.optimizers.Adam() for group in trainer.groups()}
    shared["action"] = shared["anonymizer"]
    with pytest.raises(ValueError, match="one optimizer instance given to anonymizer, action: "):
        trainer.compile(shared)
    with pytest.raises(TypeError, match=r"SPAct.compile takes no loss, metrics: .* logs \["):
        trainer.compile(shared, loss="mse", metrics=["accuracy"])
    trainer.fit(good, batch_size=2, verbose=0)
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1


def test_train_on_batch_takes_one_batch_dict_and_fit_no_sample_weights():
    from keras_privacy.data.pairs import pair_arrays

    trainer = make_trainer()
    rng = np.random.default_rng(2)
    batch = pair_arrays(*(tiny_models.batch(rng, images=2) for _ in "ab"))
    logs = trainer.train_on_batch(batch, return_dict=True)
    assert np.isfinite(logs["action_loss"])
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1
    rows = len(batch["labels"])
    for unused in ("sample_weight", "class_weight"):
        value = np.ones(rows) if unused == "sample_weight" else {0: 1.0}
        with pytest.raises(ValueError, match=f"SPAct.fit takes no {unused}: "):
            trainer.fit(batch, batch_size=2, verbose=0, **{unused: value})
    with pytest.raises(TypeError, match="but was given a y or sample_weight beside them"):
        trainer.train_on_batch(batch, sample_weight=np.ones(rows))


def test_a_batch_without_a_key_the_step_reads_is_named():
    from keras_privacy.data.pairs import pair_arrays

    trainer = make_trainer()
    rng = np.random.default_rng(3)
    batch = pair_arrays(*(tiny_models.batch(rng, images=2) for _ in "ab"))
    unlabelled = {key: value for key, value in batch.items() if key != "labels"}
    with pytest.raises(ValueError, match=r"^SPAct's step reads batch\['labels'\], which the"):
        trainer.fit(unlabelled, batch_size=2, verbose=0)
    with pytest.raises(ValueError, match=r"^SPAct's step reads batch\['labels'\], which the"):
        trainer.train_on_batch(unlabelled)
    trainer.fit(batch, batch_size=2, verbose=0)  # the failed steps left it able to train
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1


def test_optimizers_may_be_given_by_name():
    from keras_privacy.data.pairs import pair_arrays

    trainer = make_trainer()
    trainer.compile({group: "adam" for group in trainer.groups()})
    batch = pair_arrays(*(tiny_models.batch(np.random.default_rng(1), images=2) for _ in "ab"))
    trainer.fit(batch, batch_size=2, verbose=0)
    for group in trainer.groups():
        optimizer = trainer.group_optimizer(group)
        assert isinstance(optimizer, keras.optimizers.Adam) and int(optimizer.iterations) == 1


def test_contrastive_views_choose_the_positive_pairs():
    batch = tiny_models.batch(np.random.default_rng(0))
    clips, views, pairs = batch["clips"], batch["views"], batch["frame_pairs"]
    frames = clips.reshape(-1, *clips.shape[2:])
    flat_views = views.reshape(-1, *views.shape[2:])
    clip_index = np.arange(len(clips))
    frame_sides = [clips[clip_index, pairs[:, k]] for k in range(2)]
    expected = {
        "images": (views[:, 0], views[:, 1]),
        "frames": tuple(frame_sides),
        "both": tuple(np.concatenate([frame_sides[k], views[:, k]]) for k in range(2)),
    }
    for choice, (first, second) in expected.items():
        got = contrastive_views(frames, flat_views, batch, choice)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got[0]), first)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got[1]), second)
    with pytest.raises(ValueError, match="needs the privacy images' `views`"):
        contrastive_views(frames, None, batch, "images")


def test_authors_views_leave_the_frame_pairs_out_of_the_privacy_loss():
    batch = tiny_models.batch(np.random.default_rng(1))
    moved = {**batch, "frame_pairs": (batch["frame_pairs"] + 1) % batch["clips"].shape[1]}
    for views, same in (("images", True), ("both", False)):
        trainer = make_trainer(contrastive_views=views)
        values = trainer.current_values()
        losses = [
            float(trainer._anonymizer_loss(values, b)[1]["logs"]["anonymizer_privacy_loss"])
            for b in (batch, moved)
        ]
        assert (losses[0] == pytest.approx(losses[1], rel=1e-6)) == same, views


def test_far_pair_frames_are_anonymized_as_the_clip_frames_would_be():
    # The far sampler's frames come as `pair_frames` (outside the clip): given the frames at
    # `frame_pairs`, the adversary's L_B is the same as from the positions in the clip.
    batch = tiny_models.batch(np.random.default_rng(2))
    clip_index = np.arange(len(batch["clips"]))
    pair_frames = np.stack(
        [batch["clips"][clip_index, batch["frame_pairs"][:, k]] for k in range(2)], axis=1
    )
    far = {key: value for key, value in batch.items() if key != "frame_pairs"}
    far["pair_frames"] = pair_frames
    for views in ("frames", "both"):
        trainer = make_trainer(contrastive_views=views)
        values = trainer.current_values()
        losses = [
            float(trainer._adversary_loss(values, b)[1]["logs"]["privacy_loss"])
            for b in (batch, far)
        ]
        assert losses[0] == pytest.approx(losses[1], rel=1e-5), views


def test_run_parts_normalises_each_part_by_its_own_statistics_in_training_mode():
    trainer = make_trainer()
    model = trainer.anonymizer
    rng = np.random.default_rng(3)
    parts = [rng.random((n, 8, 8, 3), dtype="float32") * scale for n, scale in ((2, 1), (3, 4))]
    values = trainer.current_values()
    outputs, state = run_parts(trainer, "anonymizer", values, parts, training=True)
    # As successive calls in training mode: each part on its own batch statistics, each
    # call's moving averages the next one's start.
    non_trainable = values["anonymizer"][1]
    for part, output in zip(parts, outputs):
        expected, non_trainable = model.stateless_call(
            values["anonymizer"][0], non_trainable, part, training=True
        )
        np.testing.assert_allclose(output, expected, rtol=1e-5, atol=1e-6)
    for got, expected in zip(state, non_trainable):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    joint, _ = model.stateless_call(*values["anonymizer"], np.concatenate(parts), training=True)
    assert np.abs(np.concatenate(outputs) - np.asarray(joint)).max() > 1e-3
    # In inference mode one call gives every part's outputs.
    outputs, _ = run_parts(trainer, "anonymizer", values, parts, training=False)
    joint, _ = model.stateless_call(*values["anonymizer"], np.concatenate(parts), training=False)
    np.testing.assert_allclose(np.concatenate(outputs), joint, rtol=1e-5, atol=1e-6)


def test_f_A_update_anonymizes_each_view_and_the_frames_in_a_call_of_its_own():
    # The authors' f_A update: f_A(views 1), f_A(views 2), f_A(frames), each in training mode.
    trainer = make_trainer()
    batch = tiny_models.batch(np.random.default_rng(4))
    frames, views, _ = anonymize_batch(trainer, trainer.current_values(), batch, training=True)
    model = trainer.anonymizer
    clips = batch["clips"]
    expected = model(clips.reshape(-1, *clips.shape[2:]), training=True)
    np.testing.assert_allclose(frames, expected, rtol=1e-5, atol=1e-6)
    for k in range(2):
        expected = model(batch["views"][:, k], training=True)
        np.testing.assert_allclose(np.asarray(views)[k::2], expected, rtol=1e-5, atol=1e-6)


def test_f_B_update_embeds_each_view_in_a_call_of_its_own():
    # The authors' f_B update: f_B(view 1), f_B(view 2) in training mode, then NT-Xent.
    trainer = make_trainer()
    rng = np.random.default_rng(5)
    first, second = (rng.random((3, 8, 8, 3), dtype="float32") for _ in range(2))
    values = trainer.current_values()
    loss, _ = privacy_loss(trainer, values, first, second, 0.5, training=True)
    encoder = trainer.privacy_encoder
    embeddings = [
        np.asarray(encoder.stateless_call(*values["privacy"], side, training=True)[0])
        for side in (first, second)
    ]
    assert float(loss) == pytest.approx(nt_xent_reference(*embeddings, 0.5), rel=1e-4)
