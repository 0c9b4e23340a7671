"""VITA: supervised adversarial anonymization with an ensemble of budget models (Wu et al.).

A batch is a dict of `clips` (B, T, H, W, 3), `labels` (B,), `images` (N * P, H, W, 3) and
`privacy` (N * P, A) binary labels of the images (N = `budget_updates` batches of P images),
and, for the `validation_loop` schedule, `validation_clips` and `validation_labels`: a batch
of held-out action clips. With `action_fresh_clips` the held-out clips are K batches, one for
each accuracy check the loop may make, and the batch also has `action_clips` (K * B, T, H, W, 3)
and `action_labels` (K * B,): K more batches of training clips, one for each f_T update the
loop may make (K = `action_max_updates`). One step follows the authors' `adv_training.py`
(VITA-Group/Privacy-AdversarialLearning, PA-HMDB51-VISPR-exp/adversarial_training/adv_training/,
lines cited at commit 939ca4a):

1. one f_A update on `L_T + gamma * budget_term` (:387). The budget term (`budget_loss`):
   - `max_bce` (default, the authors', :64-79): every budget model sees the anonymized frames
     of the action clips; its logits are averaged over each clip's frames, then the sigmoid
     cross-entropy against all-ones targets is averaged over the attributes of each clip; the
     maximum over the ensemble is taken per clip, then the batch mean. All-ones targets push
     every attribute towards "present" (the authors' code calls them uniform labels); this is
     not an entropy maximum;
   - `entropy`: the same per-clip structure with the negative binary entropy of the clip's
     attribute probabilities (averaged over attributes) in place of the BCE: its minimum
     is the maximum uncertainty p = 0.5 (the authors' softmax form, `loss.py`, is for
     single-label budgets);
   - `image_max_bce` (this library's earlier form): BCE against all ones on the anonymized
     privacy images, the maximum over the ensemble of the batch means.
   f_A runs on what its budget term reads: the clips' frames alone (`max_bce`, `entropy`; the
   authors' f_d loss reads fd(videos) only, :32, :81), or the frames and the first privacy
   batch's images in one batch (`image_max_bce`);
2. f_T updates (`action_schedule`):
   - `validation_loop` (the authors', :393-406): f_T's accuracy on the validation clips is
     measured; while it is below `action_threshold`, f_T makes an update on training clips
     and the accuracy is measured again, at most `action_max_updates` updates (the authors'
     loop has no bound; one step must have a fixed size). The step logs how many ran
     (`action_updates`) and the last accuracy measured (`action_validation_accuracy`).
     Each of the authors' f_T updates takes a fresh training batch (`update_fT`, :268-283,
     reads its mini-batches from the training queue, :402-404), and each accuracy check a
     fresh validation batch (`eval_fT`, :289-309, from the validation queue, :394-396): with
     `action_fresh_clips` the k-th update takes the k-th batch of `action_clips` and the k-th
     check the k-th batch of `validation_clips`; without it every update takes the step's
     `clips` and every check all the `validation_clips`;
   - `batch_gate` (this library's earlier form): one update, applied while f_T's accuracy on
     the training batch (from the update's own forward pass) is below `action_threshold`.
   With `action_moves_anonymizer` (the authors', :149, :170) the f_T update also moves f_A,
   with an Adam of its own (the `anonymizer_by_action` optimizer: f_T's learning rate);
3. `budget_updates` updates of every budget model (the authors: 5, no threshold, :409-413),
   the n-th on the n-th P images of the batch, on its BCE against the images' true labels;
   with `budget_threshold` an update is applied only while the model's accuracy on its images
   is below it.

Restarts (:370-386): the first `budget_pretrain_updates / budget_updates` steps of the minimax
make only the budget-model updates of 3 (f_A and f_T are not updated), and with
`restart_every > 0` the budget models go back to their initial weights (those they had when
the trainer was compiled, kept in `restart_snapshot`) after every
`restart_every` such minimax steps (their Adam state goes on: the authors' Saver restores the
weights alone, :89, 371), then re-train as many steps again before the minimax goes on: the
authors restore their pre-trained budget models and train them `--pretraining_steps_fb` = 200
updates at step 0 and at every restart (`--use_fb_restarting`, every `--restarting_step` = 200
steps, off by default). A resumed run's restarts go back to the same weights: checkpoints keep
them (`StatelessTrainer.restart_snapshot`), where the authors reload their pre-trained file.

With `budget_batch_statistics` (the authors') the budget models normalise by the batch's own
statistics in the f_A update, as everywhere in their minimax (`is_training` is fed True at
:258; their moving averages are never updated, the accumulators run no UPDATE_OPS, :168-170);
without it they run in inference mode there, as SPAct's f_B.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import keras
from keras import ops

from keras_privacy import losses
from keras_privacy.methods.steps import (
    action_logits,
    action_update_loss,
    as_model_list,
    fold_time,
    multilabel_accuracy,
)
from keras_privacy.methods.trainer import (
    GroupValues,
    StatelessTrainer,
    Update,
    deserialize_models,
    serialize_models,
)
from keras_privacy.spelling import spell
from keras_privacy.types import Tensor

BUDGET_LOSSES = ("max_bce", "entropy", "image_max_bce")
ACTION_SCHEDULES = ("validation_loop", "batch_gate")


def budget_only_steps(budget_pretrain_updates: int, budget_updates: int) -> int:
    """The steps of budget-model updates alone at the start of the minimax and after each
    restart: `budget_pretrain_updates` updates, `budget_updates` a step."""
    return budget_pretrain_updates // budget_updates


def negative_entropy(logits: Tensor) -> Tensor:
    """sum p log p + (1 - p) log (1 - p) of sigmoid probabilities, entry by entry (max 0, min
    -log 2, at p = 0.5)."""
    p = ops.sigmoid(logits)
    eps = 1e-7
    return p * ops.log(p + eps) + (1 - p) * ops.log(1 - p + eps)


def bce_to_ones(logits: Tensor) -> Tensor:
    """Sigmoid cross-entropy of `logits` against all-ones targets, entry by entry."""
    return losses.binary_cross_entropy(ops.ones_like(logits), logits)


def clip_budget_term(
    frame_logits: Sequence[Tensor], clip_length: int, budget_loss: str = "max_bce"
) -> Tensor:
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
        budget_models: privacy classifiers, images -> (N, A) attribute logits (one, or a list).
        budget_weight: gamma (VITA: 0.5).
        budget_batch_statistics: in the f_A update, the budget models' batch normalisation
            uses the anonymized batch's statistics (the authors'), their moving averages left
            as they are; False: inference mode.
        budget_loss: "max_bce" (the authors'), "entropy" or "image_max_bce" (see above).
        action_schedule: "validation_loop" (the authors') or "batch_gate" (see above).
        action_threshold: f_T's accuracy below which it updates (VITA: 0.7).
        action_max_updates: the bound of the `validation_loop`'s f_T updates in one step.
        action_fresh_clips: each `validation_loop` f_T update and accuracy check on a batch
            of its own, from the batch's `action_clips` and `validation_clips` (the authors');
            False: every update on the step's `clips`, every check on all the
            `validation_clips`.
        action_moves_anonymizer: whether f_T's updates also move f_A (the authors' do), with
            the `anonymizer_by_action` optimizer.
        budget_updates: updates of every budget model per step (VITA: 5).
        budget_threshold: a budget update is applied only while the model's accuracy is below
            this (None: always, as the authors).
        restart_every: restart the budget models after every this many minimax steps (0 =
            never).
        budget_pretrain_updates: budget-model updates (a multiple of `budget_updates`) at the
            start of the minimax and after each restart, before f_A and f_T update again
            (VITA: 200).
        penalty_weight, penalty_budget: the penalty-driven term on the action clips.
    """

    log_names = (
        "action_loss",
        "action_accuracy",
        "action_validation_accuracy",
        "action_updates",
        "budget_loss",
        "budget_accuracy",
        "anonymizer_budget_term",
        "penalty",
    )

    def __init__(
        self,
        anonymizer: keras.Model,
        action_model: keras.Model,
        budget_models: keras.Model | Sequence[keras.Model],
        budget_weight: float = 0.5,
        budget_batch_statistics: bool = True,
        budget_loss: str = "max_bce",
        action_schedule: str = "validation_loop",
        action_threshold: float = 0.7,
        action_max_updates: int = 5,
        action_fresh_clips: bool = False,
        action_moves_anonymizer: bool = True,
        budget_updates: int = 5,
        budget_threshold: float | None = None,
        restart_every: int = 0,
        budget_pretrain_updates: int = 0,
        penalty_weight: float = 0.0,
        penalty_budget: float = 0.3,
        **kwargs,
    ):
        if budget_loss not in BUDGET_LOSSES:
            raise ValueError(f"budget_loss={budget_loss!r} is not one of {BUDGET_LOSSES}")
        if action_schedule not in ACTION_SCHEDULES:
            raise ValueError(
                f"action_schedule={action_schedule!r} is not one of {ACTION_SCHEDULES}"
            )
        if not budget_models:
            raise ValueError("VITA needs at least one budget model")
        if action_max_updates < 1 or budget_updates < 1:
            raise ValueError("action_max_updates and budget_updates must be at least 1")
        if action_fresh_clips and action_schedule != "validation_loop":
            raise ValueError(
                "action_fresh_clips needs action_schedule='validation_loop' (the batch_gate "
                "makes its one f_T update on the step's clips)"
            )
        if budget_pretrain_updates < 0 or budget_pretrain_updates % budget_updates:
            raise ValueError(
                f"budget_pretrain_updates={budget_pretrain_updates} must be a non-negative "
                f"multiple of budget_updates={budget_updates} (each step makes that many)"
            )
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.action_model = action_model
        self.budget_models = as_model_list(budget_models)
        self.budget_weight = budget_weight
        self.budget_batch_statistics = budget_batch_statistics
        self.budget_loss = budget_loss
        self.action_schedule = action_schedule
        self.action_threshold = action_threshold
        self.action_max_updates = action_max_updates
        self.action_fresh_clips = action_fresh_clips
        self.action_moves_anonymizer = action_moves_anonymizer
        self.budget_updates = budget_updates
        self.budget_threshold = budget_threshold
        self.restart_every = restart_every
        self.budget_pretrain_updates = budget_pretrain_updates
        self.penalty_weight = penalty_weight
        self.penalty_budget = penalty_budget
        if action_schedule == "batch_gate":
            # the gate reads the training batch's accuracy: no validation accuracy is measured
            self._stop_logging("action_validation_accuracy")
        self._make_restart_snapshot()

    def groups(self) -> dict[str, keras.Model]:
        groups = {"anonymizer": self.anonymizer, "action": self.action_model}
        for i, model in enumerate(self.budget_models):
            groups[f"budget_{i}"] = model
        return groups

    def optimizer_groups(self) -> dict[str, str]:
        return {"anonymizer_by_action": "anonymizer"} if self.action_moves_anonymizer else {}

    def privacy_classifiers(self) -> dict[str, keras.Model]:
        return dict(zip(self.budget_groups, self.budget_models))

    def compile(
        self, optimizers: Mapping[str, keras.optimizers.Optimizer] | None = None, **kwargs: Any
    ) -> None:
        missing = isinstance(optimizers, Mapping) and "anonymizer_by_action" not in optimizers
        if self.action_moves_anonymizer and missing:
            raise ValueError(
                "VITA with action_moves_anonymizer needs an 'anonymizer_by_action' optimizer "
                "(f_T's update moves f_A with it; the authors: Adam at f_T's rate)"
            )
        super().compile(optimizers, **kwargs)

    @property
    def budget_groups(self) -> list[str]:
        """The optimizer group names of the budget models: `budget_0`, `budget_1`, ..."""
        return [f"budget_{i}" for i in range(len(self.budget_models))]

    @property
    def pretrain_steps(self) -> int:
        """Steps of budget updates alone at the start of the minimax and after a restart."""
        return budget_only_steps(self.budget_pretrain_updates, self.budget_updates)

    def call(self, clips, training=False):
        frames = self.anonymizer(fold_time(clips), training=training)
        return self.action_model(ops.reshape(frames, ops.shape(clips)), training=training)

    def restart_groups(self) -> tuple[tuple[str, ...], int]:
        every = self.restart_every + self.pretrain_steps if self.restart_every > 0 else 0
        return tuple(self.budget_groups), every

    def step_logs(self, logs: Mapping[str, Tensor]) -> dict:
        if self.action_schedule == "batch_gate":
            ran = logs["action_update_0"] * ops.cast(self._action_gate(logs), "float32")
            return {"action_updates": ran}
        ran = [logs[f"action_update_{i}"] for i in range(self.action_max_updates)]
        return {"action_updates": ops.sum(ops.stack(ran))}

    def epoch_warnings(self, before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
        """A warning where every minimax step of the epoch made all `action_max_updates` f_T
        updates: f_T's held-out accuracy never reached `action_threshold`, so the loop ran to
        its bound each time, and with `action_moves_anonymizer` each update moved f_A too. The
        authors' 0.7 suits their f_T (C3D from Sports-1M weights); a weaker f_T never reaches
        it, and the f_A steps that serve the action alone then outnumber the adversarial ones
        `action_max_updates` to one."""
        if self.action_schedule != "validation_loop":
            return []
        steps = after.get("anonymizer", 0) - before.get("anonymizer", 0)
        updates = after.get("action", 0) - before.get("action", 0)
        if steps == 0 or updates < self.action_max_updates * steps:
            return []
        return [
            spell(
                f"f_T's accuracy on the held-out clips stayed below <action_threshold>="
                f"{self.action_threshold:g} in every one of the epoch's {steps} minimax steps: "
                f"each made all <action_max_updates>={self.action_max_updates} f_T updates"
                + (", each also moving f_A" if self.action_moves_anonymizer else "")
                + "; an f_T that cannot reach the threshold (the authors' C3D from Sports-1M "
                "weights did) keeps the loop at its bound: lower <action_threshold> towards "
                "f_T's held-out accuracy after <action_init_epochs>, or keep it knowingly"
            )
        ]

    def _minimax_step(self):
        """Whether this step updates f_A and f_T (a boolean scalar), or None for every step:
        False in the budget-only steps that follow the minimax's start and each restart."""
        if self.pretrain_steps == 0:
            return None
        every = self.restart_groups()[1]
        position = self.step_count % every if every > 0 else self.step_count
        return position >= self.pretrain_steps

    def _action_gate(self, logs):
        return logs["action_accuracy"] < self.action_threshold

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        minimax = self._minimax_step()

        def both(condition):
            """`condition` (a function of the logs) also holding only in minimax steps."""
            if minimax is None:
                return condition
            if condition is None:
                return lambda logs: minimax
            return lambda logs: ops.logical_and(minimax, condition(logs))

        updates = [
            Update(
                ("anonymizer",),
                lambda values: self._anonymizer_loss(values, data),
                condition=both(None),
            )
        ]
        action_groups = ("action", "anonymizer") if self.action_moves_anonymizer else ("action",)
        by_action = {"anonymizer": "anonymizer_by_action"} if self.action_moves_anonymizer else {}
        if self.action_schedule == "batch_gate":
            updates.append(
                Update(
                    action_groups,
                    lambda values: self._action_loss(values, data, 0),
                    gate=self._action_gate,
                    condition=both(None),
                    optimizers=by_action,
                )
            )
        else:

            def below(logs):
                return logs["action_validation_accuracy"] < self.action_threshold

            for i in range(self.action_max_updates):
                updates.append(
                    Update(
                        (),
                        lambda values, i=i: self._validation_accuracy(values, data, i),
                        condition=both(None if i == 0 else below),
                    )
                )
                updates.append(
                    Update(
                        action_groups,
                        lambda values, i=i: self._action_loss(values, data, i),
                        condition=both(below),
                        optimizers=by_action,
                    )
                )
        gate = None
        if self.budget_threshold is not None:

            def gate(logs):
                return logs["budget_accuracy"] < self.budget_threshold

        for n in range(self.budget_updates):
            for group in self.budget_groups:
                updates.append(
                    Update(
                        (group,),
                        lambda values, group=group, n=n: self._budget_loss(values, data, group, n),
                        gate=gate,
                    )
                )
        return updates

    def _privacy_batch(self, data, n: int):
        """The n-th of the `budget_updates` image batches of the step, and their labels."""
        size = ops.shape(data["images"])[0] // self.budget_updates
        return data["images"][n * size : (n + 1) * size], data["privacy"][n * size : (n + 1) * size]

    def _anonymizer_loss(self, values: GroupValues, data):
        clips = data["clips"]
        frames = fold_time(clips)
        # With batch statistics the budget models' new moving averages are dropped: only
        # f_A's state is returned.
        batch_statistics = self.budget_batch_statistics
        if self.budget_loss == "image_max_bce":
            # One f_A pass over the frames and the first privacy batch's images.
            images, _ = self._privacy_batch(data, 0)
            count = ops.shape(frames)[0]
            outputs, state = self.run(
                "anonymizer", values, ops.concatenate([frames, images], axis=0), training=True
            )
            anon_frames, anon_images = outputs[:count], outputs[count:]
            budget_term = ops.max(
                ops.stack(
                    [
                        ops.mean(
                            bce_to_ones(self.run(group, values, anon_images, batch_statistics)[0])
                        )
                        for group in self.budget_groups
                    ]
                )
            )
        else:
            # The budget term reads the clips' frames alone, so f_A runs on them alone: the
            # authors' f_d loss reads fd(videos) only (adv_training.py:32, 81), fd(images)
            # feeds the budget models' own loss (:42). One batch with the images would cost
            # their pass and, for an f_A with BatchNorm, mix their statistics into the frames'.
            anon_frames, state = self.run("anonymizer", values, frames, training=True)
            frame_logits = [
                self.run(group, values, anon_frames, training=batch_statistics)[0]
                for group in self.budget_groups
            ]
            budget_term = clip_budget_term(frame_logits, ops.shape(clips)[1], self.budget_loss)
        logits, _ = action_logits(self, values, anon_frames, ops.shape(clips)[1], training=False)
        action_loss = losses.softmax_cross_entropy(data["labels"], logits)
        penalty = losses.rms_penalty(
            clips, ops.reshape(anon_frames, ops.shape(clips)), self.penalty_budget
        )
        loss = action_loss + self.budget_weight * budget_term + self.penalty_weight * penalty
        return loss, {
            "logs": {"anonymizer_budget_term": budget_term, "penalty": penalty},
            "non_trainable": {"anonymizer": state},
        }

    def _action_batch(self, data, index: int):
        """The clips and labels of the `index`-th f_T update: the `index`-th batch of
        `action_clips` with `action_fresh_clips`, else the step's clips."""
        if not self.action_fresh_clips:
            return data["clips"], data["labels"]
        return self._fresh_batch(data, "action", index)

    def _validation_batch(self, data, index: int):
        """The held-out clips and labels of the `index`-th accuracy check: the `index`-th
        batch of `validation_clips` with `action_fresh_clips`, else all of them."""
        if not self.action_fresh_clips:
            _require(
                data,
                ("validation_clips", "validation_labels"),
                "VITA's validation_loop",
                "validation=True",
            )
            return data["validation_clips"], data["validation_labels"]
        return self._fresh_batch(data, "validation", index)

    def _fresh_batch(self, data, kind: str, index: int):
        """The `index`-th batch (of the step's batch size) of `<kind>_clips` and
        `<kind>_labels`, which hold one batch for each of the loop's `action_max_updates`."""
        clips_key, labels_key = f"{kind}_clips", f"{kind}_labels"
        _require(
            data,
            (clips_key, labels_key),
            f"VITA with action_fresh_clips, which takes each {kind} batch of the loop from them "
            "(action_max_updates batches of clips),",
            "validation=True" if kind == "validation" else "action_batches=action_max_updates",
        )
        size = ops.shape(data["clips"])[0]
        count = ops.shape(data[clips_key])[0]
        if (
            isinstance(size, int)
            and isinstance(count, int)
            and count < self.action_max_updates * size
        ):
            raise ValueError(
                f"VITA with action_fresh_clips needs action_max_updates={self.action_max_updates} "
                f"batches of {size} clips in '{clips_key}', got {count} clips"
            )
        part = slice(index * size, (index + 1) * size)
        return data[clips_key][part], data[labels_key][part]

    def _action_loss(self, values, data, index: int):
        """L_T of f_T on f_A's training clips (`_action_batch`); back-propagated into f_A where
        f_T's update moves it. Logs `action_update_<index>` = 1, to count the updates that
        ran."""
        clips, labels = self._action_batch(data, index)
        anon_frames, state = self.run(
            "anonymizer", values, fold_time(clips), training=self.action_moves_anonymizer
        )
        if not self.action_moves_anonymizer:
            anon_frames = ops.stop_gradient(anon_frames)
        loss, aux = action_update_loss(self, values, anon_frames, ops.shape(clips)[1], labels)
        aux["logs"][f"action_update_{index}"] = ops.ones(())
        if self.action_moves_anonymizer:
            aux["non_trainable"]["anonymizer"] = state
        return loss, aux

    def _validation_accuracy(self, values, data, index: int):
        """f_T's accuracy on f_A's held-out clips of the `index`-th check (inference mode);
        changes nothing."""
        clips, labels = self._validation_batch(data, index)
        anon_frames, _ = self.run("anonymizer", values, fold_time(clips), training=False)
        logits, _ = action_logits(self, values, anon_frames, ops.shape(clips)[1], False)
        accuracy = losses.accuracy(labels, logits)
        return ops.zeros(()), {"logs": {"action_validation_accuracy": accuracy}}

    def _budget_loss(self, values, data, group, n: int):
        images, privacy = self._privacy_batch(data, n)
        anon_images, _ = self.run("anonymizer", values, images, training=False)
        logits, state = self.run(group, values, ops.stop_gradient(anon_images), training=True)
        loss = losses.masked_binary_cross_entropy(privacy, logits)
        return loss, {
            "logs": {
                "budget_loss": loss,
                "budget_accuracy": multilabel_accuracy(privacy, logits),
            },
            "non_trainable": {group: state},
        }

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "action_model": serialize_models(self.action_model),
            "budget_models": serialize_models(self.budget_models),
            "budget_weight": self.budget_weight,
            "budget_batch_statistics": self.budget_batch_statistics,
            "budget_loss": self.budget_loss,
            "action_schedule": self.action_schedule,
            "action_threshold": self.action_threshold,
            "action_max_updates": self.action_max_updates,
            "action_fresh_clips": self.action_fresh_clips,
            "action_moves_anonymizer": self.action_moves_anonymizer,
            "budget_updates": self.budget_updates,
            "budget_threshold": self.budget_threshold,
            "restart_every": self.restart_every,
            "budget_pretrain_updates": self.budget_pretrain_updates,
            "penalty_weight": self.penalty_weight,
            "penalty_budget": self.penalty_budget,
        }

    @classmethod
    def from_config(cls, config: dict) -> VITA:
        return cls(**deserialize_models(config, "anonymizer", "action_model", "budget_models"))


def _require(data: Mapping[str, Tensor], keys: tuple[str, ...], reader: str, source: str) -> None:
    """Refuse a batch without `keys`, naming them, the `reader` that needs them and the
    `TrainingData.dataset` argument that adds them (`source`)."""
    if any(key not in data for key in keys):
        raise ValueError(
            f"{reader} reads the batch's {' and '.join(repr(k) for k in keys)}, which this "
            f"batch lacks (it has {', '.join(sorted(data))}): "
            f"keras_privacy.data.sources.TrainingData.dataset({source}) adds them"
        )
