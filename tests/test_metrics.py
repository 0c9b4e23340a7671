"""Action and privacy metrics against scikit-learn and hand-worked cases."""

import math

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, f1_score

from keras_privacy.evaluation.metrics import (
    action_cmap,
    cmap_interval,
    privacy_cmap,
    privacy_f1,
    privacy_f1_interval,
    relative_drop,
    row_groups,
    top1,
    video_action_cmap,
    video_scores,
    video_top1,
    video_top1_interval,
)

pytestmark = pytest.mark.backend_independent


def _random_multilabel(seed=0, n=200, attributes=5):
    rng = np.random.default_rng(seed)
    labels = (rng.random((n, attributes)) < 0.3).astype(np.int64)
    probs = rng.random((n, attributes))
    return labels, probs


def test_perfect_predictions_score_one():
    labels, _ = _random_multilabel()
    probs = labels * 0.9 + 0.05
    assert privacy_cmap(labels, probs).value == pytest.approx(1.0)
    assert privacy_f1(labels, probs).value == pytest.approx(1.0)


def test_random_predictions_match_scikit_learn():
    labels, probs = _random_multilabel()
    cmap = privacy_cmap(labels, probs, names=list("abcde"))
    expected = [average_precision_score(labels[:, k], probs[:, k]) for k in range(5)]
    assert cmap.value == pytest.approx(np.mean(expected))
    assert cmap.value == pytest.approx(average_precision_score(labels, probs, average="macro"))
    assert list(cmap.per_attribute) == list("abcde")
    assert cmap.skipped == ()
    f1 = privacy_f1(labels, probs)
    assert f1.value == pytest.approx(f1_score(labels, probs >= 0.5, average="macro"))


def test_constant_predictions():
    labels, _ = _random_multilabel()
    prevalence = labels.mean(axis=0)
    # All scores tied: AP is the fraction of positives.
    assert privacy_cmap(labels, np.full(labels.shape, 0.7)).value == pytest.approx(
        prevalence.mean()
    )
    # Everything predicted present: precision = prevalence, recall = 1.
    all_present = privacy_f1(labels, np.full(labels.shape, 0.7)).value
    assert all_present == pytest.approx(np.mean(2 * prevalence / (1 + prevalence)))
    assert privacy_f1(labels, np.full(labels.shape, 0.3)).value == 0.0


def test_hand_worked_average_precision_and_f1():
    labels = np.array([[1], [0], [1], [0]])
    # Ranked: positive (precision 1), negative, positive (precision 2/3).
    scores = np.array([[0.9], [0.8], [0.7], [0.1]])
    assert privacy_cmap(labels, scores).value == pytest.approx((1 + 2 / 3) / 2)
    # Thresholded at 0.5 (inclusive): TP 1, FP 1, FN 1 -> F1 = 2 / 4.
    probs = np.array([[0.5], [0.7], [0.45], [0.2]])
    assert privacy_f1(labels, probs).value == pytest.approx(0.5)


def test_attribute_without_positive_is_skipped_and_reported_not_nan():
    labels, probs = _random_multilabel()
    labels[:, 2] = 0
    names = ["face", "gender", "tattoo", "skin", "nudity"]
    for metric in (privacy_cmap, privacy_f1):
        result = metric(labels, probs, names=names)
        assert result.skipped == ("tattoo",)
        assert "tattoo" not in result.per_attribute
        assert not math.isnan(result.value)
        assert result.value == pytest.approx(np.mean(list(result.per_attribute.values())))


def test_no_attribute_with_positive_raises():
    with pytest.raises(ValueError, match="no attribute"):
        privacy_cmap(np.zeros((4, 2)), np.full((4, 2), 0.5))


def test_f1_rejects_logits():
    labels, probs = _random_multilabel()
    with pytest.raises(ValueError, match="probabilities"):
        privacy_f1(labels, np.log(probs / (1 - probs)))


def test_action_cmap_matches_scikit_learn_and_skips_absent_classes():
    labels, scores = _random_multilabel(seed=1, attributes=4)
    labels[:, 0] = 0
    result = action_cmap(labels, scores)
    expected = np.mean([average_precision_score(labels[:, k], scores[:, k]) for k in (1, 2, 3)])
    assert result.value == pytest.approx(expected)
    assert result.skipped == ("0",)


def test_top1():
    probs = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]])
    assert top1(probs, np.array([0, 1, 1])) == pytest.approx(2 / 3)


def test_video_level_averaging_changes_the_answer():
    # Video 7 (label 0): one confident right clip, two mildly wrong ones -> mean says 1: wrong.
    # Video 3 (label 0): two mildly wrong clips, one confident right one -> mean says 0: right.
    clip_probs = np.array(
        [[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.45, 0.55], [0.3, 0.7], [1.0, 0.0]]
    )
    video_index = np.array([7, 3, 7, 3, 7, 3])
    labels = np.zeros(6, dtype=np.int64)
    assert top1(clip_probs, labels) == pytest.approx(2 / 6)
    assert video_top1(clip_probs, video_index, labels) == pytest.approx(0.5)
    videos, means = video_scores(clip_probs, video_index)
    np.testing.assert_array_equal(videos, [3, 7])
    np.testing.assert_allclose(means, [[0.6166667, 0.3833333], [0.4666667, 0.5333333]], atol=1e-6)


def test_video_top1_rejects_logits_and_inconsistent_labels():
    with pytest.raises(ValueError, match="softmax"):
        video_top1(np.array([[2.0, 1.0]]), np.array([0]), np.array([0]))
    with pytest.raises(ValueError, match="different labels"):
        video_top1(np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([1, 1]), np.array([0, 1]))


def every_metric(labels, probs, softmax, videos, actions, clip_labels) -> list:
    """Each metric and interval, called on (N, A) `labels` and `probs`, (N, C) `softmax`, the
    (N,) `videos` and `actions` of clips, and the clips' multi-hot `clip_labels`."""
    return [
        lambda: privacy_cmap(labels, probs),
        lambda: privacy_f1(labels, probs),
        lambda: action_cmap(labels, probs),
        lambda: cmap_interval(labels, probs, samples=20),
        lambda: privacy_f1_interval(labels, probs, samples=20),
        lambda: video_action_cmap(probs, videos, clip_labels),
        lambda: top1(softmax, actions),
        lambda: video_scores(softmax, videos),
        lambda: video_top1(softmax, videos, actions),
        lambda: video_top1_interval(softmax, videos, actions, samples=20),
    ]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_scores_that_are_not_finite_are_refused_by_every_metric(bad):
    # A diverged model's NaN on a positive image: F1 counted it as not predicted and the
    # intervals ranked it somewhere; cMAP raised scikit-learn's bare "Input contains NaN.".
    labels = np.array([[1, 0], [1, 1], [0, 1], [0, 0], [1, 1]])
    probs = np.array([[0.9, 0.2], [bad, 0.8], [0.2, 0.6], [0.1, 0.3], [bad, bad]])
    softmax = np.array([[0.5, 0.5], [bad, 0.5], [0.3, 0.7], [0.5, 0.5], [bad, bad]])
    videos, actions = np.array([0, 0, 1, 1, 2]), np.array([0, 0, 1, 1, 0])
    for call in every_metric(labels, probs, softmax, videos, actions, labels[[0, 0, 2, 2, 4]]):
        with pytest.raises(ValueError, match=r"not finite \(NaN or inf\): 3, in rows 1, 4$"):
            call()


def test_an_empty_test_set_is_named_by_every_metric():
    # Before, numpy's "zero-size array to reduction operation" or a NaN top-1.
    labels, scores = np.zeros((0, 2), np.int64), np.zeros((0, 2))
    videos = actions = np.zeros(0, np.int64)
    for call in every_metric(labels, scores, scores, videos, actions, labels):
        with pytest.raises(ValueError, match=r"no scores to evaluate \(shape \(0, 2\)\)"):
            call()


def test_scores_that_are_not_finite_name_their_first_rows():
    probs = np.full((20, 2), 0.5)
    probs[3:, 1] = np.nan
    with pytest.raises(ValueError, match=r": 17, in rows 3, 4, 5, 6, 7 and 12 more$"):
        privacy_cmap(np.ones((20, 2)), probs)


def test_relative_drop():
    # SPAct Table 1: supervised cMAP 55.32 from raw 64.41 is "down 14%".
    assert relative_drop(55.32, 64.41) == pytest.approx(0.1411, abs=1e-4)
    assert relative_drop(0.6, 0.5) == pytest.approx(-0.2)
    with pytest.raises(ValueError):
        relative_drop(0.3, 0.0)


def _numpy_bootstrap(metric, units, samples, seed):
    """The bootstrap transcribed: resample the units with replacement, recompute the metric,
    leave out resamples where it is undefined, take the 2.5 / 97.5 percentiles."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(samples):
        drawn = rng.integers(0, units, units)
        try:
            values.append(metric(drawn))
        except ValueError:  # no attribute with a positive in this resample
            continue
    return np.percentile(values, [2.5, 97.5])


def _on_the_estimates_attributes(metric, labels):
    """`metric(rows)`, undefined (ValueError) on a resample of `rows` that lacks a positive of
    an attribute the estimate on every row averages: each value is a mean of one set."""
    averaged = labels.any(axis=0)

    def value(rows):
        if not labels[rows][:, averaged].any(axis=0).all():
            raise ValueError("an averaged attribute has no positive in this resample")
        return metric(rows)

    return value


def test_privacy_intervals_equal_a_numpy_bootstrap_with_the_same_seed():
    rng = np.random.default_rng(1)
    labels = (rng.random((40, 3)) < [0.4, 0.2, 0.03]).astype(np.int64)
    labels[0, 2] = 1  # a rare attribute, absent from many resamples (undefined there)
    labels[:, 1] = 0  # an attribute without a positive, left out of the estimate and of each
    probs = np.round(rng.random((40, 3)), 1)  # ties between images
    cmap = _on_the_estimates_attributes(lambda i: privacy_cmap(labels[i], probs[i]).value, labels)
    expected = _numpy_bootstrap(cmap, 40, 300, 7)
    np.testing.assert_allclose(cmap_interval(labels, probs, samples=300, seed=7), expected)
    f1 = _on_the_estimates_attributes(lambda i: privacy_f1(labels[i], probs[i]).value, labels)
    expected = _numpy_bootstrap(f1, 40, 300, 7)
    np.testing.assert_allclose(privacy_f1_interval(labels, probs, samples=300, seed=7), expected)
    # A rare attribute's low AP stays in every value: averaging fewer attributes where it is
    # not drawn would be another metric, whose values reach far above the estimate.
    rare = np.zeros((200, 2), np.int64)
    rare[:40, 0] = 1
    rare[150, 1] = 1
    scores = np.where(rare == 1, 0.9, 0.1)
    scores[150, 1] = 0.0  # its one positive ranked last: an AP near 0
    estimate = privacy_cmap(rare, scores).value
    low, high = cmap_interval(rare, scores, samples=200, seed=0)
    assert low <= estimate <= high < estimate + 0.05
    # Resamples with no positive of any attribute are left out, not counted as 0.
    only = np.zeros((5, 1), np.int64)
    only[0] = 1
    low, _ = cmap_interval(only, rng.random((5, 1)), samples=50, seed=0)
    assert low > 0


def test_an_interval_says_how_many_resamples_it_left_out(caplog):
    only = np.zeros((5, 1), np.int64)
    only[0] = 1
    draws = np.random.default_rng(0)
    undefined = sum(0 not in draws.integers(0, 5, 5) for _ in range(50))
    assert undefined > 0
    with caplog.at_level("WARNING"):
        cmap_interval(only, np.linspace(0, 1, 5)[:, None], samples=50, seed=0)
    assert f"{undefined} of 50 bootstrap resamples left out" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        cmap_interval(np.eye(5, dtype=np.int64)[:, :1] | 1, np.ones((5, 1)), 50, 0)
    assert "left out" not in caplog.text


def test_grouped_intervals_resample_whole_groups():
    # Test frames of one video (PA-HMDB51's) are resampled together: three frames of each of
    # 12 videos, their rows drawn as a numpy bootstrap over the videos draws them.
    rng = np.random.default_rng(2)
    labels = (rng.random((36, 3)) < 0.4).astype(np.int64)
    labels[0] = 1
    probs = np.round(rng.random((36, 3)), 1)
    names = [f"video{v}" for v in rng.permutation(np.repeat(np.arange(12), 3))]
    groups = row_groups(names)
    members = [np.flatnonzero(groups == g) for g in range(12)]

    def rows(drawn):
        return np.concatenate([members[g] for g in drawn])

    expected = _numpy_bootstrap(
        lambda d: privacy_cmap(labels[rows(d)], probs[rows(d)]).value, 12, 200, 3
    )
    np.testing.assert_allclose(cmap_interval(labels, probs, 200, 3, groups), expected)
    expected = _numpy_bootstrap(
        lambda d: privacy_f1(labels[rows(d)], probs[rows(d)]).value, 12, 200, 3
    )
    np.testing.assert_allclose(
        privacy_f1_interval(labels, probs, samples=200, seed=3, groups=groups), expected
    )
    # Group ids with gaps are the same groups: no empty unit enters the resamples.
    gapped = cmap_interval(labels, probs, 200, 3, groups * 7 + 5)
    np.testing.assert_allclose(gapped, cmap_interval(labels, probs, 200, 3, groups))
    assert row_groups(["b", "a", "b", "c"]).tolist() == [0, 1, 0, 2]
    with pytest.raises(ValueError, match="groups of shape"):
        cmap_interval(labels, probs, 10, 0, groups[:5])


def test_video_top1_interval_equals_a_numpy_bootstrap_over_videos():
    rng = np.random.default_rng(2)
    videos = np.repeat(np.arange(30), 3)
    labels = np.repeat(rng.integers(0, 4, 30), 3)
    probs = rng.dirichlet(np.ones(4), size=90)
    _, video_probs = video_scores(probs, videos)
    correct = np.argmax(video_probs, axis=1) == labels[::3]
    expected = _numpy_bootstrap(lambda i: correct[i].mean(), 30, 200, 3)
    interval = video_top1_interval(probs, videos, labels, samples=200, seed=3)
    np.testing.assert_allclose(interval, expected)
    assert interval[0] <= video_top1(probs, videos, labels) <= interval[1]
