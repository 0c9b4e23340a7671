"""Joint attribute and model generalisation by virtual training and testing (NeurIPS 2023).

No public code exists; this follows Algorithm 1 and Sec. 4 of the supplement
(/shared/papers/003). A batch is a dict of `clips`, `labels`, `images`, `privacy` (N, A) and the
epoch's split, drawn in the input pipeline by `epoch_splits` (it needs no labels):

- `attribute_split` (A,): 1 for Attr1 (60 % of the attributes), 0 for Attr2, drawn each epoch;
- `sample_keys` (N,): uniform keys that choose which mixed samples go to X1;
- `support_models`, `query_models` (K,): a 60/40 split of the training attack models, drawn
  each epoch.

Which split an anonymizer update uses follows Algorithm 1's meta-iteration counter I: reset to
0 at the start of every epoch, advanced by every meta update (not by the f_T or attack-model
updates); an odd I splits attributes, an even I splits models, so every epoch's first meta
update splits models. The counter is the non-trainable state of the group `meta_iteration`
(`MetaIteration`), which `fit` carries on both backends; `reset_metrics`, which Keras calls at
the start of every epoch, puts it back to 0.

- Attribute split (`attribute_masks`, supplement Sec. 4 steps 1-5): the samples whose positive
  labels all lie in Attr1 form X1 (support) and keep only their Attr1 labels; those whose
  positives all lie in Attr2 form X2 (query) with only their Attr2 labels; of the mixed samples
  (positives in both groups) 60 % go to X1 with their Attr2 labels masked, the rest to X2 with
  their Attr1 labels masked. Every attack model serves both sets.
- Model split: every label in both sets; the support set's attack models are `support_models`,
  the query set's `query_models`.

Masked labels are "not available" and count nowhere (masked BCE). The privacy term of the
anonymizer's loss on a set is minus the masked BCE of that set's attack models (the anonymizer
maximises their loss), so `L(phi, D) = L_T + gamma * (-mean_k BCE_k)`. The meta update is
`phi <- phi - beta * grad(L(phi, S) + L(phi - alpha * grad L(phi, S), Q))`, second order by
default, first order with `first_order=True`. Its gradient is computed in three passes that
never overlap (`meta_gradient`: g_S, g_Q at the adapted phi', then the Hessian-vector product
H_S g_Q): the nested gradient of `meta_objective` to float rounding, faster to compile and run
on JAX (`docs/memory.md`). On JAX these passes recompute f_A block by block instead of storing
its activations (`recompute_anonymizer`, `models.segments`).

Which player updates follows Algorithm 1, decided on the accuracies measured on the batch before
any update: f_T while its accuracy < T1 (70 %); else each attack model whose accuracy < T2 (95
%); else the anonymizer's meta update. A first, parameter-free update measures those accuracies
and every player's update has a `condition` on them. JAX decides them on the host and compiles
one step per player (the updates' `branch`: `action`, `attack`, `anonymizer`), so no program
holds all three; TensorFlow computes only the selected updates on an accelerator (`tf.cond`) and
computes the others and discards them on a CPU under XLA, where a conditional would slow the
convolutions' gradients (see `trainer`). A player's logs are means over the steps that updated it:
`action_loss` over the f_T updates, `attack_loss` over the steps where an attack model updated
(the last one that did), the meta losses and `attribute_split` (1 for an attribute split, 0 for
a model split) over the meta updates. A player that never updated in an epoch logs 0 there, so
every step also logs how often each player updated: `action_updates` and `meta_updates` (the
share of steps), `attack_updates` (attack models updated per step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np
from keras import ops

from keras_privacy import losses
from keras_privacy.backend import checkpoint, hessian_vector_product, value_and_gradient
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
from keras_privacy.models.segments import Segment, block_ends, functional_segments, run_segments
from keras_privacy.types import Tensor


def attribute_masks(
    privacy: Tensor, attribute_split: Tensor, sample_keys: Tensor, fraction: float = 0.6
) -> tuple[Tensor, Tensor]:
    """The support and query label masks (N, A) of an attribute split (supplement Sec. 4).

    X1 (support, Attr1 labels only): the samples whose positives are all in Attr1, and the first
    `round(fraction * M)` of the M mixed samples by `sample_keys`; X2 (query, Attr2 labels only):
    the samples whose positives are all in Attr2, and the other mixed samples. A sample with no
    positive at all, which the supplement does not place, counts as mixed: it is split 60/40
    too, so its negatives still supervise one set and X1 and X2 stay disjoint.
    """
    positive = ops.cast(ops.convert_to_tensor(privacy) > 0.5, "float32")
    attr1 = ops.cast(ops.convert_to_tensor(attribute_split), "float32")
    keys = ops.cast(ops.convert_to_tensor(sample_keys), "float32")
    in1 = ops.max(positive * attr1[None, :], axis=1) > 0
    in2 = ops.max(positive * (1.0 - attr1)[None, :], axis=1) > 0
    mixed = ops.equal(in1, in2)  # positives in both groups, or none
    mixed_count = ops.sum(ops.cast(mixed, "float32"))
    earlier = ops.cast(keys[None, :] < keys[:, None], "float32") * ops.cast(mixed, "float32")
    rank = ops.sum(earlier, axis=1)  # mixed samples with a smaller key
    to_x1 = ops.logical_and(mixed, rank < ops.round(fraction * mixed_count))
    x1 = ops.logical_or(ops.logical_and(in1, ops.logical_not(in2)), to_x1)
    x2 = ops.logical_or(
        ops.logical_and(in2, ops.logical_not(in1)),
        ops.logical_and(mixed, ops.logical_not(to_x1)),
    )
    support = ops.cast(x1, "float32")[:, None] * attr1[None, :]
    query = ops.cast(x2, "float32")[:, None] * (1.0 - attr1)[None, :]
    return support, query


def epoch_splits(
    seed: int,
    epoch: int,
    steps: int,
    num_images: int,
    num_attributes: int,
    num_models: int,
    fraction: float = 0.6,
) -> dict[str, np.ndarray]:
    """The split inputs of every batch of one epoch, stacked on a leading (steps,) axis.

    Attr1 and the support models are drawn once per epoch (Algorithm 1's steps A1 / B1), the
    sample keys anew for every batch, from a generator seeded by (seed, epoch), so a resumed run
    sees the same splits. With one attack model, it serves both sets."""
    rng = np.random.default_rng([seed, epoch])
    attribute_split = np.zeros(num_attributes, "float32")
    attribute_split[rng.permutation(num_attributes)[: _share(fraction, num_attributes)]] = 1
    support_models = np.zeros(num_models, "float32")
    support_models[rng.permutation(num_models)[: _share(fraction, num_models)]] = 1
    query_models = 1 - support_models if num_models > 1 else support_models
    return {
        "attribute_split": np.tile(attribute_split, (steps, 1)),
        "sample_keys": rng.random((steps, num_images), dtype="float32"),
        "support_models": np.tile(support_models, (steps, 1)),
        "query_models": np.tile(query_models, (steps, 1)),
    }


def _share(fraction: float, count: int) -> int:
    """How many of `count` items the first group gets: `fraction` of them, at least one, and at
    least one left for the second group (when there are two)."""
    return min(max(1, round(fraction * count)), max(1, count - 1))


@keras.saving.register_keras_serializable(package="keras_privacy")
class MetaIteration(keras.Model):
    """Algorithm 1's meta-iteration counter I, the one non-trainable variable of a model, so
    that it lives in a trainer group: `fit` carries it on JAX and checkpoints save it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.count = self.add_weight(
            shape=(), dtype="int32", initializer="zeros", trainable=False, name="count"
        )
        self.built = True

    def get_config(self) -> dict:
        return {"name": self.name}


@keras.saving.register_keras_serializable(package="keras_privacy")
class MetaGeneralization(StatelessTrainer):
    """Algorithm 1 of the meta-generalisation paper over f_A, f_T and K attack models.

    Args:
        anonymizer: f_A (phi).
        action_model: f_T.
        attack_models: the training attack models (paper: MobileNet-V2 at 8 widths; one, or a
            list).
        privacy_weight: gamma of the privacy term.
        alpha: virtual-training step size (paper: 5e-4).
        fraction: share of the mixed samples that an attribute split gives X1 (paper: 0.6).
        first_order: drop the second-order term of the meta-gradient.
        recompute_anonymizer: in the meta update's derivative passes, recompute f_A block by
            block instead of storing its activations (`backend.checkpoint`: on JAX; TensorFlow
            stores them): the passes hold one block's activations at a time, for one more
            forward pass of f_A each. Same meta-gradient.
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
        "attribute_split",
        "action_updates",
        "attack_updates",
        "meta_updates",
    )

    def __init__(
        self,
        anonymizer: keras.Model,
        action_model: keras.Model,
        attack_models: keras.Model | Sequence[keras.Model],
        privacy_weight: float = 1.0,
        alpha: float = 5e-4,
        fraction: float = 0.6,
        first_order: bool = False,
        recompute_anonymizer: bool = True,
        action_threshold: float = 0.7,
        attack_threshold: float = 0.95,
        **kwargs,
    ):
        if not attack_models:
            raise ValueError("meta generalisation needs at least one attack model")
        super().__init__(**kwargs)
        self.anonymizer = anonymizer
        self.action_model = action_model
        self.attack_models = as_model_list(attack_models)
        self.privacy_weight = privacy_weight
        self.alpha = alpha
        self.fraction = fraction
        self.first_order = first_order
        self.action_threshold = action_threshold
        self.attack_threshold = attack_threshold
        self.meta_iteration = MetaIteration(name="meta_iteration")
        self.recompute_anonymizer = recompute_anonymizer
        self._anonymizer_blocks = _blocks(anonymizer) if recompute_anonymizer else ()

    @property
    def attack_groups(self) -> list[str]:
        """The optimizer group names of the attack models: `attack_0`, `attack_1`, ..."""
        return [f"attack_{i}" for i in range(len(self.attack_models))]

    def groups(self) -> dict[str, keras.Model]:
        groups = {"anonymizer": self.anonymizer, "action": self.action_model}
        groups.update(zip(self.attack_groups, self.attack_models))
        groups["meta_iteration"] = self.meta_iteration
        return groups

    def privacy_classifiers(self) -> dict[str, keras.Model]:
        return dict(zip(self.attack_groups, self.attack_models))

    def reset_metrics(self) -> None:
        """Reset the metrics and Algorithm 1's meta-iteration counter: Keras calls this at the
        start of every epoch of `fit`, on both backends."""
        super().reset_metrics()
        self.meta_iteration.count.assign(0)

    def call(self, clips, training=False):
        frames = self.anonymizer(fold_time(clips), training=training)
        return self.action_model(ops.reshape(frames, ops.shape(clips)), training=training)

    def updates(self, data: Mapping[str, Tensor]) -> list[Update]:
        updates = [
            Update((), lambda values: self._measure(values, data)),
            Update(
                ("action",),
                lambda values: self._action_loss(values, data),
                condition=self._action_updates,
                branch="action",
            ),
        ]
        for i, group in enumerate(self.attack_groups):
            updates.append(
                Update(
                    (group,),
                    lambda values, group=group: self._attack_loss(values, data, group),
                    condition=lambda logs, i=i: self._attack_updates(logs, i),
                    branch="attack",
                )
            )
        updates.append(
            Update(
                ("anonymizer",),
                lambda values: self._meta_loss(values, data),
                condition=self._meta_updates,
                branch="anonymizer",
            )
        )
        return updates

    def _action_updates(self, logs):
        """Whether f_T updates, from the accuracies measured before any update: below T1."""
        return logs["measured_action_accuracy"] < self.action_threshold

    def _attack_updates(self, logs, i: int):
        """Whether attack model `i` updates: f_T at T1 or above, the model below T2."""
        return (logs["measured_action_accuracy"] >= self.action_threshold) & (
            logs["measured_attack_accuracies"][i] < self.attack_threshold
        )

    def _meta_updates(self, logs):
        """Whether f_A makes its meta update: f_T at T1 or above, every attack model at T2."""
        return (logs["measured_action_accuracy"] >= self.action_threshold) & (
            ops.min(logs["measured_attack_accuracies"]) >= self.attack_threshold
        )

    def step_logs(self, logs: Mapping[str, Tensor]) -> dict:
        attacks = [self._attack_updates(logs, i) for i in range(len(self.attack_groups))]
        return {
            "action_updates": ops.cast(self._action_updates(logs), "float32"),
            "attack_updates": ops.sum(ops.cast(ops.stack(attacks), "float32")),
            "meta_updates": ops.cast(self._meta_updates(logs), "float32"),
        }

    def _anonymize(self, values, data, training=False, recompute=False):
        """f_A on the clips' frames and the privacy images together (one BatchNorm batch):
        (anonymized frames, anonymized images, f_A's new non-trainable values). With
        `recompute`, for the passes that differentiate f_A, block by block under
        `backend.checkpoint` where f_A has blocks, so those passes hold one block's
        activations at a time."""
        frames = fold_time(data["clips"])
        count = ops.shape(frames)[0]
        inputs = ops.concatenate([frames, data["images"]], 0)
        if recompute and self._anonymizer_blocks:
            trainable, non_trainable = values["anonymizer"]
            outputs, state = run_segments(
                self._anonymizer_blocks, trainable, non_trainable, inputs, training, checkpoint
            )
        else:
            outputs, state = self.run("anonymizer", values, inputs, training)
        return outputs[:count], outputs[count:], state

    def _anonymized(self, values, inputs):
        """f_A in inference mode on `inputs` alone. BatchNorm then uses its moving statistics,
        so each output is the one f_A gives that frame or image in any batch: the f_T and
        attack-model updates anonymize only what they read (an attack update does not pass
        the 384 frames of the clips through f_A to use the 64 images)."""
        return self.run("anonymizer", values, inputs)[0]

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
        anon_frames = self._anonymized(values, fold_time(data["clips"]))
        clip_length = ops.shape(data["clips"])[1]
        frozen = ops.stop_gradient(anon_frames)
        return action_update_loss(self, values, frozen, clip_length, data["labels"])

    def _attack_loss(self, values, data, group):
        anon_images = self._anonymized(values, data["images"])
        logits, state = self.run(group, values, ops.stop_gradient(anon_images), training=True)
        loss = losses.masked_binary_cross_entropy(data["privacy"], logits)
        return loss, {
            "logs": {
                "attack_loss": loss,
                "attack_accuracy": multilabel_accuracy(data["privacy"], logits),
            },
            "non_trainable": {group: state},
        }

    def anonymizer_loss(
        self,
        values: GroupValues,
        data: Mapping[str, Tensor],
        label_mask: Tensor,
        model_mask: Tensor,
    ) -> tuple[Tensor, list]:
        """L(phi, D): action loss minus gamma times the masked BCE of D's attack models."""
        anon_frames, anon_images, state = self._anonymize(values, data, True, recompute=True)
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

    def split(self, values: GroupValues, data: Mapping[str, Tensor]) -> dict:
        """The support / query label masks (N, A) and model masks (K,) of this meta iteration:
        an attribute split where the counter I is odd, a model split where it is even."""
        attribute = ops.equal(values["meta_iteration"][1][0] % 2, 1)
        support, query = attribute_masks(
            data["privacy"], data["attribute_split"], data["sample_keys"], self.fraction
        )
        every_label = ops.ones_like(support)
        every_model = ops.ones_like(ops.cast(data["support_models"], "float32"))
        return {
            "support_mask": ops.where(attribute, support, every_label),
            "query_mask": ops.where(attribute, query, every_label),
            "support_models": ops.where(attribute, every_model, data["support_models"]),
            "query_models": ops.where(attribute, every_model, data["query_models"]),
        }

    def meta_objective(
        self, values: GroupValues, data: Mapping[str, Tensor]
    ) -> tuple[Tensor, Tensor, Tensor, list]:
        """L(phi, S) + L(phi - alpha * grad L(phi, S), Q) and the parts of it, on the split
        of this meta iteration: the definition, differentiable twice (nested gradients).
        Training takes its gradient from `meta_gradient`, the same in passes."""
        phi = values["anonymizer"][0]
        split = self.split(values, data)
        support_loss = self._loss_on(values, data, split["support_mask"], split["support_models"])
        train_loss, grads = value_and_gradient(lambda params: support_loss(params)[0], phi)
        if self.first_order:
            grads = [ops.stop_gradient(g) for g in grads]
        adapted = [p - self.alpha * g for p, g in zip(phi, grads)]
        query_loss = self._loss_on(values, data, split["query_mask"], split["query_models"])
        test_loss, state = query_loss(adapted)
        return train_loss + test_loss, train_loss, test_loss, state

    def meta_gradient(
        self, values: GroupValues, data: Mapping[str, Tensor], loss_scale: Tensor | None = None
    ) -> tuple[list, Tensor, Tensor, list]:
        """The gradient of `meta_objective` with respect to phi, in passes that never overlap:
        g_S = grad L(phi, S); g_Q = grad L(phi', Q) at phi' = phi - alpha * g_S; then, second
        order, g_S + g_Q - alpha * H_S g_Q, with the Hessian-vector product of L(., S) on a
        third support pass (`hessian_vector_product`, each backend's cheaper way), or g_S + g_Q
        first order. Returns (meta-gradient, L(phi, S), L(phi', Q), f_A's new BatchNorm
        statistics from the query pass). With a `loss_scale` (`mixed_float16`), each pass
        differentiates its loss times the scale and divides the gradient by it, so that no
        float16 gradient inside f_A underflows; one that overflows makes the meta-gradient
        non-finite, and the step skips it and halves the scale."""
        scale = 1.0 if loss_scale is None else loss_scale
        phi = [ops.stop_gradient(p) for p in values["anonymizer"][0]]
        split = self.split(values, data)
        support_loss = self._loss_on(
            values, data, split["support_mask"], split["support_models"], scale
        )
        query_loss = self._loss_on(values, data, split["query_mask"], split["query_models"], scale)
        (train_loss, _), support_grads = value_and_gradient(support_loss, phi, has_aux=True)
        support_grads = [g / scale for g in support_grads]
        adapted = [p - self.alpha * g for p, g in zip(phi, support_grads)]
        (test_loss, state), query_grads = value_and_gradient(query_loss, adapted, has_aux=True)
        query_grads = [g / scale for g in query_grads]
        grads = [s + q for s, q in zip(support_grads, query_grads)]
        if not self.first_order:
            curvature = hessian_vector_product(
                lambda params: support_loss(params)[0], phi, query_grads
            )
            grads = [g - self.alpha * h / scale for g, h in zip(grads, curvature)]
        return grads, train_loss / scale, test_loss / scale, state

    def _loss_on(self, values: GroupValues, data, label_mask, model_mask, scale=1.0):
        """`anonymizer_loss` on one set, times `scale`, as a function of phi alone: (loss,
        f_A's state)."""

        def loss(params):
            value, state = self.anonymizer_loss(
                _replace(values, params), data, label_mask, model_mask
            )
            return value * scale, state

        return loss

    def _meta_loss(self, values, data):
        """A loss whose gradient with respect to phi is `meta_gradient` (the sum of phi times
        the gradient held constant), with the meta losses in its logs."""
        grads, train_loss, test_loss, state = self.meta_gradient(values, data, self.loss_scale)
        phi = values["anonymizer"][0]
        surrogate = sum(ops.sum(ops.stop_gradient(g) * p) for g, p in zip(grads, phi))
        iteration = values["meta_iteration"][1][0]
        return surrogate, {
            "logs": {
                "meta_train_loss": train_loss,
                "meta_test_loss": test_loss,
                "attribute_split": ops.cast(ops.equal(iteration % 2, 1), "float32"),
            },
            "non_trainable": {
                "anonymizer": state,
                "meta_iteration": [ops.cast(iteration + 1, "int32")],
            },
        }

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "action_model": serialize_models(self.action_model),
            "attack_models": serialize_models(self.attack_models),
            "privacy_weight": self.privacy_weight,
            "alpha": self.alpha,
            "fraction": self.fraction,
            "first_order": self.first_order,
            "recompute_anonymizer": self.recompute_anonymizer,
            "action_threshold": self.action_threshold,
            "attack_threshold": self.attack_threshold,
        }

    @classmethod
    def from_config(cls, config: dict) -> MetaGeneralization:
        return cls(**deserialize_models(config, "anonymizer", "action_model", "attack_models"))


def _blocks(anonymizer: keras.Model) -> tuple[Segment, ...]:
    """f_A cut after each of its blocks (`segments.block_ends`); none where it has no blocks
    or is not a Functional model."""
    ends = block_ends(anonymizer)
    if not ends:
        return ()
    try:
        return tuple(functional_segments(anonymizer, ends))
    except ValueError:
        return ()


def _replace(values: GroupValues, anonymizer_params: list) -> GroupValues:
    values = dict(values)
    values["anonymizer"] = (anonymizer_params, values["anonymizer"][1])
    return values
