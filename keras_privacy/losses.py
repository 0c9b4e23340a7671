"""Losses of the privacy-preserving methods, written with `keras.ops` for every backend.

Every loss casts its inputs to float32 first, so that under a mixed-precision policy
(`mixed_bfloat16`, `mixed_float16`) the softmax, log-sum-exp and square roots stay exact.
"""

from __future__ import annotations

from keras import ops

from keras_privacy.types import Tensor


def l2_normalized(x: Tensor) -> Tensor:
    """The rows of `x` (N, D) as float32 unit vectors.

    The norm is clamped below by 1e-12 through the squared norm, as PyTorch's `F.normalize`, so
    a zero row stays zero and its gradient is finite on every backend (the derivative of `sqrt`
    at 0 would make it NaN on JAX).
    """
    x = ops.cast(x, "float32")
    return x * ops.rsqrt(ops.maximum(ops.sum(ops.square(x), axis=1, keepdims=True), 1e-24))


def nt_xent(z1: Tensor, z2: Tensor, temperature: float = 0.1) -> Tensor:
    """NT-Xent (SimCLR) loss in the full 2N x 2N form.

    Row i of `z1` and row i of `z2` are the two views of one example (the positive pair); every
    other view in the batch, from either side, is a negative. Embeddings are L2-normalised here, so
    the similarity is the cosine. This is SPAct's Eq. 5 averaged over all 2N anchors (not the
    cross-view-only variant of keras-io's SimCLR example).

    Args:
        z1: (N, D) embeddings of the first views.
        z2: (N, D) embeddings of the second views.
        temperature: Softmax temperature tau (SPAct: 0.1).

    Returns:
        The scalar mean loss.
    """
    z = l2_normalized(ops.concatenate([z1, z2], axis=0))
    n2 = ops.shape(z)[0]
    n = n2 // 2
    logits = ops.matmul(z, ops.transpose(z)) / temperature
    logits = ops.where(ops.eye(n2, dtype="bool"), -1e9, logits)
    positives = ops.concatenate([ops.arange(n, n2), ops.arange(0, n)], axis=0)
    log_prob = logits - ops.logsumexp(logits, axis=1, keepdims=True)
    positive_log_prob = ops.take_along_axis(log_prob, positives[:, None], axis=1)
    return -ops.mean(positive_log_prob)


def softmax_cross_entropy(labels: Tensor, logits: Tensor) -> Tensor:
    """Mean sparse categorical cross-entropy of integer `labels` under `logits`."""
    logits = ops.cast(logits, "float32")
    return ops.mean(ops.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def accuracy(labels: Tensor, logits: Tensor) -> Tensor:
    """Fraction of rows of `logits` whose arg-max equals the integer label."""
    predicted = ops.argmax(logits, axis=-1)
    return ops.mean(ops.cast(ops.equal(predicted, ops.cast(labels, predicted.dtype)), "float32"))


def binary_cross_entropy(labels: Tensor, logits: Tensor) -> Tensor:
    """Sigmoid cross-entropy of `logits` against `labels`, entry by entry (no reduction)."""
    logits = ops.cast(logits, "float32")
    labels = ops.cast(labels, "float32")
    return ops.maximum(logits, 0) - logits * labels + ops.log1p(ops.exp(-ops.abs(logits)))


def masked_binary_cross_entropy(
    labels: Tensor, logits: Tensor, mask: Tensor | None = None
) -> Tensor:
    """Mean binary cross-entropy over the (example, attribute) entries where `mask` is 1.

    Masked entries ("label not available", as in the meta-generalisation support/query sets)
    contribute nothing to the loss or its gradient. With no mask every entry counts.
    """
    per_entry = binary_cross_entropy(labels, logits)
    if mask is None:
        return ops.mean(per_entry)
    mask = ops.cast(mask, "float32")
    return ops.sum(per_entry * mask) / ops.maximum(ops.sum(mask), 1.0)


def l1_reconstruction(target: Tensor, output: Tensor) -> Tensor:
    """Mean absolute error, the identity-initialisation loss of the anonymizer."""
    return ops.mean(ops.abs(ops.cast(target, "float32") - ops.cast(output, "float32")))


def rms_penalty(inputs: Tensor, outputs: Tensor, budget: float) -> Tensor:
    """Penalty-driven anonymization: max(0, RMS(inputs - outputs) - budget), per sample, averaged.

    The RMS is taken per sample (over all its pixels) and the hinge applied per sample, so one
    strongly changed clip is penalised even when the others are untouched. Differentiable
    everywhere except at the hinge (unlike the authors' `.item()` version, which never was).
    """
    diff = ops.cast(inputs, "float32") - ops.cast(outputs, "float32")
    diff = ops.reshape(diff, (ops.shape(inputs)[0], -1))
    rms = ops.sqrt(ops.mean(ops.square(diff), axis=1) + 1e-12)
    return ops.mean(ops.relu(rms - budget))


def triplet_margin(
    anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0
) -> Tensor:
    """Triplet margin loss: mean of max(0, ||a - p|| - ||a - n|| + margin), Euclidean distances.

    The form of PyTorch's `TripletMarginLoss` (p = 2, no squaring), which TeD-SPAD's temporal
    term uses with margin mu = 1 on L2-normalised embeddings. Rows of the three (N, D)
    arguments are the triplets.
    """
    anchor, positive, negative = (ops.cast(x, "float32") for x in (anchor, positive, negative))
    positive_distance = ops.sqrt(ops.sum(ops.square(anchor - positive), axis=-1) + 1e-12)
    negative_distance = ops.sqrt(ops.sum(ops.square(anchor - negative), axis=-1) + 1e-12)
    return ops.mean(ops.relu(positive_distance - negative_distance + margin))


def rotations(images: Tensor) -> tuple[Tensor, Tensor]:
    """The four rotations of every image and their RotNet labels.

    `images` (N, S, S, C), square. Returns (4N, S, S, C) images, rotated counter-clockwise by
    0, 90, 180 and 270 degrees (block k holds the rotation by k * 90 degrees, `np.rot90(image, k)`
    per image), and the (4N,) int32 labels 0..3.
    """
    shape = ops.shape(images)
    if shape[1] != shape[2]:
        raise ValueError(f"RotNet needs square images, got {shape[1]}x{shape[2]}")
    transposed = ops.transpose(images, (0, 2, 1, 3))
    rotated = [
        images,
        ops.flip(transposed, axis=1),
        ops.flip(ops.flip(images, axis=1), axis=2),
        ops.flip(transposed, axis=2),
    ]
    labels = ops.repeat(ops.arange(4, dtype="int32"), shape[0])
    return ops.concatenate(rotated, axis=0), labels


def info_nce(queries: Tensor, keys: Tensor, queue: Tensor, temperature: float = 0.2) -> Tensor:
    """MoCo's InfoNCE: row i of `keys` is the positive of row i of `queries`, every row of
    `queue` (K, D) a negative. Queries, keys and the queue are L2-normalised here.

    Returns the scalar mean of -log softmax of the positive among [positive, K negatives].
    """
    queries, keys, queue = l2_normalized(queries), l2_normalized(keys), l2_normalized(queue)
    positive = ops.sum(queries * keys, axis=1, keepdims=True)
    logits = ops.concatenate([positive, ops.matmul(queries, ops.transpose(queue))], axis=1)
    logits = logits / temperature
    return -ops.mean(logits[:, 0] - ops.logsumexp(logits, axis=1))
