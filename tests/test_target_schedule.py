"""The target models' learning rate per epoch (`EpochLearningRate`): warm-up, plateau drops,
the half cosine, `fit` training at the rates it sets, and each target model's own rate,
schedule and batch, on both backends; and the action target's frozen BatchNorm."""

import math

import keras
import numpy as np
import pytest

from keras_privacy.config import ExperimentConfig, SettingError
from keras_privacy.evaluation import protocol
from keras_privacy.evaluation.targets import (
    DivergenceCheck,
    EpochLearningRate,
    TargetDivergedError,
    learning_rate_schedule,
)
from keras_privacy.learning_rates import EpochRates
from keras_privacy.models import registry
from tests import tiny_models


def rates_through(schedule: EpochLearningRate, losses: list[float]) -> list[float]:
    """The rate each epoch runs at when its training loss comes out as `losses[epoch]`."""
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(1.0), "mse")
    schedule.set_model(model)
    rates = []
    for epoch, loss in enumerate(losses):
        schedule.on_epoch_begin(epoch)
        rates.append(float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)))
        schedule.on_epoch_end(epoch, {"loss": loss})
    return rates


def test_warm_up_rises_linearly_then_holds():
    rates = rates_through(EpochLearningRate(EpochRates(0.8, warmup_epochs=4)), [5, 4, 3, 2, 1, 1])
    np.testing.assert_allclose(rates, [0.2, 0.4, 0.6, 0.8, 0.8, 0.8])


def test_an_epoch_without_a_new_lowest_loss_drops_the_rate():
    # The authors' patience 0: the first epoch whose loss is not below the lowest drops it.
    rates = rates_through(
        EpochLearningRate(EpochRates(1.0, drop=10)), [3, 2, 2.5, 1.5, 1.6, 1.7, 1.0]
    )
    np.testing.assert_allclose(rates, [1, 1, 1, 0.1, 0.1, 0.01, 0.001])


def test_patience_counts_the_epochs_a_plateau_allows():
    losses = [3, 3.1, 3.2, 3.3, 2, 2.1, 2.2, 2.3]
    rates = rates_through(EpochLearningRate(EpochRates(1.0, drop=5, patience=1)), losses)
    # Drops after epochs 2 (second without a new lowest) and 6; epoch 4's new lowest resets.
    np.testing.assert_allclose(rates, [1, 1, 1, 0.2, 0.2, 0.2, 0.2, 0.04])


def test_a_drop_during_the_warm_up_gives_way_to_it_but_one_at_its_last_epoch_holds():
    rates = rates_through(
        EpochLearningRate(EpochRates(1.0, warmup_epochs=3, drop=5)), [2, 3, 1, 4, 0.5]
    )
    # Epoch 1's loss drops a rate that epoch 2's warm-up replaces; epoch 3's loss drops it.
    np.testing.assert_allclose(rates, [1 / 3, 2 / 3, 1, 1, 0.2])
    held = rates_through(EpochLearningRate(EpochRates(1.0, warmup_epochs=2, drop=5)), [2, 3, 1])
    np.testing.assert_allclose(held, [0.5, 1, 0.2])


def test_no_drop_keeps_the_rate_and_every_epoch_logs_its_rate():
    schedule = EpochLearningRate(EpochRates(0.3))
    assert rates_through(schedule, [1, 2, 3]) == pytest.approx([0.3] * 3)
    logs = {"loss": 9.0}
    schedule.on_epoch_end(3, logs)
    assert logs["learning_rate"] == pytest.approx(0.3)


def test_the_cosine_follows_the_warm_up_and_ignores_plateaus():
    # Rising losses would drop a plateau schedule; the cosine runs on to its last epoch.
    schedule = EpochLearningRate(EpochRates(1.0, warmup_epochs=2, drop=10, cosine_epochs=6))
    rates = rates_through(schedule, [1, 2, 3, 4, 5, 6])
    cosine = [(1 + math.cos(math.pi * k / 4)) / 2 for k in range(4)]
    np.testing.assert_allclose(rates, [0.5, 1.0, *cosine])
    assert rates[-1] > 0


def test_each_target_model_takes_its_own_rate_schedule_and_batch():
    shared = ExperimentConfig(eval_lr=1e-3, eval_lr_drop=5, batch_size=4, privacy_batch_size=6)
    for target, batch in (("action", 4), ("privacy", 6)):
        schedule = learning_rate_schedule(shared, target)
        rates = schedule.rates
        assert (rates.rate, rates.drop, rates.cosine_epochs) == (1e-3, 5, 0)
        assert shared.eval_batch_size(target) == batch
    own = ExperimentConfig(
        eval_lr=1e-3,
        eval_lr_drop=10,
        eval_privacy_lr_drop=1,
        eval_action_lr=1e-4,
        eval_action_schedule="cosine",
        eval_action_epochs=10,
        eval_privacy_lr=2e-4,
        eval_action_batch_size=16,
        eval_privacy_batch_size=32,
    )
    action = learning_rate_schedule(own, "action").rates
    privacy = learning_rate_schedule(own, "privacy").rates
    assert (action.rate, action.cosine_epochs, action.drop) == (1e-4, 10, 10)
    assert (privacy.rate, privacy.cosine_epochs, privacy.drop) == (2e-4, 0, 1)
    with pytest.raises(
        SettingError,
        match="--eval_action_lr_drop must be at least 1 \\(or 0: --eval_lr_drop\\), got 0.5",
    ):
        ExperimentConfig(eval_action_lr_drop=0.5).validate()
    assert (own.eval_batch_size("action"), own.eval_batch_size("privacy")) == (16, 32)


def test_the_target_models_train_with_their_own_batch_and_rate(benchmark, tmp_path):
    config = tiny_models.tiny_config(
        benchmark,
        tmp_path,
        eval_action_batch_size=3,
        eval_privacy_batch_size=5,
        eval_action_lr=0.02,
        eval_privacy_lr=0.03,
    )
    data = protocol.evaluation_data(config)
    classes, attributes = len(data.class_names), len(data.attribute_names)
    action = protocol.train_action_target(config, data.action_train, classes, None)
    privacy = protocol.train_privacy_target(config, data.privacy_train, attributes, None)
    # One epoch: as many optimizer steps as whole batches of the training split (12 each).
    assert int(action.optimizer.iterations) == 12 // 3
    assert int(privacy.optimizer.iterations) == 12 // 5
    assert float(action.optimizer.learning_rate) == pytest.approx(0.02)
    assert float(privacy.optimizer.learning_rate) == pytest.approx(0.03)


def test_a_target_model_whose_loss_turns_nan_is_refused_by_name(benchmark, tmp_path):
    config = tiny_models.tiny_config(benchmark, tmp_path, eval_privacy_lr=1e30)
    data = protocol.evaluation_data(config)
    with pytest.raises(
        TargetDivergedError,
        match=r"the training loss became nan in epoch 1: .* lower --eval_privacy_lr \(now 1e\+30\)",
    ):
        protocol.train_privacy_target(config, data.privacy_train, len(data.attribute_names), None)


def run_check(losses: list[float]) -> None:
    """A DivergenceCheck shown one training whose epochs end at `losses`."""
    check = DivergenceCheck("eval_privacy_lr", 0.5)
    check.set_model(keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)], name="f"))
    check.on_train_begin()
    for epoch, loss in enumerate(losses):
        check.on_epoch_end(epoch, {"loss": loss})
    check.on_train_end()


def test_a_training_loss_that_ends_above_its_first_epochs_is_warned_of(caplog):
    """Finite but exploding (`--eval_privacy_lr=1e12`): scored, with a warning naming it."""
    with caplog.at_level("WARNING"):
        run_check([0.7, 0.5, 0.6])  # noisy, but below where it began: no warning
        run_check([0.7])
        assert not caplog.records
        run_check([0.7, 3e9, 8e10])
    assert [record.getMessage() for record in caplog.records] == [
        "f: the training loss rose from 0.7 (epoch 1) to 8e+10 (epoch 3): the target model may "
        "have diverged, and its scores are reported as they are; a lower --eval_privacy_lr "
        "(now 0.5) may train it"
    ]
    with pytest.raises(TargetDivergedError, match="f: the training loss became inf in epoch 2"):
        run_check([0.7, float("inf")])


def test_a_divergence_after_finished_methods_says_a_lower_rate_needs_a_new_report(tmp_path):
    # The finished rows were trained at the rate that diverged: a lower one in the same folder
    # is refused as another evaluation, so the advice names the new folder it needs.
    from keras_privacy.evaluation.report import Report

    report = Report(tmp_path)
    diverged = TargetDivergedError("f: the target model diverged; lower --eval_lr (now 1)")
    with pytest.raises(TargetDivergedError) as raised:
        with protocol._divergence_explained(report):
            raise diverged
    assert raised.value is diverged
    report.add("raw", 0.5, 0.6, 0.7)
    with pytest.raises(TargetDivergedError) as raised:
        with protocol._divergence_explained(report):
            raise diverged
    assert str(raised.value) == (
        "f: the target model diverged; lower --eval_lr (now 1) and evaluate again in a new "
        f"--eval_dir: {tmp_path / 'report.json'} holds raw, trained at this rate, and rows of "
        "another rate would not compare"
    )


def test_fit_trains_at_the_rates_the_schedule_sets():
    # One SGD step an epoch on y = 2x from w = 0, MSE: the gradient is -2 x (y - w x).
    x = np.array([[1.0]], "float32")
    y = 2.0 * x
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
    model.layers[0].kernel.assign([[0.0]])
    model.compile(keras.optimizers.SGD(123.0), "mse")
    history = model.fit(
        x,
        y,
        epochs=3,
        verbose=0,
        callbacks=[EpochLearningRate(EpochRates(0.3, warmup_epochs=2, drop=10))],
    )
    w = 0.0
    for rate in (0.15, 0.3, 0.3):  # losses fall each epoch: no drop
        w += rate * 2 * (2 - w)
    np.testing.assert_allclose(model.layers[0].kernel.numpy()[0, 0], w, rtol=1e-6)
    np.testing.assert_allclose(history.history["learning_rate"], [0.15, 0.3, 0.3], rtol=1e-6)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"eval_lr_drop": 0.5}, "--eval_lr_drop must be at least 1, got 0.5"),
        ({"eval_warmup_epochs": -1}, "--eval_warmup_epochs cannot be negative, got -1"),
        ({"eval_lr_patience": -2}, "--eval_lr_patience cannot be negative, got -2"),
        ({"eval_action_lr": -1e-4}, "--eval_action_lr cannot be negative, got -0.0001"),
        ({"eval_privacy_batch_size": -1}, "--eval_privacy_batch_size cannot be negative"),
        ({"eval_action_schedule": "step"}, "--eval_action_schedule"),
    ],
)
def test_a_schedule_setting_out_of_range_is_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**overrides).validate()


def layer_weights(model: keras.Model, kind: type) -> dict[str, list[np.ndarray]]:
    """The weights of each layer of `kind` (nested models included), by layer name."""
    found = {}
    for layer in model.layers:
        if isinstance(layer, kind):
            found[layer.name] = [np.array(w) for w in layer.get_weights()]
        elif isinstance(layer, keras.Model):
            found |= layer_weights(layer, kind)
    return found


def same_weights(a: dict, b: dict) -> bool:
    return all(np.array_equal(x, y) for name in a for x, y in zip(a[name], b[name]))


def test_a_frozen_batchnorm_target_keeps_its_weight_files_batchnorm(benchmark, tmp_path):
    config = tiny_models.tiny_config(benchmark, tmp_path)
    data = protocol.evaluation_data(config)
    classes = len(data.class_names)
    start = registry.build_action_model(
        config.eval_action_model_names()[0],
        num_classes=classes,
        input_shape=(config.clip_length, config.image_size, config.image_size, 3),
    )
    rng = np.random.default_rng(0)
    for layer in start.layers:  # statistics and scales a trained file would hold
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([rng.uniform(0.5, 1.5, w.shape) for w in layer.get_weights()])
    path = tmp_path / "start.weights.h5"
    start.save_weights(path)
    saved = layer_weights(start, keras.layers.BatchNormalization)
    heads = layer_weights(start, keras.layers.Dense)
    assert saved and heads
    for frozen in (True, False):
        run = tiny_models.tiny_config(
            benchmark,
            tmp_path,
            eval_action_weights=str(path),
            eval_action_frozen_batchnorm=frozen,
            eval_action_lr=0.05,
        )
        model = protocol.train_action_target(run, data.action_train, classes, None)
        assert same_weights(saved, layer_weights(model, keras.layers.BatchNormalization)) == frozen
        assert not same_weights(heads, layer_weights(model, keras.layers.Dense))
    with pytest.raises(SettingError, match="--eval_action_frozen_batchnorm keeps the BatchNorm"):
        tiny_models.tiny_config(benchmark, tmp_path, eval_action_frozen_batchnorm=True)


def test_each_target_privacy_model_starts_from_its_own_listed_file(benchmark, tmp_path):
    """`--eval_privacy_weights` as a list: one file per `--eval_privacy_model`, in order, an
    empty entry from scratch (SPAct supp. D.3: each architecture from its own ImageNet file)."""
    config = tiny_models.tiny_config(benchmark, tmp_path)
    data = protocol.evaluation_data(config)
    attributes = len(data.attribute_names)
    models = ["resnet_tiny_small_images", "resnet_tiny"]
    start = registry.build_image_backbone(
        models[1], input_shape=(config.image_size, config.image_size, 3)
    )
    path = tmp_path / "start.keras"
    start.save(path)
    kernels = layer_weights(start, keras.layers.Conv2D)
    run = tiny_models.tiny_config(
        benchmark,
        tmp_path,
        eval_privacy_model=",".join(models),
        eval_privacy_weights=f",{path}",
        eval_privacy_lr=1e-20,  # the kernels stay where they started
    )
    assert [run.eval_weights("privacy", name) for name in models] == ["", str(path)]
    for name, started in zip(models, (False, True)):
        model = protocol.train_privacy_target(run, data.privacy_train, attributes, None, name)
        assert same_weights(kernels, layer_weights(model, keras.layers.Conv2D)) == started, name

    with pytest.raises(SettingError, match=r"lists 3 files for the 2 models of --eval_privacy"):
        tiny_models.tiny_config(
            benchmark,
            tmp_path,
            eval_privacy_model=",".join(models),
            eval_privacy_weights=f"{path},{path},",
        )
    with pytest.raises(SettingError, match=r"--eval_action_weights=.*missing.keras: no such"):
        tiny_models.tiny_config(
            benchmark,
            tmp_path,
            eval_action_model="factorized_tiny,r3d_tiny",
            eval_action_weights=f"{tmp_path / 'missing.keras'},",
        )
    with pytest.raises(SettingError, match="name one for r3d_tiny, or set"):
        tiny_models.tiny_config(
            benchmark,
            tmp_path,
            eval_action_model="factorized_tiny,r3d_tiny",
            eval_action_weights=f"{path},",
            eval_action_frozen_batchnorm=True,
        )
