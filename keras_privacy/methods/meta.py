"""Joint attribute and model generalisation by virtual training and testing (NeurIPS 2023).

No public code exists; this follows the paper's Algorithm 1 (/shared/papers/003). A batch is a
dict of `clips`, `labels`, `images`, `privacy` (N, A) and the split of this iteration, made by
`split_masks` in the input pipeline so the step stays a pure function:

- `support_mask`, `query_mask` (N, A): which (image, attribute) labels each set may use. An
  attribute split (odd iterations) gives 60 % of the images to the support set with only the
  labels of Attr1 (60 % of the attributes, redrawn each epoch) and the rest to the query set
  with only the labels of Attr2; labels outside a set's mask are "not available" and count
  nowhere (masked BCE). A model split (even iterations) keeps every label in both sets.
- `support_models`, `query_models` (K,): which training attack models each set uses: all of
  them for an attribute split, a 60/40 split of them (redrawn each epoch) for a model split.

The privacy term of the anonymizer's loss on a set is minus the masked BCE of that set's attack
models (the anonymizer maximises their loss), so
`L(phi, D) = L_T + gamma * (-mean_k BCE_k)`. The meta update is
`phi <- phi - beta * grad(L(phi, S) + L(phi - alpha * grad L(phi, S), Q))`, second order by
default (nested gradients), first order with `first_order=True`.

Which player updates follows Algorithm 1, decided on the accuracies measured on the batch
before any update: f_T while its accuracy < T1 (70 %); else each attack model whose accuracy
< T2 (95 %); else the anonymizer's meta update. A first, parameter-free update measures those
accuracies and every player's update has a `condition` on them, so on an accelerator only the
selected updates are computed (`jax.lax.cond` / `tf.cond`); on a CPU under XLA, where a
conditional would slow the convolutions' gradients, the others are computed and discarded (see
`engine`). A player's logs are means over the steps that updated it: `action_loss` over the f_T
updates, `attack_loss` over the steps where an attack model updated (the last one that did),
the meta losses over the meta updates.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import ops

from keras_privacy import losses
from keras_privacy.methods.engine import (
    GroupValues,
    StatelessTrainer,
    Update,
    fold_time,
    value_and_gradient,
)
from keras_privacy.methods.spact import action_logits
from keras_privacy.methods.vita import multilabel_accuracy


def split_masks(
    rng: np.random.Generator,
    iteration: int,
    num_images: int,
    num_attributes: int,
    num_models: int,
    attribute_order: np.ndarray,
    model_order: np.ndarray,
    fraction: float = 0.6,
) -> dict[str, np.ndarray]:
    """Support/query masks of one iteration (see the module docstring).

    `attribute_order` and `model_order` are the epoch's random permutations: the first
    `fraction` of each is Attr1 / the support models. Odd iterations split attributes, even
    iterations split models, as Algorithm 1 alternates them.
    """
    if iteration % 2 == 1:
        attr1 = np.zeros(num_attributes, bool)
        attr1[attribute_order[: max(1, round(fraction * num_attributes))]] = True
        images = rng.permutation(num_images)
        support_images = np.zeros(num_images, bool)
        support_images[images[: max(1, round(fraction * num_images))]] = True
        support = support_images[:, None] & attr1[None, :]
        query = ~support_images[:, None] & ~attr1[None, :]
        models = np.ones(num_models, bool)
        return {
            "support_mask": support.astype("float32"),
            "query_mask": query.astype("float32"),
            "support_models": models.astype("float32"),
            "query_models": models.astype("float32"),
        }
    support_models = np.zeros(num_models, bool)
    support_models[model_order[: max(1, round(fraction * num_models))]] = True
    if num_models > 1 and support_models.all():
        support_models[model_order[-1]] = False
    everything = np.ones((num_images, num_attributes), "float32")
    return {
        "support_mask": everything,
        "query_mask": everything,
        "support_models": support_models.astype("float32"),
        "query_models": (~support_models if num_models > 1 else support_models).astype("float32"),
    }


def epoch_splits(
    seed: int,
    epoch: int,
    steps: int,
    num_images: int,
    num_attributes: int,
    num_models: int,
    fraction: float = 0.6,
) -> dict[str, np.ndarray]:
    """The `split_masks` of every iteration of one epoch, stacked on a leading (steps,) axis.

    The attribute and model orders are drawn once per epoch (Algorithm 1), from a generator
    seeded by (seed, epoch), so a resumed run sees the same splits."""
    rng = np.random.default_rng([seed, epoch])
    attribute_order = rng.permutation(num_attributes)
    model_order = rng.permutation(num_models)
    per_step = [
        split_masks(
            rng,
            epoch * steps + step + 1,
            num_images,
            num_attributes,
            num_models,
            attribute_order,
            model_order,
            fraction,
        )
        for step in range(steps)
    ]
    return {key: np.stack([masks[key] for masks in per_step]) for key in per_step[0]}


@keras.saving.register_keras_serializable(package="keras_privacy")
class MetaGeneralization(StatelessTrainer):
    """Algorithm 1 of the meta-generalisation paper over f_A, f_T and K attack models.

    Args:
        anonymizer: f_A (phi).
        action_model: f_T.
        attack_models: the training attack models (paper: MobileNet-V2 at 8 widths).
        privacy_weight: gamma of the privacy term.
        alpha: virtual-training step size (paper: 5e-4).
        first_order: drop the second-order term of the meta-gradient.
        action_threshold: T1 (0.7).
        attack_threshold: T2 (0.95).
    The meta step size beta is the learning rate of the anonymizer's optimizer (SGD, 1e-4).
    """

    log_names = (
        "action_loss",
        "action_accuracy",
        "attack_loss",
        "attack_accuracy",
        "meta_train_loss",
        "meta_test_loss",
    )

    def __init__(
        self,
        anonymizer: keras.Model,
        action_model: keras.Model,
        attack_models: list[keras.Model],
        privacy_weight: float = 1.0,
        alpha: float = 5e-4,
        first_order: bool = False,
        action_threshold: float = 0.7,
        attack_threshold: float = 0.95,
        **kwargs,
    ):
        if not attack_models:
            raise ValueError("meta generalisation needs at least one attack model")
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.action_model = action_model
        self.attack_models = list(attack_models)
        self.privacy_weight = privacy_weight
        self.alpha = alpha
        self.first_order = first_order
        self.action_threshold = action_threshold
        self.attack_threshold = attack_threshold

    @property
    def attack_groups(self) -> list[str]:
        """The optimizer group names of the attack models: `attack_0`, `attack_1`, ..."""
        return [f"attack_{i}" for i in range(len(self.attack_models))]

    def groups(self) -> dict[str, keras.Model]:
        groups = {"anonymizer": self.anonymizer, "action": self.action_model}
        groups.update(zip(self.attack_groups, self.attack_models))
        return groups

    def call(self, clips, training=False):
        frames = self.anonymizer(fold_time(clips), training=training)
        return self.action_model(ops.reshape(frames, ops.shape(clips)), training=training)

    def updates(self, data) -> list[Update]:
        T1, T2 = self.action_threshold, self.attack_threshold
        updates = [
            Update((), lambda values: self._measure(values, data)),
            Update(
                ("action",),
                lambda values: self._action_loss(values, data),
                condition=lambda logs: logs["measured_action_accuracy"] < T1,
            ),
        ]
        for i, group in enumerate(self.attack_groups):
            updates.append(
                Update(
                    (group,),
                    lambda values, group=group: self._attack_loss(values, data, group),
                    condition=lambda logs, i=i: (
                        (logs["measured_action_accuracy"] >= T1)
                        & (logs["measured_attack_accuracies"][i] < T2)
                    ),
                )
            )
        updates.append(
            Update(
                ("anonymizer",),
                lambda values: self._meta_loss(values, data),
                condition=lambda logs: (
                    (logs["measured_action_accuracy"] >= T1)
                    & (ops.min(logs["measured_attack_accuracies"]) >= T2)
                ),
            )
        )
        return updates

    def _anonymize(self, values, data, training=False):
        frames = fold_time(data["clips"])
        count = ops.shape(frames)[0]
        outputs, state = self.run(
            "anonymizer", values, ops.concatenate([frames, data["images"]], 0), training
        )
        return outputs[:count], outputs[count:], state

    def _measure(self, values, data):
        anon_frames, anon_images, _ = self._anonymize(values, data)
        logits, _ = action_logits(self, values, anon_frames, ops.shape(data["clips"])[1], False)
        accuracies = [
            multilabel_accuracy(data["privacy"], self.run(g, values, anon_images)[0])
            for g in self.attack_groups
        ]
        return ops.zeros(()), {
            "logs": {
                "measured_action_accuracy": losses.accuracy(data["labels"], logits),
                "measured_attack_accuracies": ops.stack(accuracies),
            }
        }

    def _action_loss(self, values, data):
        anon_frames, _, _ = self._anonymize(values, data)
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

    def _attack_loss(self, values, data, group):
        _, anon_images, _ = self._anonymize(values, data)
        logits, state = self.run(group, values, ops.stop_gradient(anon_images), training=True)
        loss = losses.masked_binary_cross_entropy(data["privacy"], logits)
        return loss, {
            "logs": {
                "attack_loss": loss,
                "attack_accuracy": multilabel_accuracy(data["privacy"], logits),
            },
            "non_trainable": {group: state},
        }

    def anonymizer_loss(self, values: GroupValues, data, label_mask, model_mask):
        """L(phi, D): action loss minus gamma times the masked BCE of D's attack models."""
        anon_frames, anon_images, state = self._anonymize(values, data, training=True)
        logits, _ = action_logits(self, values, anon_frames, ops.shape(data["clips"])[1], False)
        action_loss = losses.softmax_cross_entropy(data["labels"], logits)
        attack_losses = ops.stack(
            [
                losses.masked_binary_cross_entropy(
                    data["privacy"], self.run(g, values, anon_images)[0], label_mask
                )
                for g in self.attack_groups
            ]
        )
        attack_term = ops.sum(attack_losses * model_mask) / ops.maximum(ops.sum(model_mask), 1.0)
        return action_loss - self.privacy_weight * attack_term, state

    def meta_objective(self, values: GroupValues, data):
        """L(phi, S) + L(phi - alpha * grad L(phi, S), Q) and the parts of it."""
        phi = values["anonymizer"][0]

        def support_loss(params):
            loss, _ = self.anonymizer_loss(
                _replace(values, params), data, data["support_mask"], data["support_models"]
            )
            return loss

        train_loss, grads = value_and_gradient(support_loss, phi)
        if self.first_order:
            grads = [ops.stop_gradient(g) for g in grads]
        adapted = [p - self.alpha * g for p, g in zip(phi, grads)]
        test_loss, state = self.anonymizer_loss(
            _replace(values, adapted), data, data["query_mask"], data["query_models"]
        )
        return train_loss + test_loss, train_loss, test_loss, state

    def _meta_loss(self, values, data):
        loss, train_loss, test_loss, state = self.meta_objective(values, data)
        return loss, {
            "logs": {"meta_train_loss": train_loss, "meta_test_loss": test_loss},
            "non_trainable": {"anonymizer": state},
        }

    def get_config(self) -> dict:
        return {
            "anonymizer": keras.saving.serialize_keras_object(self.anonymizer),
            "action_model": keras.saving.serialize_keras_object(self.action_model),
            "attack_models": [keras.saving.serialize_keras_object(m) for m in self.attack_models],
            "privacy_weight": self.privacy_weight,
            "alpha": self.alpha,
            "first_order": self.first_order,
            "action_threshold": self.action_threshold,
            "attack_threshold": self.attack_threshold,
        }

    @classmethod
    def from_config(cls, config: dict):
        config = dict(config)
        config["anonymizer"] = keras.saving.deserialize_keras_object(config["anonymizer"])
        config["action_model"] = keras.saving.deserialize_keras_object(config["action_model"])
        config["attack_models"] = [
            keras.saving.deserialize_keras_object(m) for m in config["attack_models"]
        ]
        return cls(**config)


def _replace(values: GroupValues, anonymizer_params: list) -> GroupValues:
    values = dict(values)
    values["anonymizer"] = (anonymizer_params, values["anonymizer"][1])
    return values
