"""The initialisation phases that every adversarial method starts from (SPAct Sec. 3.3).

1. `IdentityInit`: f_A learns the identity (L1 reconstruction) on privacy images and frames.
2. `ActionInit`: f_T learns the action from f_A(x), f_A frozen (cross-entropy).
3. `PrivacyInit`: f_B learns NT-Xent on f_A(x), f_A frozen (SPAct; on pairs of clips of a
   video for the spatio-temporal branch); or
   `SupervisedPrivacyInit`: the supervised adversaries (VITA's budget models, the meta attack
   models) learn the privacy labels of f_A(x), f_A frozen (multi-label BCE).

They take single batches in the format of `keras_privacy.methods.spact` (not pairs; labelled
images for `SupervisedPrivacyInit`), each trains its own groups, and each is a plain `fit`, so
it can run alone and be resumed from a checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
from keras import ops

from keras_privacy import losses
from keras_privacy.methods.steps import (
    action_update_loss,
    anonymize_batch,
    anonymize_clip_pairs,
    as_encoders,
    multilabel_accuracy,
    pair_inputs,
    privacy_group_names,
    privacy_loss,
)
from keras_privacy.methods.trainer import (
    StatelessTrainer,
    Update,
    deserialize_models,
    serialize_models,
)
from keras_privacy.types import Tensor


@keras.saving.register_keras_serializable(package="keras_privacy")
class IdentityInit(StatelessTrainer):
    """Train f_A to reproduce its input (L1), on the privacy views and two frames per clip."""

    log_names = ("reconstruction_loss",)

    def __init__(self, anonymizer: keras.Model, **kwargs):
        super().__init__(**kwargs)
        self.anonymizer = anonymizer

    def groups(self) -> dict[str, keras.Model]:
        return {"anonymizer": self.anonymizer}

    def get_config(self) -> dict:
        return {"name": self.name, "anonymizer": serialize_models(self.anonymizer)}

    @classmethod
    def from_config(cls, config: dict) -> IdentityInit:
        return cls(**deserialize_models(config, "anonymizer"))

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        return [Update(("anonymizer",), lambda values: self._loss(values, data))]

    def _loss(self, values, batch):
        targets = ops.concatenate(pair_inputs(batch, "both"), axis=0)
        outputs, state = self.run("anonymizer", values, targets, training=True)
        loss = losses.l1_reconstruction(targets, outputs)
        return loss, {"logs": {"reconstruction_loss": loss}, "non_trainable": {"anonymizer": state}}


@keras.saving.register_keras_serializable(package="keras_privacy")
class ActionInit(StatelessTrainer):
    """Train f_T on clips anonymized by the frozen f_A (cross-entropy)."""

    log_names = ("action_loss", "action_accuracy")

    def __init__(self, anonymizer: keras.Model, action_model: keras.Model, **kwargs):
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.action_model = action_model

    def groups(self) -> dict[str, keras.Model]:
        return {"anonymizer": self.anonymizer, "action": self.action_model}

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "action_model": serialize_models(self.action_model),
        }

    @classmethod
    def from_config(cls, config: dict) -> ActionInit:
        return cls(**deserialize_models(config, "anonymizer", "action_model"))

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        return [Update(("action",), lambda values: self._loss(values, data))]

    def _loss(self, values, batch):
        clips_only = {"clips": batch["clips"]}
        anon_frames, _, _ = anonymize_batch(self, values, clips_only, training=False)
        clip_length = ops.shape(batch["clips"])[1]
        frozen = ops.stop_gradient(anon_frames)
        return action_update_loss(self, values, frozen, clip_length, batch["labels"])


@keras.saving.register_keras_serializable(package="keras_privacy")
class PrivacyInit(StatelessTrainer):
    """Train f_B with NT-Xent on the positive pairs of `contrastive_views` (image views, frame
    pairs or both, as the minimax) anonymized by the frozen f_A.

    `privacy_encoder` may be a list, an ensemble: each member (group `privacy_<i>`) trains on its
    own NT-Xent; the logged `privacy_loss` is their mean. With `clip_pairs` (SPAct's
    spatio-temporal branch), f_B is a video encoder and the positive pairs are the two
    anonymized clips of each video (`clips`, `second_clips`); frame pairs and views are unused."""

    log_names = ("privacy_loss",)

    def __init__(
        self,
        anonymizer: keras.Model,
        privacy_encoder: keras.Model | Sequence[keras.Model],
        temperature: float = 0.1,
        clip_pairs: bool = False,
        contrastive_views: str = "images",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.contrastive_views = contrastive_views
        self.privacy_encoders = as_encoders(privacy_encoder)
        self.privacy_groups = privacy_group_names(len(self.privacy_encoders))
        self.temperature = temperature
        self.clip_pairs = clip_pairs

    def groups(self) -> dict[str, keras.Model]:
        return {
            "anonymizer": self.anonymizer,
            **dict(zip(self.privacy_groups, self.privacy_encoders)),
        }

    def get_config(self) -> dict:
        encoders = self.privacy_encoders
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "privacy_encoder": serialize_models(encoders[0] if len(encoders) == 1 else encoders),
            "temperature": self.temperature,
            "clip_pairs": self.clip_pairs,
            "contrastive_views": self.contrastive_views,
        }

    @classmethod
    def from_config(cls, config: dict) -> PrivacyInit:
        return cls(**deserialize_models(config, "anonymizer", "privacy_encoder"))

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        return [Update(self.privacy_groups, lambda values: self._loss(values, data))]

    def _loss(self, values, batch):
        first, second = self._anonymized_pairs(values, batch)
        first, second = ops.stop_gradient(first), ops.stop_gradient(second)
        total, states = 0.0, {}
        for group in self.privacy_groups:
            loss, states[group] = privacy_loss(
                self, values, first, second, self.temperature, training=True, group=group
            )
            total = total + loss
        mean = total / len(self.privacy_groups)
        return total, {"logs": {"privacy_loss": mean}, "non_trainable": states}

    def _anonymized_pairs(self, values, batch):
        """The two sides of the positive pairs through the frozen f_A, in one call."""
        if self.clip_pairs:
            first, second, _ = anonymize_clip_pairs(self, values, batch, training=False)
            return first, second
        first, second = pair_inputs(batch, self.contrastive_views)
        anonymized, _ = self.run(
            "anonymizer", values, ops.concatenate([first, second], axis=0), training=False
        )
        num = ops.shape(first)[0]
        return anonymized[:num], anonymized[num:]


@keras.saving.register_keras_serializable(package="keras_privacy")
class SupervisedPrivacyInit(StatelessTrainer):
    """Train each adversary on the privacy labels of images anonymized by the frozen f_A.

    `adversaries` maps group names (`training` names them `adversary_0`, ...) to image models
    with one logit per attribute; each is its own group with its own optimizer."""

    log_names = ("privacy_loss", "privacy_accuracy")

    def __init__(self, anonymizer: keras.Model, adversaries: dict[str, keras.Model], **kwargs):
        if not adversaries:
            raise ValueError("SupervisedPrivacyInit needs at least one adversary")
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.adversaries = dict(adversaries)

    def groups(self) -> dict[str, keras.Model]:
        return {"anonymizer": self.anonymizer, **self.adversaries}

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "adversaries": {
                name: serialize_models(model) for name, model in self.adversaries.items()
            },
        }

    @classmethod
    def from_config(cls, config: dict) -> SupervisedPrivacyInit:
        names = list(config["adversaries"])
        rebuilt = deserialize_models(
            {**config, "adversaries": [config["adversaries"][name] for name in names]},
            "anonymizer",
            "adversaries",
        )
        return cls(**{**rebuilt, "adversaries": dict(zip(names, rebuilt["adversaries"]))})

    def privacy_classifiers(self) -> dict[str, keras.Model]:
        return dict(self.adversaries)

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        # One update over every adversary: each group's gradient comes from its own term only.
        return [Update(tuple(self.adversaries), lambda values: self._loss(values, data))]

    def _loss(self, values, batch):
        anonymized, _ = self.run("anonymizer", values, batch["images"], training=False)
        anonymized = ops.stop_gradient(anonymized)
        total, accuracy, states = 0.0, 0.0, {}
        for group in self.adversaries:
            logits, states[group] = self.run(group, values, anonymized, training=True)
            total = total + losses.masked_binary_cross_entropy(batch["privacy"], logits)
            accuracy = accuracy + multilabel_accuracy(batch["privacy"], logits)
        count = float(len(self.adversaries))
        return total, {
            "logs": {"privacy_loss": total / count, "privacy_accuracy": accuracy / count},
            "non_trainable": states,
        }
