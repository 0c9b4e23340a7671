"""SPAct with an ensemble of privacy encoders (SPAct Table 6): groups, gradients, aggregation."""

import keras
import numpy as np
import pytest
import tiny_models
from test_losses import nt_xent_reference
from tiny_models import AdversaryHalfOnly

from keras_privacy.methods.init import PrivacyInit
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.steps import anonymize_batch, contrastive_views


def encoders(count: int) -> list[keras.Model]:
    models = [tiny_models.privacy_encoder() for _ in range(count)]
    for seed, model in enumerate(models):
        tiny_models.deterministic_weights(model, 10 + seed)
    return models


def make_trainer(privacy, cls=SPAct, optimizer=lambda: keras.optimizers.Adam(1e-2), **kwargs):
    models = [tiny_models.anonymizer(), tiny_models.action_model()]
    for seed, model in enumerate(models):
        tiny_models.deterministic_weights(model, seed)
    trainer = cls(*models, privacy, **kwargs)
    trainer.compile({group: optimizer() for group in trainer.groups()})
    return trainer


def snapshot(model):
    return [np.array(v.numpy()) for v in model.weights]


def test_groups_are_privacy_for_one_encoder_and_numbered_for_an_ensemble():
    assert set(make_trainer(encoders(1)[0]).groups()) == {"anonymizer", "action", "privacy"}
    assert set(make_trainer(encoders(1)).groups()) == {"anonymizer", "action", "privacy"}
    assert set(make_trainer(encoders(2)).groups()) == {
        "anonymizer",
        "action",
        "privacy_0",
        "privacy_1",
    }
    with pytest.raises(ValueError, match="ntxent"):
        SPAct(
            tiny_models.anonymizer(), tiny_models.action_model(), encoders(2), ssl_adversary="moco"
        )
    with pytest.raises(ValueError, match="at least one"):
        SPAct(tiny_models.anonymizer(), tiny_models.action_model(), [])


def test_every_member_receives_gradients_and_its_optimizer_advances():
    members = encoders(2)
    before = [snapshot(m) for m in members]
    trainer = make_trainer(members)
    history = trainer.fit(tiny_models.paired_dataset(2), epochs=1, verbose=0).history
    for i, member in enumerate(members):
        assert int(trainer.group_optimizer(f"privacy_{i}").iterations) == 2
        assert not np.array_equal(before[i][0], snapshot(member)[0])
    assert np.isfinite(history["privacy_loss"][0])


def test_each_member_steps_on_its_own_loss_as_if_alone():
    # One SGD adversary step of the ensemble moves each member as a lone f_B would move.
    batch = tiny_models.paired_dataset(1)
    sgd = lambda: keras.optimizers.SGD(0.5)  # noqa: E731
    ensemble = encoders(2)
    make_trainer(ensemble, AdversaryHalfOnly, sgd).fit(batch, epochs=1, verbose=0)
    for i, alone in enumerate(encoders(2)):
        make_trainer(alone, AdversaryHalfOnly, sgd).fit(batch, epochs=1, verbose=0)
        for got, want in zip(snapshot(ensemble[i]), snapshot(alone)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_anonymizer_maximises_the_mean_of_the_members_losses():
    rng = np.random.default_rng(3)
    batch = tiny_models.tinted(tiny_models.batch(rng), rng)
    members = encoders(3)
    trainer = SPAct(
        tiny_models.identity_anonymizer(), tiny_models.action_model(), members, temperature=0.5
    )
    trainer.compile({group: keras.optimizers.Adam(1e-2) for group in trainer.groups()})
    _, aux = trainer._anonymizer_loss(trainer.current_values(), batch)
    frames, views, _ = anonymize_batch(trainer, trainer.current_values(), batch, training=False)
    first, second = contrastive_views(frames, views, batch)
    losses = [
        nt_xent_reference(
            np.asarray(m(first, training=False)), np.asarray(m(second, training=False)), 0.5
        )
        for m in members
    ]
    # the members' losses differ, so their mean is told from any one of them or their maximum
    assert np.ptp(losses) > 1e-2
    np.testing.assert_allclose(
        float(aux["logs"]["anonymizer_privacy_loss"]), np.mean(losses), rtol=1e-4
    )


def test_privacy_init_trains_every_member():
    members = encoders(2)
    before = [snapshot(m) for m in members]
    trainer = PrivacyInit(tiny_models.anonymizer(), members)
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in ("privacy_0", "privacy_1")})
    trainer.fit(tiny_models.single_dataset(2), epochs=1, verbose=0)
    for i, member in enumerate(members):
        assert int(trainer.group_optimizer(f"privacy_{i}").iterations) == 2
        assert not np.array_equal(before[i][0], snapshot(member)[0])


def test_ensemble_trainer_config_round_trips():
    trainer = make_trainer(encoders(2))
    restored = SPAct.from_config(trainer.get_config())
    assert list(restored.groups()) == list(trainer.groups())
    assert restored.get_config() == trainer.get_config()


def test_config_splits_and_checks_the_backbones():
    from keras_privacy.config import ExperimentConfig

    config = ExperimentConfig(privacy_backbone="resnet_tiny, mobilenet_v1_0.25")
    config.validate()
    assert config.privacy_backbone_names() == ["resnet_tiny", "mobilenet_v1_0.25"]
    with pytest.raises(ValueError, match="privacy_backbone: 'nope'"):
        ExperimentConfig(privacy_backbone="resnet_tiny,nope").validate()
    with pytest.raises(ValueError, match="ntxent"):
        ExperimentConfig(
            privacy_backbone="resnet_tiny,resnet_tiny", ssl_adversary="rotnet"
        ).validate()


@pytest.mark.backend_independent  # the run's files; the ensemble's JAX steps are tested above
def test_ensemble_trains_through_train_and_saves_every_member(benchmark, tmp_path):
    from keras_privacy import checkpoint, training

    config = tiny_models.variant_run_config(
        benchmark, tmp_path, privacy_backbone="resnet_tiny,resnet_tiny_small_images"
    )
    result = training.train(config)
    assert all(np.isfinite(result.history["minimax"]["privacy_loss"]))
    assert {"privacy_0", "privacy_1"} <= set(result.model_paths)
    assert all(result.model_paths[g].is_file() for g in ("privacy_0", "privacy_1"))
    folder = (
        tmp_path / "run" / "checkpoints" / checkpoint.latest_checkpoint(config.run_dir)["folder"]
    )
    assert {"privacy_0.weights.h5", "privacy_1.weights.h5"} <= {p.name for p in folder.iterdir()}
