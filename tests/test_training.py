"""A whole training run (`keras_privacy.training.train`) and its command line on a tiny
synthetic benchmark with tiny models: saved models, history, frames, logs, exact resume after a
kill in the middle of an epoch, and the NaN guard."""

import collections
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import keras
import numpy as np
import pytest
import tiny_models
from test_files import holding_a_lock

from keras_privacy import checkpoint, training
from keras_privacy.config import ExperimentConfig
from keras_privacy.data.cache import prepare_image_cache, read_manifest
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split
from keras_privacy.evaluation.anonymizations import load_anonymizer
from keras_privacy.files import LockedError
from keras_privacy.learning_rates import EpochRates, LinearWarmup
from keras_privacy.methods.init import IdentityInit
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.trainer import StatelessTrainer
from keras_privacy.methods.vita import VITA
from keras_privacy.spelling import SettingError

REPO = Path(__file__).resolve().parents[1]
PHASES = ["identity", "action_init", "privacy_init", "minimax"]
# Four action batches per epoch: the minimax takes them in pairs, so two steps per epoch.
EPOCHS = {"identity": 1, "action_init": 1, "privacy_init": 1, "minimax": 2}


def tiny_config(benchmark, run_dir, **overrides) -> ExperimentConfig:
    settings = dict(
        **tiny_models.TINY_RUN,
        synthetic_dir=str(benchmark),
        run_dir=str(run_dir),
        anonymizer="unet_tiny",
        identity_epochs=EPOCHS["identity"],
        identity_warmup_epochs=1,
        action_init_epochs=EPOCHS["action_init"],
        privacy_init_epochs=EPOCHS["privacy_init"],
        minimax_epochs=EPOCHS["minimax"],
        # Large enough that a resume with the wrong optimizer state (moments, step count) ends
        # measurably elsewhere.
        anonymizer_lr=1e-2,
        action_lr=1e-2,
        privacy_lr=1e-2,
        steps_per_epoch=4,
    )
    if overrides.get("method", "spact") in ("spact", "penalty"):
        settings.update(projection_hidden=16, projection_dim=8)  # SPAct's f_B only
    config = ExperimentConfig(**(settings | overrides))
    config.validate()
    return config


class EpochRecorder(keras.callbacks.Callback):
    """Remember which (trainer, epoch) pairs a run trained, through `train(callbacks=...)`."""

    def __init__(self):
        super().__init__()
        self.epochs = []

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append((type(self.model).__name__, epoch))


class BatchEndThreads(keras.callbacks.Callback):
    """Whether each step's logs reached the callbacks on the host's main thread. Async-safe:
    where every callback of a fit is, Keras (on JAX) reads the logs in worker threads, so the
    host dispatches the next step without waiting for this one."""

    async_safe = True

    def __init__(self):
        super().__init__()
        self.on_main_thread = set()

    def on_train_batch_end(self, batch, logs=None):
        self.on_main_thread.add(threading.current_thread() is threading.main_thread())


class SnapshotMidEpoch(EpochRecorder):
    """Copy the run folder after the first step of the second minimax epoch: what a run killed
    at that moment leaves on disk (the copy is taken before the epoch's checkpoint)."""

    def __init__(self, run_dir: Path, target: Path):
        super().__init__()
        self.run_dir, self.target = run_dir, target

    def on_train_batch_end(self, batch, logs=None):
        if isinstance(self.model, SPAct) and self.epochs[-1][1] == 1 and batch == 0:
            assert not self.target.exists(), "snapshot taken twice"
            shutil.copytree(self.run_dir, self.target)


def train_capturing_models(config, callbacks=()):
    """`train(config)`, and the in-memory models it trained."""
    built = {}
    real_build = training.build_models

    def capturing_build(*args, **kwargs):
        built.update(real_build(*args, **kwargs))
        return built

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training, "build_models", capturing_build)
        result = training.train(config, callbacks=list(callbacks))
    return result, built


def inputs_of(config, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    size, frames = config.image_size, config.clip_length
    return {
        "anonymizer": rng.random((2, size, size, 3), dtype="float32"),
        "action": rng.random((2, frames, size, size, 3), dtype="float32"),
        "privacy": rng.random((2, size, size, 3), dtype="float32"),
    }


def assert_same_weights(first: keras.Model, second: keras.Model, atol: float):
    first_weights, second_weights = first.get_weights(), second.get_weights()
    assert len(first_weights) == len(second_weights)
    for a, b in zip(first_weights, second_weights):
        np.testing.assert_allclose(a, b, atol=atol, rtol=0)


@pytest.fixture(scope="module")
def uninterrupted(benchmark, tmp_path_factory):
    """Run A, uninterrupted; a snapshot of its folder in the middle of minimax epoch 2."""
    folder = tmp_path_factory.mktemp("runs")
    config = tiny_config(benchmark, folder / "a")
    snapshot = SnapshotMidEpoch(folder / "a", folder / "killed")
    with contextlib.redirect_stdout(io.StringIO()) as log:
        result, models = train_capturing_models(config, callbacks=[snapshot])
    return {
        "log": log.getvalue(),
        "config": config,
        "result": result,
        "models": models,
        "epochs": snapshot.epochs,
        "killed": folder / "killed",
    }


def test_full_run_writes_models_history_frames_and_logs(uninterrupted):
    config, result, models = (uninterrupted[k] for k in ("config", "result", "models"))
    run_dir = Path(config.run_dir)
    assert result.run_dir == run_dir

    # Every phase ran each of its epochs once, in order, with the callbacks given to `train`.
    assert uninterrupted["epochs"] == [
        ("IdentityInit", 0),
        ("ActionInit", 0),
        ("PrivacyInit", 0),
        ("SPAct", 0),
        ("SPAct", 1),
    ]
    # The log says how long each phase's first step took (its compile), once a phase.
    first_steps = re.findall(r"^phase (\w+): first step ([\d.]+) s", uninterrupted["log"], re.M)
    assert [phase for phase, _ in first_steps] == [
        "identity", "action_init", "privacy_init", "minimax"
    ]  # fmt: skip
    assert all(float(seconds) > 0 for _, seconds in first_steps)
    # Keras' progress lines count the phase's epochs (fit runs one at a time): the minimax's
    # two, where Keras alone would print "Epoch 2/2" alone.
    assert re.findall(r"^Epoch (\d+)/(\d+)$", uninterrupted["log"], re.M) == [
        ("1", "2"),
        ("2", "2"),
    ]

    # The .keras files reload to the trained models: same weights, same outputs.
    assert result.model_paths == {
        name: run_dir / filename for name, filename in training.MODEL_FILES.items()
    }
    inputs = inputs_of(config)
    for name, path in result.model_paths.items():
        loaded = keras.saving.load_model(path)
        assert_same_weights(loaded, models[name], atol=0)
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(loaded(inputs[name], training=False)),
            keras.ops.convert_to_numpy(models[name](inputs[name], training=False)),
            atol=1e-6,
        )

    # history.json: every phase, one finite value per epoch and log.
    history = json.loads((run_dir / "history.json").read_text())
    assert history == result.history
    assert list(history) == PHASES
    assert set(history["identity"]) == {"reconstruction_loss"}
    assert {"action_loss", "privacy_loss", "anonymizer_privacy_loss"} <= set(history["minimax"])
    for phase, logs in history.items():
        for name, values in logs.items():
            assert len(values) == EPOCHS[phase], (phase, name)
            assert all(math.isfinite(v) for v in values), (phase, name)

    # One PNG per epoch: the fixed clip's frames, raw above anonymized.
    expected = [f"{p}_epoch{e:03d}.png" for p in PHASES for e in range(1, EPOCHS[p] + 1)]
    assert sorted(p.name for p in (run_dir / "frames").iterdir()) == sorted(expected)
    strip = keras.utils.img_to_array(keras.utils.load_img(run_dir / "frames" / expected[-1]))
    assert strip.shape == (2 * config.image_size, config.clip_length * config.image_size, 3)

    # TensorBoard logs of every phase, with the epoch scalars of that phase.
    import tensorflow as tf

    for phase in PHASES:
        events = sorted((run_dir / "logs" / phase / "train").glob("events.out.tfevents.*"))
        assert events, phase
        tags = {
            value.tag
            for path in events
            for event in tf.compat.v1.train.summary_iterator(str(path))
            for value in event.summary.value
        }
        assert {f"epoch_{name}" for name in history[phase]} <= tags, (phase, tags)

    # The last checkpoint is the end of the minimax; older ones are gone.
    state = checkpoint.latest_checkpoint(run_dir)
    assert (state["phase"], state["epoch"]) == ("minimax", EPOCHS["minimax"])
    assert [p.name for p in (run_dir / "checkpoints").iterdir() if p.is_dir()] == [
        Path(state["path"]).name
    ]
    assert json.loads((run_dir / "config.json").read_text()) == dataclasses.asdict(config)
    record = json.loads((run_dir / "environment.json").read_text())
    assert record["backend"] == keras.backend.backend()
    assert (record["resumed_from"], record["earlier_starts"]) == (None, [])
    assert time.strptime(record["started"], "%Y-%m-%dT%H:%M:%SZ")


def test_a_kept_run_is_resumed_only_with_its_settings(uninterrupted, benchmark, tmp_path):
    finished = Path(uninterrupted["config"].run_dir)
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    kept = (run_dir / "config.json").read_text()
    state = checkpoint.latest_checkpoint(run_dir)
    assert (state["phase"], state["epoch"]) == ("minimax", 2)
    with pytest.raises(SettingError) as raised:
        training.train(tiny_config(benchmark, run_dir, seed=1, anonymizer="unet_small"))
    assert str(raised.value) == (
        f"--run_dir={run_dir} holds a run trained with --seed=0 (now 1), --anonymizer=unet_tiny "
        "(now unet_small) (checkpoint: minimax epoch 2): resume it with those settings, or give "
        "another --run_dir"
    )
    assert (run_dir / "config.json").read_text() == kept
    # Fewer epochs than the checkpoint holds, or a phase behind it: refused by name.
    for change in ({"minimax_epochs": 1}, {"identity_epochs": 3}):
        with pytest.raises(SettingError, match=f"--{next(iter(change))}="):
            training.train(tiny_config(benchmark, run_dir, **change))
    # Where the files are, how the steps run, lower rates or privacy weight (the advice after
    # a diverged run), the evaluation, a longer minimax: resumable.
    training._require_the_runs_settings(
        tiny_config(
            benchmark,
            run_dir,
            synthetic_dir=str(tmp_path / "moved"),
            jit_compile="false",
            anonymizer_lr=1e-5,
            privacy_weight=0.1,
            eval_action_epochs=3,
            minimax_epochs=4,
        ),
        run_dir,
        checkpoint.latest_checkpoint(run_dir),
    )


def test_a_finished_run_keeps_the_settings_it_was_trained_with(uninterrupted, benchmark, tmp_path):
    """Nothing is trained: a changed privacy weight (a resumable setting, as a `--seeds` run
    added to later may give) is not recorded as the run's."""
    run_dir = tmp_path / "run"
    shutil.copytree(Path(uninterrupted["config"].run_dir), run_dir)
    kept = (run_dir / "config.json").read_text()
    history, checkpoints = (run_dir / "history.json").read_text(), checkpoint_files(run_dir)
    assert checkpoints
    with contextlib.redirect_stdout(io.StringIO()):
        training.train(tiny_config(benchmark, run_dir, privacy_weight=0.5))
    assert (run_dir / "config.json").read_text() == kept
    assert (run_dir / "history.json").read_text() == history
    assert checkpoint_files(run_dir) == checkpoints


def test_a_finished_run_extended_from_a_damaged_checkpoint_keeps_its_models_evaluable(
    uninterrupted, benchmark, tmp_path
):
    """The checkpoint is read whole before the run's records say it trains on: a damaged one
    is named, and config.json and the saved models stay those of the finished run."""
    run_dir = tmp_path / "run"
    shutil.copytree(Path(uninterrupted["config"].run_dir), run_dir)
    config_before = (run_dir / "config.json").read_text()
    weights = Path(checkpoint.latest_checkpoint(run_dir)["path"]) / "anonymizer.weights.h5"
    weights.write_bytes(weights.read_bytes()[:300])
    with pytest.raises(checkpoint.CheckpointError) as raised:
        training.train(tiny_config(benchmark, run_dir, minimax_epochs=3))
    assert str(raised.value).startswith(f"{weights}: cannot be read (")
    assert (run_dir / "config.json").read_text() == config_before
    assert checkpoint.saved_models_behind(run_dir) is None
    load_anonymizer(run_dir / "anonymizer.keras")


class InterruptAtFirstBatch(keras.callbacks.Callback):
    """Ctrl-C after the first training step."""

    def on_train_batch_end(self, batch, logs=None):
        raise KeyboardInterrupt


def full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_the_models_of_a_run_that_trained_on_past_them_are_not_evaluated(
    uninterrupted, benchmark, tmp_path, monkeypatch
):
    """A run that checkpoints an epoch and stops before saving its models (killed, a full disk)
    keeps the models of an earlier finish, or none: evaluate.py would score an earlier model
    under the config.json of the longer run. Finishing the run saves them and clears it."""
    run_dir = tmp_path / "run"
    shutil.copytree(Path(uninterrupted["config"].run_dir), run_dir)
    path = run_dir / "anonymizer.keras"
    assert checkpoint.saved_models_behind(run_dir) is None
    load_anonymizer(path)
    longer = tiny_config(benchmark, run_dir, minimax_epochs=3)
    # Killed in its first new epoch: the latest checkpoint is still the one the models hold,
    # but config.json already asks for three epochs.
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(KeyboardInterrupt):
        training.train(longer, callbacks=[InterruptAtFirstBatch()])
    assert checkpoint.latest_checkpoint(run_dir)["epoch"] == 2
    with pytest.raises(checkpoint.CheckpointError) as raised:
        load_anonymizer(path)
    assert str(raised.value) == (
        f"{path}: the run in {run_dir} saved its models at minimax epoch 2, then trained on (its "
        "latest checkpoint: minimax epoch 2) and stopped before saving them again; finish it "
        "with train.py and the same flags (it resumes from that checkpoint), or evaluate a copy "
        "kept elsewhere"
    )
    # Killed after its epoch's checkpoint, before the models are saved (here: a disk that
    # fills up in the middle of the first): the file of the earlier finish is left whole.
    saved = path.read_bytes()

    def half_written(model, filepath, *args, **kwargs):
        Path(filepath).write_bytes(saved[: len(saved) // 2])
        full_disk()

    monkeypatch.setattr(keras.Model, "save", half_written)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(OSError):
        training.train(longer)
    assert checkpoint.latest_checkpoint(run_dir)["epoch"] == 3
    assert path.read_bytes() == saved
    assert sorted(p.name for p in run_dir.glob(".*")) == [training.RUN_LOCK_FILE]  # no partial
    with pytest.raises(
        checkpoint.CheckpointError, match="trained on .its latest checkpoint: minimax epoch 3"
    ):
        load_anonymizer(path)
    monkeypatch.undo()
    with contextlib.redirect_stdout(io.StringIO()):
        training.train(longer)
    assert checkpoint.saved_models_behind(run_dir) is None
    load_anonymizer(path)

    # A first run stopped before it saved any model is named as such.
    first = tmp_path / "first"
    epochs = dict(action_init_epochs=0, privacy_init_epochs=0, minimax_epochs=0)
    monkeypatch.setattr(keras.Model, "save", full_disk)
    with contextlib.redirect_stdout(io.StringIO()), pytest.raises(OSError):
        training.train(tiny_config(benchmark, first, **epochs))
    assert checkpoint.saved_models_behind(first) == (
        f"the run in {first} stopped at identity epoch 1 (its latest checkpoint) before saving "
        "its models"
    )
    with pytest.raises(checkpoint.CheckpointError, match="before saving its models; finish it"):
        load_anonymizer(first / "anonymizer.keras")


def checkpoint_files(run_dir: Path) -> dict[str, int]:
    """The run's checkpoint files by path, with their modification times."""
    folder = run_dir / "checkpoints"
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_run_killed_mid_epoch_resumes_to_the_same_end(uninterrupted, benchmark, capsys):
    killed = uninterrupted["killed"]
    assert killed.is_dir(), "no snapshot was taken in the middle of minimax epoch 2"
    # What the kill left: the checkpoint after minimax epoch 1, no saved models.
    state = checkpoint.latest_checkpoint(killed)
    assert (state["phase"], state["epoch"]) == ("minimax", 1)
    assert not any((killed / filename).exists() for filename in training.MODEL_FILES.values())

    config = tiny_config(benchmark, killed)
    recorder, threads = EpochRecorder(), BatchEndThreads()
    result, models = train_capturing_models(config, callbacks=[recorder, threads])
    # train's own callbacks let Keras read the logs off the main thread on JAX, where the
    # uninterrupted run read them on it (SnapshotMidEpoch is not async-safe): the same end.
    assert threads.on_main_thread == {keras.backend.backend() == "tensorflow"}

    # Only the unfinished epoch was trained again; finished phases were not redone.
    assert recorder.epochs == [("SPAct", 1)]
    resumed = f"resuming {killed} from its checkpoint after minimax epoch 1: going on from there"
    assert resumed in capsys.readouterr().out
    expected = uninterrupted["result"].history
    assert list(result.history) == list(expected)
    for phase, logs in expected.items():
        assert list(result.history[phase]) == list(logs)
        for name, values in logs.items():
            np.testing.assert_allclose(
                result.history[phase][name], values, rtol=1e-5, atol=1e-5, err_msg=phase + name
            )

    # Where each start ran is kept, with the checkpoint it resumed from.
    first = json.loads((uninterrupted["result"].run_dir / "environment.json").read_text())
    record = json.loads((killed / "environment.json").read_text())
    assert record["resumed_from"] == {"phase": "minimax", "epoch": 1}
    # (The snapshot was copied out of the uninterrupted run's folder: its only change.)
    moved = [str(uninterrupted["result"].run_dir), str(killed)]
    assert record["changed_settings"] == {"run_dir": moved}
    assert first["changed_settings"] == {}
    assert first.pop("earlier_starts") == [] and len(record["earlier_starts"]) == 1
    earlier = record["earlier_starts"][0]
    assert earlier["started"] <= record["started"]  # the killed start's own time
    assert {**earlier, "started": first["started"]} == first  # the same machine otherwise

    # The resumed run ends where the uninterrupted one ends: all three models.
    for name, model in models.items():
        assert_same_weights(model, uninterrupted["models"][name], atol=1e-5)
        reloaded = keras.saving.load_model(result.model_paths[name])
        assert_same_weights(reloaded, uninterrupted["models"][name], atol=1e-5)
    assert sorted(p.name for p in (killed / "frames").iterdir()) == sorted(
        p.name for p in (uninterrupted["result"].run_dir / "frames").iterdir()
    )

    # Restarting a finished run trains nothing and saves the same models again.
    recorder = EpochRecorder()
    again, models = train_capturing_models(config, callbacks=[recorder])
    assert recorder.epochs == []
    assert again.history == result.history
    finished = f"resuming {killed} from its checkpoint after minimax epoch 2: nothing is left"
    assert finished in capsys.readouterr().out
    starts = json.loads((killed / "environment.json").read_text())["earlier_starts"]
    assert [start["resumed_from"] for start in starts] == [None, {"phase": "minimax", "epoch": 1}]
    for name, model in models.items():
        assert_same_weights(model, uninterrupted["models"][name], atol=1e-5)


class ZeroAfterTheFirstEpoch(EpochRates):
    """Rate 0 from the second epoch on (Adam then moves no weight); remembers what it is shown."""

    def __init__(self):
        super().__init__(1e-3)
        self.shown = []

    def rate_at(self, epoch):
        return self.rate if epoch == 0 else 0.0

    def observe(self, epoch, loss):
        self.shown.append((epoch, loss))
        return False


def test_the_identity_rate_set_per_epoch_reaches_the_step_and_survives_a_resume(
    benchmark, tmp_path, monkeypatch
):
    rules = []

    def plateau_rates(groups, loss, *rule, **options):
        def rates():
            rules.append(ZeroAfterTheFirstEpoch())
            return training.GroupRates(tuple(groups), rules[-1], loss)

        return rates

    monkeypatch.setattr(training, "_plateau_rates", plateau_rates)
    settings = dict(
        identity_lr_drop=5, action_init_epochs=0, privacy_init_epochs=0, minimax_epochs=0
    )
    first = tiny_config(benchmark, tmp_path / "run", identity_epochs=1, **settings)
    result, models = train_capturing_models(first)
    after_one = [w.numpy() for w in models["anonymizer"].trainable_weights]
    (loss,) = result.history["identity"]["reconstruction_loss"]
    assert result.history["identity"]["anonymizer_learning_rate"] == [pytest.approx(1e-3)]
    assert rules[0].shown == [(0, loss)]

    # Resumed for two more epochs: the new rule is first shown the loss already logged, and
    # the rate 0 it sets is the one the compiled step uses.
    longer = dataclasses.replace(first, identity_epochs=3)
    result, models = train_capturing_models(longer)
    assert rules[1].shown[0] == (0, pytest.approx(loss))
    assert [epoch for epoch, _ in rules[1].shown] == [0, 1, 2]
    rates = result.history["identity"]["anonymizer_learning_rate"]
    np.testing.assert_allclose(rates, [1e-3, 0.0, 0.0])
    for weight, before in zip(models["anonymizer"].trainable_weights, after_one):
        np.testing.assert_array_equal(weight.numpy(), before)


def test_the_identity_rate_drops_on_a_plateau_only_where_asked(benchmark, tmp_path):
    config = tiny_config(
        benchmark, tmp_path, identity_epochs=4, identity_lr_drop=5, identity_warmup_epochs=2
    )
    rates = training.training_phases(config, collections.defaultdict(lambda: None), 4)[0]
    rule = rates.epoch_rates()
    assert (rule.groups, rule.loss) == (("anonymizer",), "reconstruction_loss")
    rate = config.identity_lr
    assert [rule.rates.rate_at(epoch) for epoch in range(3)] == pytest.approx(
        [rate / 2, rate, rate]
    )
    # The penalty code's patience 0: an epoch whose loss is no new lowest drops the rate.
    dropped = [rule.rates.observe(epoch, loss) for epoch, loss in enumerate([3.0, 2.0, 2.5])]
    assert dropped == [False, False, True]
    assert rule.rates.rate_at(3) == pytest.approx(rate / 5)
    assert (
        training.training_phases(ExperimentConfig(), collections.defaultdict(lambda: None), 4)[
            0
        ].epoch_rates
        is None
    )
    with pytest.raises(SettingError, match="identity_lr_drop must be at least 1, got 0.5"):
        ExperimentConfig(identity_lr_drop=0.5).validate()


def test_without_a_plateau_drop_the_identity_rate_rises_by_step(benchmark, tmp_path):
    """<identity_warmup_epochs> without <identity_lr_drop>: a schedule of the step, from
    rate / warmup_steps up to the rate at the warm-up's last step, then the rate; it is
    saved with the optimizer and read back the same."""
    config = tiny_config(benchmark, tmp_path, identity_epochs=4, identity_warmup_epochs=2)
    identity = training.training_phases(config, collections.defaultdict(lambda: None), 4)[0]
    assert identity.epoch_rates is None
    optimizer = identity.optimizers()["anonymizer"]
    schedule = optimizer._learning_rate
    assert isinstance(schedule, LinearWarmup) and schedule.warmup_steps == 2 * 4
    rate = config.identity_lr
    expected = [rate * min(step + 1, 8) / 8 for step in range(11)]
    assert [float(schedule(step)) for step in range(11)] == pytest.approx(expected)
    copy = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert [float(copy._learning_rate(step)) for step in (0, 7, 9)] == pytest.approx(
        [expected[0], expected[7], expected[9]]
    )
    assert float(LinearWarmup(rate, 0)(0)) == pytest.approx(rate)  # no warm-up: the rate


def test_the_initialisations_rates_drop_on_a_plateau_only_where_asked(benchmark, tmp_path):
    config = tiny_config(
        benchmark, tmp_path, init_lr_drop=10, privacy_backbone="resnet_tiny,resnet_tiny"
    )
    phases = {
        phase.name: phase
        for phase in training.training_phases(config, collections.defaultdict(lambda: None), 4)
    }
    action, privacy = (phases[name].epoch_rates() for name in ("action_init", "privacy_init"))
    assert (action.groups, action.loss) == (("action",), "action_loss")
    assert (privacy.groups, privacy.loss) == (("privacy_0", "privacy_1"), "privacy_loss")
    # SPAct supp. C.3 with the authors' lr_patience 0: to 1/10 after an epoch without a new
    # lowest loss, and no warm-up.
    rate = config.action_init_lr
    assert action.rates.rate_at(0) == pytest.approx(rate)
    dropped = [action.rates.observe(epoch, loss) for epoch, loss in enumerate([3.0, 2.0, 2.5])]
    assert dropped == [False, False, True]
    assert action.rates.rate_at(3) == pytest.approx(rate / 10)
    assert privacy.rates.rate_at(0) == pytest.approx(config.privacy_init_lr)
    supervised = tiny_config(
        benchmark, tmp_path, init_lr_drop=10, init_lr_patience=1, method="vita"
    )
    models = collections.defaultdict(lambda: None, adversary_0=None, adversary_1=None)
    vita_init = training.training_phases(supervised, models, 4)[2]
    assert vita_init.name == "privacy_init"
    budget = vita_init.epoch_rates()
    assert budget.groups == ("adversary_0", "adversary_1")
    # --init_lr_patience=1: a drop after two epochs in a row without a new lowest loss.
    losses = [3.0, 3.5, 2.0, 2.5, 2.6, 2.7]
    dropped = [budget.rates.observe(epoch, loss) for epoch, loss in enumerate(losses)]
    assert dropped == [False, False, False, False, True, False]
    for phase in training.training_phases(
        tiny_config(benchmark, tmp_path), collections.defaultdict(lambda: None), 4
    ):
        assert phase.epoch_rates is None
    with pytest.raises(SettingError, match="init_lr_drop must be at least 1, got 0.5"):
        ExperimentConfig(init_lr_drop=0.5).validate()
    with pytest.raises(SettingError, match="init_lr_patience"):
        ExperimentConfig(init_lr_patience=-1).validate()


def test_meta_recompute_reaches_the_meta_trainer(benchmark, tmp_path):
    for recompute in (True, False):
        config = tiny_config(
            benchmark, tmp_path, method="meta", meta_recompute=recompute, **SUPERVISED
        )
        config.validate()
        models = training.build_models(config, 4, 5)
        trainer = training.training_phases(config, models, 4)[-1].make_trainer()
        assert trainer.recompute_anonymizer is recompute
        assert bool(trainer._anonymizer_blocks) is recompute  # f_A's blocks, to recompute


# The rates' plumbing; a rate set per epoch reaches a JAX step in
# test_the_identity_rate_set_per_epoch_reaches_the_step_and_survives_a_resume.
@pytest.mark.backend_independent
def test_the_initialisations_rates_reach_every_group_of_the_phase(benchmark, tmp_path, monkeypatch):
    def plateau_rates(groups, loss, *rule, **options):
        return lambda: training.GroupRates(tuple(groups), ZeroAfterTheFirstEpoch(), loss)

    monkeypatch.setattr(training, "_plateau_rates", plateau_rates)
    config = tiny_config(
        benchmark,
        tmp_path,
        identity_epochs=0,
        identity_warmup_epochs=0,
        action_init_epochs=2,
        privacy_init_epochs=2,
        minimax_epochs=0,
        privacy_backbone="resnet_tiny,resnet_tiny",
    )
    history = train_capturing_models(config)[0].history
    assert history["action_init"]["action_learning_rate"] == pytest.approx([1e-3, 0.0])
    for group in ("privacy_0", "privacy_1"):
        assert history["privacy_init"][f"{group}_learning_rate"] == pytest.approx([1e-3, 0.0])


def test_nan_loss_stops_the_run_and_keeps_the_last_checkpoint(benchmark, tmp_path):
    # Adam's steps of 1e38 throw the action model's weights to +-1e38, then past float32's
    # largest value, so an action_init batch has a non-finite loss (the identity phase is
    # fine): NaN in the second batch in TensorFlow's graph, infinite in the third under JAX's
    # XLA, which keeps the loss of +-1e38 weights finite.
    settings = dict(privacy_init_epochs=0, minimax_epochs=0, steps_per_epoch=3)
    config = tiny_config(benchmark, tmp_path / "run", action_init_lr=1e38, **settings)
    with pytest.raises(training.TrainingDivergedError) as raised:
        training.train(config)
    message = str(raised.value)
    assert re.search(r"phase action_init, epoch 1, batch [23]: action_loss = (nan|inf);", message)
    state = checkpoint.latest_checkpoint(config.run_dir)
    assert (state["phase"], state["epoch"]) == ("identity", 1)
    assert f"the last checkpoint, {state['path']} (every weight finite), is kept" in message
    assert sorted(p.name for p in Path(state["path"]).iterdir()) == [
        "action.weights.h5",
        "anonymizer.weights.h5",
        "optimizer.npz",
        "privacy.weights.h5",
        "state.json",
    ]
    run_dir = Path(config.run_dir)
    assert not (run_dir / "history.json").exists()
    assert not any((run_dir / filename).exists() for filename in training.MODEL_FILES.values())
    assert [p.name for p in (run_dir / "frames").iterdir()] == ["identity_epoch001.png"]
    identity_loss = state["history"]["identity"]["reconstruction_loss"]

    # Restarted with a sane learning rate, the run goes on from the kept checkpoint.
    recorder = EpochRecorder()
    fixed = dataclasses.replace(config, action_init_lr=1e-3)
    result, models = train_capturing_models(fixed, callbacks=[recorder])
    assert recorder.epochs == [("ActionInit", 0)]
    assert result.history["identity"]["reconstruction_loss"] == identity_loss
    assert all(math.isfinite(v) for v in result.history["action_init"]["action_loss"])
    for model in models.values():
        assert all(np.isfinite(w).all() for w in model.get_weights())


def test_a_resume_trains_at_the_learning_rates_of_its_flags(
    benchmark, tmp_path, monkeypatch, capsys
):
    """A run resumed mid-phase with another rate (lowered after a divergence, say) takes its
    optimizer's moments and step count from the checkpoint, and its rates from the flags;
    environment.json keeps the rates it ran at before (config.json holds the new ones)."""
    settings = dict(identity_epochs=0, identity_warmup_epochs=0, action_init_epochs=0)
    config = tiny_config(benchmark, tmp_path, privacy_init_epochs=0, minimax_epochs=1, **settings)
    training.train(config)
    restored = []
    real_restore = checkpoint.restore_optimizer

    def capturing_restore(state, optimizer):
        real_restore(state, optimizer)
        restored.append((optimizer, int(np.asarray(optimizer.iterations.value))))

    monkeypatch.setattr(checkpoint, "restore_optimizer", capturing_restore)
    lowered = dataclasses.replace(config, minimax_epochs=2, anonymizer_lr=3e-6, action_lr=2e-6)
    training.train(lowered)
    ((optimizer, restored_steps),) = restored
    rates = [
        float(np.asarray(v.value)) for v in optimizer.variables if v.path.endswith("learning_rate")
    ]
    group_rates = sorted(rate for rate in rates if rate)  # the trainer's own is 0: unused
    assert group_rates == pytest.approx(sorted([3e-6, 2e-6, config.privacy_lr]), rel=1e-6)
    # The step count went on from the checkpoint's (the first epoch's), one epoch further.
    assert restored_steps > 0
    assert int(np.asarray(optimizer.iterations.value)) == 2 * restored_steps
    changed = {
        "minimax_epochs": [1, 2],
        "anonymizer_lr": [config.anonymizer_lr, 3e-6],
        "action_lr": [config.action_lr, 2e-6],
    }
    record = json.loads((Path(config.run_dir) / "environment.json").read_text())
    assert record["changed_settings"] == changed
    assert record["earlier_starts"][0]["changed_settings"] == {}
    assert json.loads((Path(config.run_dir) / "config.json").read_text())["anonymizer_lr"] == 3e-6
    assert "resuming with changed settings (environment.json): --minimax_epochs 1 -> 2, " in (
        capsys.readouterr().out
    )


def test_training_on_an_empty_cache_names_the_cache_and_how_it_was_made(benchmark, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image")
    split = Split([Example(str(broken), privacy=(0,) * 4)], attribute_names=["a", "b", "c", "d"])
    prepare_image_cache(split, tmp_path / "cache", short_side=32)
    config = tiny_config(benchmark, tmp_path / "run", privacy_cache=str(tmp_path / "cache"))
    with pytest.raises(SettingError) as raised:
        training.train(config)
    assert raised.value.template.startswith(f"<privacy_cache>={tmp_path / 'cache'}: ")
    assert str(raised.value) == (
        f"--privacy_cache={tmp_path / 'cache'}: the cache holds no image: `python -m "
        "keras_privacy.data prepare` wrote it from 1 listed files, 1 failed to decode, e.g. "
        f"{broken}: unreadable image: not a JPEG, PNG, GIF, BMP, TIFF or WebP file (it starts "
        "with b'not an i'), and 0 were missing (see "
        f"{tmp_path / 'cache' / 'manifest.json'})"
    )


@pytest.mark.parametrize(
    "kind, pattern, flag, reason",
    [
        ("video", "videos/*/*.avi", "action_annotations", "empty file (0 bytes)"),
        ("image", "vispr/images/train2017/*.jpg", "privacy_annotations", "empty file (0 bytes)"),
    ],
)
def test_training_from_files_none_of_which_decodes_names_the_split_and_a_file(
    benchmark, tmp_path, kind, pattern, flag, reason
):
    # Training from the files skips an undecodable one; a split of none would wait forever.
    files = tmp_path / "files"
    shutil.copytree(benchmark, files, ignore=shutil.ignore_patterns("cache"))
    broken = sorted(files.glob(pattern))
    for path in broken:
        path.write_bytes(b"")
    config = tiny_config(
        benchmark,
        tmp_path / "run",
        action_dataset="ucf101",
        action_annotations=str(files / "ucf_splits"),
        action_root=str(files / "videos"),
        privacy_dataset="vispr",
        privacy_annotations=str(files / "vispr"),
        privacy_root=str(files / "vispr"),
        privacy_attributes="all",
    )
    with pytest.raises(SettingError) as raised:
        training.training_data(config)
    message = str(raised.value)
    assert message.startswith(f"--{flag}: none of the split's 12 {kind}s on disk decodes, e.g. ")
    assert message.endswith(f": {reason}") and str(files) in message
    # One file that decodes is enough: the others are skipped as the batches are read.
    shutil.copy(benchmark / broken[0].relative_to(files), broken[0])
    assert training.training_data(config).class_names


def test_an_unknown_vispr_attribute_names_the_setting_that_chose_it(benchmark, tmp_path):
    from keras_privacy.evaluation import datasets

    vispr = dict(
        privacy_annotations=str(benchmark / "vispr"), privacy_root=str(benchmark / "vispr")
    )
    config = tiny_config(
        benchmark, tmp_path, privacy_dataset="vispr", privacy_attributes="a99_bogus", **vispr
    )
    with pytest.raises(SettingError) as raised:
        training.training_data(config)
    tsv = benchmark / "vispr" / "attributes.tsv"
    assert str(raised.value) == (
        f"--privacy_attributes=a99_bogus: unknown VISPR attribute(s) a99_bogus: not in {tsv}"
    )
    evaluation = dataclasses.replace(
        config,
        privacy_attributes="all",
        eval_privacy_dataset="vispr",
        eval_privacy_attributes="s5_object,s5_object",
        **{f"eval_{name}": value for name, value in vispr.items()},
    )
    with pytest.raises(SettingError) as raised:
        datasets.evaluation_privacy_splits(evaluation, tmp_path)
    assert str(raised.value) == (
        "--eval_privacy_attributes=s5_object,s5_object: choose distinct VISPR attributes, got "
        "s5_object, s5_object"
    )


def test_a_root_folder_that_does_not_exist_is_named(benchmark, tmp_path):
    missing = tmp_path / "no_such_videos"
    config = tiny_config(
        benchmark,
        tmp_path / "run",
        action_dataset="ucf101",
        action_annotations=str(benchmark / "ucf_splits"),
        action_root=str(missing),
    )
    with pytest.raises(FileNotFoundError, match=re.escape(f"{missing}: no such folder (the")):
        training.training_data(config)


def test_a_cache_prepared_from_another_subset_split_or_attributes_is_refused(benchmark, tmp_path):
    from keras_privacy.data import __main__ as data_cli
    from keras_privacy.data.synthetic import ATTRIBUTE_IDS

    videos = ["--dataset", "ucf101", "--annotations", str(benchmark / "ucf_splits")]
    videos += ["--root", str(benchmark / "videos"), "--short_side", "32"]
    assert data_cli.main(["prepare", *videos, "--out", str(tmp_path / "ucf")]) == 0
    images = ["--dataset", "vispr", "--annotations", str(benchmark / "vispr")]
    images += ["--root", str(benchmark / "vispr"), "--short_side", "32", "--attributes", "all"]
    assert data_cli.main(["prepare", *images, "--out", str(tmp_path / "vispr")]) == 0
    caches = dict(
        action_dataset="ucf101",
        action_cache=str(tmp_path / "ucf" / "train"),
        privacy_dataset="vispr",
        privacy_cache=str(tmp_path / "vispr" / "train"),
        privacy_attributes="all",
    )
    every = ",".join(ATTRIBUTE_IDS)
    for attributes in ("all", every):
        config = tiny_config(
            benchmark, tmp_path / "run", **(caches | {"privacy_attributes": attributes})
        )
        data = training.training_data(config)
        assert data.attribute_names == list(ATTRIBUTE_IDS), attributes
    for change, message in [
        (
            {"action_cache": str(tmp_path / "ucf" / "test")},
            "prepared from ucf101, split 1, test, but the run reads ucf101, split 1, train;",
        ),
        (
            {"action_split": 2},
            "prepared from ucf101, split 1, train, but the run reads ucf101, split 2, train;",
        ),
        (
            {"privacy_cache": str(tmp_path / "vispr" / "test")},
            "prepared from vispr, test, but the run reads vispr, train;",
        ),
        (
            {"privacy_attributes": "s2_striped_actor,s3_face_mark"},
            f"holds the attributes {', '.join(ATTRIBUTE_IDS)}, but --privacy_attributes="
            "s2_striped_actor,s3_face_mark names s2_striped_actor, s3_face_mark; prepare it "
            "with --attributes s2_striped_actor,s3_face_mark",
        ),
    ]:
        with pytest.raises(SettingError, match=re.escape(message)):
            training.training_data(tiny_config(benchmark, tmp_path / "run", **(caches | change)))


def test_a_cache_of_frames_smaller_than_the_frame_size_is_refused(benchmark, tmp_path):
    image = tmp_path / "image.png"
    cv2.imwrite(str(image), np.full((40, 60, 3), 128, np.uint8))
    split = Split([Example(str(image), privacy=(0,) * 4)], attribute_names=["a", "b", "c", "d"])
    small = tmp_path / "small"
    prepare_image_cache(split, small, short_side=24)
    config = tiny_config(benchmark, tmp_path / "run", privacy_cache=str(small))
    with pytest.raises(SettingError) as raised:
        training.training_data(config)
    assert str(raised.value) == (
        f"--privacy_cache={small}: its frames have a short side of 24 px (`python -m "
        "keras_privacy.data prepare --short_side 24`), below --frame_size=32, so the crops "
        "would be cut from up-sampled frames; prepare it again with --short_side 32, or lower "
        "--frame_size"
    )
    # Frames at the frame size or larger, or at their original size, are fine.
    for short_side in (32, 40, None):
        cache = tmp_path / f"cache_{short_side}"
        prepare_image_cache(split, cache, short_side=short_side)
        config = tiny_config(benchmark, tmp_path / "run", privacy_cache=str(cache))
        assert training.training_data(config).attribute_names == ["a", "b", "c", "d"]


def test_a_privacy_cache_smaller_than_the_privacy_image_side_is_refused(benchmark, tmp_path):
    image = tmp_path / "image.png"
    cv2.imwrite(str(image), np.full((60, 90, 3), 128, np.uint8))
    split = Split([Example(str(image), privacy=(0,) * 4)], attribute_names=["a", "b", "c", "d"])
    for short_side in (40, 48):
        prepare_image_cache(split, tmp_path / f"cache_{short_side}", short_side=short_side)
    config = tiny_config(
        benchmark, tmp_path / "run", privacy_cache=str(tmp_path / "cache_40"), privacy_image_side=48
    )
    with pytest.raises(SettingError, match=r"below --privacy_image_side=48, so the crops"):
        training.training_data(config)
    config.privacy_cache = str(tmp_path / "cache_48")
    assert training.training_data(config).attribute_names == ["a", "b", "c", "d"]


def test_the_built_in_benchmark_caches_its_images_at_the_privacy_image_side(benchmark, tmp_path):
    config = tiny_config(benchmark, tmp_path / "run", privacy_image_side=44)
    data = training.training_data(config)
    assert read_manifest(data.images)["short_side"] == 44
    assert read_manifest(data.videos)["short_side"] == config.frame_size


class PoisonAtEpochEnd(keras.callbacks.Callback):
    """Set one anonymizer weight to NaN at the end of identity epoch `epoch` (0-based): what
    an epoch's last update does when it diverges, while every logged loss stays finite (the
    loss of a batch is computed before its update)."""

    def __init__(self, epoch: int):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if isinstance(self.model, IdentityInit) and epoch == self.epoch:
            weight = self.model.groups()["anonymizer"].weights[0]
            weight.assign(np.full(weight.shape, np.nan, dtype="float32"))


def test_weights_that_turn_non_finite_in_an_epochs_last_update_are_never_checkpointed(
    benchmark, tmp_path
):
    epochs = dict(identity_epochs=2, action_init_epochs=0, privacy_init_epochs=0, minimax_epochs=0)
    config = tiny_config(benchmark, tmp_path / "run", steps_per_epoch=1, **epochs)
    with pytest.raises(training.TrainingDivergedError) as raised:
        training.train(config, callbacks=[PoisonAtEpochEnd(epoch=1)])
    message = str(raised.value)
    assert "phase identity, epoch 2, after the last update 1 non-finite variable(s)" in message
    state = checkpoint.latest_checkpoint(config.run_dir)
    assert (state["phase"], state["epoch"]) == ("identity", 1)
    assert f"the last checkpoint, {state['path']} (every weight finite), is kept" in message

    # The restart resumes from that checkpoint, trains identity epoch 2 again and finishes.
    recorder = EpochRecorder()
    result, models = train_capturing_models(config, callbacks=[recorder])
    assert recorder.epochs == [("IdentityInit", 1)]
    assert len(result.history["identity"]["reconstruction_loss"]) == 2
    assert all((Path(config.run_dir) / name).is_file() for name in training.MODEL_FILES.values())
    for model in models.values():
        assert all(np.isfinite(w).all() for w in model.get_weights())


def test_a_checkpoint_is_never_written_from_non_finite_weights(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name="head")])
    checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, None, {})
    model.layers[0].bias.assign([math.inf])
    with pytest.raises(checkpoint.NonFiniteWeightsError, match="1 non-finite variable.*head/bias"):
        checkpoint.save_checkpoint(tmp_path, "identity", 2, {"anonymizer": model}, None, {})
    assert checkpoint.latest_checkpoint(tmp_path)["epoch"] == 1
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()] == ["identity-0001"]


def test_a_checkpoint_that_cannot_be_written_is_named_and_the_last_one_kept(tmp_path, monkeypatch):
    """A full disk while the optimizer's state is written: the error names the file, the
    partial folder is removed (its space freed), and `latest.json` still names the last one."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, optimizer, {})

    def full_disk(path, *arrays):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(checkpoint.np, "savez", full_disk)
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.save_checkpoint(tmp_path, "identity", 2, {"anonymizer": model}, optimizer, {})
    root = tmp_path / "checkpoints"
    assert str(raised.value) == (
        f"{root / 'identity-0002' / 'optimizer.npz'}: cannot be written (No space left on "
        f"device); the last one, {root / 'identity-0001'}, is kept"
    )
    assert checkpoint.latest_checkpoint(tmp_path)["epoch"] == 1
    assert [p.name for p in root.iterdir() if p.is_dir()] == ["identity-0001"]


def test_a_resumed_model_draws_the_dropout_masks_an_uninterrupted_one_draws(tmp_path):
    """Keras' weight files leave a Dropout's seed generator out: the checkpoint keeps it, so
    the model rebuilt and restored (as a resume rebuilds it) draws the next masks as the
    model that trained on."""

    def built():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((64,))
        dropped = keras.layers.Dropout(0.5, name="drop")(inputs)
        return keras.Model(inputs, keras.layers.Dense(2, name="head")(dropped))

    ones = np.ones((4, 64), "float32")
    model = built()
    for _ in range(3):  # three masks drawn: the generator's state moved on
        model(ones, training=True)
    folder = checkpoint.save_checkpoint(tmp_path, "minimax", 1, {"action": model}, None, {})
    assert (folder / "action.random.npz").is_file()
    expected = keras.ops.convert_to_numpy(model(ones, training=True))

    resumed = built()
    fresh = keras.ops.convert_to_numpy(resumed(ones, training=True))
    resumed = built()
    checkpoint.restore_models(checkpoint.latest_checkpoint(tmp_path), {"action": resumed})
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(resumed(ones, training=True)), expected
    )
    assert not np.array_equal(fresh, expected)  # without the state: the first mask again


def test_a_checkpoint_holding_non_finite_weights_is_refused_by_name(tmp_path):
    # What a version that saved diverged runs left behind: the restart says what to do.
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    folder = checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, None, {})
    model.layers[0].bias.assign([math.nan])
    model.save_weights(folder / "anonymizer.weights.h5")
    state = checkpoint.latest_checkpoint(tmp_path)
    with pytest.raises(checkpoint.CheckpointError, match=f"{folder} holds non-finite weights"):
        checkpoint.restore_models(state, {"anonymizer": model})


@pytest.mark.parametrize("damaged", ["anonymizer.weights.h5", "optimizer.npz"])
def test_a_checkpoint_file_cut_short_is_refused_by_name(tmp_path, damaged):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    folder = checkpoint.save_checkpoint(
        tmp_path, "identity", 1, {"anonymizer": model}, optimizer, {}
    )
    path = folder / damaged
    path.write_bytes(path.read_bytes()[:300])
    state = checkpoint.latest_checkpoint(tmp_path)
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.restore_models(state, {"anonymizer": model})
        checkpoint.restore_optimizer(state, optimizer)
    assert str(raised.value).startswith(f"{path}: cannot be read (")
    assert str(raised.value).endswith(
        f"the run's one checkpoint is damaged: remove {tmp_path / 'checkpoints'} to train the "
        "run again from its start, or use a new --run_dir"
    )


def test_a_run_killed_right_after_a_checkpoint_keeps_that_epochs_frames_and_checks_its_files(
    benchmark, tmp_path, monkeypatch
):
    config = tiny_config(
        benchmark, tmp_path / "run", identity_epochs=2, action_init_epochs=0,
        privacy_init_epochs=0, minimax_epochs=0,
    )  # fmt: skip
    save = checkpoint.save_checkpoint

    def killed_after_the_second(run_dir, phase, epoch, *args):
        folder = save(run_dir, phase, epoch, *args)
        if epoch == 2:
            raise KeyboardInterrupt
        return folder

    monkeypatch.setattr(checkpoint, "save_checkpoint", killed_after_the_second)
    with pytest.raises(KeyboardInterrupt):
        training.train(config)
    monkeypatch.undo()
    # A resume checks the checkpoint's files before anything else: a copy of the run with a
    # weights file changed in place (the same size, still read by h5py) is refused by name,
    # and its records stay as they were.
    changed = tmp_path / "changed"
    shutil.copytree(tmp_path / "run", changed)
    weights = next(changed.glob("checkpoints/identity-0002/anonymizer.weights.h5"))
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    records = {name: (changed / name).read_text() for name in ("config.json", "environment.json")}
    resumed = dataclasses.replace(config, run_dir=str(changed), privacy_weight=0.5)
    with pytest.raises(checkpoint.CheckpointError, match=f"{weights}: cannot be read .its SHA"):
        training.train(resumed)
    assert {name: (changed / name).read_text() for name in records} == records
    training.train(config)  # nothing left to train: the frames are not drawn again
    frames = sorted(p.name for p in (tmp_path / "run" / "frames").iterdir())
    assert frames == ["identity_epoch001.png", "identity_epoch002.png"]


def test_a_checkpoint_file_overwritten_in_place_is_refused_by_name(tmp_path):
    # A block overwritten in the middle of an HDF5 file can leave one that still reads, with
    # other weights: the SHA-256 that state.json recorded tells.
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64)])
    folder = checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, None, {})
    path = folder / "anonymizer.weights.h5"
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))
    state = checkpoint.latest_checkpoint(tmp_path)
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.check_readable(state)
    assert str(raised.value) == (
        f"{path}: cannot be read (its SHA-256 is not the one state.json recorded); the run's "
        f"one checkpoint is damaged: remove {tmp_path / 'checkpoints'} to train the run again "
        "from its start, or use a new --run_dir"
    )


def test_a_second_train_py_on_a_run_folder_stops_before_writing(benchmark, tmp_path):
    """A job launched once per task without --num_processes starts one run per task on one
    folder: each would write its checkpoints over the others'. The run folder's lock stops
    the second before it writes anything."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = holding_a_lock(run_dir / training.RUN_LOCK_FILE)
    try:
        with pytest.raises(LockedError, match="the lock of the run folder, which another"):
            training.train(tiny_config(benchmark, run_dir))
    finally:
        holder.kill()
        holder.wait()
    assert sorted(path.name for path in run_dir.iterdir()) == [training.RUN_LOCK_FILE]


def test_a_run_dir_that_is_a_file_is_named(benchmark, tmp_path):
    (tmp_path / "run").write_text("notes")
    with pytest.raises(NotADirectoryError, match=f"{tmp_path / 'run'}: --run_dir names a file"):
        training.train(tiny_config(benchmark, tmp_path / "run"))
    assert (tmp_path / "run").read_text() == "notes"


def test_a_runs_record_is_read_whole_or_named_with_its_problem(tmp_path):
    record = tmp_path / "config.json"
    assert checkpoint.read_record(record, "unknown") is None
    record.write_text('{"seed": 3}')
    assert checkpoint.read_record(record, "unknown") == {"seed": 3}
    for content, problem in [
        (b'{"seed": ', "is not valid JSON (Expecting value"),
        (b'{"name": "\xff"}', "is not valid JSON ('utf-8' codec can't decode"),
        (b"[1, 2]", "holds a list, not a JSON object"),
    ]:
        record.write_bytes(content)
        with pytest.raises(SettingError) as raised:
            checkpoint.read_record(record, "the settings are unknown", SettingError)
        assert str(raised.value).startswith(f"{record} {problem}")
        assert str(raised.value).endswith(": the settings are unknown")


def test_a_damaged_pointer_or_config_of_the_run_is_named(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, optimizer, {})
    pointer = tmp_path / "checkpoints" / "latest.json"
    state = json.loads(pointer.read_text())
    pointer.write_text(json.dumps({k: v for k, v in state.items() if k != "folder"}))
    with pytest.raises(checkpoint.CheckpointError, match=f"{pointer} names no checkpoint folder"):
        checkpoint.latest_checkpoint(tmp_path)
    pointer.write_text(json.dumps(state))
    latest = checkpoint.latest_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text('{"method": "spa')
    with pytest.raises(checkpoint.CheckpointError) as raised:
        training._require_the_runs_settings(ExperimentConfig(), tmp_path, latest)
    assert str(raised.value).startswith(f"{tmp_path / 'config.json'} is not valid JSON (")
    (tmp_path / "config.json").unlink()
    with pytest.raises(checkpoint.CheckpointError) as raised:
        training._require_the_runs_settings(ExperimentConfig(), tmp_path, latest)
    assert str(raised.value) == (
        f"{tmp_path / 'config.json'} is missing beside the checkpoint (identity epoch 1): the "
        "settings the run started with are unknown; restore it, or start again in a new --run_dir"
    )
    (tmp_path / "environment.json").write_text('{"python": "3.')
    with pytest.raises(checkpoint.CheckpointError) as raised:
        training._environment_record(tmp_path, None, {})
    assert str(raised.value).startswith(f"{tmp_path / 'environment.json'} is not valid JSON (")


def test_a_run_dir_of_another_seeds_layout_is_refused(tmp_path):
    # A single run's folder under --seeds=2, or seed runs' under --seeds=1, would be trained
    # from scratch beside the kept run, not resumed.
    single = ExperimentConfig(run_dir=str(tmp_path / "single"))
    (tmp_path / "single" / "checkpoints").mkdir(parents=True)
    training.require_the_seeds_layout(single)
    with pytest.raises(SettingError) as raised:
        training.require_the_seeds_layout(dataclasses.replace(single, seeds=2))
    assert str(raised.value) == (
        f"--run_dir={tmp_path / 'single'} holds a single run, and --seeds=2 trains each seed in "
        "--run_dir/seed_K, from scratch beside it: give another --run_dir, or move the run's "
        f"files into {tmp_path / 'single'}/seed_0 to make it the first seed"
    )
    seeded = ExperimentConfig(run_dir=str(tmp_path / "seeded"), seeds=2)
    for seed in (0, 1):
        (tmp_path / "seeded" / f"seed_{seed}" / "checkpoints").mkdir(parents=True)
    training.require_the_seeds_layout(seeded)
    training.require_the_seeds_layout(dataclasses.replace(seeded, seeds=3))  # one more seed
    with pytest.raises(
        SettingError, match=re.escape("a --seeds run (seed_0, seed_1), and --seeds=1")
    ):
        training.require_the_seeds_layout(dataclasses.replace(seeded, seeds=1))
    training.require_the_seeds_layout(ExperimentConfig(run_dir=str(tmp_path / "new")))


def test_a_damaged_shard_of_the_benchmarks_own_cache_names_train_py_to_rewrite_it(
    benchmark, tmp_path
):
    """The built-in benchmark's training cache is written by train.py, not by `prepare`."""
    import tensorflow as tf

    shutil.copytree(benchmark, tmp_path / "benchmark")
    config = tiny_config(tmp_path / "benchmark", tmp_path / "run")
    data = training.training_data(config)
    shard = sorted(Path(data.videos).glob("*.tfrecord"))[0]
    damaged = bytearray(shard.read_bytes())
    damaged[len(damaged) // 2 : len(damaged) // 2 + 64] = bytes(64)  # a bad disk
    shard.write_bytes(bytes(damaged))
    with pytest.raises(DatasetFormatError) as raised:
        with training._damaged_shards_named(config, data):
            for _ in tf.data.TFRecordDataset(str(shard)):
                pass
    assert re.fullmatch(
        rf"{re.escape(str(shard))}: the cache's shard does not read back \(corrupted record at "
        r"\d+\); remove it and its .json beside it, then run train.py again: it writes that "
        "shard again and keeps the others",
        str(raised.value),
    )


def test_a_meta_run_resumes_with_a_lower_inner_step_rate(tmp_path):
    """A diverged meta run's message names --meta_alpha among the rates to lower: its restart
    with a lower one resumes the kept checkpoint."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    checkpoint.save_checkpoint(tmp_path, "privacy_init", 1, {"anonymizer": model}, None, {})
    trained = ExperimentConfig(method="meta", meta_alpha=1e30)
    (tmp_path / "config.json").write_text(json.dumps(dataclasses.asdict(trained)))
    lowered = dataclasses.replace(trained, meta_alpha=5e-4)
    state = checkpoint.latest_checkpoint(tmp_path)
    training._require_the_runs_settings(lowered, tmp_path, state)
    with pytest.raises(SettingError, match="--meta_fraction=0.6 "):  # what is trained: kept
        training._require_the_runs_settings(
            dataclasses.replace(trained, meta_fraction=0.25), tmp_path, state
        )


def test_a_lost_or_damaged_pointer_keeps_the_checkpoints(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    root, pointer = tmp_path / "checkpoints", tmp_path / "checkpoints" / "latest.json"
    remedy = f"remove {root} to train the run again, or use a new --run_dir"
    # A first checkpoint cut short before it was complete: a new run, as before.
    (root / "identity-0001").mkdir(parents=True)
    assert checkpoint.latest_checkpoint(tmp_path) is None
    checkpoint.save_checkpoint(tmp_path, "identity", 1, {"anonymizer": model}, None, {})
    checkpoint.save_checkpoint(tmp_path, "identity", 2, {"anonymizer": model}, None, {"a": 1})
    kept = checkpoint.latest_checkpoint(tmp_path)
    assert (kept["epoch"], kept["history"]) == (2, {"a": 1})
    saved = pointer.read_bytes()
    pointer.unlink()  # a new run would delete identity-0002 at its first epoch
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.latest_checkpoint(tmp_path)
    state = root / "identity-0002" / "state.json"
    assert str(raised.value) == (
        f"{pointer} is missing, but {root} holds complete checkpoints (identity-0002): copy "
        f"{state} to {pointer} to resume from identity-0002, or {remedy}"
    )
    shutil.copy(state, pointer)  # the remedy it gives resumes the run
    assert checkpoint.latest_checkpoint(tmp_path) == kept
    # Killed between writing the new pointer whole and renaming it: the rename is finished.
    pointer.rename(root / "latest.json.tmp")
    assert checkpoint.latest_checkpoint(tmp_path) == kept
    assert pointer.read_bytes() == saved and not (root / "latest.json.tmp").exists()
    # One that does not hold a complete folder's state is not taken.
    pointer.rename(root / "latest.json.tmp")
    (root / "identity-0002" / "state.json").write_text("{}")
    with pytest.raises(checkpoint.CheckpointError, match=f"{pointer} is missing, but"):
        checkpoint.latest_checkpoint(tmp_path)
    (root / "latest.json.tmp").rename(pointer)
    shutil.copy(pointer, state)
    # A damaged pointer: the remedy names the newest complete folder's state.
    pointer.write_bytes(b"\xd4\x00")
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.latest_checkpoint(tmp_path)
    assert str(raised.value).startswith(f"{pointer} is not valid JSON ('utf-8' codec")
    assert str(raised.value).endswith(
        f"copy {state} to {pointer} to resume from identity-0002, or {remedy}"
    )
    pointer.write_bytes(saved)
    shutil.rmtree(root / "identity-0002")
    with pytest.raises(checkpoint.CheckpointError) as raised:
        checkpoint.latest_checkpoint(tmp_path)
    assert str(raised.value) == f"{pointer} names identity-0002, which is not in {root}: {remedy}"


@pytest.mark.backend_independent  # flag checks, before any backend work
@pytest.mark.parametrize(
    "config, flag, message",
    [
        ("synthetic.cfg", "--minimax_epochs=-1", "--minimax_epochs cannot be negative, got -1"),
        ("synthetic_vita.cfg", "--temperature=0.5", "--temperature=0.5: --method=vita does not"),
    ],
)
def test_train_cli_names_a_nonsense_flag(tmp_path, config, flag, message):
    run_dir = tmp_path / "run"
    completed = subprocess.run(
        [
            sys.executable,
            "train.py",
            f"--flagfile={REPO / 'configs' / config}",
            f"--run_dir={run_dir}",
            flag,
        ],
        cwd=REPO,
        env=os.environ | {"TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode != 0
    assert message in completed.stderr
    assert "Traceback" not in completed.stderr
    assert not run_dir.exists(), "the run started before the flags were checked"


def _run_on_synthetic(script: str, *flags: str) -> subprocess.CompletedProcess:
    """`python script --flagfile=configs/synthetic.cfg flags` in the repository, its output
    captured."""
    return subprocess.run(
        [sys.executable, script, f"--flagfile={REPO / 'configs' / 'synthetic.cfg'}", *flags],
        cwd=REPO,
        env=os.environ | {"TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.backend_independent
def test_evaluate_cli_names_an_eval_dir_that_is_a_file(tmp_path):
    (tmp_path / "notes").write_text("kept")
    completed = _run_on_synthetic(
        "evaluate.py",
        f"--run_dir={tmp_path / 'run'}",
        f"--eval_dir={tmp_path / 'notes' / 'report'}",
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines()[-1] == (
        f"error: {tmp_path / 'notes' / 'report'}: --eval_dir lies under the file "
        f"{tmp_path / 'notes'}; name a folder (made if missing)"
    )
    assert (tmp_path / "notes").read_text() == "kept"


@pytest.mark.backend_independent
def test_evaluate_cli_refuses_a_report_of_another_evaluation_before_reading_data(tmp_path):
    """Refused before any data is read or test frame written (PA-HMDB51's and VP's frames go
    into the report folder): the report folder is left as it was."""
    from keras_privacy.evaluation.report import Report

    report = Report(tmp_path / "report")
    report.set_evaluation({"protocol": "novel_actions"})
    report.add("raw", 0.5, 0.5, 0.5)
    before = sorted(path.name for path in (tmp_path / "report").iterdir())
    completed = _run_on_synthetic(
        "evaluate.py",
        f"--run_dir={tmp_path / 'run'}",
        f"--eval_dir={tmp_path / 'report'}",
        f"--synthetic_dir={tmp_path / 'synthetic'}",
    )
    assert completed.returncode == 1
    assert "holds results of another evaluation (its protocol" in completed.stderr
    assert not (tmp_path / "synthetic").exists(), "the data were read before the refusal"
    assert sorted(path.name for path in (tmp_path / "report").iterdir()) == sorted(
        [*before, "error.log"]
    )


@pytest.mark.parametrize("script", ["train.py", "evaluate.py"])
def test_the_backend_flag_chooses_the_backend_before_keras_is_imported(tmp_path, script):
    other = "jax" if keras.backend.backend() == "tensorflow" else "tensorflow"
    completed = _run_on_synthetic(
        script, f"--run_dir={tmp_path / 'run'}", f"--backend={other}", "--minimax_epochs=-1"
    )
    assert "--minimax_epochs cannot be negative" in completed.stderr, completed.stderr[-2000:]
    assert "--backend must be chosen" not in completed.stderr


SUPERVISED = {
    "adversary_models": "resnet_tiny,resnet_tiny",
    "action_threshold": 1.0,  # thresholds of 1 keep every player updating
    "adversary_threshold": 1.0,
}


# The run's plumbing for each method with trainers of its own: each method's JAX step is tested
# in its own file, and a whole JAX run in test_full_run_writes_models_history_frames_and_logs
# (these took 96 s there). SPAct's run is test_full_run's; the penalty's, SPAct's trainer with
# its penalty, is test_pretrained's run from weight files.
@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "method, overrides, minimax_trainer",
    [
        # Two bounded f_T updates and two of each budget model a step (defaults 5 and 5): a
        # smaller program; test_vita checks the counts.
        (
            "vita",
            {
                **SUPERVISED,
                "restart_every": 1,
                "action_max_updates": 2,
                "action_fresh_clips": True,
                "adversary_updates_per_step": 2,
            },
            "VITA",
        ),
        ("meta", SUPERVISED, "MetaGeneralization"),
    ],
)
def test_every_method_trains_through_train(
    benchmark, tmp_path, method, overrides, minimax_trainer, monkeypatch, caplog
):
    # The identity and action phases are the same for every method (tested above), so they are
    # skipped here. Each epoch's warnings (test_vita has VITA's) are logged with the epoch.
    seen = []

    def epoch_warnings(trainer, before, after):
        seen.append((type(trainer).__name__, before, after))
        return [f"{type(trainer).__name__} says"]

    for trainer_class in (StatelessTrainer, VITA):  # VITA has its own
        monkeypatch.setattr(trainer_class, "epoch_warnings", epoch_warnings)
    config = tiny_config(
        benchmark,
        tmp_path / method,
        method=method,
        identity_epochs=0,
        identity_warmup_epochs=0,
        action_init_epochs=0,
        minimax_epochs=1,
        **overrides,
    )
    recorder = EpochRecorder()
    with caplog.at_level("WARNING"):
        result, models = train_capturing_models(config, callbacks=[recorder])
    supervised = method in ("vita", "meta")
    init = "SupervisedPrivacyInit" if supervised else "PrivacyInit"
    assert [name for name, _ in recorder.epochs] == [init, minimax_trainer]
    assert [name for name, _, _ in seen] == [init, minimax_trainer]
    assert seen[1][2] != seen[1][1]  # the update counts before and after the epoch
    assert f"phase minimax, epoch 1: {minimax_trainer} says" in caplog.text
    expected = {"anonymizer", "action"} | (
        {"adversary_0", "adversary_1"} if supervised else {"privacy"}
    )
    assert set(result.model_paths) == expected
    assert all(path.is_file() for path in result.model_paths.values())
    for name in expected - {"anonymizer", "action"}:
        logits = models[name](np.zeros((2, config.image_size, config.image_size, 3)))
        width = 5 if supervised else config.projection_dim
        assert keras.ops.shape(logits) == (2, width)
    history = result.history
    assert set(history) == {"privacy_init", "minimax"}
    for logs in history.values():
        assert all(math.isfinite(v) for values in logs.values() for v in values)
    if method == "vita":
        assert {"budget_loss", "anonymizer_budget_term", "action_updates"} <= set(
            history["minimax"]
        )
    if method == "meta":
        assert {"meta_train_loss", "meta_test_loss", "attack_loss"} <= set(history["minimax"])


def test_vitas_fresh_f_T_batches_are_read_with_each_step(benchmark, tmp_path):
    # Two f_T updates a step: two more batches of 4 training clips, after the step's own in
    # the shuffled order (other videos' clips), none of the held-out validation videos, and
    # two batches of 4 held-out clips, one for each accuracy check.
    config = tiny_config(
        benchmark,
        tmp_path,
        method="vita",
        **SUPERVISED,
        action_max_updates=2,
        action_fresh_clips=True,
        action_validation_every=2,
    )
    data = training.training_data(config)
    # Every 2nd video is held out: its clips only validate (test_pipelines checks the batches).
    assert data.hold_out == config.action_validation_every == 2
    models = training.build_models(config, len(data.class_names), len(data.attribute_names))
    minimax = training.training_phases(config, models, 4)[-1]
    assert minimax.action_batches == 2
    batches = training.phase_dataset(
        minimax, data, epoch=0, steps=2, num_models=2, meta_fraction=0.6
    )
    for batch in batches.as_numpy_iterator():
        assert batch["clips"].shape == (4, 4, 16, 16, 3)
        assert batch["action_clips"].shape == (8, 4, 16, 16, 3)
        assert batch["action_labels"].shape == (8,)
        assert batch["validation_clips"].shape == (8, 4, 16, 16, 3)
        assert batch["validation_labels"].shape == (8,)
        clips = np.concatenate([batch["clips"], batch["action_clips"], batch["validation_clips"]])
        labels = np.concatenate(
            [batch["labels"], batch["action_labels"], batch["validation_labels"]]
        )
        flat = clips.reshape(len(clips), -1)
        distances = np.abs(flat[:, None] - flat[None]).max(axis=-1)
        # Twenty different clips, but that a held-out video (one a class) read in two epochs
        # may give the same one: its view is the centred one, its start one of six.
        validation = np.arange(len(clips)) >= len(clips) - len(batch["validation_clips"])
        again = validation[:, None] & validation[None] & (labels[:, None] == labels[None])
        assert ((distances > 0) | again | np.eye(len(clips), dtype=bool)).all()


@pytest.mark.parametrize("method", ["spact", "vita"])
def test_processes_read_their_rows_of_every_phase_batch(benchmark, tmp_path, method):
    # Two processes of a multi-process job read batches whose rows, each key's put together
    # in process order, are the batches one process reads: the global batch that
    # data-parallel training splits over their devices (VITA's: with its fresh f_T batches
    # and held-out clips; SPAct's: its minimax pairs and f_B's image views; both: f_A's
    # identity initialisation, each clip's pair of frames alone).
    supervised = dict(SUPERVISED, action_max_updates=2, action_fresh_clips=True)
    config = tiny_config(
        benchmark,
        tmp_path,
        method=method,
        contrastive_views="images",
        **(dict(supervised, action_validation_every=2) if method == "vita" else {}),
    )
    data = training.training_data(config)
    models = training.build_models(config, len(data.class_names), len(data.attribute_names))
    phases = {p.name: p for p in training.training_phases(config, models, 4)}
    read = ["minimax", "identity"] + (["privacy_init"] if method == "spact" else [])
    assert phases["identity"].batches == "pairs"

    def batches(name, process):
        dataset = training.phase_dataset(phases[name], data, 1, 4, 2, 0.6, process)
        return list(dataset.as_numpy_iterator())

    for name in read:
        alone, halves = batches(name, (0, 1)), [batches(name, (index, 2)) for index in range(2)]
        assert len(alone) == len(halves[0]) == len(halves[1]) >= 2  # SPAct's: pairs of steps
        for whole, first, second in zip(alone, *halves):
            assert whole.keys() == first.keys() == second.keys()
            if name == "identity":
                assert "pair_frames" in whole and "clips" not in whole
            for key in whole:
                assert len(first[key]) == len(whole[key]) // 2, (name, key)
                together = np.concatenate([first[key], second[key]])
                np.testing.assert_array_equal(together, whole[key], err_msg=f"{name} {key}")


def test_a_process_other_than_the_first_reads_the_checkpoints_only_as_it_starts(
    benchmark, tmp_path, monkeypatch
):
    # Process 0 writes a checkpoint at each epoch's end while the others train on: a read of
    # the run folder mid-write (checkpoints without latest.json yet) stopped the whole job.
    config = tiny_config(benchmark, tmp_path / "run", minimax_epochs=0, privacy_init_epochs=0)
    recorder, epochs_at_reads = EpochRecorder(), []
    read = checkpoint.latest_checkpoint

    def recorded_read(run):
        epochs_at_reads.append(len(recorder.epochs))
        return read(run)

    monkeypatch.setattr(checkpoint, "latest_checkpoint", recorded_read)
    monkeypatch.setattr(training.distribute, "is_chief", lambda: False)
    training.train(config, callbacks=[recorder])
    assert len(recorder.epochs) == 2 and epochs_at_reads and set(epochs_at_reads) == {0}
    assert not Path(config.run_dir).exists()  # the first process writes the run folder


def test_a_vita_minimax_of_budget_only_steps_is_refused_before_training(benchmark, tmp_path):
    # 2 epochs of 4 steps, all inside the 16 / 2 = 8 steps that train the budget models alone:
    # f_A would never move, and the run would save it as learned.
    config = tiny_config(
        benchmark,
        tmp_path / "run",
        method="vita",
        **SUPERVISED,
        adversary_updates_per_step=2,
        budget_pretrain_updates=16,
    )
    with pytest.raises(
        SettingError,
        match=r"its 8 steps \(--minimax_epochs=2 x 4 steps an epoch\) are all budget-only "
        r"steps \(--budget_pretrain_updates=16 / --adversary_updates_per_step=2 = 8 steps",
    ):
        training.train(config)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_meta_with_one_attack_model_is_warned_of(caplog):
    """Meta's model splits need two attack models at least; with one they test on the model
    they train on, which the run reports (the method still runs: its attribute splits hold)."""
    with caplog.at_level("WARNING"):
        assert training.warn_if_one_attack_model(
            ExperimentConfig(method="meta", adversary_models="resnet_tiny")
        )
    assert (
        "--adversary_models=resnet_tiny names one attack model: meta's model splits" in caplog.text
    )
    several = ExperimentConfig(method="meta", adversary_models="resnet_tiny,resnet_tiny")
    assert not training.warn_if_one_attack_model(several)
    assert not training.warn_if_one_attack_model(ExperimentConfig(method="vita"))


def test_a_gated_anonymizer_that_never_updated_is_reported(caplog):

    trainer = SPAct(
        tiny_models.anonymizer(), tiny_models.action_model(), tiny_models.privacy_encoder()
    )
    trainer.compile({g: keras.optimizers.SGD(0.1) for g in ("anonymizer", "action", "privacy")})
    with caplog.at_level("WARNING"):
        assert training.warn_if_anonymizer_frozen(trainer, "minimax")
    assert (
        "phase minimax never updated the anonymizer: the players' accuracies stayed under "
        "--action_threshold / --adversary_threshold" in caplog.text
    )
    trainer.group_optimizer("anonymizer").iterations.assign(1)
    assert not training.warn_if_anonymizer_frozen(trainer, "minimax")
    trainer.compile({"action": keras.optimizers.SGD(0.1)})  # a phase that never trains f_A
    assert not training.warn_if_anonymizer_frozen(trainer, "action_init")


@pytest.mark.parametrize(
    "overrides, noted",
    [
        ({"method": "meta"}, keras.backend.backend() == "tensorflow"),
        ({"method": "meta", "meta_first_order": True}, False),
        ({"method": "spact"}, False),
    ],
)
def test_the_second_order_meta_step_on_tensorflow_advises_jax(overrides, noted):
    note = training.backend_note(ExperimentConfig(**overrides))
    assert (note is not None) == noted
    if noted:
        assert "--backend=jax" in note and "--meta_first_order" in note


@pytest.mark.parametrize("method", ["spact", "vita"])
def test_the_privacy_initialisation_and_the_minimax_have_epoch_lengths_of_their_own(
    benchmark, tmp_path, method
):
    # SPAct's f_B initialisation reads only privacy images: its epoch can be a pass over them
    # while the identity and f_T initialisations pass over the action videos.
    overrides = SUPERVISED if method == "vita" else {}
    config = tiny_config(
        benchmark,
        tmp_path,
        method=method,
        privacy_init_steps_per_epoch=3,
        minimax_steps_per_epoch=4,
        **overrides,
    )
    data = training.training_data(config)
    models = training.build_models(config, len(data.class_names), len(data.attribute_names))
    phases = training.training_phases(config, models, 2)
    assert {phase.name: phase.steps_per_epoch for phase in phases} == {
        "identity": 0,
        "action_init": 0,
        "privacy_init": 3,
        "minimax": 4,
    }


def test_f_Bs_initialisation_on_image_views_reads_no_clip(benchmark, tmp_path):
    # NT-Xent on the privacy images' views needs no video: its batches hold the views alone,
    # the same views as the batches with clips of the same epoch.
    config = tiny_config(benchmark, tmp_path, contrastive_views="images")
    data = training.training_data(config)
    models = training.build_models(config, len(data.class_names), len(data.attribute_names))
    init = {phase.name: phase for phase in training.training_phases(config, models, 2)}[
        "privacy_init"
    ]
    assert init.batches == "views"
    views = list(training.phase_dataset(init, data, 0, 2, 0, 0.6).as_numpy_iterator())
    with_clips = dataclasses.replace(init, batches="contrastive")
    full = list(training.phase_dataset(with_clips, data, 0, 2, 0, 0.6).as_numpy_iterator())
    assert len(views) == len(full) == 2
    for batch, full_batch in zip(views, full):
        assert set(batch) == {"views"} and "clips" in full_batch
        np.testing.assert_array_equal(batch["views"], full_batch["views"])
    trainer = init.make_trainer()
    trainer.compile(init.optimizers())
    history = trainer.fit(training.phase_dataset(init, data, 0, 2, 0, 0.6), verbose=0).history
    assert math.isfinite(history["privacy_loss"][0])
    frames = tiny_config(benchmark, tmp_path, contrastive_views="both")
    phases = training.training_phases(frames, models, 2)
    assert {phase.name: phase.batches for phase in phases}["privacy_init"] == "contrastive"


def test_a_phase_names_an_unknown_kind_of_batches():
    with pytest.raises(
        ValueError, match="phase minimax: batches='couples' is none of contrastive,"
    ):
        training.Phase("minimax", 1, lambda: None, dict, batches="couples")


@pytest.mark.parametrize(
    "overrides, flag",
    [
        (dict(steps_per_epoch=1), "--steps_per_epoch \\(1\\)"),
        (dict(minimax_steps_per_epoch=1), "--minimax_steps_per_epoch \\(1\\)"),
    ],
)
def test_a_minimax_of_one_batch_per_epoch_is_refused_before_training(
    benchmark, tmp_path, overrides, flag
):
    # The alternating minimax takes its batches two a step: one batch would be no step at all.
    config = tiny_config(benchmark, tmp_path / "run", **overrides)
    with pytest.raises(SettingError, match=f"{flag}.*two batches a step"):
        training.train(config)
    assert not (tmp_path / "run" / "checkpoints").exists()
