"""models/segments.py: a Functional model cut into blocks computes the model, and recomputed
block by block (backend.checkpoint) gives the model's gradients."""

import keras
import numpy as np
import pytest
from keras import layers, ops

from keras_privacy import backend
from keras_privacy.models.segments import block_ends, functional_segments, run_segments
from keras_privacy.models.unet import unet


def tiny_unet():
    keras.utils.set_random_seed(0)
    return unet(widths=(2, 4, 4))


def values(model):
    return [v.value for v in model.trainable_variables], [
        v.value for v in model.non_trainable_variables
    ]


def test_block_ends_are_the_last_relu_of_each_unet_block():
    model = tiny_unet()
    assert block_ends(model) == [
        "down0_relu2", "down1_relu2", "down2_relu2", "up1_relu2", "up0_relu2"
    ]  # fmt: skip


def test_segments_compute_the_model_and_its_new_batchnorm_statistics():
    model = tiny_unet()
    segments = functional_segments(model, block_ends(model))
    assert len(segments) == 6
    # The cut after down0 keeps the skip connection the decoder reads last.
    assert [len(s.layout) for s in segments] == [1, 2, 3, 2, 1, 1]
    trainable, non_trainable = values(model)
    x = np.random.default_rng(0).random((3, 8, 8, 3), dtype="float32")
    expected, expected_state = model.stateless_call(trainable, non_trainable, x, training=True)
    outputs, state = run_segments(segments, trainable, non_trainable, x, True, backend.checkpoint)
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-6)
    for got, want in zip(state, expected_state):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    covered = sorted(i for s in segments for i in s.trainable_index)
    assert covered == list(range(len(trainable)))


def test_gradient_through_recomputed_blocks_equals_the_model_gradient():
    model = tiny_unet()
    segments = functional_segments(model, block_ends(model))
    trainable, non_trainable = values(model)
    x = np.random.default_rng(1).random((2, 8, 8, 3), dtype="float32")

    def plain(params):
        return ops.mean(model.stateless_call(params, non_trainable, x, training=True)[0] ** 3)

    def blocks(params):
        outputs, _ = run_segments(segments, params, non_trainable, x, True, backend.checkpoint)
        return ops.mean(outputs**3)

    _, want = backend.value_and_gradient(plain, trainable)
    _, got = backend.value_and_gradient(blocks, trainable)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-7)
    vector = [ops.ones_like(p) for p in trainable]
    want = backend.hessian_vector_product(plain, trainable, vector)
    got = backend.hessian_vector_product(blocks, trainable, vector)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_a_model_that_cannot_be_cut_is_named():
    model = tiny_unet()
    with pytest.raises(ValueError, match="has no layer named \\['nowhere'\\]"):
        functional_segments(model, ["nowhere"])
    inputs = keras.Input((4,))
    shared = layers.Dense(4, name="shared")
    twice = keras.Model(inputs, shared(shared(inputs)), name="twice")
    with pytest.raises(ValueError, match="layer shared of twice is called more than once"):
        functional_segments(twice, ["shared"])
    two_inputs = [keras.Input((4,)), keras.Input((4,))]
    joined = keras.Model(two_inputs, layers.Add()(two_inputs), name="joined")
    with pytest.raises(ValueError, match="joined is not a model of one input and one output"):
        functional_segments(joined, [])
