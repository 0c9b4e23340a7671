"""SPAct's spatio-temporal privacy branch: a video f_B with NT-Xent on two clips of a video."""

import keras
import numpy as np
import pytest
import tiny_models
from test_losses import nt_xent_reference
from tiny_models import AdversaryHalfOnly, AnonymizerHalfOnly, changed_groups, snapshot

from keras_privacy.config import ExperimentConfig
from keras_privacy.methods.init import PrivacyInit
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.steps import anonymize_clip_pairs
from keras_privacy.models.registry import build_action_trunk, build_video_privacy_encoder

GROUPS = ("anonymizer", "action", "privacy")


def make_trainer(cls=SPAct, **kwargs):
    trainer = cls(
        tiny_models.anonymizer(),
        tiny_models.action_model(),
        tiny_models.video_privacy_encoder(),
        ssl_adversary="spatiotemporal",
        **kwargs,
    )
    trainer.compile({group: keras.optimizers.Adam(1e-2) for group in GROUPS})
    return trainer


def clip_batch(seed: int = 0) -> dict:
    return tiny_models.batch(np.random.default_rng(seed), clips=3, second_clips=True)


def anonymized_clips(anonymizer, clips):
    frames = anonymizer.predict(clips.reshape((-1,) + clips.shape[2:]), verbose=0)
    return frames.reshape(clips.shape)


# ----------------------------------------------------------------------------------- the encoder
def test_video_encoder_embeds_clips_with_unit_norm():
    shape = (4, 16, 16, 3)
    trunk = build_action_trunk("r3d_tiny", shape)
    assert trunk.output_shape == (None, 64)  # the pooled features, no classifier
    encoder = build_video_privacy_encoder("r3d_tiny", input_shape=shape)
    head = encoder.get_layer("projection_head")
    assert [layer.units for layer in head.layers if hasattr(layer, "units")] == [512, 128]
    clips = np.random.default_rng(0).random((3, *shape), dtype="float32")
    embeddings = np.asarray(encoder(clips))
    assert embeddings.shape == (3, 128)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)


def test_privacy_loss_is_nt_xent_of_the_two_clips_embeddings():
    trainer = SPAct(
        tiny_models.identity_anonymizer(),
        tiny_models.action_model(),
        tiny_models.video_privacy_encoder(),
        ssl_adversary="spatiotemporal",
        temperature=0.2,
    )
    trainer.compile({group: keras.optimizers.Adam(1e-2) for group in GROUPS})
    batch = tiny_models.tinted(clip_batch(), np.random.default_rng(9))
    values = trainer.current_values()
    first, second, _ = anonymize_clip_pairs(trainer, values, batch, training=False)
    loss, _ = trainer._privacy_term(values, first, second, training=False)
    encoder = trainer.privacy_encoder
    z1 = encoder.predict(anonymized_clips(trainer.anonymizer, batch["clips"]), verbose=0)
    z2 = encoder.predict(anonymized_clips(trainer.anonymizer, batch["second_clips"]), verbose=0)
    matched = nt_xent_reference(z1, z2, 0.2)
    assert float(loss) == pytest.approx(matched, rel=1e-4)
    # the pairing shows: the second clips in another order move the loss a hundred times more
    # than the difference from the reference (the tiny encoder's embeddings lie close together,
    # so the move is a few per cent)
    shuffled = nt_xent_reference(z1, z2[::-1], 0.2)
    assert abs(float(loss) - shuffled) > 100 * max(abs(float(loss) - matched), 1e-5)


def test_privacy_init_trains_only_the_video_encoder_on_clip_pairs():
    anonymizer, encoder = tiny_models.anonymizer(), tiny_models.video_privacy_encoder()
    init = PrivacyInit(anonymizer, encoder, temperature=0.5, clip_pairs=True)
    init.compile({"privacy": keras.optimizers.Adam(1e-2)})
    batch = clip_batch(1)
    loss, _ = init._loss(init.current_values(), batch)
    # In training mode BatchNorm normalises each side's clips by their own statistics.
    first, second = (
        np.asarray(encoder(anonymized_clips(anonymizer, batch[key]), training=True))
        for key in ("clips", "second_clips")
    )
    expected = nt_xent_reference(first, second, 0.5)
    assert float(loss) == pytest.approx(expected, rel=1e-4)

    before = snapshot(init)
    init.fit(tiny_models.single_dataset(2, second_clips=True), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(init)) == {"privacy"}
    assert int(init.group_optimizer("privacy").iterations) == 2


# ---------------------------------------------------------------------------------- the minimax
def test_anonymizer_step_changes_only_the_anonymizer():
    trainer = make_trainer(AnonymizerHalfOnly)
    before = snapshot(trainer)
    trainer.fit(tiny_models.paired_dataset(1, second_clips=True), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == {"anonymizer"}


def test_adversary_step_changes_only_the_action_model_and_video_encoder():
    trainer = make_trainer(AdversaryHalfOnly)
    before = snapshot(trainer)
    trainer.fit(tiny_models.paired_dataset(1, second_clips=True), epochs=1, verbose=0)
    assert changed_groups(before, snapshot(trainer)) == {"action", "privacy"}


def test_every_optimizer_advances_and_the_losses_are_logged():
    trainer = make_trainer()
    data = tiny_models.paired_dataset(3, second_clips=True)
    history = trainer.fit(data, epochs=1, verbose=0).history
    assert [int(trainer.group_optimizer(g).iterations) for g in GROUPS] == [3, 3, 3]
    for name in ("privacy_loss", "anonymizer_privacy_loss", "action_loss"):
        assert np.isfinite(history[name][0]) and history[name][0] > 0


def test_saved_trainer_reloads_to_the_same_outputs(tmp_path):
    trainer = make_trainer()
    trainer.fit(tiny_models.paired_dataset(1, second_clips=True), epochs=1, verbose=0)
    clips = clip_batch(3)["clips"]
    trainer.save(tmp_path / "trainer.keras")
    reloaded = keras.saving.load_model(tmp_path / "trainer.keras", compile=False)
    assert reloaded.ssl_adversary == "spatiotemporal"
    np.testing.assert_allclose(reloaded(clips), trainer(clips), atol=1e-5)
    np.testing.assert_allclose(
        reloaded.privacy_encoder(clips), trainer.privacy_encoder(clips), atol=1e-5
    )


# ------------------------------------------------------------------------------- wrong settings
def test_the_encoder_must_match_the_branch():
    anonymizer, action = tiny_models.anonymizer(), tiny_models.action_model()
    with pytest.raises(ValueError, match="needs a privacy encoder of clips"):
        SPAct(anonymizer, action, tiny_models.privacy_encoder(), ssl_adversary="spatiotemporal")
    with pytest.raises(ValueError, match="needs a privacy encoder of images"):
        SPAct(anonymizer, action, tiny_models.video_privacy_encoder(), ssl_adversary="ntxent")


def test_config_names_a_privacy_backbone_that_is_not_an_action_model():
    settings = dict(ssl_adversary="spatiotemporal", eval_privacy_model="resnet_tiny")
    ExperimentConfig(privacy_backbone="r3d_tiny", **settings).validate()
    with pytest.raises(
        ValueError, match="--privacy_backbone: 'resnet_tiny' is not one of .*r3d_18"
    ):
        ExperimentConfig(privacy_backbone="resnet_tiny", **settings).validate()
    with pytest.raises(ValueError, match="needs --eval_privacy_model"):
        ExperimentConfig(privacy_backbone="r3d_tiny", ssl_adversary="spatiotemporal").validate()


# ----------------------------------------------------------------------------- through train()
@pytest.mark.backend_independent  # the run's plumbing; the branch's JAX steps are tested above
def test_branch_trains_through_train(benchmark, tmp_path):
    from keras_privacy import training

    config = tiny_models.variant_run_config(
        benchmark,
        tmp_path,
        privacy_backbone="factorized_tiny",
        ssl_adversary="spatiotemporal",
        eval_privacy_model="resnet_tiny",
    )
    result = training.train(config)
    for phase in ("privacy_init", "minimax"):
        assert all(np.isfinite(result.history[phase]["privacy_loss"]))
    encoder = keras.saving.load_model(result.model_paths["privacy"])
    assert encoder.input_shape == (None, 4, 16, 16, 3) and encoder.output_shape == (None, 8)
