import keras
import numpy as np
import pytest

from keras_privacy.models import (
    apply_per_frame,
    build_action_model,
    build_anonymizer,
    build_image_backbone,
    privacy_classifier,
    privacy_encoder,
    projection_head,
    registry,
    unet,
    vita_net,
)
from keras_privacy.models.__main__ import main as models_cli
from keras_privacy.models.__main__ import trainable_parameters
from keras_privacy.models.layers import (
    NearestUpSampling2D,
    TemporalDifference,
    torch_padded_conv,
)
from keras_privacy.models.resnet import residual_blocks


def test_r3d_18_has_torchvision_parameter_count():
    assert trainable_parameters(build_action_model("r3d_18", num_classes=400)) == 33_371_472


def test_residual_blocks_name_and_stride_blocks_as_torchvision():
    blocks = [tuple(block) for block in residual_blocks((4, 8), (2, 1))]
    assert blocks == [(0, 0, 4, 1, "layer1_0"), (0, 1, 4, 1, "layer1_1"), (1, 0, 8, 2, "layer2_0")]


def test_mc3_18_has_torchvision_parameter_count():
    assert trainable_parameters(build_action_model("mc3_18", num_classes=400)) == 11_695_440


def test_resnet50_has_torchvision_parameter_count():
    assert trainable_parameters(build_image_backbone("resnet50", num_classes=1000)) == 25_557_032


def test_unet_has_spact_parameter_count():
    # milesial's Pytorch-UNet(n_channels=3, n_classes=3, bilinear=True), used by SPAct.
    assert trainable_parameters(unet()) == 17_263_107


def test_unet_output_is_an_image_in_unit_range():
    model = unet(widths=(8, 16, 32))
    frames = np.random.default_rng(0).random((2, 16, 24, 3), dtype="float32")
    out = np.asarray(model(frames))
    assert out.shape == (2, 16, 24, 3)
    assert out.min() >= 0.0 and out.max() <= 1.0


def test_apply_per_frame_equals_a_loop_over_frames():
    model = unet(widths=(8, 16))
    clips = np.random.default_rng(1).random((2, 3, 8, 8, 3), dtype="float32")
    folded = np.asarray(apply_per_frame(model, clips))
    looped = np.stack(
        [np.stack([np.asarray(model(clips[b, t : t + 1]))[0] for t in range(3)]) for b in range(2)]
    )
    np.testing.assert_allclose(folded, looped, atol=1e-5)


def test_spact_r3d_keeps_time_in_the_last_stage():
    plain = build_action_model(
        "r3d_18", 5, widths=(4, 8, 8, 8), blocks=(1, 1, 1, 1), stem_width=4, include_top=False
    )
    spact = build_action_model(
        "r3d_18_spact", 5, widths=(4, 8, 8, 8), blocks=(1, 1, 1, 1), stem_width=4, include_top=False
    )
    clips = np.zeros((1, 16, 32, 32, 3), "float32")
    last = {}
    for name, model in (("plain", plain), ("spact", spact)):
        features = keras.Model(model.input, model.get_layer("layer4_0_out").output)
        last[name] = features(clips).shape
    assert last["plain"][1] == 2 and last["spact"][1] == 4
    assert last["plain"][2:4] == last["spact"][2:4] == (2, 2)


@pytest.mark.parametrize(
    "kernel, strides, padding, dilation, as_same",
    [
        ((3, 3), 1, 1, 1, True),
        ((3, 3), 2, 1, 1, False),
        ((7, 7), 2, 3, 1, False),
        ((3, 3, 3), 1, 1, 1, True),
        ((1, 3, 3), (1, 2, 2), (0, 1, 1), 1, False),
        ((3, 1, 1), 1, (1, 0, 0), 1, True),
        ((3, 3, 3), 1, (2, 1, 1), (2, 1, 1), False),
        ((2, 2), 1, 1, 1, False),
    ],
)
def test_torch_padded_conv_equals_zeros_padded_then_a_valid_convolution(
    kernel, strides, padding, dilation, as_same
):
    """PyTorch's symmetric padding, whether the convolution pads "same" itself (undilated,
    stride 1, (kernel - 1) / 2 a side) or a pad layer precedes it."""
    rank = len(kernel)
    shape = (6, 10, 9, 2)[-rank - 1 :]
    inputs = keras.Input(shape)
    model = keras.Model(
        inputs, torch_padded_conv(inputs, 3, kernel, strides, padding, dilation, name="c")
    )
    pad_layers = [layer for layer in model.layers if layer.name == "c_pad"]
    assert (len(pad_layers) == 0) == as_same
    conv = model.get_layer("c_conv")
    x = np.random.default_rng(0).random((2, *shape), dtype="float32")
    pads = (padding,) * rank if isinstance(padding, int) else padding
    padded = np.pad(x, [(0, 0), *[(p, p) for p in pads], (0, 0)])
    layer = (keras.layers.Conv3D if rank == 3 else keras.layers.Conv2D)(
        3, kernel, strides=strides, dilation_rate=dilation, use_bias=False
    )
    layer.build(padded.shape)
    layer.set_weights(conv.get_weights())
    np.testing.assert_allclose(model(x), layer(padded), atol=1e-5)


@pytest.mark.parametrize("size", [2, 3])
def test_nearest_up_sampling_equals_keras_up_sampling_and_keeps_its_channels(size):
    """UNet++'s decoder up-sampling: the pixels of Keras' `UpSampling2D`, with the channel
    count known where height and width are not (TFLite's converter needs it)."""
    x = np.random.default_rng(0).random((2, 5, 7, 4), dtype="float32")
    layer = NearestUpSampling2D(size)
    np.testing.assert_array_equal(layer(x), keras.layers.UpSampling2D(size)(x))
    assert layer.compute_output_shape((None, None, None, 4)) == (None, None, None, 4)
    assert NearestUpSampling2D.from_config(layer.get_config()).size == size
    decoder = build_anonymizer("unetpp_tiny").get_layer("decoder_x_0_0_upsample")
    assert type(decoder) is NearestUpSampling2D


@pytest.mark.parametrize("name", ["r3d_18", "r2plus1d_18", "i3d_r50"])
def test_torchvision_layout_models_start_as_pytorch_starts_them(name):
    """Convolutions N(0, 2 / fan_out) (torchvision's kaiming_normal_, fan_out), the head
    uniform in +-1 / sqrt(fan_in), bias included (nn.Linear): sample moments over the
    weights of the largest layers, with bounds checked exactly."""
    model = build_action_model(name, num_classes=50, input_shape=(8, 32, 32, 3))
    convs = [
        layer
        for layer in model.layers
        if isinstance(layer, (keras.layers.Conv3D, keras.layers.Conv2D))
    ]
    assert convs
    for conv in convs:
        kernel = np.asarray(conv.kernel)
        fan_out = kernel.shape[-1] * np.prod(kernel.shape[:-2])
        if kernel.size >= 20_000:
            assert kernel.std() == pytest.approx(np.sqrt(2.0 / fan_out), rel=0.05), conv.name
    fc = model.get_layer("fc")
    bound = 1.0 / np.sqrt(fc.kernel.shape[0])
    for weights in (np.asarray(fc.kernel), np.asarray(fc.bias)):
        assert np.abs(weights).max() <= bound
        assert np.abs(weights).max() > 0.8 * bound
    assert np.asarray(fc.kernel).std() == pytest.approx(bound / np.sqrt(3.0), rel=0.05)


def test_spact_rebuilt_layer4_convolutions_start_as_a_new_conv3d():
    """SPAct replaces layer4's first convolution and shortcut after torchvision's start: they
    start as nn.Conv3d, uniform in +-1 / sqrt(fan_in); the next convolution keeps fan_out."""
    model = build_action_model("r3d_18_spact", num_classes=5, input_shape=(8, 32, 32, 3))
    for name in ("layer4_0_1_conv", "layer4_0_downsample_conv"):
        kernel = np.asarray(model.get_layer(name).kernel)
        bound = 1.0 / np.sqrt(np.prod(kernel.shape[:-1]))
        assert bound * 0.99 < np.abs(kernel).max() <= bound, name
        assert kernel.std() == pytest.approx(bound / np.sqrt(3.0), rel=0.05), name
    kernel = np.asarray(model.get_layer("layer4_0_2_conv").kernel)
    fan_out = kernel.shape[-1] * np.prod(kernel.shape[:-2])
    assert kernel.std() == pytest.approx(np.sqrt(2.0 / fan_out), rel=0.05)


def test_unetpp_unbounded_is_unetpp_without_its_sigmoid():
    """The authors' UNet++ (no output activation) gives the logits that `unetpp`'s sigmoid
    turns into frames: the same layers and weights, one Activation fewer."""
    widths = {"encoder_widths": (4, 4, 8, 8), "encoder_blocks": (1, 1, 1)}
    bounded = build_anonymizer("unetpp", decoder_widths=(8, 8, 4, 4), **widths)
    unbounded = build_anonymizer("unetpp_unbounded", decoder_widths=(8, 8, 4, 4), **widths)
    assert [w.path for w in unbounded.weights] == [w.path for w in bounded.weights]
    unbounded.set_weights(bounded.get_weights())
    frames = np.random.default_rng(5).random((2, 32, 32, 3), dtype="float32")
    logits = np.asarray(unbounded(frames, training=False))
    np.testing.assert_allclose(
        np.asarray(bounded(frames, training=False)), 1 / (1 + np.exp(-logits)), atol=1e-6
    )


def test_unetpp_starts_as_segmentation_models_pytorch_starts_it():
    """The decoder's convolutions uniform in +-sqrt(6 / fan_in) (smp's initialize_decoder), the
    encoder's N(0, 2 / fan_out) (torchvision's ResNet), the head Glorot uniform, bias 0."""
    model = build_anonymizer("unetpp", input_shape=(32, 32, 3))
    for layer in model.layers:
        if not isinstance(layer, keras.layers.Conv2D) or layer.name == "segmentation_head":
            continue
        kernel = np.asarray(layer.kernel)
        if layer.name.startswith("decoder_"):
            bound = np.sqrt(6.0 / np.prod(kernel.shape[:-1]))
            assert np.abs(kernel).max() <= bound * (1 + 1e-6), layer.name
            if kernel.size >= 20_000:
                assert kernel.std() == pytest.approx(bound / np.sqrt(3.0), rel=0.05), layer.name
        elif kernel.size >= 20_000:
            fan_out = kernel.shape[-1] * np.prod(kernel.shape[:-2])
            assert kernel.std() == pytest.approx(np.sqrt(2.0 / fan_out), rel=0.05), layer.name
    head = model.get_layer("segmentation_head")
    fans = np.prod(head.kernel.shape[:-2]) * sum(head.kernel.shape[-2:])
    assert np.abs(np.asarray(head.kernel)).max() <= np.sqrt(6.0 / fans)
    assert not np.asarray(head.bias).any()


def test_resnet_heads_start_as_pytorch_linear_layers():
    backbone = build_image_backbone("resnet_tiny")
    head = projection_head(backbone.output_shape[-1], 16, 8)
    classifier = privacy_classifier(backbone, 7)
    for layer, fan_in in [
        (head.get_layer("hidden"), backbone.output_shape[-1]),
        (head.get_layer("output"), 16),
        (classifier.get_layer("attributes"), backbone.output_shape[-1]),
    ]:
        bias = np.asarray(layer.bias)
        assert 0 < np.abs(bias).max() <= 1.0 / np.sqrt(fan_in), layer.name
        assert np.abs(np.asarray(layer.kernel)).max() <= 1.0 / np.sqrt(fan_in), layer.name


def test_privacy_encoder_embeddings_have_unit_norm_and_classifier_gives_logits():
    backbone = build_image_backbone("resnet_tiny")
    encoder = privacy_encoder(backbone, projection_head(backbone.output_shape[-1], 16, 8))
    images = np.random.default_rng(2).random((3, 32, 32, 3), dtype="float32")
    z = np.asarray(encoder(images))
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    assert privacy_classifier(backbone, 7)(images).shape == (3, 7)


# Small settings of every full-size registered model (its "_tiny" entry needs none).
TINY_KWARGS = {
    "r3d_18": {"widths": (4, 4, 4, 4), "blocks": (1, 1, 1, 1), "stem_width": 4},
    "r3d_18_spact": {"widths": (4, 4, 4, 4), "blocks": (1, 1, 1, 1), "stem_width": 4},
    "r2plus1d_18": {
        "widths": (4, 4, 4, 4),
        "blocks": (1, 1, 1, 1),
        "stem_width": 4,
        "stem_mid_width": 4,
    },
    "r3d_50": {"widths": (4, 4, 4, 4), "blocks": (1, 1, 1, 1), "stem_width": 4},
    "i3d_r50": {"widths": (4, 4, 4, 4), "blocks": (1, 1, 1, 1), "stem_width": 4},
    "c3d": {"widths": (4, 4, 4, 4, 4), "fc_width": 8, "input_shape": (16, 16, 16, 3)},
    **{
        f"resnet{depth}": {"blocks": (1, 1, 1, 1), "widths": (4, 4, 4, 4)}
        for depth in (18, 34, 50, 101, 152)
    },
    "unet": {"widths": (4, 8)},
    "unet_small": {"widths": (4, 8)},
    **{
        name: {
            "encoder_widths": (4, 4, 8, 8),
            "encoder_blocks": (1, 1, 1),
            "decoder_widths": (8, 8, 4, 4),
        }
        for name in ("unetpp", "unetpp_unbounded")
    },
    "vita": {"widths": (4, 4, 8), "residual_blocks": 1},
}


def tiny_instance(kind, name):
    kwargs = TINY_KWARGS.get(name, {})
    if kind == "action" and name.startswith("factorized"):
        model = build_action_model(name, 3, input_shape=(4, 16, 16, 3), widths=(4, 4))
        clips = np.random.default_rng(0).random((2, 4, 16, 16, 3), dtype="float32")
        return model, clips, np.array([0, 1])
    if kind == "action":
        # C3D pools time 16-fold, I3D 8-fold with a 5-frame stem kernel.
        # Four clips: the deep models end at 1 x 1 x 1, where BatchNorm over two values gives
        # +-1 whatever its input, so only its epsilon would pass a gradient further down.
        frames = {"c3d": 16, "i3d": 8}.get(name[:3], 4)
        model = build_action_model(name, 3, **kwargs)
        return model, np.zeros((4, frames, 16, 16, 3), "float32"), np.array([0, 1, 2, 0])
    if kind == "image":
        model = build_image_backbone(name, num_classes=3, **kwargs)
        return model, np.zeros((2, 32, 32, 3), "float32"), np.array([0, 1])
    # 32 px: UNet++'s deepest features at 2 x 2, where BatchNorm normalises 8 values, not 2
    model = build_anonymizer(name, **kwargs)
    return model, np.zeros((2, 32, 32, 3), "float32"), np.zeros((2, 32, 32, 3), "float32")


# MobileNets of the same version differ by their width multiplier alone: the narrowest of each
# trains here, and test_zoo.py builds every registered width. The ResNet-V2s are Keras' own
# applications, which Keras tests, and slim's ResNet-V1-101 is its -50 with more units:
# test_zoo.py builds them.
TRAINED_IMAGE_MODELS = [
    name
    for name in registry.IMAGE_MODELS
    if not name.startswith("mobilenet") or name in ("mobilenet_v1_0.25", "mobilenet_v2_0.35")
    if not name.startswith("resnet_v2") and name != "resnet_v1_101"
]


# The image models are Keras' own layers in a Functional graph, whose gradients reach every
# weight alike on either backend: they train on the TensorFlow run only (JAX's compile of each
# took 10-50 s there), but for `resnet_tiny`, which the JAX run's trainers use.
IMAGE_PARAMS = [
    pytest.param(
        "image",
        name,
        marks=[] if name == "resnet_tiny" else [pytest.mark.backend_independent],
    )
    for name in TRAINED_IMAGE_MODELS
]


# A full-size model built from the same blocks as its tiny sibling (named here) adds only
# XLA's compile on the JAX run (5-13 s each there): it trains on the TensorFlow run only.
TINY_SIBLINGS = {
    "r3d_18": "r3d_tiny",
    "r2plus1d_18": "r2plus1d_tiny",
    "r3d_50": "r3d_50_tiny",
    "i3d_r50": "i3d_r50_tiny",
    "c3d": "c3d_tiny",
    "unet": "unet_tiny",
    "unetpp": "unetpp_tiny",
    "unetpp_unbounded": "unetpp_tiny",
    "vita": "vita_tiny",
}


def full_size_params(kind: str, names) -> list:
    siblings = {TINY_SIBLINGS[name] for name in names if name in TINY_SIBLINGS}
    assert siblings <= set(names), f"tiny siblings not registered: {siblings - set(names)}"
    return [
        pytest.param(
            kind, name, marks=[pytest.mark.backend_independent] if name in TINY_SIBLINGS else []
        )
        for name in names
    ]


@pytest.mark.parametrize(
    "kind, name",
    full_size_params("action", registry.ACTION_MODELS)
    + IMAGE_PARAMS
    + full_size_params("anonymizer", registry.ANONYMIZERS),
)
def test_every_registered_model_builds_runs_and_trains_one_step(kind, name):
    model, x, y = tiny_instance(kind, name)
    loss = "mse" if kind == "anonymizer" else keras.losses.SparseCategoricalCrossentropy(True)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    rng = np.random.default_rng(0)
    x = rng.random(x.shape, dtype="float32")  # a constant input leaves most gradients zero
    if kind == "anonymizer":
        y = rng.random(y.shape, dtype="float32")
    before = {v.path: np.array(v.numpy()) for v in model.trainable_variables}
    model.fit(x, y, epochs=1, verbose=0)
    unmoved = [
        v.path for v in model.trainable_variables if np.array_equal(v.numpy(), before[v.path])
    ]
    assert unmoved == [], f"{len(unmoved)} of {len(before)} variables did not move"


def test_difference_stem_appends_the_difference_to_the_next_frame():
    clips = np.random.default_rng(1).random((2, 4, 3, 3, 3), dtype="float32")
    out = keras.ops.convert_to_numpy(TemporalDifference()(clips))
    np.testing.assert_allclose(out[..., :3], clips)
    np.testing.assert_allclose(out[:, :-1, ..., 3:], clips[:, 1:] - clips[:, :-1], atol=1e-6)
    np.testing.assert_array_equal(out[:, -1, ..., 3:], 0.0)


def test_saved_model_reloads_to_the_same_outputs(tmp_path):
    model = build_action_model("r3d_tiny", 4)
    clips = np.random.default_rng(3).random((1, 4, 16, 16, 3), dtype="float32")
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(reloaded(clips), model(clips), atol=1e-5)


def test_unknown_model_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="known: .*unet"):
        build_anonymizer("nope")


def test_cli_lists_and_counts(capsys):
    assert models_cli(["list"]) == 0
    assert "r3d_18" in capsys.readouterr().out
    assert models_cli(["count", "resnet50", "--num_classes", "1000"]) == 0
    assert "25,557,032" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        (["count", "r3d_19"], "unknown model 'r3d_19' (anonymizers: "),
        (["count", "r3d_tiny", "--num_classes=0"], "--num_classes: must be at least 1, got 0"),
    ],
)
def test_cli_refuses_an_unknown_name_or_no_class_as_a_usage_error(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        models_cli(args)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error
    if "unknown" in error:
        assert "action models: " in error and "r3d_18" in error and "image models: " in error


TRUNCATED = 0.8796  # the standard deviation of a unit normal truncated at +-2


def test_vitas_anonymizer_is_the_originals_function_on_0_to_255_frames():
    """The original f_d reads frames in 0..255 and writes (tanh + 1) * 127.5, every instance
    normalisation at epsilon 1e-3; ours on frames / 255 gives its output / 255."""
    model = build_anonymizer("vita", widths=(4, 4, 8), residual_blocks=1)
    rng = np.random.default_rng(0)
    for layer in model.layers:  # learned scales and shifts of another start than 1 and 0
        for weight in layer.weights:
            weight.assign(rng.normal(0.3, 0.5, weight.shape).astype("float32"))

    def as_the_original(layer):
        config = layer.get_config()
        if isinstance(layer, keras.layers.GroupNormalization):
            config["epsilon"] = vita_net.EPSILON
        if layer.name == "output_rescale":
            config.update(scale=127.5, offset=127.5)
        return layer.__class__.from_config(config)

    authors = keras.models.clone_model(model, clone_function=as_the_original)
    authors.set_weights(model.get_weights())
    frames = rng.random((2, 16, 16, 3), dtype="float32") * 0.1  # a dark, low-contrast frame
    ours = keras.ops.convert_to_numpy(model(frames))
    theirs = keras.ops.convert_to_numpy(authors(frames * 255.0))
    np.testing.assert_allclose(ours * 255.0, theirs, rtol=1e-4, atol=1e-3)
    assert model.get_layer("conv1_norm").epsilon == pytest.approx(1e-3 / 255**2)


@pytest.mark.parametrize(
    "name, drawn_std",
    [
        ("mobilenet_v1_0.25", lambda fan_in: 0.09),
        # Keras scales the normal before truncating, so that the variance is 2 / fan_in
        ("resnet_v2_50", lambda fan_in: np.sqrt(2.0 / fan_in) / TRUNCATED),
        ("resnet_v1_50", lambda fan_in: np.sqrt(2.0 / fan_in) / TRUNCATED),
    ],
)
def test_vita_budget_models_start_as_tf_slim_starts_them(name, drawn_std):
    """VITA's budget models: every convolution (depthwise too) and the attribute head drawn as
    slim's arg scopes draw them, from a normal of std `drawn_std` truncated at two standard
    deviations; biases 0. Sample moments over the largest layers, bounds on every one."""
    model = registry.build_privacy_classifier(name, 7, input_shape=(32, 32, 3))
    backbone = model.get_layer(name)
    kinds = (keras.layers.Conv2D, keras.layers.DepthwiseConv2D)
    convs = [layer for layer in backbone.layers if isinstance(layer, kinds)]
    assert convs
    for conv in convs:
        kernel = np.asarray(conv.kernel)
        depthwise = isinstance(conv, keras.layers.DepthwiseConv2D)
        fan_in = np.prod(kernel.shape[:2] if depthwise else kernel.shape[:-1])
        assert np.abs(kernel).max() <= 2 * drawn_std(fan_in) * (1 + 1e-5), conv.name
        if kernel.size >= 20_000:
            assert kernel.std() == pytest.approx(TRUNCATED * drawn_std(fan_in), rel=0.05)
        if conv.use_bias:
            assert not np.asarray(conv.bias).any(), conv.name
    # each layer its own draw: one shared initializer gave layers of a shape the same kernel
    kernels = {np.asarray(conv.kernel).tobytes() for conv in convs}
    assert len(kernels) == len(convs)
    head = model.get_layer("attributes")
    expected = TRUNCATED * drawn_std(head.kernel.shape[0])
    assert np.asarray(head.kernel).std() == pytest.approx(expected, rel=0.15)
    assert not np.asarray(head.bias).any()


def test_meta_inception_attackers_start_as_tf_slim_starts_them():
    """Inception-V1: every convolution truncated normal std 0.01; Inception-V2 per layer as
    inception_v2.py names them (0.09 reductions, 0.1 pool branches and stem 1x1, 1.0 separable
    stem, variance scaling elsewhere); both heads variance scaling, biases 0."""

    def drawn(kernel, std):  # bounds exactly, the spread where the layer is large
        assert np.abs(kernel).max() <= 2 * std * (1 + 1e-5)
        if kernel.size >= 20_000:
            assert kernel.std() == pytest.approx(TRUNCATED * std, rel=0.05)

    def he(kernel):
        return np.sqrt(2.0 / np.prod(kernel.shape[:-1])) / TRUNCATED

    v1 = registry.build_privacy_classifier("inception_v1", 7, input_shape=(32, 32, 3))
    convs = [layer for layer in v1.get_layer("inception_v1").layers if hasattr(layer, "kernel")]
    assert len(convs) == 57
    for conv in convs:
        drawn(np.asarray(conv.kernel), 0.01)
    v2 = registry.build_privacy_classifier("inception_v2", 7, input_shape=(32, 32, 3))
    body = v2.get_layer("inception_v2")
    for name, std in [
        ("mixed_4d_1a_conv", 0.09),
        ("mixed_5a_0a_conv", 0.09),
        ("mixed_4d_3_conv", 0.1),
        ("stem_2b_conv", 0.1),
        ("mixed_5b_1b_conv", None),
        ("mixed_5b_0_conv", None),
    ]:
        kernel = np.asarray(body.get_layer(name).kernel)
        drawn(kernel, std or he(kernel))
    stem = body.get_layer("stem_1a_conv")
    drawn(np.asarray(stem.depthwise_kernel), 1.0)
    assert not np.asarray(stem.bias).any()
    for model in (v1, v2):
        head = np.asarray(model.get_layer("attributes").kernel)
        assert head.std() == pytest.approx(TRUNCATED * he(head), rel=0.15)


@pytest.mark.parametrize("name", ["resnet_tiny", "mobilenet_v2_0.35"])
def test_other_backbones_keep_the_pytorch_head(name):
    head = registry.build_privacy_classifier(name, 7, input_shape=(32, 32, 3)).get_layer(
        "attributes"
    )
    bound = 1.0 / np.sqrt(head.kernel.shape[0])
    assert 0 < np.abs(np.asarray(head.bias)).max() <= bound
    assert np.abs(np.asarray(head.kernel)).max() <= bound
