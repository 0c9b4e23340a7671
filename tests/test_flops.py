"""FLOPs of one forward pass (`models.flops`), the numerator of the benchmarks' fraction of the
peak: each layer kind against a count by hand."""

import keras

from keras_privacy.models.flops import forward_flops


def test_every_convolution_kind_and_dense_count_their_multiply_adds():
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, padding="same")(inputs)  # 64 positions x 4 x 27
    x = keras.layers.DepthwiseConv2D(3, padding="same", depth_multiplier=2)(x)  # 64 x 8 x 9
    x = keras.layers.SeparableConv2D(6, 3, padding="same")(x)  # 64 x 8 x 9 + 64 x 8 x 6
    x = keras.layers.Conv2DTranspose(2, 3, strides=2, padding="same")(x)  # 64 inputs x 6 x 9 x 2
    x = keras.layers.Conv2D(4, 1, groups=2)(x)  # 256 positions x 4 x 1 input channel
    x = keras.layers.Dense(5)(keras.layers.Flatten()(x))  # 1024 x 5
    model = keras.Model(inputs, keras.layers.ReLU()(x))
    multiply_adds = 6912 + 4608 + (4608 + 3072) + 6912 + 1024 + 5120
    assert forward_flops(model, (8, 8, 3)) == 2 * multiply_adds


def test_time_distributed_and_nested_models_count_every_step():
    frames = keras.Input((8, 8, 3))
    per_frame = keras.Model(frames, keras.layers.Conv2D(4, 3, padding="same")(frames))
    clip = keras.Input((2, 8, 8, 3))
    x = keras.layers.TimeDistributed(keras.layers.Conv2D(4, 3, padding="same"))(clip)
    y = keras.layers.TimeDistributed(per_frame)(clip)
    x = keras.layers.Conv3D(2, 1)(keras.layers.Concatenate()([x, y]))  # 128 x 2 x 8
    model = keras.Model(clip, x)
    assert forward_flops(model, (2, 8, 8, 3)) == 2 * (2 * 6912 + 2 * 6912 + 2048)


def test_a_convolution_strided_and_dilated_counts_as_the_strided_one():
    """SPAct's R3D-18 layer4 opens with a convolution strided (1, 2, 2) in space and dilated 2
    in time, which Keras runs at stride 1 and then subsamples: its model FLOPs are the strided
    convolution's (a quarter of the positions), as PyTorch computes it."""
    from keras_privacy.models.r3d import conv3x3x3

    clip = keras.Input((4, 8, 8, 3))
    strided_dilated = keras.Model(clip, conv3x3x3(clip, 4, (1, 2, 2), (2, 1, 1), name="c"))
    assert strided_dilated.output.shape == (None, 4, 4, 4, 4)
    multiply_adds = 4 * 4 * 4 * 4 * (27 * 3)  # output positions x channels x window
    assert forward_flops(strided_dilated, (4, 8, 8, 3)) == 2 * multiply_adds
    strided = keras.Model(clip, conv3x3x3(clip, 4, (1, 2, 2), (1, 1, 1), name="s"))
    assert forward_flops(strided, (4, 8, 8, 3)) == forward_flops(strided_dilated, (4, 8, 8, 3))


def test_a_layer_called_twice_counts_both_calls():
    """A layer shared by two branches (or a nested model called on two inputs) computes twice."""
    inputs = keras.Input((8, 8, 3))
    shared = keras.layers.Conv2D(4, 3, padding="same")  # 64 positions x 4 x 27 a call
    per_image = keras.Model(inputs, keras.layers.Conv2D(2, 1)(inputs))  # 64 x 2 x 3 a call
    flipped = keras.layers.Lambda(lambda x: keras.ops.flip(x, axis=2))(inputs)
    x = keras.layers.Concatenate()([shared(inputs), shared(flipped)])
    y = keras.layers.Concatenate()([per_image(inputs), per_image(flipped)])
    model = keras.Model(inputs, keras.layers.Concatenate()([x, y]))
    assert forward_flops(model, (8, 8, 3)) == 2 * (2 * 6912 + 2 * 384)
