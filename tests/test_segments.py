"""models/segments.py: a Functional model cut into blocks computes the model, and recomputed
block by block (backend.checkpoint) gives the model's gradients."""

import functools

import keras
import numpy as np
import pytest
from keras import layers, ops

from keras_privacy import backend
from keras_privacy.models.segments import block_ends, functional_segments, run_segments
from keras_privacy.models.unet import unet


def tiny_unet(widths=(2, 4, 4)):
    keras.utils.set_random_seed(0)
    return unet(widths=widths)


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


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX recomputes; TensorFlow stores")
def test_checkpoint_recomputes_in_the_backward_pass_with_the_same_derivatives():
    import jax
    import jax.numpy as jnp

    traced = []

    def block(weights, x, steps):
        traced.append(True)
        return [jnp.tanh(x * weights[0]) * weights[1] + steps.astype(x.dtype)]

    x, steps = jnp.linspace(-1.0, 1.0, 5), jnp.arange(5)

    def loss(weights, wrap):
        return jnp.sum(wrap(block)(weights, x, steps)[0] ** 3)

    weights, vector = [jnp.array(0.7), jnp.array(1.3)], [jnp.array(0.2), jnp.array(-0.4)]
    recomputed = jax.grad(lambda w: loss(w, backend.checkpoint))(weights)
    assert len(traced) == 2  # the forward pass, then the recomputation in the backward one
    stored = jax.grad(lambda w: loss(w, lambda fn: fn))(weights)
    np.testing.assert_allclose(recomputed, stored, rtol=1e-6)
    products = [
        backend.hessian_vector_product(functools.partial(loss, wrap=wrap), weights, vector)
        for wrap in (backend.checkpoint, lambda fn: fn)
    ]
    np.testing.assert_allclose(*products, rtol=1e-6)
    # Reverse over reverse too (a nested gradient): the wait for tangents is the product's only.
    nested = [
        jax.grad(lambda w, wrap=wrap: sum(jax.grad(loss)(w, wrap)))(weights)
        for wrap in (backend.checkpoint, lambda fn: fn)
    ]
    np.testing.assert_allclose(*nested, rtol=1e-6)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX recomputes; TensorFlow stores")
def test_recomputed_blocks_plan_less_than_stored_ones_in_a_gradient_then_its_product():
    """The meta update's shape: a gradient, then the Hessian-vector product along it. Before
    the waits for tangents (recomputations for their cotangents', a block's outputs for their
    own) recomputed planned 0.93 of stored here, 0.79 with the first wait alone; now 0.70."""
    import jax

    model = tiny_unet(widths=(8, 16, 32))
    segments = functional_segments(model, block_ends(model))
    trainable, non_trainable = values(model)
    x = np.random.default_rng(1).random((8, 64, 64, 3), dtype="float32")

    def loss(params, wrap):
        return ops.mean(run_segments(segments, params, non_trainable, x, True, wrap)[0] ** 3)

    def second_order(params, wrap):
        gradient = jax.grad(functools.partial(loss, wrap=wrap))(params)
        return backend.hessian_vector_product(functools.partial(loss, wrap=wrap), params, gradient)

    planned = {
        name: jax.jit(functools.partial(second_order, wrap=wrap))
        .lower(trainable)
        .compile()
        .memory_analysis()
        .temp_size_in_bytes
        for name, wrap in (("stored", lambda fn: fn), ("recomputed", backend.checkpoint))
    }
    assert planned["recomputed"] < 0.75 * planned["stored"], planned
