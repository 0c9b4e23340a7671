"""Helpers every method's step shares: frames of clips, f_A on a batch, the positive pairs of
a contrastive adversary, f_T's logits, multi-label accuracy. Each runs sub-models through a
trainer's `run` on the values of its groups, so it is differentiated by either backend."""

from __future__ import annotations

from collections.abc import Sequence

import keras
from keras import ops

from keras_privacy import losses
from keras_privacy.backend import gather_replicas
from keras_privacy.methods.trainer import GroupValues, StatelessTrainer
from keras_privacy.types import Tensor

CONTRASTIVE_VIEWS = ("images", "frames", "both")
"""The positive pairs of an image adversary (`contrastive_views`)."""


def fold_time(clips: Tensor) -> Tensor:
    """(B, T, H, W, C) -> (B * T, H, W, C): frames of a clip become images of a batch."""
    shape = ops.shape(clips)
    return ops.reshape(clips, (-1, shape[2], shape[3], shape[4]))


def privacy_group_names(count: int) -> tuple[str, ...]:
    """The groups of `count` privacy encoders: `privacy` for one (the group and saved file names
    of single-encoder runs), `privacy_0`, `privacy_1`, ... for an ensemble."""
    return ("privacy",) if count == 1 else tuple(f"privacy_{i}" for i in range(count))


def as_model_list(models: keras.Model | Sequence[keras.Model]) -> list[keras.Model]:
    """One model or a sequence of them (SPAct's privacy encoders, VITA's budget models, meta's
    attack models), as a list."""
    return list(models) if isinstance(models, (list, tuple)) else [models]


def as_encoders(privacy_encoder: keras.Model | Sequence[keras.Model]) -> tuple[keras.Model, ...]:
    """One privacy encoder or a sequence of them, as a non-empty tuple."""
    encoders = tuple(as_model_list(privacy_encoder))
    if not encoders:
        raise ValueError("privacy_encoder: an ensemble needs at least one encoder")
    return encoders


def run_parts(
    trainer: StatelessTrainer,
    group: str,
    values: GroupValues,
    parts: Sequence[Tensor],
    training: bool,
) -> tuple[list[Tensor], list]:
    """The model of `group` on each of `parts` (image batches): in training mode one call per
    part, in order, each call's new non-trainable values (BatchNorm statistics) passed on to the
    next, as successive calls of a PyTorch module in training mode normalise each batch by its
    own statistics; in inference mode one call on all of them (the same outputs).

    Returns (the outputs of each part, the group's new non-trainable values).
    """
    if not training:
        joint, non_trainable = trainer.run(group, values, ops.concatenate(parts, axis=0))
        outputs, start = [], 0
        for part in parts:
            end = start + ops.shape(part)[0]
            outputs.append(joint[start:end])
            start = end
        return outputs, non_trainable
    trainable, non_trainable = values[group]
    outputs = []
    for part in parts:
        output, non_trainable = trainer.run(
            group, {**values, group: (trainable, non_trainable)}, part, training=True
        )
        outputs.append(output)
    return outputs, non_trainable


def anonymize_batch(
    trainer: StatelessTrainer, values: GroupValues, batch: dict, training: bool
) -> tuple[Tensor, Tensor | None, list]:
    """Run f_A on every frame of the clips and on the privacy views: in training mode the first
    views, the second views and the frames each in a call of their own (`run_parts`), as the
    SPAct and penalty authors' f_A updates call f_A (`train_ssl_minimax2.py:75, 80`;
    `train_anonymizer_balance.py:116, 148`), so each batch is normalised by its own statistics.

    Returns (anonymized frames (B*T, H, W, 3), anonymized views (2N, H, W, 3), the two views
    of each image in turn, or None, f_A's new non-trainable values).
    """
    frames = fold_time(batch["clips"])
    if "views" not in batch:
        (anon_frames,), non_trainable = run_parts(trainer, "anonymizer", values, [frames], training)
        return anon_frames, None, non_trainable
    views = batch["views"]
    parts = [views[:, 0], views[:, 1], frames]
    (first, second, anon_frames), non_trainable = run_parts(
        trainer, "anonymizer", values, parts, training
    )
    shape = ops.shape(views)
    anon_views = ops.reshape(ops.stack([first, second], axis=1), (-1, *shape[2:]))
    return anon_frames, anon_views, non_trainable


def anonymize_clips(
    trainer: StatelessTrainer, values: GroupValues, clip_sets: Sequence[Tensor], training: bool
) -> tuple[list[Tensor], list]:
    """Run f_A on every frame of several batches of clips, each (B, T, H, W, 3), in one call.

    Returns the anonymized batches, in the same shapes, and f_A's new non-trainable values.
    """
    joint = ops.concatenate(list(clip_sets), axis=0)
    frames, non_trainable = trainer.run("anonymizer", values, fold_time(joint), training=training)
    anonymized = ops.split(ops.reshape(frames, ops.shape(joint)), len(clip_sets), axis=0)
    return list(anonymized), non_trainable


def anonymize_clip_pairs(
    trainer: StatelessTrainer, values: GroupValues, batch: dict, training: bool
) -> tuple[Tensor, Tensor, list]:
    """Run f_A on every frame of both clips of each video (`clips`, `second_clips`) in one call;
    the privacy `views` are not used.

    Returns (anonymized clips, anonymized second clips), each (B, T, H, W, 3), and f_A's new
    non-trainable values.
    """
    (first, second), non_trainable = anonymize_clips(
        trainer, values, [batch["clips"], batch["second_clips"]], training
    )
    return first, second, non_trainable


def contrastive_views(
    anon_frames: Tensor | None,
    anon_views: Tensor | None,
    batch: dict,
    views: str = "images",
    pairs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The two sides of the positive pairs of an image adversary: with `views` "images" the
    two views of each anonymized privacy image (the authors' minimax), "frames" two frames of
    each anonymized clip (chosen by the temporal sampler, the paper's Sec. 3.2.2), "both" the
    frame pairs then the image views. The frame pairs are `pairs` (B, 2, H, W, 3), the
    anonymized `pair_frames` of the batch, when given; else the clip frames at `frame_pairs`."""
    if views not in CONTRASTIVE_VIEWS:
        raise ValueError(f"contrastive_views={views!r} is not one of {CONTRASTIVE_VIEWS}")
    first, second = [], []
    if views in ("frames", "both") and pairs is not None:
        first.append(pairs[:, 0])
        second.append(pairs[:, 1])
    elif views in ("frames", "both"):
        clips = batch["clips"]
        num_clips, clip_length = ops.shape(clips)[0], ops.shape(clips)[1]
        positions = ops.cast(batch["frame_pairs"], "int32")
        offsets = ops.arange(num_clips, dtype="int32") * clip_length
        first.append(ops.take(anon_frames, offsets + positions[:, 0], axis=0))
        second.append(ops.take(anon_frames, offsets + positions[:, 1], axis=0))
    if views in ("images", "both") and anon_views is not None:
        shape = ops.shape(anon_views)
        image_pairs = ops.reshape(anon_views, (-1, 2, shape[1], shape[2], shape[3]))
        first.append(image_pairs[:, 0])
        second.append(image_pairs[:, 1])
    if not first:
        raise ValueError(
            f"contrastive_views={views!r} needs the privacy images' `views` in the batch"
        )
    return ops.concatenate(first, axis=0), ops.concatenate(second, axis=0)


def pair_inputs(batch: dict, views: str = "images") -> tuple[Tensor, Tensor]:
    """The raw (un-anonymized) two sides of the positive pairs, laid out as
    `contrastive_views` lays out the anonymized ones: phases that only need the pairs run f_A
    on these images instead of on every frame of every clip. Image views need no clips in the
    batch (the "views" batches of f_B's initialisation), nor frame pairs given as
    `pair_frames` (the "pairs" batches of f_A's identity initialisation)."""
    images = batch.get("views")
    if images is not None:
        shape = ops.shape(images)
        images = ops.reshape(images, (-1, shape[2], shape[3], shape[4]))
    pairs = batch.get("pair_frames")
    frames = None if views == "images" or pairs is not None else fold_time(batch["clips"])
    return contrastive_views(frames, images, batch, views, pairs)


def privacy_loss(
    trainer: StatelessTrainer,
    values: GroupValues,
    first: Tensor,
    second: Tensor,
    temperature: float,
    training: bool,
    group: str = "privacy",
) -> tuple[Tensor, list]:
    """NT-Xent of the embeddings of the two sides by the encoder of `group`, and its new
    non-trainable values. In training mode each side is a call of its own (`run_parts`), as the
    SPAct and penalty authors' f_B updates call f_B on each view (`train_ssl_minimax2.py:108`,
    `train_anonymizer_balance.py:228`)."""
    (first, second), non_trainable = run_parts(trainer, group, values, [first, second], training)
    # Every replica of a data-parallel step gets the negatives of the whole global batch.
    first, second = gather_replicas(first), gather_replicas(second)
    return losses.nt_xent(first, second, temperature), non_trainable


def action_logits(
    trainer: StatelessTrainer,
    values: GroupValues,
    anon_frames: Tensor,
    clip_length: int,
    training: bool,
) -> tuple[Tensor, list]:
    """f_T's logits on the anonymized clips, and f_T's new non-trainable values."""
    shape = ops.shape(anon_frames)
    clips = ops.reshape(anon_frames, (-1, clip_length, shape[1], shape[2], shape[3]))
    return trainer.run("action", values, clips, training=training)


def action_update_loss(
    trainer: StatelessTrainer,
    values: GroupValues,
    anon_frames: Tensor,
    clip_length: int,
    labels: Tensor,
) -> tuple[Tensor, dict]:
    """The loss of an f_T update: cross-entropy of f_T's logits (training mode) on the
    anonymized frames, which the caller stops the gradient of where f_A stays fixed.

    Returns (the loss, the aux of an `Update`'s loss: logs `action_loss` and
    `action_accuracy`, f_T's new non-trainable values)."""
    logits, state = action_logits(trainer, values, anon_frames, clip_length, training=True)
    loss = losses.softmax_cross_entropy(labels, logits)
    logs = {"action_loss": loss, "action_accuracy": losses.accuracy(labels, logits)}
    return loss, {"logs": logs, "non_trainable": {"action": state}}


def multilabel_accuracy(labels: Tensor, logits: Tensor) -> Tensor:
    """Fraction of (example, attribute) entries whose thresholded prediction equals the label."""
    predicted = ops.cast(logits > 0, "float32")
    return ops.mean(ops.cast(ops.equal(predicted, ops.cast(labels, "float32")), "float32"))
