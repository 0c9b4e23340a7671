"""A batch's frames are checked against the models when a step is traced: each mistake is
named by its key, on either backend, before a model fails deep in a layer."""

import types

import keras
import numpy as np
import pytest
import tiny_models

from keras_privacy.data.pairs import pair_arrays
from keras_privacy.methods.batches import BatchList, check_frames
from keras_privacy.methods.spact import SPAct


def built_for(shape: tuple, name: str) -> keras.Model:
    """A model built on inputs of `shape` (one example), as the registry's models are."""
    inputs = keras.Input(shape)
    pooled = keras.layers.GlobalAveragePooling3D() if len(shape) == 4 else keras.layers.Flatten()
    return keras.Model(inputs, keras.layers.Dense(3)(pooled(inputs)), name=name)


MODELS = {
    "anonymizer": tiny_models.anonymizer(),
    "action": built_for((4, 8, 8, 3), "r3d"),
    "privacy": built_for((8, 8, 3), "resnet"),
}


def zeros(*shape):
    return np.zeros(shape, "float32")


def test_frames_the_models_were_built_for_pass():
    batch = {"clips": zeros(2, 4, 8, 8, 3), "views": zeros(3, 2, 8, 8, 3), "labels": zeros(2)}
    check_frames("SPAct", batch, MODELS, paired=False)
    paired = {key: np.stack([value, value], axis=1) for key, value in batch.items()}
    check_frames("SPAct", paired, MODELS, paired=True)
    unknown = types.SimpleNamespace(shape=(None, None, 4, 8, 8, 3))  # a traced dataset's batch
    check_frames("SPAct", {"clips": unknown}, MODELS, paired=True)
    check_frames("VITA", {"images": zeros(4, 8, 8, 3)}, MODELS, paired=False)


@pytest.mark.parametrize(
    "batch, paired, message",
    [
        (
            {"clips": zeros(2, 8, 8, 3)},
            False,
            r"batch\['clips'\] has shape \(2, 8, 8, 3\), but T takes it as \(batch, time, "
            r"height, width, channels\)$",
        ),
        (
            {"clips": zeros(2, 4, 8, 8, 3)},  # one batch where a pair is taken
            True,
            r"as \(batch, 2, time, height, width, channels\) \(pairs of batches: .*pair_batches",
        ),
        (
            {"views": zeros(2, 3, 2, 8, 8, 3)},
            True,
            r"batch\['views'\] has shape \(2, 3, 2, 8, 8, 3\), but T takes it as \(batch, 2, 2,",
        ),
        (
            {"clips": zeros(2, 3, 8, 8, 3)},
            False,
            r"batch\['clips'\] holds clips of 3 x 8 x 8 x 3 \(time, height, width, channels\), "
            r"but the action model 'r3d' was built for 4 x 8 x 8 x 3",
        ),
        (
            {"images": zeros(2, 16, 16, 3)},
            False,
            r"batch\['images'\] holds frames of 16 x 16 x 3 \(height, width, channels\), but the "
            r"privacy model 'resnet' was built for 8 x 8 x 3",
        ),
        (
            {"validation_clips": zeros(2, 4, 8, 8, 1)},
            False,
            r"batch\['validation_clips'\] holds frames of 8 x 8 x 1 \(height, width, "
            r"channels\), but the anonymizer model 'anonymizer' was built for \? x \? x 3",
        ),
    ],
)
def test_frames_the_models_cannot_take_are_named_by_key(batch, paired, message):
    with pytest.raises(ValueError, match=message):
        check_frames("T", batch, MODELS, paired)


def test_integer_frames_and_privacy_labels_of_another_width_are_refused():
    """What a dataset's element spec or a traced batch shows: NumPy batches are checked with
    their values before a fit (`StatelessTrainer._check_arrays`)."""
    spec = types.SimpleNamespace(shape=(None, 4, 8, 8, 3), dtype="uint8")
    with pytest.raises(ValueError, match=r"batch\['clips'\] holds uint8 frames; .* divide by 255"):
        check_frames("SPAct", {"clips": spec}, MODELS, paired=False)
    classifiers = {"budget_0": MODELS["privacy"]}  # 3 attributes
    labels = types.SimpleNamespace(shape=(None, 4), dtype="float32")
    with pytest.raises(ValueError, match=r"holds labels of 4 attributes, but budget_0 predicts 3"):
        check_frames("VITA", {"privacy": labels}, MODELS, False, classifiers)
    check_frames("VITA", {"privacy": zeros(2, 3)}, MODELS, False, classifiers)


def test_frames_of_several_sizes_in_one_batch_are_refused():
    models = {"anonymizer": tiny_models.anonymizer(), "action": tiny_models.action_model()}
    batch = {"clips": zeros(2, 4, 8, 8, 3), "views": zeros(2, 2, 6, 6, 3)}
    with pytest.raises(
        ValueError,
        match=r"all of one size, .* batch\['clips'\] holds 8 x 8, batch\['views'\] holds 6 x 6",
    ):
        check_frames("SPAct", batch, models, paired=False)


def test_a_trainers_fit_refuses_clips_of_another_length_than_its_action_model():
    """The check runs before a fit and inside the traced step (arrays, batch lists and
    datasets alike), and the failed fit leaves the trainer able to train. A second fit is
    refused too, where TensorFlow relaxes the retraced step's changed dimension to unknown."""
    trainer = SPAct(
        tiny_models.anonymizer(),
        built_for((4, 8, 8, 3), "r3d"),
        tiny_models.privacy_encoder(),
    )
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in ("anonymizer", "action", "privacy")})
    rng = np.random.default_rng(0)
    good = pair_arrays(tiny_models.batch(rng, images=2), tiny_models.batch(rng, images=2))
    short = dict(good, clips=good["clips"][:, :, :3])
    with pytest.raises(ValueError, match=r"holds clips of 3 x 8 x 8 x 3 .* 'r3d' was built for 4"):
        trainer.fit(short, batch_size=2, verbose=0)
    assert int(trainer.group_optimizer("anonymizer").iterations) == 0
    trainer.fit(good, batch_size=2, verbose=0)
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1
    with pytest.raises(ValueError, match=r"holds clips of 3 x 8 x 8 x 3 .* 'r3d' was built for 4"):
        trainer.fit(short, batch_size=2, verbose=0)
    with pytest.raises(ValueError, match=r"holds clips of 3 x 8 x 8 x 3 .* 'r3d' was built for 4"):
        trainer.fit(BatchList([short]), verbose=0)
    assert int(trainer.group_optimizer("anonymizer").iterations) == 1


@pytest.mark.parametrize(
    "call, given",
    [
        (lambda trainer, batch: trainer.fit(batch["clips"], batch["labels"]), "fit's y"),
        (lambda trainer, batch: trainer.fit(batch["clips"]), "fit's x as one array"),
        (
            lambda trainer, batch: trainer.fit(BatchList([(batch["clips"], batch["labels"])])),
            "a tuple",
        ),
    ],
)
def test_batches_that_are_no_dict_are_refused_by_name(call, given):
    trainer = SPAct(
        tiny_models.anonymizer(), tiny_models.action_model(), tiny_models.privacy_encoder()
    )
    trainer.compile({g: keras.optimizers.Adam(1e-2) for g in ("anonymizer", "action", "privacy")})
    rng = np.random.default_rng(0)
    batch = pair_arrays(tiny_models.batch(rng, images=2), tiny_models.batch(rng, images=2))
    with pytest.raises(
        (TypeError, ValueError),
        match=rf"SPAct takes each batch as one dict of named arrays, labels included .* "
        rf"keras_privacy.methods.spact names them\), but was given {given}",
    ):
        call(trainer, batch)
    assert int(trainer.group_optimizer("anonymizer").iterations) == 0
