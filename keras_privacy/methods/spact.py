"""SPAct: self-supervised privacy preservation (Dave et al., CVPR 2022), and its init phases.

A batch is a dict of
- `clips`: (B, T, H, W, 3) float frames in [0, 1];
- `labels`: (B,) action labels;
- `frame_pairs`: (B, 2) indices of two frames of each clip (the temporal sampler's positive pair);
  or `pair_frames`: (B, 2, H, W, 3) the two frames themselves, taken from the video outside the
  clip (the "far" sampler, SPAct Table 4);
- `views` (optional): (N, 2, H, W, 3) two augmented views of N privacy images, same H, W;
- `second_clips` (`spatiotemporal`, or the triplet term): (B, T, H, W, 3) a second clip of each
  video, with its own random start and augmentation;
- `positive_clips` (the triplet term): (B, T, H, W, 3) the frames of `clips` augmented again.

The minimax trainer alternates per batch as the authors ran it. `fit` feeds it *pairs* of such
batches (axis 1 of size 2 after the batch axis, see `pair_batches`, so that data-parallel training
splits the batch axis as usual): the first batch updates the anonymizer f_A alone on
`w_T * L_T - w_B * L_B (+ lambda * penalty)` with f_T and f_B frozen; the second updates f_T on
L_T and f_B on L_B with f_A frozen. One `fit` step is therefore one full minimax iteration.

The positive pairs of an image adversary are (`contrastive_views`): `images`, the two augmented
views of each privacy image, as the authors' minimax (`train_ssl_minimax2.py`) computes L_B, in
both halves of the step (the default); `frames`, two frames of each clip chosen by the temporal
sampler (the paper's Sec. 3.2.2 and Table 4); or `both`, one NT-Xent over the frame pairs and
the image views together.

The self-supervised adversary L_B is one of (`ssl_adversary`, SPAct Table 5):
- `ntxent`: NT-Xent over the positive pairs;
- `rotnet`: f_B and a linear head (group `rotation`) predict which of the four rotations
  (0, 90, 180, 270 degrees) was applied to the first side of every pair; L_B is the
  cross-entropy over all four rotations of each image. The head reads f_B's L2-normalised
  projection (our choice: Gidaris et al. classify the convolutional features), which bounds
  its logits by the head's weights;
- `moco`: the first sides are queries of f_B, the second sides keys of a momentum encoder (EMA
  of f_B), negatives a queue of past keys (`MomentumQueue`, group `momentum`); L_B is InfoNCE.
  The adversary update first moves the momentum encoder (MoCo's order), then computes the keys,
  then enqueues them; the anonymizer update reads the state without changing it, and its
  gradient reaches f_A through both the queries and the keys. The key encoder's BatchNorm runs
  on its EMA moving statistics (inference mode), not on batch statistics as MoCo's (with its
  shuffled BN): our simplification;
- `spatiotemporal` (SPAct Table 3, supplement Sec. C, a naive SimCLR on video): f_B is a video
  encoder (an action model's trunk, R3D-18 in the paper, then a 512-512-128 head and L2
  normalisation, `registry.build_video_privacy_encoder`); L_B is NT-Xent (full 2N x 2N form)
  between the embeddings of the anonymized `clips` and `second_clips`: two clips of a video are
  positives, the clips of the other videos negatives. `frame_pairs` and the privacy `views` are
  not used (a batch may hold them); f_A anonymizes both clips of every video in one call.

An ensemble of privacy encoders (SPAct Table 6: ResNet-50 + MobileNet-V1) is a list of f_B's,
each with its own projection head, group (`privacy_0`, `privacy_1`, ...; a single encoder keeps
the group `privacy`) and optimizer. Each member minimises its own NT-Xent on the same positive
pairs; f_A maximises the mean of the members' losses. The paper does not say how it aggregates
the members' losses: the mean is our choice (it keeps w_B's scale that of one adversary). The
ensemble trains with `ntxent` only.

The TeD-SPAD temporal term (Fioresi et al., ICCV 2023), on with `triplet_weight > 0`, adds
`triplet_weight * triplet_margin_loss(anchor, positive, negative)` to the action loss that f_A
and f_T minimise, as TeD-SPAD's code builds it (anonymization_training/train_anonymizer.py:
93-119, aux_code/ucf101_dl.py:443-518): the clip (anchor), its frames augmented again
(positive, `positive_clips`) and a clip from a random start in the same video, which may
overlap it, with an augmentation of its own (negative, `second_clips`), anonymized in the
clips' call of f_A; margin 1 (TeD-SPAD's f_A loss is -1 * L_B + 0.7 * (L_T + 0.1 * L_temp)).
The embeddings are TeD-SPAD's: its head (`resnet.embedding_head`, Dense(512) - BatchNorm -
ReLU - Dense(128) - BatchNorm - L2 normalisation, group `embedding`, trained with f_T's
learning rate in f_T's update and in inference mode in f_A's) on f_T's pooled features
(`registry.with_pooled_features`: what its classifier reads, before dropout), Euclidean
distances. In f_T's update f_T and the head run once per clip set, their BatchNorm statistics
updated in turn (TeD-SPAD's three calls of `ft_model`), the anchor's logits giving L_T; in
f_A's, in inference mode, once on the three.
(TeD-SPAD's R3D-18 wrapper compares the raw pooled features, with no head; its I3D, the
configured f_T, has the head, which every f_T gets here.) Its augmentations are ours, those of
the action clips (`--supervised_augmentation`); TeD-SPAD's own are weaker than SimCLR's.

Augmenting f_A's outputs (our addition, off by default; `output_augment`, group `augment`): with
`adversary_crop > 0` the two sides of every positive pair are two random resized crops (and
flips) of the *same* anonymized image (the first frame of each temporal pair, the first view
of each privacy image), so f_A can no longer raise L_B by amplifying the differences between
two inputs (the authors' views are two augmented images, each anonymized);
with `adversary_jitter > 0` a random colour distortion follows, so a colour remapping of f_A's
output does not move f_B's embeddings. Drawn anew for every image of both sides in both halves
of the step; image adversaries only (not `spatiotemporal`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
from keras import ops

from keras_privacy import losses
from keras_privacy.backend import gather_replicas
from keras_privacy.methods.moco import MomentumQueue
from keras_privacy.methods.output_augment import ColourJitter, RandomResizedCrop
from keras_privacy.methods.steps import (
    CONTRASTIVE_VIEWS,
    action_logits,
    anonymize_batch,
    anonymize_clips,
    as_encoders,
    contrastive_views,
    fold_time,
    privacy_group_names,
    privacy_loss,
)
from keras_privacy.methods.trainer import (
    GroupValues,
    StatelessTrainer,
    Update,
    deserialize_models,
    serialize_models,
    variable_positions,
)
from keras_privacy.models.registry import with_pooled_features
from keras_privacy.models.resnet import embedding_head
from keras_privacy.types import Tensor

SSL_ADVERSARIES = ("ntxent", "rotnet", "moco", "spatiotemporal")


def _half(data: dict, index: int) -> dict:
    return {key: value[:, index] for key, value in data.items()}


def action_and_triplet(
    trainer: StatelessTrainer,
    values: GroupValues,
    clips: Sequence[Tensor],
    margin: float,
    training: bool,
) -> tuple[Tensor, Tensor, dict]:
    """f_T's logits of the anchor clips and TeD-SPAD's temporal triplet loss of the anonymized
    (anchor, positive, negative) `clips`, each (B, T, H, W, 3), on the embeddings of
    `trainer`'s `embedding` head of f_T's pooled features (see the module docstring); and the
    new non-trainable values of `action` and `embedding`. In inference mode f_T and the head
    run once on the three; in training mode three times each, their BatchNorm statistics
    updated in turn, as TeD-SPAD calls its f_T (and the head in it) once per clip."""
    trainable, non_trainable = values["action"]
    non_trainable = trainer.fold_replica_into_seeds("action", non_trainable)
    trainable_at, non_trainable_at = trainer.feature_positions
    weights = [trainable[i] for i in trainable_at]
    state = [non_trainable[i] for i in non_trainable_at]
    head_weights, head_state = values["embedding"]
    parts = list(clips) if training else [ops.concatenate(list(clips), axis=0)]
    logits, embeddings = None, []
    for part in parts:
        (part_logits, features), state = trainer.call_action_with_features(
            weights, state, part, training=training
        )
        logits = part_logits if logits is None else logits
        head_values = {**values, "embedding": (head_weights, head_state)}
        embedding, head_state = trainer.run("embedding", head_values, features, training=training)
        embeddings.append(ops.cast(embedding, "float32"))
    anchor, positive, negative = ops.split(ops.concatenate(embeddings, axis=0), 3, axis=0)
    new_state = list(non_trainable)
    for position, value in zip(non_trainable_at, state):
        new_state[position] = value
    return (
        logits[: ops.shape(clips[0])[0]],
        losses.triplet_margin(anchor, positive, negative, margin),
        {
            "action": trainer.fold_replica_into_seeds("action", new_state, unfold=True),
            "embedding": head_state,
        },
    )


@keras.saving.register_keras_serializable(package="keras_privacy")
class SPAct(StatelessTrainer):
    """The SPAct minimax trainer: f_A against a self-supervised (NT-Xent) adversary f_B,
    while an action model f_T keeps the action recognisable.

    Args:
        anonymizer: f_A, frames in [0, 1] -> frames in [0, 1].
        action_model: f_T, clips (B, T, H, W, 3) -> action logits.
        privacy_encoder: f_B, images -> L2-normalised embeddings; or a list of such encoders,
            an ensemble (see the module docstring); for `spatiotemporal`, a video encoder,
            clips (B, T, H, W, 3) -> L2-normalised embeddings.
        action_weight: w_T, weight of L_T in the anonymizer loss (SPAct: 1).
        privacy_weight: w_B (omega), weight of the maximised L_B (SPAct Eq. 9: omega in (0, 1)).
        temperature: NT-Xent temperature (SPAct: 0.1).
        penalty_weight: lambda of the penalty-driven term (0 turns it off).
        penalty_budget: B of the penalty `max(0, RMS(x - f_A(x)) - B)` (penalty paper: 0.3).
        ssl_adversary: ntxent | rotnet | moco | spatiotemporal (see the module docstring).
        moco_queue_size: K, MoCo's number of queued negatives (a multiple of the batch is not
            required: the queue wraps around).
        moco_momentum: m of MoCo's key encoder EMA (MoCo: 0.999).
        triplet_weight: weight of TeD-SPAD's temporal triplet term (0 turns it off).
        triplet_margin: its margin mu (TeD-SPAD: 1).
        adversary_jitter: strength of the random colour jitter of f_A's outputs before an
            image adversary (`output_augment.ColourJitter`; 0 turns it off).
        adversary_crop: smallest area of the random resized crop of f_A's outputs before an
            image adversary (`output_augment.RandomResizedCrop`; 0 turns it off); on, both
            sides of a pair are augmentations of one anonymized image.
        augment_seed: seed of those augmentations' random draws and of MoCo's initial queue.
        contrastive_views: the positive pairs of an image adversary: "images" (the authors'),
            "frames" or "both" (see the module docstring); `spatiotemporal` uses clips.
    """

    log_names = (
        "action_loss",
        "privacy_loss",
        "action_accuracy",
        "anonymizer_action_loss",
        "anonymizer_privacy_loss",
        "penalty",
        "triplet_loss",
        "anonymizer_triplet_loss",
    )
    paired_batches = True

    def __init__(
        self,
        anonymizer: keras.Model,
        action_model: keras.Model,
        privacy_encoder: keras.Model | Sequence[keras.Model],
        action_weight: float = 1.0,
        privacy_weight: float = 1.0,
        temperature: float = 0.1,
        penalty_weight: float = 0.0,
        penalty_budget: float = 0.3,
        ssl_adversary: str = "ntxent",
        moco_queue_size: int = 4096,
        moco_momentum: float = 0.999,
        triplet_weight: float = 0.0,
        triplet_margin: float = 1.0,
        adversary_jitter: float = 0.0,
        adversary_crop: float = 0.0,
        augment_seed: int = 0,
        contrastive_views: str = "images",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if contrastive_views not in CONTRASTIVE_VIEWS:
            raise ValueError(
                f"contrastive_views={contrastive_views!r} is not one of "
                f"{', '.join(CONTRASTIVE_VIEWS)}"
            )
        if ssl_adversary not in SSL_ADVERSARIES:
            raise ValueError(
                f"ssl_adversary={ssl_adversary!r} is not one of {', '.join(SSL_ADVERSARIES)}"
            )
        encoders = as_encoders(privacy_encoder)
        if len(encoders) > 1 and ssl_adversary != "ntxent":
            raise ValueError(
                f"an ensemble of {len(encoders)} privacy encoders trains with "
                f"ssl_adversary='ntxent' only, got {ssl_adversary!r}"
            )
        video = ssl_adversary == "spatiotemporal"
        if video and (adversary_jitter > 0 or adversary_crop > 0):
            raise ValueError(
                "adversary_jitter and adversary_crop augment the images of an image adversary; "
                "ssl_adversary='spatiotemporal' sees clips"
            )
        for encoder in encoders:
            if len(encoder.input_shape) != (5 if video else 4):
                raise ValueError(
                    f"ssl_adversary={ssl_adversary!r} needs a privacy encoder of "
                    f"{'clips (B, T, H, W, 3)' if video else 'images (B, H, W, 3)'}, got "
                    f"{encoder.name!r} of input shape {encoder.input_shape}"
                )
        self.anonymizer = anonymizer
        self.action_model = action_model
        self.privacy_encoders = encoders
        self.privacy_groups = privacy_group_names(len(encoders))
        self.privacy_encoder = encoders[0]
        self.action_weight = action_weight
        self.privacy_weight = privacy_weight
        self.temperature = temperature
        self.penalty_weight = penalty_weight
        self.penalty_budget = penalty_budget
        self.ssl_adversary = ssl_adversary
        self.moco_queue_size = moco_queue_size
        self.moco_momentum = moco_momentum
        self.triplet_weight = triplet_weight
        self.triplet_margin = triplet_margin
        self.embedding_head = self.call_action_with_features = None
        self.feature_positions = ([], [])
        if triplet_weight == 0:
            self._stop_logging("triplet_loss", "anonymizer_triplet_loss")
        else:
            with_features = with_pooled_features(action_model)
            self.feature_positions = (
                variable_positions(
                    action_model.trainable_variables, with_features.trainable_variables
                ),
                variable_positions(
                    action_model.non_trainable_variables, with_features.non_trainable_variables
                ),
            )
            # Its bound call, not the model: Keras would track (and save) f_T's layers twice.
            self.call_action_with_features = with_features.stateless_call
            self.embedding_head = embedding_head(
                with_features.output_shape[1][-1], name="embedding_head"
            )
        self.adversary_jitter = adversary_jitter
        self.augment_seed = augment_seed
        self.adversary_crop = adversary_crop
        self.contrastive_views = contrastive_views
        self.augment = None
        if adversary_jitter > 0 or adversary_crop > 0:
            augment = [keras.Input((*self.privacy_encoder.input_shape[1:3], 3))]
            if adversary_crop > 0:
                augment.append(RandomResizedCrop(adversary_crop, seed=augment_seed + 1))
            if adversary_jitter > 0:
                augment.append(ColourJitter(adversary_jitter, seed=augment_seed))
            self.augment = keras.Sequential(augment, name="augment")
        dim = self.privacy_encoder.output_shape[-1]
        self.rotation_head = None
        self.momentum = None
        if ssl_adversary == "rotnet":
            self.rotation_head = keras.Sequential(
                [
                    keras.Input((dim,)),
                    keras.layers.Dense(4, dtype="float32", name="rotation_logits"),
                ],
                name="rotation_head",
            )
        if ssl_adversary == "moco":
            self.momentum = MomentumQueue(
                self.privacy_encoder,
                moco_queue_size,
                moco_momentum,
                seed=augment_seed + 2,
                name="momentum_queue",
            )

    def groups(self) -> dict[str, keras.Model]:
        groups = {
            "anonymizer": self.anonymizer,
            "action": self.action_model,
            **dict(zip(self.privacy_groups, self.privacy_encoders)),
        }
        if self.rotation_head is not None:
            groups["rotation"] = self.rotation_head
        if self.embedding_head is not None:
            groups["embedding"] = self.embedding_head
        if self.momentum is not None:
            groups["momentum"] = self.momentum
        if self.augment is not None:
            groups["augment"] = self.augment
        return groups

    def call(self, clips, training=False):
        """Action logits of f_T on the anonymized clips."""
        frames = self.anonymizer(fold_time(clips), training=training)
        shape = ops.shape(clips)
        return self.action_model(ops.reshape(frames, shape), training=training)

    def updates(self, data: dict[str, Any]) -> list[Update]:
        return [
            Update(("anonymizer",), lambda values: self._anonymizer_loss(values, _half(data, 0))),
            Update(
                ("action", *self.privacy_groups)
                + (("rotation",) if self.rotation_head else ())
                + (("embedding",) if self.embedding_head else ()),
                lambda values: self._adversary_loss(values, _half(data, 1)),
            ),
        ]

    def _anonymize(self, values: GroupValues, batch: dict, training: bool):
        """f_A on the batch: the anonymized frames of the clips (B*T, H, W, 3), the two sides
        of L_B's positive pairs (`contrastive_views`; or, `spatiotemporal`, the two clips of
        each video), the anonymized (anchor, positive, negative) clips of the triplet term
        (`clips`, `positive_clips`, `second_clips`; None without it), and f_A's new
        non-trainable values. The triplet's clips join the clips' call of f_A, as TeD-SPAD
        anonymizes its three clips of a video in one call."""
        triplet_keys = ("positive_clips", "second_clips") if self.triplet_weight > 0 else ()
        missing = [key for key in triplet_keys if key not in batch]
        if missing:
            raise ValueError(
                f"triplet_weight > 0 needs batches with {' and '.join(missing)} (TeD-SPAD's "
                "positive and negative clips: `sources.Batching(triplet_clips=True)` gives "
                "them in a minimax phase's batches, as `train` makes them)"
            )
        if self.ssl_adversary == "spatiotemporal":
            # The second clips are L_B's positives and, with the triplet, its negatives too.
            keys = ("clips", "second_clips") + (("positive_clips",) if triplet_keys else ())
            clips, state = anonymize_clips(self, values, [batch[key] for key in keys], training)
            triplet = (clips[0], clips[2], clips[1]) if triplet_keys else None
            return fold_time(clips[0]), (clips[0], clips[1]), triplet, state
        num_clips = ops.shape(batch["clips"])[0]
        # f_A's input: the step's clips, then the triplet's (`batch` stays the step's).
        fa_batch = batch
        if triplet_keys:
            joint = [batch["clips"], *(batch[key] for key in triplet_keys)]
            fa_batch = {**batch, "clips": ops.concatenate(joint, axis=0)}
        pairs = None
        if "pair_frames" in batch and self.contrastive_views != "images":
            # The far sampler's frames lie outside the clips: f_A anonymizes them as privacy
            # views (each pair's first frame with the first views, its second with the second).
            pair_frames = batch["pair_frames"]
            count = 2 * ops.shape(pair_frames)[0]
            merged = pair_frames
            if "views" in batch:
                merged = ops.concatenate([merged, batch["views"]], axis=0)
            anon_frames, anon_all, state = anonymize_batch(
                self, values, {**fa_batch, "views": merged}, training
            )
            pairs = ops.reshape(anon_all[:count], ops.shape(pair_frames))
            anon_views = anon_all[count:] if "views" in batch else None
        else:
            anon_frames, anon_views, state = anonymize_batch(self, values, fa_batch, training)
        triplet = None
        if triplet_keys:
            clips = ops.reshape(anon_frames, ops.shape(fa_batch["clips"]))
            triplet = ops.split(clips, 3, axis=0)
            anon_frames = fold_time(clips[:num_clips])
        first, second = contrastive_views(
            anon_frames, anon_views, batch, self.contrastive_views, pairs
        )
        if self.adversary_crop > 0:
            # Both sides are augmentations of the same anonymized images.
            second = first
        return anon_frames, (first, second), triplet, state

    def _privacy_term(self, values: GroupValues, first, second, training: bool):
        """L_B of the adversary on the two sides of the positive pairs (an ensemble's: the mean
        of its members' NT-Xent losses), and the new non-trainable values by group (the momentum
        state changes only when `training`; the augmentations' call counters at every call)."""
        augment_state = {}
        if self.augment is not None:
            num = ops.shape(first)[0]
            augmented, augment_state["augment"] = self.run(
                "augment", values, ops.concatenate([first, second], axis=0)
            )
            first, second = augmented[:num], augmented[num:]
        loss, states = self._adversary_term(values, first, second, training)
        return loss, {**states, **augment_state}

    def _adversary_term(self, values: GroupValues, first, second, training: bool):
        """`_privacy_term` on the two sides as the adversary sees them."""
        if self.ssl_adversary in ("ntxent", "spatiotemporal"):
            member_losses, states = [], {}
            for group in self.privacy_groups:
                loss, states[group] = privacy_loss(
                    self, values, first, second, self.temperature, training, group=group
                )
                member_losses.append(loss)
            return ops.mean(ops.stack(member_losses)), states
        if self.ssl_adversary == "rotnet":
            images, labels = losses.rotations(first)
            embeddings, state = self.run("privacy", values, images, training=training)
            logits, _ = self.run("rotation", values, embeddings, training=training)
            return losses.softmax_cross_entropy(labels, logits), {"privacy": state}
        queries, state = self.run("privacy", values, first, training=training)
        momentum_state = values["momentum"][1]
        if training:
            momentum_state = self.momentum.momentum_update(momentum_state, values["privacy"])
        keys = self.momentum.keys(momentum_state, second)
        if training:
            keys = ops.stop_gradient(keys)
        queue = self.momentum.queue_of(momentum_state)
        loss = losses.info_nce(queries, keys, queue, self.temperature)
        new_state = {"privacy": state}
        if training:
            keys = losses.l2_normalized(keys)
            # Every replica of a data-parallel step enqueues the keys of the global batch.
            new_state["momentum"] = self.momentum.enqueue(momentum_state, gather_replicas(keys))
        return loss, new_state

    def _anonymizer_loss(self, values: GroupValues, batch: dict):
        clip_length = ops.shape(batch["clips"])[1]
        anon_frames, (first, second), triplet_clips, anonymizer_state = self._anonymize(
            values, batch, training=True
        )
        if triplet_clips is None:
            logits, _ = action_logits(self, values, anon_frames, clip_length, training=False)
            triplet = ops.zeros(())
        else:
            logits, triplet, _ = action_and_triplet(
                self, values, triplet_clips, self.triplet_margin, training=False
            )
        action_loss = losses.softmax_cross_entropy(batch["labels"], logits)
        contrastive, privacy_states = self._privacy_term(values, first, second, training=False)
        penalty = losses.rms_penalty(
            batch["clips"], ops.reshape(anon_frames, ops.shape(batch["clips"])), self.penalty_budget
        )
        loss = (
            self.action_weight * (action_loss + self.triplet_weight * triplet)
            - self.privacy_weight * contrastive
            + self.penalty_weight * penalty
        )
        return loss, {
            "logs": {
                "anonymizer_action_loss": action_loss,
                "anonymizer_privacy_loss": contrastive,
                "penalty": penalty,
                "anonymizer_triplet_loss": triplet,
            },
            # f_B ran in inference mode: of its states only the augmentations' counters change.
            "non_trainable": {
                "anonymizer": anonymizer_state,
                **({"augment": privacy_states["augment"]} if self.augment is not None else {}),
            },
        }

    def _adversary_loss(self, values: GroupValues, batch: dict):
        clip_length = ops.shape(batch["clips"])[1]
        anon_frames, (first, second), triplet_clips, _ = self._anonymize(
            values, batch, training=False
        )
        anon_frames, first, second = (ops.stop_gradient(x) for x in (anon_frames, first, second))
        head_state = {}
        if triplet_clips is None:
            logits, action_state = action_logits(
                self, values, anon_frames, clip_length, training=True
            )
            triplet = ops.zeros(())
        else:
            triplet_clips = [ops.stop_gradient(x) for x in triplet_clips]
            logits, triplet, states = action_and_triplet(
                self, values, triplet_clips, self.triplet_margin, training=True
            )
            action_state, head_state = states["action"], {"embedding": states["embedding"]}
        action_loss = losses.softmax_cross_entropy(batch["labels"], logits)
        contrastive, states = self._privacy_term(values, first, second, training=True)
        # The sum of the members' losses: each member's gradient is that of its own loss.
        members_sum = len(self.privacy_groups) * contrastive
        return action_loss + self.triplet_weight * triplet + members_sum, {
            "logs": {
                "action_loss": action_loss,
                "privacy_loss": contrastive,
                "action_accuracy": losses.accuracy(batch["labels"], logits),
                "triplet_loss": triplet,
            },
            "non_trainable": {"action": action_state, **states, **head_state},
        }

    def get_config(self) -> dict:
        return {
            "name": self.name,
            "anonymizer": serialize_models(self.anonymizer),
            "action_model": serialize_models(self.action_model),
            "privacy_encoder": serialize_models(
                self.privacy_encoder if len(self.privacy_encoders) == 1 else self.privacy_encoders
            ),
            "action_weight": self.action_weight,
            "privacy_weight": self.privacy_weight,
            "temperature": self.temperature,
            "penalty_weight": self.penalty_weight,
            "penalty_budget": self.penalty_budget,
            "ssl_adversary": self.ssl_adversary,
            "moco_queue_size": self.moco_queue_size,
            "moco_momentum": self.moco_momentum,
            "triplet_weight": self.triplet_weight,
            "triplet_margin": self.triplet_margin,
            "adversary_jitter": self.adversary_jitter,
            "adversary_crop": self.adversary_crop,
            "augment_seed": self.augment_seed,
            "contrastive_views": self.contrastive_views,
        }

    @classmethod
    def from_config(cls, config: dict) -> SPAct:
        return cls(**deserialize_models(config, "anonymizer", "action_model", "privacy_encoder"))
