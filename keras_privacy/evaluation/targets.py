"""The target models of the evaluation: a fresh action model f'_T and privacy model f'_B
trained on (anonymized) data, behind a frozen anonymizer where there is one, and tested with
their metrics and bootstrap intervals."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence

import keras
import numpy as np
import scipy.special
from absl import logging
from tqdm import tqdm

from keras_privacy import distribute
from keras_privacy.config import ExperimentConfig, SettingError
from keras_privacy.data import pipelines
from keras_privacy.data.phvu import frame_source
from keras_privacy.evaluation import metrics
from keras_privacy.learning_rates import EpochRates
from keras_privacy.models import pretrained, registry
from keras_privacy.models.unet import apply_per_frame
from keras_privacy.spelling import spell


def with_anonymizer(
    target: keras.Model, anonymizer: keras.Layer | None, clips: bool
) -> keras.Model:
    """`target` behind a frozen frame-wise `anonymizer` (clips: applied frame by frame)."""
    if anonymizer is None:
        return target
    anonymizer.trainable = False
    inputs = keras.Input(target.input_shape[1:], name="inputs")
    anonymized = apply_per_frame(anonymizer, inputs) if clips else anonymizer(inputs)
    return keras.Model(inputs, target(anonymized), name=f"anonymized_{target.name}")


class EpochLearningRate(keras.callbacks.Callback):
    """The target models' learning rate, set at the start of each epoch by `rates` (the
    warm-up, then the plateau rule or the half cosine), and logged as `learning_rate`."""

    def __init__(self, rates: EpochRates):
        super().__init__()
        self.rates = rates

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.model.optimizer.learning_rate = self.rates.rate_at(epoch)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs if logs is not None else {}
        logs["learning_rate"] = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )
        lowest = self.rates.lowest_loss
        if self.rates.observe(epoch, logs["loss"]):
            logging.info(
                "%s: loss %.4f not below %.4f: learning rate divided by %g to %.3g",
                self.model.name,
                logs["loss"],
                lowest,
                self.rates.drop,
                self.rates.rate,
            )


class TargetDivergedError(RuntimeError):
    """A target model's training loss became NaN or infinite: its scores would mean nothing,
    so it is neither tested nor kept."""


class DivergenceCheck(keras.callbacks.Callback):
    """Raises TargetDivergedError at the end of an epoch whose mean loss is not finite (a NaN
    in any batch makes the mean NaN), naming the model, the epoch and the learning-rate flag
    `flag` with its value `rate`: the model is never tested or saved. A training that ends
    with a mean loss above its first epoch's, finite, is warned of: such a model may have
    diverged without a NaN, and its scores are reported, as its training ended."""

    def __init__(self, flag: str, rate: float):
        super().__init__()
        self.flag = flag
        self.rate = rate
        self.losses: list[float] = []

    def on_train_begin(self, logs: dict | None = None) -> None:
        self.losses = []

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss")
        if loss is None:
            return
        if not np.isfinite(loss):
            raise TargetDivergedError(
                spell(
                    f"{self.model.name}: the training loss became {loss} in epoch {epoch + 1}: "
                    f"the target model diverged; lower <{self.flag}> (now {self.rate:g})"
                )
            )
        self.losses.append(float(loss))

    def on_train_end(self, logs: dict | None = None) -> None:
        if len(self.losses) > 1 and self.losses[-1] > self.losses[0]:
            logging.warning(
                spell(
                    f"{self.model.name}: the training loss rose from {self.losses[0]:.4g} "
                    f"(epoch 1) to {self.losses[-1]:.4g} (epoch {len(self.losses)}): the "
                    f"target model may have diverged, and its scores are reported as they are; "
                    f"a lower <{self.flag}> (now {self.rate:g}) may train it"
                )
            )


def target_callbacks(
    config: ExperimentConfig, target: str, test_epochs: BestTestEpoch | None
) -> list[keras.callbacks.Callback]:
    """The `target` ("action" or "privacy") model's callbacks: the divergence check first
    (before the schedule reads the loss), its learning rate per epoch, its test epochs."""
    flag = f"eval_{target}_lr" if getattr(config, f"eval_{target}_lr") else "eval_lr"
    return [
        DivergenceCheck(flag, config.eval_learning_rate(target)),
        learning_rate_schedule(config, target),
        *([test_epochs] if test_epochs else []),
    ]


class BestTestEpoch(keras.callbacks.Callback):
    """Tests the model after each of `epochs` (from 1) with `score` (the model -> its test
    score, higher is better), keeps the weights of the best score and puts them back when
    training ends: the penalty authors' choice of their target models
    (`--eval_<target>_test_epochs`, their val_array; train_anonymized_action.py:298-375,
    train_privacy.py:231-251). Of equal scores the first is kept, as their strict `>`.
    `scores` holds each tested epoch's score, `best_epoch` the epoch whose weights the model
    ends with."""

    def __init__(self, epochs: Sequence[int], score: Callable[[keras.Model], float]):
        super().__init__()
        self.epochs = set(epochs)
        self.score = score
        self.scores: dict[int, float] = {}
        self.best_epoch: int | None = None
        self._best_weights: list | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if epoch + 1 not in self.epochs:
            return
        score = float(self.score(self.model))
        self.scores[epoch + 1] = score
        logging.info("%s: test score %.4f after epoch %d", self.model.name, score, epoch + 1)
        if self.best_epoch is None or score > self.scores[self.best_epoch]:
            self.best_epoch = epoch + 1
            self._best_weights = self.model.get_weights()

    def on_train_end(self, logs: dict | None = None) -> None:
        if self._best_weights is not None:
            self.model.set_weights(self._best_weights)

    def record(self, prefix: str) -> dict:
        """The tests' scores and the epoch kept, as report entries named by `prefix`."""
        return {
            f"{prefix}_test_scores": {str(epoch): value for epoch, value in self.scores.items()},
            f"{prefix}_epoch": self.best_epoch,
        }


def epoch_tests_record(test_epochs: BestTestEpoch | None, prefix: str) -> dict:
    """`test_epochs.record(prefix)`, or nothing where the target model had no test epochs."""
    return test_epochs.record(prefix) if test_epochs else {}


def action_test_epochs(config: ExperimentConfig, test: pipelines.Source) -> BestTestEpoch | None:
    """The `BestTestEpoch` of an f'_T tested on `test` (video top-1, or action cMAP with
    `--action_multilabel`), where `--eval_action_test_epochs` asks for one."""
    epochs = config.eval_test_epoch_list("action")
    if not epochs:
        return None
    metric = "action_cmap" if config.action_multilabel else "action_top1"
    return BestTestEpoch(
        epochs, lambda model: test_action_target(config, model, test, intervals=False)[metric]
    )


def privacy_test_epochs(
    config: ExperimentConfig, test: pipelines.Source, names: Sequence[str]
) -> BestTestEpoch | None:
    """The `BestTestEpoch` of an f'_B tested on `test` (cMAP over `names`), where
    `--eval_privacy_test_epochs` asks for one."""
    epochs = config.eval_test_epoch_list("privacy")
    if not epochs:
        return None
    return BestTestEpoch(
        epochs,
        lambda model: test_privacy_target(config, model, test, names, intervals=False)[
            "privacy_cmap"
        ],
    )


def learning_rate_schedule(config: ExperimentConfig, target: str) -> EpochLearningRate:
    """The learning rate per epoch of the `target` ("action" or "privacy") model: its rate
    (`--eval_<target>_lr`, else `--eval_lr`), the warm-up, then the plateau rule (its drop:
    `--eval_<target>_lr_drop`, else `--eval_lr_drop`) or, for the action model with
    `--eval_action_schedule=cosine`, the half cosine."""
    cosine = target == "action" and config.eval_action_schedule == "cosine"
    rates = EpochRates(
        config.eval_learning_rate(target),
        config.eval_warmup_epochs,
        config.eval_lr_drop_of(target),
        config.eval_lr_patience,
        cosine_epochs=config.eval_action_epochs if cosine else 0,
    )
    return EpochLearningRate(rates)


def train_action_target(
    config: ExperimentConfig,
    train: pipelines.Source,
    num_classes: int,
    anonymizer: keras.Layer | None,
    model_name: str | None = None,
    test_epochs: BestTestEpoch | None = None,
) -> keras.Model:
    """A fresh f'_T `model_name` (default the first of `--eval_action_model`) trained with
    cross-entropy on (anonymized) training clips; with `test_epochs` (`action_test_epochs`)
    it ends with the weights of its best test score."""
    c = config
    model_name = model_name or c.eval_action_model_names()[0]
    keras.utils.set_random_seed(c.seed)
    target = registry.build_action_model(
        model_name,
        num_classes=num_classes,
        input_shape=(c.clip_length, c.image_size, c.image_size, 3),
    )
    target = pretrained.start_from_weights(target, c.eval_weights("action", model_name), model_name)
    if c.eval_action_frozen_batchnorm:
        freeze_batchnorm(target)
    model = with_anonymizer(target, anonymizer, clips=True)
    if c.action_multilabel:
        loss, accuracy, labels = keras.losses.BinaryCrossentropy(from_logits=True), [], "actions"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        accuracy, labels = ["accuracy"], "labels"
    model.compile(
        keras.optimizers.Adam(c.eval_learning_rate("action")),
        loss,
        metrics=accuracy,
        jit_compile=distribute.choose_jit_compile(c.jit_compile, [target])[0],
    )
    batch_size = c.eval_batch_size("action")
    dataset = pipelines.action_train_dataset(
        train,
        batch_size,
        c.clip_length,
        c.clip_stride,
        c.image_size,
        seed=c.seed,
        config=c.action_augmentation(),
        epochs=None,
        short_videos=c.short_videos,
    )
    if labels not in dataset.element_spec:
        raise SettingError(
            "<action_multilabel> needs multi-hot action labels (a P-HVU split from read_phvu)"
        )
    dataset = dataset.map(lambda batch: (batch["clips"], batch[labels]))
    steps = c.steps_per_epoch or max(1, pipelines.count_examples(train) // batch_size)
    model.fit(
        dataset,
        epochs=c.eval_action_epochs,
        steps_per_epoch=steps,
        callbacks=target_callbacks(c, "action", test_epochs),
        verbose=2,
        shuffle=False,  # the pipeline shuffles (Keras would warn that it ignores True)
    )
    return model


def action_target_settings(config: ExperimentConfig) -> dict:
    """How the action target models are trained and tested (what `train_action_target`,
    `action_test_epochs` and `test_action_target` read besides the clips), as JSON values."""
    return _as_json(
        {
            "models": config.eval_action_model_names(),
            "weights": config.eval_action_weights,
            "frozen_batchnorm": config.eval_action_frozen_batchnorm,
            "multilabel": config.action_multilabel,
            "frame_size": config.frame_size,
            "image_size": config.image_size,
            "clip_length": config.clip_length,
            "clip_stride": config.clip_stride,
            # Kept only where not the default, so that reports written before it compare alike.
            **({"short_videos": config.short_videos} if config.short_videos != "loop" else {}),
            "seed": config.seed,
            "epochs": config.eval_action_epochs,
            "steps_per_epoch": config.steps_per_epoch,
            "test_epochs": config.eval_test_epoch_list("action"),
            "learning_rate": config.eval_learning_rate("action"),
            "schedule": config.eval_action_schedule,
            "warmup_epochs": config.eval_warmup_epochs,
            "lr_drop": config.eval_lr_drop_of("action"),
            "lr_patience": config.eval_lr_patience,
            "batch_size": config.eval_batch_size("action"),
            "augmentation": dataclasses.asdict(config.action_augmentation()),
            "test_clips": config.eval_clips,
            "test_crop": config.eval_action_crop,
        }
    )


def privacy_target_settings(config: ExperimentConfig) -> dict:
    """How a privacy target model is trained (what `train_privacy_target` and
    `privacy_test_epochs` read besides the images and the model's name), as JSON values."""
    return _as_json(
        {
            "privacy_image_side": config.image_side(),
            "image_size": config.image_size,
            "seed": config.seed,
            "weights": config.eval_privacy_weights,
            "epochs": config.eval_privacy_epochs,
            "test_epochs": config.eval_test_epoch_list("privacy"),
            "learning_rate": config.eval_learning_rate("privacy"),
            "warmup_epochs": config.eval_warmup_epochs,
            "lr_drop": config.eval_lr_drop_of("privacy"),
            "lr_patience": config.eval_lr_patience,
            "batch_size": config.eval_batch_size("privacy"),
            "augmentation": config.supervised_augmentation,
        }
    )


def target_settings(config: ExperimentConfig) -> dict:
    """How every target model of the evaluation is trained and tested: the action models,
    the privacy models (with their names) and the bootstrap of the intervals. Rows measured
    with other settings do not compare (`report.json` keeps it as `target_models`)."""
    # Kept only where not the default, so that reports written before it compare with runs alike.
    f1_threshold = config.eval_f1_threshold
    return {
        "action": action_target_settings(config),
        "privacy": {
            "models": config.eval_privacy_model_names(),
            **privacy_target_settings(config),
            **({"f1_threshold": f1_threshold} if f1_threshold != 0.5 else {}),
        },
        "bootstrap": config.eval_bootstrap,
    }


def _as_json(settings: dict) -> dict:
    """`settings` as JSON gives them back (tuples as lists), so they compare with a record."""
    return json.loads(json.dumps(settings))


def freeze_batchnorm(model: keras.Model) -> None:
    """Every BatchNormalization layer of `model` (nested models included) made untrainable:
    Keras then normalises by its moving statistics even in training and updates neither them
    nor its scale and offset, as the penalty authors' `freeze_bn` swaps in `FrozenBN`
    (large_i3d.py:8-38; train_anonymized_action.py:45-46)."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.trainable = False
        elif isinstance(layer, keras.Model):
            freeze_batchnorm(layer)


def test_action_target(
    config: ExperimentConfig, model: keras.Model, test: pipelines.Source, intervals: bool = True
) -> dict:
    """Video-level top-1 of `model` on `test`: mean softmax over K equidistant clips (with
    `--action_multilabel`, action cMAP of the mean sigmoid: see the module docstring), and,
    with `intervals`, its 95 % interval by `--eval_bootstrap` resamples of the test videos
    (`<metric>_interval`)."""
    c = config
    dataset = pipelines.action_eval_dataset(
        test,
        c.eval_clips,
        c.clip_length,
        c.clip_stride,
        c.image_size,
        c.eval_action_crop,
        keeps_aspect=c.action_augmentation().crop_keeps_aspect,
        short_videos=c.short_videos,
    )
    probs, labels, videos = [], [], []
    for video in tqdm(dataset.as_numpy_iterator(), desc="testing f'_T", unit="video", leave=False):
        logits = np.asarray(model.predict_on_batch(video["clips"]), np.float64)
        if c.action_multilabel:
            probs.append(scipy.special.expit(logits))
            labels.append(np.repeat(video["actions"][None], len(logits), axis=0))
        else:
            probs.append(_softmax(logits))
            labels.append(np.full(len(logits), video["label"]))
        videos.append(np.full(len(logits), video["video_index"]))
    probs, labels, videos = np.concatenate(probs), np.concatenate(labels), np.concatenate(videos)
    samples, seed = c.eval_bootstrap if intervals else 0, c.seed
    if c.action_multilabel:
        names = pipelines.label_names(test, "class_names")
        cmap = metrics.video_action_cmap(probs, videos, labels, names)
        result = {
            "action_cmap": cmap.value,
            "action_metric": "cmap",
            "action_ap": cmap.per_attribute,
            "action_skipped": list(cmap.skipped),
            "action_test_videos": int(len(np.unique(videos))),
        }
        if samples:
            _, video_probs = metrics.video_scores(probs, videos)
            _, video_labels = metrics.video_scores(labels, videos)
            interval = metrics.cmap_interval(video_labels, video_probs, samples, seed)
            result["action_cmap_interval"] = list(interval)
        return result
    result = {
        "action_top1": metrics.video_top1(probs, videos, labels),
        "action_clip_top1": metrics.top1(probs, labels),
        "action_test_videos": int(len(np.unique(videos))),
    }
    if samples:
        interval = metrics.video_top1_interval(probs, videos, labels, samples, seed)
        result["action_top1_interval"] = list(interval)
    return result


def train_privacy_target(
    config: ExperimentConfig,
    train: pipelines.Source,
    num_attributes: int,
    anonymizer: keras.Layer | None,
    model_name: str | None = None,
    test_epochs: BestTestEpoch | None = None,
) -> keras.Model:
    """A fresh f'_B on the backbone `model_name` (default the first of `--eval_privacy_model`)
    trained with multi-label BCE on (anonymized) training images; with `test_epochs`
    (`privacy_test_epochs`) it ends with the weights of its best test cMAP."""
    c = config
    model_name = model_name or c.eval_privacy_model_names()[0]
    keras.utils.set_random_seed(c.seed)
    target = registry.build_privacy_classifier(
        model_name, num_attributes, input_shape=(c.image_size, c.image_size, 3)
    )
    target = pretrained.start_from_weights(
        target, c.eval_weights("privacy", model_name), model_name
    )
    model = with_anonymizer(target, anonymizer, clips=False)
    model.compile(
        keras.optimizers.Adam(c.eval_learning_rate("privacy")),
        keras.losses.BinaryCrossentropy(from_logits=True),
        jit_compile=distribute.choose_jit_compile(c.jit_compile, [target])[0],
    )
    batch_size = c.eval_batch_size("privacy")
    dataset = pipelines.privacy_labelled_dataset(
        train,
        batch_size,
        c.image_size,
        training=True,
        seed=c.seed,
        config=c.image_augmentation(),
        epochs=None,
    ).map(lambda batch: (batch["images"], batch["privacy"]))
    steps = max(1, pipelines.count_examples(train) // batch_size)
    model.fit(
        dataset,
        epochs=c.eval_privacy_epochs,
        steps_per_epoch=steps,
        callbacks=target_callbacks(c, "privacy", test_epochs),
        verbose=2,
        shuffle=False,
    )
    return model


def test_privacy_target(
    config: ExperimentConfig,
    model: keras.Model,
    test: pipelines.Source,
    names: Sequence[str],
    prefix: str = "privacy",
    intervals: bool = True,
) -> dict:
    """cMAP and mean F1 (at probability `--eval_f1_threshold`) of `model` on the test images,
    and, with `intervals`, their 95 % intervals by `--eval_bootstrap` resamples of the test
    images (`<metric>_interval`). cMAP ranks the logits, as the authors' `average_precision_score`
    does: a float64 sigmoid is exactly 1.0 above a logit of about 37, which would tie them."""
    dataset = pipelines.privacy_labelled_dataset(
        test, config.eval_batch_size("privacy"), config.image_size, training=False
    )
    logits, labels, paths = [], [], []
    for batch in dataset.as_numpy_iterator():
        logits.append(np.asarray(model.predict_on_batch(batch["images"]), np.float64))
        labels.append(batch["privacy"])
        paths.extend(path.decode() for path in batch["path"])
    logits, labels = np.concatenate(logits), np.concatenate(labels)
    probs = scipy.special.expit(logits)
    cmap = metrics.privacy_cmap(labels, logits, names)
    f1 = metrics.privacy_f1(labels, probs, config.eval_f1_threshold, names)
    # PA-HMDB51's test frames are resampled by video: frames of one video are not
    # independent samples.
    groups = metrics.row_groups([frame_source(path) for path in paths])
    result = {
        f"{prefix}_cmap": cmap.value,
        f"{prefix}_f1": f1.value,
        f"{prefix}_ap": cmap.per_attribute,
        f"{prefix}_skipped": list(cmap.skipped),
        f"{prefix}_test_units": int(groups.max()) + 1,  # what an interval resamples
    }
    if config.eval_bootstrap and intervals:
        samples, seed = config.eval_bootstrap, config.seed
        cmap_interval = metrics.cmap_interval(labels, logits, samples, seed, groups)
        f1_interval = metrics.privacy_f1_interval(
            labels, probs, config.eval_f1_threshold, samples, seed, groups
        )
        result[f"{prefix}_cmap_interval"] = list(cmap_interval)
        result[f"{prefix}_f1_interval"] = list(f1_interval)
    return result


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
