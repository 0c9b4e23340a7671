import numpy as np
import pytest
from keras import ops

from keras_privacy import losses


def nt_xent_reference(z1, z2, temperature):
    """SPAct Eq. 5 averaged over all 2N anchors, written with loops."""
    z = np.concatenate([z1, z2])
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    n = len(z1)
    total = 0.0
    for i in range(2 * n):
        positive = (i + n) % (2 * n)
        sims = np.exp(z @ z[i] / temperature)
        denominator = sims.sum() - sims[i]
        total += -np.log(sims[positive] / denominator)
    return total / (2 * n)


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_nt_xent_matches_numpy_reference(temperature):
    rng = np.random.default_rng(1)
    z1, z2 = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    got = float(losses.nt_xent(z1.astype("float32"), z2.astype("float32"), temperature))
    assert got == pytest.approx(nt_xent_reference(z1, z2, temperature), rel=1e-4)


def test_nt_xent_is_low_for_matching_views_and_log_2n_minus_1_for_identical_embeddings():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(4, 16)).astype("float32")
    assert float(losses.nt_xent(z, z, 0.05)) < 0.2
    same = np.ones((4, 16), "float32")
    assert float(losses.nt_xent(same, same, 0.1)) == pytest.approx(np.log(7), rel=1e-5)


def info_nce_reference(queries, keys, queue, temperature):
    """MoCo's InfoNCE (He et al., Algorithm 1), one query at a time, with loops."""
    unit = lambda x: x / np.linalg.norm(x)  # noqa: E731
    total = 0.0
    for query, key in zip(queries, keys):
        positive = np.exp(unit(query) @ unit(key) / temperature)
        negatives = sum(np.exp(unit(query) @ unit(k) / temperature) for k in queue)
        total += -np.log(positive / (positive + negatives))
    return total / len(queries)


@pytest.mark.parametrize("temperature", [0.07, 0.2])
def test_info_nce_matches_numpy_reference(temperature):
    rng = np.random.default_rng(3)
    queries, keys, queue = (rng.normal(size=shape) for shape in ((4, 6), (4, 6), (9, 6)))
    got = float(
        losses.info_nce(*(x.astype("float32") for x in (queries, keys, queue)), temperature)
    )
    assert got == pytest.approx(info_nce_reference(queries, keys, queue, temperature), rel=1e-4)
    # each query's own key is its positive: pairing the keys otherwise changes the loss
    shuffled = float(losses.info_nce(queries, keys[::-1], queue, temperature))
    assert shuffled != pytest.approx(got, rel=1e-2)


@pytest.mark.parametrize("loss", ["nt_xent", "info_nce"])
def test_an_all_zero_embedding_gets_a_finite_gradient(loss):
    from keras_privacy.backend import value_and_gradient

    rng = np.random.default_rng(4)
    z1, z2 = rng.normal(size=(3, 5)).astype("float32"), rng.normal(size=(3, 5)).astype("float32")
    z1[1] = 0.0  # e.g. a ReLU projection that is dead for one clip
    queue = rng.normal(size=(4, 5)).astype("float32")

    def value(params):
        if loss == "nt_xent":
            return losses.nt_xent(params[0], z2, 0.1)
        return losses.info_nce(params[0], z2, queue, 0.1)

    got, (gradient,) = value_and_gradient(value, [ops.convert_to_tensor(z1)])
    assert np.isfinite(float(got))
    # finite (1 / 1e-12 along the row, as PyTorch's F.normalize), not NaN
    assert np.all(np.isfinite(ops.convert_to_numpy(gradient)))


def test_masked_binary_cross_entropy_ignores_masked_entries():
    labels = np.array([[1, 0], [0, 1]], "float32")
    logits = np.array([[2.0, -1.0], [0.5, 3.0]], "float32")
    mask = np.array([[1, 0], [1, 0]], "float32")
    p = 1 / (1 + np.exp(-logits))
    bce = -(labels * np.log(p) + (1 - labels) * np.log(1 - p))
    expected = (bce[0, 0] + bce[1, 0]) / 2
    got = losses.masked_binary_cross_entropy(labels, logits, mask)
    assert float(got) == pytest.approx(expected, rel=1e-5)
    changed = logits.copy()
    changed[:, 1] = [-50.0, 50.0]
    assert float(losses.masked_binary_cross_entropy(labels, changed, mask)) == pytest.approx(
        expected, rel=1e-5
    )


def test_rms_penalty_is_zero_below_budget_and_hinged_above():
    x = np.zeros((2, 4, 4, 3), "float32")
    y = np.full((2, 4, 4, 3), 0.2, "float32")
    assert float(losses.rms_penalty(x, y, 0.3)) == pytest.approx(0.0)
    assert float(losses.rms_penalty(x, y, 0.1)) == pytest.approx(0.1, rel=1e-4)


def test_rms_penalty_hinges_each_clip_not_the_batch():
    x = np.zeros((2, 4, 4, 3), "float32")
    y = x.copy()
    y[0] = 0.6  # one clip changed strongly, the other untouched
    # per clip: (max(0, 0.6 - 0.3) + 0) / 2 = 0.15; one RMS over the batch would give ~0.124
    assert float(losses.rms_penalty(x, y, 0.3)) == pytest.approx(0.15, rel=1e-4)


def test_accuracy_and_cross_entropy():
    logits = ops.convert_to_tensor(np.array([[3.0, 0.0], [0.0, 1.0]], "float32"))
    labels = np.array([0, 0], "int32")
    assert float(losses.accuracy(labels, logits)) == pytest.approx(0.5)
    expected = np.mean([np.log1p(np.exp(-3.0)), np.log1p(np.exp(1.0))])
    assert float(losses.softmax_cross_entropy(labels, logits)) == pytest.approx(expected, rel=1e-5)


def test_rms_penalty_gradient_reaches_the_anonymizer_only_above_budget():
    import tiny_models

    from keras_privacy.backend import value_and_gradient

    anonymizer = tiny_models.anonymizer()
    x = np.random.default_rng(0).random((2, 8, 8, 3), dtype="float32")
    trainable = [v.value for v in anonymizer.trainable_variables]
    non_trainable = [v.value for v in anonymizer.non_trainable_variables]

    def penalty(budget):
        def loss(params):
            output, _ = anonymizer.stateless_call(params, non_trainable, x, training=False)
            return losses.rms_penalty(x, output, budget)

        return value_and_gradient(loss, trainable)

    above, grads_above = penalty(0.0)
    below, grads_below = penalty(10.0)
    assert float(above) > 0 and float(below) == 0.0
    # Above B every trainable weight of f_A gets a gradient; below B none does.
    assert all(float(ops.max(ops.abs(g))) > 0 for g in grads_above)
    assert all(float(ops.max(ops.abs(g))) == 0 for g in grads_below)


def test_masked_labels_get_no_gradient():
    from keras_privacy.backend import value_and_gradient

    labels = np.array([[1, 0, 1], [0, 1, 1]], "float32")
    mask = np.array([[1, 0, 1], [0, 0, 1]], "float32")
    logits = np.random.default_rng(1).normal(size=(2, 3)).astype("float32")

    def loss(params):
        return losses.masked_binary_cross_entropy(labels, params[0], mask)

    _, (grad,) = value_and_gradient(loss, [ops.convert_to_tensor(logits)])
    grad = ops.convert_to_numpy(grad)
    assert np.all(grad[mask == 0] == 0)
    assert np.all(grad[mask == 1] != 0)
