from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
import tiny_models

from keras_privacy import checkpoint
from keras_privacy.backend import value_and_gradient
from keras_privacy.methods.steps import multilabel_accuracy
from keras_privacy.methods.vita import VITA, clip_budget_term, negative_entropy


def make_vita(learning_rates=None, jit_compile="auto", resumed=None, budget_models=None, **kwargs):
    """A VITA of tiny models (two budget models unless `budget_models` says); every optimizer
    Adam 1e-2 unless `learning_rates` says; with `resumed` (a checkpoint's state) its models'
    weights are loaded from it before compile, as `training.train` resumes a run."""
    trainer = VITA(
        tiny_models.anonymizer(),
        tiny_models.action_model(),
        budget_models or [tiny_models.budget_model(width=4), tiny_models.budget_model(width=6)],
        **kwargs,
    )
    if resumed is not None:
        checkpoint.restore_models(resumed, trainer.groups())
    names = [*trainer.groups(), *trainer.optimizer_groups()]
    rates = {name: 1e-2 for name in names} | (learning_rates or {})
    optimizers = {name: keras.optimizers.Adam(rates[name]) for name in names}
    trainer.compile(optimizers, jit_compile=jit_compile)
    return trainer


def test_one_budget_model_may_be_given_alone_as_one_attack_model_may():
    from keras_privacy.methods.meta import MetaGeneralization

    budget = tiny_models.budget_model(width=4)
    vita = VITA(tiny_models.anonymizer(), tiny_models.action_model(), budget)
    assert vita.budget_models == [budget] and "budget_0" in vita.groups()
    meta = MetaGeneralization(tiny_models.anonymizer(), tiny_models.action_model(), budget)
    assert meta.attack_models == [budget]


def weights(model):
    return [np.array(v.numpy()) for v in model.weights]


def velocities(optimizer):
    """The Adam second moments of `optimizer`, as arrays."""
    return [np.array(v.numpy()) for v in optimizer.variables if v.path.endswith("_velocity")]


def iterations(trainer, group):
    return int(trainer.group_optimizer(group).iterations)


# Without XLA, TensorFlow runs the skipped updates inside real conditionals (`tf.cond`). JAX
# without jit (op by op: 42 s here) runs its conditionals in test_engine.
@pytest.mark.parametrize(
    "jit_compile", ["auto", pytest.param(False, marks=pytest.mark.backend_independent)]
)
def test_validation_loop_runs_f_T_until_the_threshold_at_most_the_bound(jit_compile):
    trainer = make_vita(
        jit_compile=jit_compile, action_threshold=1.0, action_max_updates=2, budget_updates=1
    )
    history = trainer.fit(tiny_models.vita_dataset(2), epochs=1, verbose=0).history
    # Validation accuracy < 1.0 is not guaranteed on every check; the count logged is the
    # number of f_T updates made, each also an update of f_A by f_T's optimizer.
    made = iterations(trainer, "action")
    assert 2 <= made <= 4
    assert history["action_updates"][0] == pytest.approx(made / 2)
    assert iterations(trainer, "anonymizer_by_action") == made
    assert iterations(trainer, "anonymizer") == 2
    never = make_vita(
        jit_compile=jit_compile, action_threshold=2.0, action_max_updates=2, budget_updates=1
    )
    history = never.fit(tiny_models.vita_dataset(2), epochs=1, verbose=0).history
    assert iterations(never, "action") == 4
    assert history["action_updates"][0] == 2


@pytest.mark.parametrize("threshold", [2.0, -1.0])
def test_an_epoch_whose_f_T_loop_always_ran_to_its_bound_is_warned_of(threshold):
    # Threshold 2.0: never reached, every step makes both updates; -1.0: reached at once.
    trainer = make_vita(action_threshold=threshold, action_max_updates=2, budget_updates=1)
    before = trainer.update_counts()
    trainer.fit(tiny_models.vita_dataset(2), epochs=1, verbose=0)
    warnings = trainer.epoch_warnings(before, trainer.update_counts())
    if threshold > 1:
        assert len(warnings) == 1
        assert "--action_threshold=2 in every one of the epoch's 2 minimax steps" in warnings[0]
        assert "--action_max_updates=2 f_T updates, each also moving f_A" in warnings[0]
    else:
        assert warnings == []
    # Before any minimax step (budget-only steps, or no epoch yet) there is nothing to say.
    assert trainer.epoch_warnings(before, before) == []


def predicted_classes(trainer, clips):
    return np.argmax(keras.ops.convert_to_numpy(trainer(clips)), axis=-1)


@pytest.mark.parametrize("validation_right", [True, False])
def test_f_T_updates_are_decided_on_the_validation_clips(validation_right):
    # f_A frozen (learning rate 0), so f_T's predictions on the validation clips before its
    # first update are those of the untrained models. One repeated validation clip: f_T
    # predicts one class for all of them, which the labels are (accuracy 1, no f_T update)
    # or are not (accuracy 0 < 0.7: f_T updates), whatever its accuracy on the training batch.
    trainer = make_vita(
        learning_rates={"anonymizer": 0.0, "anonymizer_by_action": 0.0},
        action_threshold=0.7,
        action_max_updates=1,
        budget_updates=1,
    )
    data = next(iter(tiny_models.vita_dataset(1).as_numpy_iterator()))
    clips = np.repeat(data["validation_clips"][:1], 2, axis=0)
    predicted = predicted_classes(trainer, clips)[0]
    labels = np.full(2, predicted if validation_right else (predicted + 1) % 3, "int32")
    batch = {**data, "validation_clips": clips, "validation_labels": labels}
    batch["labels"] = labels if not validation_right else (labels + 1) % 3
    dataset = tf.data.Dataset.from_tensors(batch)
    history = trainer.fit(dataset, epochs=1, verbose=0).history
    assert iterations(trainer, "action") == (0 if validation_right else 1)
    assert history["action_validation_accuracy"][0] == (1.0 if validation_right else 0.0)


def test_f_T_update_moves_f_A_at_its_own_learning_rate():
    # f_A's own optimizer at rate 0: only f_T's update moves it, by one Adam step of f_T's
    # rate (|change| <= 1e-3, about 1e-3 where the gradient is not tiny).
    trainer = make_vita(
        learning_rates={"anonymizer": 0.0, "anonymizer_by_action": 1e-3},
        action_threshold=2.0,
        action_max_updates=1,
        budget_updates=1,
    )
    before = weights(trainer.anonymizer)
    trainer.fit(tiny_models.vita_dataset(1), epochs=1, verbose=0)
    change = max(
        np.abs(a - b).max() for a, b in zip(before, weights(trainer.anonymizer)) if a.ndim > 1
    )
    assert 5e-4 < change <= 1e-3 * 1.01
    alone = make_vita(
        learning_rates={"anonymizer": 0.0},
        action_threshold=2.0,
        action_max_updates=1,
        budget_updates=1,
        action_moves_anonymizer=False,
    )
    before = weights(alone.anonymizer)
    alone.fit(tiny_models.vita_dataset(1), epochs=1, verbose=0)
    assert iterations(alone, "action") == 1
    trained = [a for a in alone.anonymizer.trainable_variables]
    assert all(
        np.array_equal(a, np.array(v.numpy())) for a, v in zip(before, trained) if a.ndim > 1
    )
    with pytest.raises(ValueError, match="anonymizer_by_action"):
        VITA(
            tiny_models.anonymizer(), tiny_models.action_model(), [tiny_models.budget_model()]
        ).compile({"anonymizer": keras.optimizers.Adam()})


def test_action_fresh_clips_give_each_f_T_update_a_batch_of_its_own():
    # f_A frozen and f_T's threshold out of reach: f_T makes both bounded updates of one step,
    # on the first then the second batch of `action_clips`. The same f_T, updated once a step
    # on the step's clips over two steps whose clips are those two batches, ends the same.
    frozen = {"anonymizer": 0.0, "anonymizer_by_action": 0.0}
    fresh = make_vita(
        frozen,
        action_threshold=2.0,
        action_max_updates=2,
        budget_updates=1,
        action_fresh_clips=True,
    )
    by_steps = make_vita(frozen, action_threshold=2.0, action_max_updates=1, budget_updates=1)
    on_step_clips = make_vita(frozen, action_threshold=2.0, action_max_updates=2, budget_updates=1)
    by_steps.set_weights(fresh.get_weights())
    on_step_clips.set_weights(fresh.get_weights())
    data = next(iter(tiny_models.vita_dataset(1, action_batches=2).as_numpy_iterator()))
    fresh.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    on_step_clips.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    steps = [
        {
            **data,
            "clips": data["action_clips"][k : k + 2],
            "labels": data["action_labels"][k : k + 2],
        }
        for k in (0, 2)
    ]
    by_steps.fit(
        tf.data.Dataset.from_tensor_slices(
            {key: np.stack([step[key] for step in steps]) for key in data}
        ),
        epochs=1,
        verbose=0,
    )
    assert iterations(fresh, "action") == iterations(by_steps, "action") == 2
    for a, b in zip(weights(fresh.action_model), weights(by_steps.action_model)):
        np.testing.assert_allclose(a, b, atol=1e-5)
    change = max(
        np.abs(a - b).max()
        for a, b in zip(weights(fresh.action_model), weights(on_step_clips.action_model))
    )
    assert change > 1e-3  # two Adam steps of 1e-2 on other clips


@pytest.mark.parametrize("first_check_right", [False, True])
def test_action_fresh_clips_give_each_accuracy_check_a_batch_of_its_own(first_check_right):
    # f_A and f_T frozen (rate 0): an update changes no prediction, so each check's accuracy
    # is that of its own batch. One held-out clip repeated: f_T predicts one class for all,
    # which the labels of one batch are (accuracy 1) and of the other are not (0). Wrong
    # first: the first check fails, one update, the second check passes. Right first: no
    # update. Without fresh clips both checks see all four clips (0.5 < 0.7): two updates.
    frozen = {"anonymizer": 0.0, "anonymizer_by_action": 0.0, "action": 0.0}
    settings = dict(action_threshold=0.7, action_max_updates=2, budget_updates=1)
    fresh = make_vita(frozen, action_fresh_clips=True, **settings)
    every = make_vita(frozen, **settings)
    every.set_weights(fresh.get_weights())
    data = next(iter(tiny_models.vita_dataset(1, action_batches=2).as_numpy_iterator()))
    clips = np.repeat(data["validation_clips"][:1], 4, axis=0)
    predicted = predicted_classes(fresh, clips)[0]
    right, wrong = [predicted] * 2, [(predicted + 1) % 3] * 2
    labels = np.array(right + wrong if first_check_right else wrong + right, "int32")
    batch = {**data, "validation_clips": clips, "validation_labels": labels}
    history = fresh.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0).history
    assert iterations(fresh, "action") == (0 if first_check_right else 1)
    assert history["action_validation_accuracy"][0] == 1.0
    every.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0)
    assert iterations(every, "action") == 2


def test_a_batch_without_the_loops_clips_and_fresh_clips_with_the_batch_gate_are_refused():
    data = next(iter(tiny_models.vita_dataset(1, action_batches=1).as_numpy_iterator()))
    trainer = make_vita(action_threshold=2.0, action_max_updates=2, action_fresh_clips=True)
    with pytest.raises(ValueError, match="action_max_updates=2 batches of 2 clips"):
        trainer.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    del data["action_clips"], data["action_labels"]
    trainer = make_vita(action_threshold=2.0, action_max_updates=1, action_fresh_clips=True)
    with pytest.raises(ValueError, match="'action_clips' and 'action_labels'.*which this batch"):
        trainer.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    data = next(iter(tiny_models.vita_dataset(1).as_numpy_iterator()))
    del data["validation_clips"], data["validation_labels"]
    trainer = make_vita(action_threshold=2.0, action_max_updates=1)
    with pytest.raises(
        ValueError,
        match=r"VITA's validation_loop reads the batch's 'validation_clips' and "
        r"'validation_labels', which this batch lacks .*dataset\(validation=True\) adds them",
    ):
        trainer.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    data = next(iter(tiny_models.vita_dataset(1, action_batches=2).as_numpy_iterator()))
    data["validation_clips"] = data["validation_clips"][:2]
    trainer = make_vita(action_threshold=2.0, action_max_updates=2, action_fresh_clips=True)
    with pytest.raises(ValueError, match="batches of 2 clips in 'validation_clips', got 2"):
        trainer.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    with pytest.raises(ValueError, match="needs action_schedule='validation_loop'"):
        VITA(
            tiny_models.anonymizer(),
            tiny_models.action_model(),
            [tiny_models.budget_model()],
            action_schedule="batch_gate",
            action_fresh_clips=True,
        )


def test_budget_models_make_n_updates_per_step_on_their_own_images():
    trainer = make_vita(action_threshold=-1.0, budget_updates=2)
    trainer.fit(tiny_models.vita_dataset(3, image_batches=2), epochs=1, verbose=0)
    for group in trainer.budget_groups:
        assert iterations(trainer, group) == 6, group
    # The same two updates by hand: f_A's output (inference mode, f_A frozen; its statistics
    # are those after the step's f_A update) on the first then the second three images, one
    # Adam step each, against the labels of those images.
    frozen = {"anonymizer": 0.0, "anonymizer_by_action": 0.0}
    reference = make_vita(frozen, action_threshold=-1.0, budget_updates=2)
    step = make_vita(frozen, action_threshold=-1.0, budget_updates=2)
    step.set_weights(reference.get_weights())
    data = next(iter(tiny_models.vita_dataset(1, image_batches=2).as_numpy_iterator()))
    step.fit(tf.data.Dataset.from_tensors(data), epochs=1, verbose=0)
    model = reference.budget_models[0]
    optimizer = keras.optimizers.Adam(1e-2)
    anonymized = step.anonymizer(data["images"], training=False)
    for n in range(2):
        images = anonymized[3 * n : 3 * n + 3]
        labels = data["privacy"][3 * n : 3 * n + 3]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(params, images=images, labels=labels, non_trainable=non_trainable):
            logits, _ = model.stateless_call(params, non_trainable, images, training=True)
            ops = keras.ops
            return ops.mean(
                ops.maximum(logits, 0) - logits * labels + ops.log1p(ops.exp(-ops.abs(logits)))
            )

        _, grads = value_and_gradient(loss, [v.value for v in model.trainable_variables])
        model(images, training=True)  # the BatchNorm statistics of the update's forward pass
        optimizer.apply(grads, model.trainable_variables)
    # (The convolution's bias before BatchNorm has a gradient of rounding noise: left out;
    # an Adam step of 1e-2 on the wrong images would differ by far more than 1e-4.)
    for v, a, b in zip(model.weights, weights(model), weights(step.budget_models[0])):
        if a.ndim > 1 or "moving" in v.path:
            np.testing.assert_allclose(a, b, atol=1e-4, err_msg=v.path)


RESTARTING = dict(
    action_threshold=2.0,
    action_max_updates=1,
    budget_updates=1,
    restart_every=2,
    budget_pretrain_updates=2,
)
"""Two budget-only steps at the start and after each restart, a restart after every two
minimax steps: steps 0-1 budget only, 2-3 minimax, 4 a restart, 4-5 budget only, 6 minimax."""


def test_a_restart_puts_back_a_budget_model_with_dropout_and_its_seed_goes_on():
    """A budget model with a Dropout layer holds a seed state among its non-trainable
    variables, which the restart snapshot (its weights) does not: the restart puts the weights
    back and lets the seed go on (JAX's step looked the seed up in the snapshot and failed)."""
    inputs = keras.Input((None, None, 3))
    x = keras.layers.Conv2D(4, 3, padding="same")(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(0.5)(x)
    budget = keras.Model(inputs, keras.layers.Dense(4)(x))
    trainer = make_vita(budget_models=[budget], **RESTARTING)
    initial = weights(budget)
    history = trainer.fit(tiny_models.vita_dataset(5), epochs=1, verbose=0).history
    assert np.isfinite(history["budget_loss"][-1])
    # Step 4 restarted the budget model, then took one Adam step from its initial weights.
    assert np.abs(weights(budget)[0] - initial[0]).max() < 0.1


def test_restart_retrains_the_budget_models_before_the_minimax_goes_on():
    trainer = make_vita(**RESTARTING)
    initial = weights(trainer.budget_models[1])
    history = trainer.fit(tiny_models.vita_dataset(4), epochs=1, verbose=0).history
    assert history["action_updates"][0] == pytest.approx(2 / 4)
    optimizer = trainer.group_optimizer("budget_1")
    before = velocities(optimizer)
    trained = np.abs(weights(trainer.budget_models[1])[0] - initial[0]).max()
    history = trainer.fit(tiny_models.vita_dataset(1, seed=2), epochs=1, verbose=0).history
    assert iterations(trainer, "anonymizer") == 2
    assert iterations(trainer, "action") == 2
    assert iterations(trainer, "budget_1") == 5
    assert history["action_updates"][0] == 0
    # Step 4 restarted the budget models: after it, one Adam step from the initial weights...
    kernel_change = np.abs(weights(trainer.budget_models[1])[0] - initial[0]).max()
    assert kernel_change <= 1e-2 * 1.01 < trained
    # ...whose Adam state went on, as the authors' restart restores the weights alone: each
    # second moment is 0.999 of its value before plus the new squared gradient (zeroed
    # moments under the step count that goes on would give steps of several times the rate).
    for old, new in zip(before, velocities(optimizer)):
        assert np.all(new >= 0.999 * old * (1 - 1e-6))
    assert max(float(new.max()) for new in velocities(optimizer)) > 0
    trainer.fit(tiny_models.vita_dataset(2, seed=1), epochs=1, verbose=0)
    assert iterations(trainer, "anonymizer") == 3
    with pytest.raises(ValueError, match="multiple of budget_updates"):
        VITA(
            tiny_models.anonymizer(),
            tiny_models.action_model(),
            [tiny_models.budget_model()],
            budget_updates=5,
            budget_pretrain_updates=7,
        )


def test_a_resumed_run_restarts_the_budget_models_to_the_weights_of_the_phase_start(
    tmp_path, caplog
):
    # RESTARTING's step 4 restarts. The run is checkpointed after three steps (0-2) and
    # resumed in a new trainer, whose compile copies the resumed weights: the checkpoint's
    # snapshot puts the phase start's back.
    trainer = make_vita(**RESTARTING)
    start = [w for model in trainer.budget_models for w in weights(model)]
    kernel = len(weights(trainer.budget_models[0]))  # budget_1's kernel in the snapshot
    trainer.fit(tiny_models.vita_dataset(3), epochs=1, verbose=0)
    checkpoint.save_checkpoint(
        tmp_path, "minimax", 1, trainer.groups(), trainer.optimizer, {}, trainer.restart_snapshot
    )
    state = checkpoint.latest_checkpoint(tmp_path)
    resumed = make_vita(resumed=state, **RESTARTING)
    checkpoint.restore_optimizer(state, resumed.optimizer)
    trained = weights(resumed.budget_models[1])
    assert not np.array_equal(trained[0], start[kernel])
    checkpoint.restore_restart_snapshot(state, resumed.restart_snapshot)
    for snapshot, value in zip(resumed.restart_snapshot, start):
        np.testing.assert_array_equal(snapshot.numpy(), value)
    resumed.fit(tiny_models.vita_dataset(2, seed=3), epochs=1, verbose=0)  # 3, then 4: a restart
    assert iterations(resumed, "budget_1") == 5
    change = np.abs(weights(resumed.budget_models[1])[0] - start[kernel]).max()
    assert change <= 1e-2 * 1.01 < np.abs(trained[0] - start[kernel]).max()

    # A checkpoint of an older version has no snapshot: a warning, the resumed weights kept.
    (Path(state["path"]) / "restart_snapshot.npz").unlink()
    older = make_vita(resumed=state, **RESTARTING)
    checkpoint.restore_restart_snapshot(state, older.restart_snapshot)
    assert "has no restart snapshot" in caplog.text
    np.testing.assert_array_equal(older.restart_snapshot[kernel].numpy(), trained[0])


def test_a_saved_trainer_reloads_compiled_and_fits_on_as_the_original(tmp_path):
    """`trainer.save` keeps the optimizers (VITA's extra `anonymizer_by_action` too), their
    state and the restart's initial weights: the reloaded trainer's next steps, across a
    restart, are the original's."""
    trainer = make_vita(**RESTARTING)
    trainer.fit(tiny_models.vita_dataset(3), epochs=1, verbose=0)
    trainer.save(tmp_path / "vita.keras")
    reloaded = keras.saving.load_model(tmp_path / "vita.keras")
    assert reloaded.compiled
    assert reloaded.update_counts() == trainer.update_counts()
    # Uncompiled, it has the snapshot's variables too (they were made by `compile`).
    uncompiled = keras.saving.load_model(tmp_path / "vita.keras", compile=False)
    assert not uncompiled.compiled and trainer.restart_snapshot
    for kept, original in zip(uncompiled.restart_snapshot, trainer.restart_snapshot, strict=True):
        np.testing.assert_array_equal(kept.numpy(), original.numpy())
    more = tiny_models.vita_dataset(3, seed=1)  # its first step is step 4, a restart
    trainer.fit(more, epochs=1, verbose=0)
    reloaded.fit(more, epochs=1, verbose=0)
    assert reloaded.update_counts() == trainer.update_counts()
    for name in trainer.update_counts():
        for kept, original in zip(
            velocities(reloaded.group_optimizer(name)),
            velocities(trainer.group_optimizer(name)),
            strict=True,
        ):
            np.testing.assert_allclose(kept, original, rtol=1e-5, atol=1e-9)
    for kept, original in zip(reloaded.weights, trainer.weights, strict=True):
        np.testing.assert_allclose(kept.numpy(), original.numpy(), atol=1e-6, err_msg=kept.path)


def test_batch_gate_keeps_one_update_gated_on_the_training_batch():
    trainer = make_vita(
        action_schedule="batch_gate", action_threshold=-1.0, budget_threshold=2.0, budget_updates=1
    )
    action_before = weights(trainer.action_model)
    budget_before = weights(trainer.budget_models[0])
    history = trainer.fit(tiny_models.labelled_dataset(2), epochs=1, verbose=0).history
    assert all(np.array_equal(a, b) for a, b in zip(action_before, weights(trainer.action_model)))
    assert iterations(trainer, "action") == 0
    assert history["action_updates"][0] == 0
    assert not all(
        np.array_equal(a, b) for a, b in zip(budget_before, weights(trainer.budget_models[0]))
    )
    gated = make_vita(
        action_schedule="batch_gate", action_threshold=2.0, budget_threshold=-1.0, budget_updates=1
    )
    history = gated.fit(tiny_models.labelled_dataset(2), epochs=1, verbose=0).history
    assert iterations(gated, "action") == 2
    assert history["action_updates"][0] == 1
    assert iterations(gated, "budget_0") == 0
    # the gate measures no validation accuracy, so none is logged (a 0 would read as one)
    assert "action_validation_accuracy" not in history


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


def entropy_budget_term(frame_logits, clip_length):
    """The negative entropy of each clip's mean prediction (sigmoid of the frames' mean logits)
    averaged over attributes; the max over models per clip, then the batch mean."""
    per_model = []
    for logits in frame_logits:
        p = 1 / (1 + np.exp(-logits.reshape(-1, clip_length, logits.shape[-1]).mean(axis=1)))
        per_model.append((p * np.log(p) + (1 - p) * np.log(1 - p)).mean(axis=1))
    return np.stack(per_model).max(axis=0).mean()


def test_budget_term_is_the_authors_per_clip_max():
    rng = np.random.default_rng(0)
    # Two models, 3 clips of 4 frames, 5 attributes; model 0 is the larger term on some clips
    # and model 1 on others, so a max of batch means would differ.
    frame_logits = [rng.normal(0, 2, (12, 5)).astype("float32") for _ in range(2)]
    expected = authors_budget_term(frame_logits, 4)
    assert float(clip_budget_term(frame_logits, 4)) == pytest.approx(expected, rel=1e-5)
    got = float(clip_budget_term(frame_logits, 4, "entropy"))
    assert got == pytest.approx(entropy_budget_term(frame_logits, 4), rel=1e-4)
    max_of_means = max(np.log1p(np.exp(-lg.reshape(3, 4, 5).mean(1))).mean() for lg in frame_logits)
    assert abs(expected - max_of_means) > 1e-3


def anonymize(trainer, *parts):
    """f_A's output on `parts` (frames, images) as one batch in training mode (one BatchNorm
    batch), as VITA's f_A update runs it."""
    batch = np.concatenate(parts)
    return keras.ops.convert_to_numpy(trainer.anonymizer(batch, training=True))


def budget_logits(model, images, batch_statistics):
    """A budget model's logits, in training mode (batch statistics) or not, its state kept."""
    logits, _ = model.stateless_call(
        model.trainable_variables, model.non_trainable_variables, images, training=batch_statistics
    )
    return keras.ops.convert_to_numpy(logits)


# What the budget terms compute is the method's backend-independent code (Keras ops): these
# three run on the TensorFlow run only; the JAX step's decisions and updates are tested above.
@pytest.mark.backend_independent
@pytest.mark.parametrize("batch_statistics", [True, False])
def test_anonymizer_budget_term_sees_the_anonymized_clip_frames(batch_statistics):
    trainer = make_vita(
        action_threshold=-1.0, budget_updates=1, budget_batch_statistics=batch_statistics
    )
    data = next(iter(tiny_models.vita_dataset(1).batch(1).as_numpy_iterator()))
    clips = data["clips"][0]
    frames = clips.reshape(-1, *clips.shape[2:])
    # f_A runs in training mode on the clip frames alone (with the images in its batch, its
    # BatchNorm statistics and so its frames would differ).
    anonymized = anonymize(trainer, frames)
    with_images = anonymize(trainer, frames, data["images"][0])[: len(frames)]
    assert np.abs(with_images - anonymized).max() > 1e-3
    frame_logits = [budget_logits(m, anonymized, batch_statistics) for m in trainer.budget_models]
    expected = authors_budget_term(frame_logits, clips.shape[1])
    other = [budget_logits(m, anonymized, not batch_statistics) for m in trainer.budget_models]
    assert abs(authors_budget_term(other, clips.shape[1]) - expected) > 1e-3
    history = trainer.fit(tiny_models.vita_dataset(1), epochs=1, verbose=0).history
    assert history["anonymizer_budget_term"][0] == pytest.approx(expected, rel=1e-4)


@pytest.mark.backend_independent
@pytest.mark.parametrize("budget_loss", ["max_bce", "entropy"])
def test_the_f_A_update_of_a_clip_budget_term_never_reads_the_images(budget_loss):
    # Only the f_A update runs (no f_T update, budget updates gated off); two batches that
    # differ only in their privacy images leave f_A with the same weights and statistics.
    data = next(iter(tiny_models.vita_dataset(1).as_numpy_iterator()))
    other = {**data, "images": np.clip(1.0 - 0.5 * data["images"], 0.0, 1.0)}
    after = []
    for batch in (data, other):
        keras.utils.set_random_seed(0)
        trainer = make_vita(
            budget_loss=budget_loss, action_threshold=-1.0, budget_updates=1, budget_threshold=-1.0
        )
        trainer.fit(tf.data.Dataset.from_tensors(batch), epochs=1, verbose=0)
        assert iterations(trainer, "anonymizer") == 1
        after.append(weights(trainer.anonymizer))
    for first, second in zip(*after):
        np.testing.assert_allclose(first, second, rtol=1e-6, atol=1e-7)


@pytest.mark.backend_independent
def test_image_max_bce_keeps_the_earlier_form():
    trainer = make_vita(budget_loss="image_max_bce", action_threshold=-1.0, budget_updates=1)
    data = next(iter(tiny_models.vita_dataset(1).batch(1).as_numpy_iterator()))
    frames = data["clips"][0].reshape(-1, *data["clips"].shape[3:])
    anonymized = anonymize(trainer, frames, data["images"][0])[len(frames) :]
    expected = max(
        np.log1p(np.exp(-budget_logits(m, anonymized, True))).mean() for m in trainer.budget_models
    )
    history = trainer.fit(tiny_models.vita_dataset(1), epochs=1, verbose=0).history
    assert history["anonymizer_budget_term"][0] == pytest.approx(expected, rel=1e-4)


def test_the_f_A_update_leaves_the_budget_models_moving_averages_alone():
    # Budget updates gated off (accuracy is never below -1): only the f_A update runs the
    # budget models, in training mode, and their moving averages stay as they were.
    trainer = make_vita(action_threshold=-1.0, budget_updates=1, budget_threshold=-1.0)
    before = [weights(m) for m in trainer.budget_models]
    trainer.fit(tiny_models.vita_dataset(2), epochs=1, verbose=0)
    for model, old in zip(trainer.budget_models, before):
        for new, was in zip(weights(model), old):
            np.testing.assert_array_equal(new, was)
    assert iterations(trainer, "anonymizer") == 2


def test_privacy_labels_of_another_width_than_the_budget_models_are_refused():
    trainer = make_vita()
    rng = np.random.default_rng(0)
    arrays = {
        "clips": rng.random((2, 4, 8, 8, 3), dtype="float32"),
        "privacy": np.zeros((2, 5), "float32"),  # the budget models predict 4 attributes
    }
    with pytest.raises(
        ValueError, match=r"x\['privacy'\] holds labels of 5 attributes, but budget_0 predicts 4"
    ):
        trainer.fit(arrays, batch_size=2, verbose=0)
