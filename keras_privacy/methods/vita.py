"""VITA: supervised adversarial anonymization with an ensemble of budget models (Wu et al.).

A batch is a dict of `clips` (B, T, H, W, 3), `labels` (B,), `images` (N, H, W, 3) and `privacy`
(N, A) binary labels of the images. One step makes, in order:

1. an f_A update on `L_T + gamma * budget_term`. The budget term (`budget_loss`):
   - `max_bce` (default, the authors' `adv_training.py`): every budget model sees the
     anonymized frames of the action clips; its logits are averaged over each clip's frames,
     then the sigmoid cross-entropy against all-ones targets is averaged over the attributes
     of each clip; the maximum over the ensemble is taken per clip, then the batch mean.
     All-ones targets push every attribute towards "present" (the authors' code calls them
     uniform labels); this is not an entropy maximum;
   - `entropy`: the same per-clip structure with the negative binary entropy of the clip's
     attribute probabilities (averaged over attributes) in place of the BCE: its minimum
     is the maximum uncertainty p = 0.5 (the authors' softmax form, `loss.py`, is for
     single-label budgets);
   - `image_max_bce` (this library's earlier form): BCE against all ones on the anonymized
     privacy images, the maximum over the ensemble of the batch means;
2. an f_T update on L_T, only while f_T's accuracy on the batch is under `action_threshold`;
3. one update per budget model on its BCE against the true labels of the privacy images,
   only while its accuracy on the batch is under `budget_threshold`.

The accuracies of 2 and 3 come from the forward pass of the update itself, on f_A's output after
update 1, so these updates are gated (computed every step, applied where the threshold says):
deciding them beforehand would need one more forward pass of f_A and of each model.

With `restart_every > 0` the budget models go back to their initial weights (and their
optimizer slots to zero) every that many steps, the restarts of the paper (the authors' code:
`--use_fb_restarting`, every `--restarting_step` = 200 steps, off by default).

Where this differs from the authors' loop (one `fit` step is one update of each player): their
f_T trains, after each f_A update, in a loop until its accuracy on validation videos reaches
0.7 (here: one gated update on the batch accuracy); the f_T update also moves f_A (at f_T's
learning rate, 1e-5; here f_T's update moves f_T alone); the budget models make 5 updates per
step, with no threshold (here one, gated); a restart reloads the pre-trained budget models and
trains them 200 more steps before the minimax goes on (here: back to the weights they had when
the trainer was compiled, with no extra steps); and their budget models run in training mode
(batch statistics) in the f_A update, here in inference mode.
"""

from __future__ import annotations

import keras
from keras import ops

from keras_privacy import losses
from keras_privacy.methods.engine import GroupValues, StatelessTrainer, Update, fold_time
from keras_privacy.methods.spact import action_logits

BUDGET_LOSSES = ("max_bce", "entropy", "image_max_bce")


def multilabel_accuracy(labels, logits):
    """Fraction of (example, attribute) entries whose thresholded prediction equals the label."""
    predicted = ops.cast(logits > 0, "float32")
    return ops.mean(ops.cast(ops.equal(predicted, ops.cast(labels, "float32")), "float32"))


def negative_entropy(logits):
    """sum p log p + (1 - p) log (1 - p) of sigmoid probabilities, entry by entry (max 0, min
    -log 2, at p = 0.5)."""
    p = ops.sigmoid(logits)
    eps = 1e-7
    return p * ops.log(p + eps) + (1 - p) * ops.log(1 - p + eps)


def bce_to_ones(logits):
    """Sigmoid cross-entropy of `logits` against all-ones targets, entry by entry."""
    return losses.binary_cross_entropy(ops.ones_like(logits), logits)


def clip_budget_term(frame_logits, clip_length, budget_loss: str = "max_bce"):
    """The budget term of the authors' VITA on the frames of B clips.

    `frame_logits` is a list (one per budget model) of (B * T, A) logits of the anonymized
    frames. Each model's logits are averaged over the T frames of a clip, the per-entry term
    (`max_bce`: BCE against ones; `entropy`: negative binary entropy) averaged over the
    attributes; the maximum over the models is taken per clip, then the mean over clips.
    """
    entry = bce_to_ones if budget_loss == "max_bce" else negative_entropy
    per_clip = []
    for logits in frame_logits:
        clips = ops.reshape(logits, (-1, clip_length, ops.shape(logits)[-1]))
        per_clip.append(ops.mean(entry(ops.mean(clips, axis=1)), axis=1))
    return ops.mean(ops.max(ops.stack(per_clip), axis=0))


@keras.saving.register_keras_serializable(package="keras_privacy")
class VITA(StatelessTrainer):
    """VITA's alternating updates of f_A, f_T and an ensemble of budget models.

    Args:
        anonymizer: f_A.
        action_model: f_T, clips -> action logits.
        budget_models: privacy classifiers, images -> (N, A) attribute logits.
        budget_weight: gamma (VITA: 0.5).
        budget_loss: "max_bce" (the authors'), "entropy" or "image_max_bce" (see above).
        action_threshold: f_T updates while its batch accuracy is below this (VITA: 0.7).
        budget_threshold: a budget model updates while its batch accuracy is below this.
        restart_every: restart the budget models every this many steps (0 = never).
        penalty_weight, penalty_budget: the penalty-driven term on the action clips.
    """

    log_names = (
        "action_loss",
        "action_accuracy",
        "budget_loss",
        "budget_accuracy",
        "anonymizer_budget_term",
        "penalty",
    )

    def __init__(
        self,
        anonymizer: keras.Model,
        action_model: keras.Model,
        budget_models: list[keras.Model],
        budget_weight: float = 0.5,
        budget_loss: str = "max_bce",
        action_threshold: float = 0.7,
        budget_threshold: float = 0.99,
        restart_every: int = 0,
        penalty_weight: float = 0.0,
        penalty_budget: float = 0.3,
        **kwargs,
    ):
        if budget_loss not in BUDGET_LOSSES:
            raise ValueError(f"budget_loss={budget_loss!r} is not one of {BUDGET_LOSSES}")
        if not budget_models:
            raise ValueError("VITA needs at least one budget model")
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.action_model = action_model
        self.budget_models = list(budget_models)
        self.budget_weight = budget_weight
        self.budget_loss = budget_loss
        self.action_threshold = action_threshold
        self.budget_threshold = budget_threshold
        self.restart_every = restart_every
        self.penalty_weight = penalty_weight
        self.penalty_budget = penalty_budget

    def groups(self) -> dict[str, keras.Model]:
        groups = {"anonymizer": self.anonymizer, "action": self.action_model}
        for i, model in enumerate(self.budget_models):
            groups[f"budget_{i}"] = model
        return groups

    @property
    def budget_groups(self) -> list[str]:
        """The optimizer group names of the budget models: `budget_0`, `budget_1`, ..."""
        return [f"budget_{i}" for i in range(len(self.budget_models))]

    def call(self, clips, training=False):
        frames = self.anonymizer(fold_time(clips), training=training)
        return self.action_model(ops.reshape(frames, ops.shape(clips)), training=training)

    def restart_groups(self) -> tuple[tuple[str, ...], int]:
        return tuple(self.budget_groups), self.restart_every

    def updates(self, data) -> list[Update]:
        updates = [
            Update(("anonymizer",), lambda values: self._anonymizer_loss(values, data)),
            Update(
                ("action",),
                lambda values: self._action_loss(values, data),
                gate=lambda logs: logs["action_accuracy"] < self.action_threshold,
            ),
        ]
        for group in self.budget_groups:
            updates.append(
                Update(
                    (group,),
                    lambda values, group=group: self._budget_loss(values, data, group),
                    gate=lambda logs: logs["budget_accuracy"] < self.budget_threshold,
                )
            )
        return updates

    def _anonymize(self, values, data, training):
        clips, images = data["clips"], data["images"]
        frames = fold_time(clips)
        count = ops.shape(frames)[0]
        outputs, state = self.run(
            "anonymizer", values, ops.concatenate([frames, images], axis=0), training=training
        )
        return outputs[:count], outputs[count:], state

    def _anonymizer_loss(self, values: GroupValues, data):
        clips = data["clips"]
        anon_frames, anon_images, state = self._anonymize(values, data, training=True)
        logits, _ = action_logits(self, values, anon_frames, ops.shape(clips)[1], training=False)
        action_loss = losses.softmax_cross_entropy(data["labels"], logits)
        if self.budget_loss == "image_max_bce":
            budget_term = ops.max(
                ops.stack(
                    [
                        ops.mean(bce_to_ones(self.run(group, values, anon_images, False)[0]))
                        for group in self.budget_groups
                    ]
                )
            )
        else:
            frame_logits = [
                self.run(group, values, anon_frames, training=False)[0]
                for group in self.budget_groups
            ]
            budget_term = clip_budget_term(frame_logits, ops.shape(clips)[1], self.budget_loss)
        penalty = losses.rms_penalty(
            clips, ops.reshape(anon_frames, ops.shape(clips)), self.penalty_budget
        )
        loss = action_loss + self.budget_weight * budget_term + self.penalty_weight * penalty
        return loss, {
            "logs": {"anonymizer_budget_term": budget_term, "penalty": penalty},
            "non_trainable": {"anonymizer": state},
        }

    def _action_loss(self, values, data):
        anon_frames, _, _ = self._anonymize(values, data, training=False)
        logits, state = action_logits(
            self, values, ops.stop_gradient(anon_frames), ops.shape(data["clips"])[1], True
        )
        loss = losses.softmax_cross_entropy(data["labels"], logits)
        return loss, {
            "logs": {
                "action_loss": loss,
                "action_accuracy": losses.accuracy(data["labels"], logits),
            },
            "non_trainable": {"action": state},
        }

    def _budget_loss(self, values, data, group):
        _, anon_images, _ = self._anonymize(values, data, training=False)
        logits, state = self.run(group, values, ops.stop_gradient(anon_images), training=True)
        loss = losses.masked_binary_cross_entropy(data["privacy"], logits)
        return loss, {
            "logs": {
                "budget_loss": loss,
                "budget_accuracy": multilabel_accuracy(data["privacy"], logits),
            },
            "non_trainable": {group: state},
        }

    def get_config(self) -> dict:
        return {
            "anonymizer": keras.saving.serialize_keras_object(self.anonymizer),
            "action_model": keras.saving.serialize_keras_object(self.action_model),
            "budget_models": [keras.saving.serialize_keras_object(m) for m in self.budget_models],
            "budget_weight": self.budget_weight,
            "budget_loss": self.budget_loss,
            "action_threshold": self.action_threshold,
            "budget_threshold": self.budget_threshold,
            "restart_every": self.restart_every,
            "penalty_weight": self.penalty_weight,
            "penalty_budget": self.penalty_budget,
        }

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        config["anonymizer"] = keras.saving.deserialize_keras_object(config["anonymizer"])
        config["action_model"] = keras.saving.deserialize_keras_object(config["action_model"])
        config["budget_models"] = [
            keras.saving.deserialize_keras_object(m) for m in config["budget_models"]
        ]
        return cls(**config)
