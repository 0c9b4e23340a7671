"""Action and privacy metrics of the SPAct / TeD-SPAD evaluation (NumPy and scikit-learn only).

- Action: top-1 of the video-level prediction, the mean softmax over a video's clips; for
  multi-label actions (P-HVU), cMAP over classes of the mean sigmoid over a video's clips.
- Privacy: cMAP, the mean over attributes of scikit-learn's `average_precision_score`, and F1,
  the mean over attributes of the F1 of probabilities thresholded at 0.5 by default
  (probabilities, not logits: SPAct's code thresholds logits at 0.5, i.e. probabilities at
  0.62246, which `--eval_f1_threshold` can set).

An attribute with no positive example in the test set has no average precision (and an F1 that is
either 0 or undefined), so both privacy metrics skip it and name it in `MetricResult.skipped`
rather than returning NaN or a silent 0.

Scores that are NaN or infinite (a diverged model) raise ValueError naming how many there are and
their first rows, in every metric and interval.

Each metric has a 95 % interval by bootstrap over the test units (videos for action, images for
privacy): `samples` resamples of the units with replacement, drawn by a seeded NumPy generator,
the metric recomputed on each, then the 2.5th and 97.5th percentiles of the values. Each
resample of a privacy metric averages the attributes the full set's value averages (those with
a positive): a resample that draws no positive of one of them has no value and is left out,
rather than averaged over fewer attributes, and a warning says how many were left out.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

import numpy as np
from sklearn.metrics import average_precision_score, f1_score

_SUM_TOLERANCE = 1e-2
BOOTSTRAP_SAMPLES = 1000
"""Default number of bootstrap resamples of an interval (`--eval_bootstrap`)."""
_INTERVAL_PERCENTILES = (2.5, 97.5)
_CHUNK = 100
"""Resamples whose unit counts are held in memory at once."""
_ROWS_SHOWN = 5
"""Rows named by the error about scores that are not finite."""


@dataclasses.dataclass(frozen=True)
class MetricResult:
    """A mean over attributes (or classes), the per-attribute values it averages, and the
    attributes left out because the test set holds no positive example of them."""

    value: float
    per_attribute: dict[str, float]
    skipped: tuple[str, ...]


def top1(probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of rows of `probs` (N, C) whose arg-max equals the integer label (N,)."""
    probs, labels = np.asarray(probs), np.asarray(labels)
    if probs.ndim != 2 or labels.shape != probs.shape[:1]:
        raise ValueError(f"expected probs (N, C), labels (N,); got {probs.shape}, {labels.shape}")
    _check_finite(probs)
    return float(np.mean(np.argmax(probs, axis=1) == labels))


def video_scores(clip_scores: np.ndarray, video_index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the clip rows of each video: (sorted unique video ids, (V, C) mean scores)."""
    clip_scores, video_index = np.asarray(clip_scores, np.float64), np.asarray(video_index)
    if clip_scores.ndim != 2 or video_index.shape != clip_scores.shape[:1]:
        raise ValueError(
            f"expected scores (N, C) and video_index (N,), got {clip_scores.shape}, "
            f"{video_index.shape}"
        )
    _check_finite(clip_scores)
    videos, inverse = np.unique(video_index, return_inverse=True)
    sums = np.zeros((len(videos), clip_scores.shape[1]))
    np.add.at(sums, inverse, clip_scores)
    counts = np.bincount(inverse, minlength=len(videos))
    return videos, sums / counts[:, None]


def video_top1(clip_probs: np.ndarray, video_index: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 of the video-level prediction: mean softmax over each video's clips, then arg-max.

    Args:
        clip_probs: (N, C) softmax probabilities of N clips (rows must sum to 1: averaging
            logits instead is a different prediction, so logits are rejected).
        video_index: (N,) id of the video each clip comes from (any integers).
        labels: (N,) integer action label of each clip; the clips of a video must agree.
    """
    clip_probs, labels = np.asarray(clip_probs), np.asarray(labels)
    _check_softmax(clip_probs)
    _, probs = video_scores(clip_probs, video_index)
    return top1(probs, _video_labels(labels, np.asarray(video_index)))


def privacy_cmap(
    labels: np.ndarray, probs: np.ndarray, names: Sequence[str] | None = None
) -> MetricResult:
    """Privacy cMAP: mean over attributes of the average precision of `probs` (N, A) against
    the binary `labels` (N, A). AP depends only on the ranking, so logits give the same value,
    and rank better: float64 sigmoid probabilities are all 1.0 above a logit of about 37."""
    return _mean_over_attributes(labels, probs, names, average_precision_score)


def action_cmap(
    labels: np.ndarray, scores: np.ndarray, names: Sequence[str] | None = None
) -> MetricResult:
    """Multi-label action cMAP (e.g. P-HVU): mean over classes of the average precision of the
    (N, C) `scores` against binary `labels`; classes with no positive are skipped and named.
    For video-level cMAP, average the clip scores first with `video_scores`."""
    return _mean_over_attributes(labels, scores, names, average_precision_score)


def video_action_cmap(
    clip_probs: np.ndarray,
    video_index: np.ndarray,
    labels: np.ndarray,
    names: Sequence[str] | None = None,
) -> MetricResult:
    """Video-level multi-label action cMAP (P-HVU): `action_cmap` of the mean over each video's
    clips of the sigmoid probabilities.

    Args:
        clip_probs: (N, C) sigmoid probabilities of N clips (values outside [0, 1] are logits,
            whose mean ranks videos differently, so they are rejected).
        video_index: (N,) id of the video each clip comes from (any integers).
        labels: (N, C) multi-hot action labels of each clip; the clips of a video must agree.
        names: Class names, naming the per-class APs and the classes skipped for having no
            positive test video.
    """
    clip_probs = np.asarray(clip_probs, np.float64)
    _, probs = video_scores(clip_probs, video_index)
    if clip_probs.size and (clip_probs.min() < 0.0 or clip_probs.max() > 1.0):
        raise ValueError("video_action_cmap expects sigmoid probabilities in [0, 1] (logits?)")
    return action_cmap(_video_labels(np.asarray(labels), np.asarray(video_index)), probs, names)


def privacy_f1(
    labels: np.ndarray,
    probs: np.ndarray,
    threshold: float = 0.5,
    names: Sequence[str] | None = None,
) -> MetricResult:
    """Privacy F1: mean over attributes of the F1 of `probs >= threshold` against `labels`.

    `probs` must be sigmoid probabilities in [0, 1] (values outside raise: they are logits).
    Attributes with no positive label are skipped, as in `privacy_cmap`, so both metrics
    average the same attributes. A kept attribute never predicted positive has F1 0.
    """
    _, probs = _checked(labels, probs)
    if probs.size and (probs.min() < 0.0 or probs.max() > 1.0):
        raise ValueError("privacy_f1 expects probabilities in [0, 1]; got values outside (logits?)")

    def f1(y_true: np.ndarray, y_prob: np.ndarray) -> float:
        return f1_score(y_true, y_prob >= threshold, zero_division=0.0)

    return _mean_over_attributes(labels, probs, names, f1)


def relative_drop(value: float, raw_value: float) -> float:
    """Relative drop of `value` from the raw-data `raw_value`: (raw - value) / raw, as a
    fraction (SPAct's "down 14%" is 0.14); negative when `value` is higher than raw."""
    if raw_value == 0:
        raise ValueError("relative drop from a raw value of 0 is undefined")
    return (raw_value - value) / raw_value


def bootstrap_interval(
    metric: Callable[[np.ndarray], np.ndarray],
    units: int,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """95 % bootstrap interval of a metric of `units` test units.

    Resample b draws `rng.integers(0, units, units)` from `np.random.default_rng(seed)` (one
    call per resample, in order), and `metric` maps the (b, units) counts of each unit in a
    chunk of resamples to their (b,) values, NaN where undefined (those are left out, and a
    warning counts them: the interval is then over the resamples that define the metric).
    Returns the 2.5th and 97.5th percentiles of the values.
    """
    if units < 1 or samples < 1:
        raise ValueError(f"a bootstrap needs units and samples; got {units}, {samples}")
    rng = np.random.default_rng(seed)
    values = []
    for start in range(0, samples, _CHUNK):
        draws = [rng.integers(0, units, units) for _ in range(min(_CHUNK, samples - start))]
        values.append(metric(np.stack([np.bincount(d, minlength=units) for d in draws])))
    values = np.concatenate(values)
    values = values[~np.isnan(values)]
    if not values.size:
        raise ValueError("the metric is undefined on every bootstrap resample")
    if values.size < samples:
        logging.getLogger(__name__).warning(
            "%d of %d bootstrap resamples left out: the metric is undefined on them (a "
            "resample that draws no positive of an averaged attribute); the interval is over "
            "the other %d",
            samples - values.size,
            samples,
            values.size,
        )
    low, high = np.percentile(values, _INTERVAL_PERCENTILES)
    return float(low), float(high)


def video_top1_interval(
    clip_probs: np.ndarray,
    video_index: np.ndarray,
    labels: np.ndarray,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """95 % bootstrap interval of `video_top1` (arguments alike), resampling videos."""
    clip_probs, labels = np.asarray(clip_probs), np.asarray(labels)
    _check_softmax(clip_probs)
    _, probs = video_scores(clip_probs, video_index)
    correct = np.argmax(probs, axis=1) == _video_labels(labels, np.asarray(video_index))
    return bootstrap_interval(
        lambda counts: counts @ correct / len(correct), len(correct), samples, seed
    )


def cmap_interval(
    labels: np.ndarray,
    scores: np.ndarray,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """95 % bootstrap interval of `privacy_cmap` / `action_cmap` of (N, A) `labels` and
    `scores`, resampling rows (images, or videos after `video_scores`), or with `groups` (N,)
    the groups of rows (`row_groups`: the frames of one video together). Every resample
    averages the attributes the estimate averages (those with a positive test example): one
    that draws no positive of any of them is left out as undefined, rather than averaging
    fewer attributes, which would be another metric (a rare attribute's low AP dropped)."""
    labels, scores = _checked(labels, scores)
    units, expand = _resampled_units(groups, len(labels))
    averaged = np.flatnonzero(_averaged_attributes(labels))

    def cmap(counts: np.ndarray) -> np.ndarray:
        counts = expand(counts)
        per_attribute = [
            _weighted_average_precision(labels[:, column], scores[:, column], counts)
            for column in averaged
        ]
        return np.stack(per_attribute, axis=1).mean(axis=1)  # NaN where one is undefined

    return bootstrap_interval(cmap, units, samples, seed)


def privacy_f1_interval(
    labels: np.ndarray,
    probs: np.ndarray,
    threshold: float = 0.5,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = 0,
    groups: np.ndarray | None = None,
) -> tuple[float, float]:
    """95 % bootstrap interval of `privacy_f1` (arguments alike), resampling images, or with
    `groups` (N,) the groups of images (`row_groups`), over the attributes the estimate
    averages, as `cmap_interval`."""
    labels, probs = _checked(labels, probs)
    averaged = _averaged_attributes(labels)
    labels, predicted = labels[:, averaged], probs[:, averaged] >= threshold
    units, expand = _resampled_units(groups, len(labels))

    def f1(counts: np.ndarray) -> np.ndarray:
        counts = expand(counts)
        true_positives = counts @ (labels & predicted)
        positives, predictions = counts @ labels, counts @ predicted
        scores = 2 * true_positives / np.maximum(positives + predictions, 1)
        return np.where(positives > 0, scores, np.nan).mean(axis=1)

    return bootstrap_interval(f1, units, samples, seed)


def row_groups(names: Sequence[str]) -> np.ndarray:
    """(N,) group index of each row named in `names`: rows of one name together (e.g. the
    video each test frame was taken from), in order of first appearance."""
    _, first, inverse = np.unique(np.asarray(names), return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse]


def _resampled_units(groups: np.ndarray | None, rows: int) -> tuple[int, Callable]:
    """The bootstrap's units and the map from their (b, units) counts to the rows' (b, rows)
    counts: the rows themselves, or with `groups` (rows,) the groups, each row drawn as often
    as its group."""
    if groups is None:
        return rows, lambda counts: counts
    groups = np.asarray(groups)
    if groups.shape != (rows,):
        raise ValueError(f"groups of shape {groups.shape} for {rows} rows")
    units, groups = np.unique(groups, return_inverse=True)  # any ids: gaps are no units
    return len(units), lambda counts: counts[:, groups]


def _weighted_average_precision(
    labels: np.ndarray, scores: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """scikit-learn's average precision of binary `labels` (N,) ranked by `scores` (N,), each
    unit counted `counts` (B, N) times, for each of the B rows (NaN without a positive).
    Ties share one threshold, so a unit drawn twice weighs as its two copies would."""
    order = np.argsort(-scores, kind="stable")
    labels, scores, counts = labels[order], scores[order], counts[:, order]
    last = np.r_[np.flatnonzero(np.diff(scores)), len(scores) - 1]
    true_positives = np.cumsum(counts * labels, axis=1)[:, last].astype(np.float64)
    predicted = np.cumsum(counts, axis=1)[:, last]
    precision = np.divide(
        true_positives, predicted, out=np.zeros_like(true_positives), where=predicted > 0
    )
    recall_steps = np.diff(true_positives, axis=1, prepend=0.0)
    positives = true_positives[:, -1]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(recall_steps * precision, axis=1) / positives


def _averaged_attributes(labels: np.ndarray) -> np.ndarray:
    """(A,) whether each attribute has a positive: those the metrics average."""
    averaged = labels.any(axis=0)
    if not averaged.any():
        raise ValueError("no attribute has a positive example: the metric is undefined")
    return averaged


def _checked(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    """Binary (N, A) labels and finite float (N, A) scores, of one shape."""
    labels, scores = np.asarray(labels), np.asarray(scores, np.float64)
    if labels.ndim != 2 or labels.shape != scores.shape:
        raise ValueError(
            f"expected labels, scores of one (N, A) shape; got {labels.shape}, {scores.shape}"
        )
    _check_finite(scores)
    return labels > 0, scores


def _check_finite(scores: np.ndarray) -> None:
    """Raise ValueError on empty `scores` (N, C), or naming how many of them are NaN or
    infinite, and their first rows."""
    if not scores.size:
        raise ValueError(f"no scores to evaluate (shape {scores.shape}): is the test set empty?")
    finite = np.isfinite(scores)
    if finite.all():
        return
    rows = np.flatnonzero(~finite.all(axis=1))
    shown = ", ".join(str(row) for row in rows[:_ROWS_SHOWN])
    if len(rows) > _ROWS_SHOWN:
        shown += f" and {len(rows) - _ROWS_SHOWN} more"
    raise ValueError(
        f"scores that are not finite (NaN or inf): {np.count_nonzero(~finite)}, in rows {shown}"
    )


def _mean_over_attributes(labels, scores, names, metric) -> MetricResult:
    """Apply `metric` to every column with at least one positive label and average them."""
    labels, scores = _checked(labels, scores)
    names = _attribute_names(names, labels.shape[1])
    per_attribute, skipped = {}, []
    for column, name in enumerate(names):
        if labels[:, column].any():
            per_attribute[name] = float(metric(labels[:, column], scores[:, column]))
        else:
            skipped.append(name)
    if not per_attribute:
        raise ValueError("no attribute has a positive example: the metric is undefined")
    value = float(np.mean(list(per_attribute.values())))
    return MetricResult(value=value, per_attribute=per_attribute, skipped=tuple(skipped))


def _attribute_names(names: Sequence[str] | None, count: int) -> list[str]:
    if names is None:
        return [str(column) for column in range(count)]
    if len(names) != count:
        raise ValueError(f"{len(names)} names for {count} attributes")
    return list(names)


def _check_softmax(probs: np.ndarray) -> None:
    message = "expected (N, C) softmax probabilities whose rows sum to 1 (logits?)"
    if probs.ndim != 2:
        raise ValueError(message)
    _check_finite(probs)
    if probs.min() < 0 or not np.allclose(probs.sum(axis=1), 1.0, atol=_SUM_TOLERANCE):
        raise ValueError(message)


def _video_labels(labels: np.ndarray, video_index: np.ndarray) -> np.ndarray:
    """The label (or multi-hot row) of each video (sorted ids), checking that all its clips
    carry the same one."""
    if labels.shape[:1] != video_index.shape or labels.ndim > 2:
        raise ValueError(f"labels {labels.shape} and video_index {video_index.shape} differ")
    videos, inverse = np.unique(video_index, return_inverse=True)
    result = np.empty((len(videos), *labels.shape[1:]), dtype=labels.dtype)
    result[inverse] = labels
    differs = (result[inverse] != labels).reshape(len(labels), -1).any(axis=1)
    disagree = np.unique(video_index[differs])
    if disagree.size:
        raise ValueError(f"clips of videos {disagree.tolist()} carry different labels")
    return result
