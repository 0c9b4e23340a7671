"""The architecture zoo: parameter counts of the full-size models, the new anonymizers' contract
(frames in [0, 1] -> frames in [0, 1], size factor, export, save and reload)."""

from pathlib import Path

import keras
import numpy as np
import pytest

from keras_privacy.export import export_anonymizer
from keras_privacy.flags import parse_config
from keras_privacy.models import registry, resnet_v1
from keras_privacy.models.__main__ import main as models_cli
from keras_privacy.models.__main__ import trainable_parameters
from keras_privacy.models.inception import inception_net
from keras_privacy.models.r2plus1d import mid_width
from keras_privacy.models.unet import downsampling_factor


@pytest.mark.backend_independent  # the same layers count the same on either backend
@pytest.mark.parametrize(
    "name, num_classes, count",
    [
        ("r2plus1d_18", 400, 31_505_325),  # torchvision
        ("r3d_50", 400, 47_018_576),  # 3D-ResNets-PyTorch resnet50 (see test_convert.py)
        ("i3d_r50", 400, 28_043_472),  # pytorch-resnet3d's I3Res50 (see test_convert.py)
        ("c3d", 487, 79_991_015),  # c3d-pytorch, Sports-1M head
    ],
)
def test_action_model_parameter_counts(name, num_classes, count):
    model = registry.build_action_model(name, num_classes=num_classes)
    assert trainable_parameters(model) == count


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "name, count",
    [
        ("resnet18", 11_689_512),  # torchvision
        ("resnet34", 21_797_672),
        ("resnet101", 44_549_160),
        ("resnet152", 60_192_808),
    ],
)
def test_resnet_parameter_counts_equal_torchvision(name, count):
    model = registry.build_image_backbone(name, num_classes=1000)
    assert trainable_parameters(model) == count


def test_mobilenets_are_registered_at_the_papers_width_multipliers():
    alphas = {
        name: registry.IMAGE_MODELS[name].keywords["alpha"]
        for name in registry.IMAGE_MODELS
        if name.startswith("mobilenet")
    }
    assert alphas == {
        **{f"mobilenet_v1_{a}": a for a in (0.25, 0.5, 0.75, 1.0)},
        **{f"mobilenet_v2_{a}": a for a in (0.35, 0.5, 0.75, 1.0, 1.3, 1.4)},
    }


def test_mobilenet_v1_is_keras_mobilenet_padded_as_tf_slim():
    """Keras' MobileNet, layer for layer, where every strided convolution meets an even size
    (224 pixels: the same outputs with the same weights); TF-slim's SAME padding where one
    meets an odd size (112: slim's last map is 4 x 4, Keras' MobileNet's 3 x 3)."""
    x = np.random.default_rng(6).random((2, 224, 224, 3), dtype="float32")
    ours = registry.build_image_backbone("mobilenet_v1_0.25", input_shape=(224, 224, 3))
    keras_mobilenet = keras.applications.MobileNet(
        input_shape=(224, 224, 3), alpha=0.25, include_top=False, weights=None, pooling="avg"
    )
    keras_mobilenet.set_weights(ours.get_weights())
    np.testing.assert_allclose(
        np.asarray(ours(x, training=True)), np.asarray(keras_mobilenet(x, training=True)), atol=1e-5
    )
    at_112 = registry.build_image_backbone("mobilenet_v1_0.25", input_shape=(112, 112, 3))
    assert at_112.get_layer("conv_pw_13_relu").output.shape == (None, 4, 4, 256)


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "name, features, count",
    [
        ("mobilenet_v1_1.0", 1024, 4_231_976),  # Keras' MobileNet with its 1000-way top
        ("mobilenet_v2_1.0", 1280, 3_504_872),  # Keras' and torchvision's MobileNetV2
        ("mobilenet_v2_1.4", 1792, 6_108_776),  # above 1, the last width grows too
    ],
)
def test_mobilenet_feature_widths_and_counts(name, features, count):
    classifier = registry.build_image_backbone(name, num_classes=1000)
    assert classifier.get_layer("fc").input.shape == (None, features)
    assert trainable_parameters(classifier) == count


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "name, trainable, total",
    [
        ("resnet_v1_50", 23_508_032, 23_561_152),
        ("resnet_v1_101", 42_500_160, 42_605_504),
        ("resnet_v2_50", 23_519_360, 23_564_800),
        ("resnet_v2_101", 42_528_896, 42_626_560),
        ("inception_v1", 5_592_624, 5_607_184),
        ("inception_v2", 10_153_336, 10_173_112),
    ],
)
def test_slim_models_count_as_tf_slim_builds_them(name, trainable, total):
    # tf_slim 1.1's nets (resnet_v1_50 / _101 and resnet_v2_50 / _101 with num_classes=None,
    # inception_v1_base, inception_v2_base) under their arg scopes: trainable variables, then
    # all of them (the batch-normalisation statistics included), as VITA's nets/ define the
    # same layers.
    model = registry.build_image_backbone(name)
    assert trainable_parameters(model) == trainable
    assert model.count_params() == total


@pytest.mark.backend_independent
@pytest.mark.parametrize(
    "name, features", [("resnet_v2_50", 2048), ("inception_v1", 1024), ("inception_v2", 1024)]
)
def test_slim_models_reduce_images_32_fold_to_their_features(name, features):
    # test_models.py runs and trains the Inceptions; Keras tests its own ResNetV2.
    model = registry.build_image_backbone(name, input_shape=(64, 64, 3))
    pooled = model.get_layer("avg_pool" if name.startswith("resnet") else "pool")
    assert pooled.input.shape == (None, 2, 2, features)
    assert model.output.shape == (None, features)


@pytest.mark.backend_independent
def test_slim_resnet_v1_strides_the_last_unit_of_a_stage():
    # Outputs equal to tf_slim's resnet_v1_50 / _101 with the same weights (4e-6 at 57 to 96
    # px, checked against tf_slim 1.1 offline); here the layout that makes them so.
    model = registry.build_image_backbone("resnet_v1_50", input_shape=(64, 64, 3))
    sides = {
        layer.name: layer.output.shape[1] for layer in model.layers if layer.name.endswith("_out")
    }
    assert [sides[f"block1_unit{u}_out"] for u in (1, 2, 3)] == [16, 16, 8]
    assert [sides[f"block3_unit{u}_out"] for u in (5, 6)] == [4, 2]
    assert [sides[f"block4_unit{u}_out"] for u in (1, 2, 3)] == [2, 2, 2]
    names = {layer.name for layer in model.layers}
    # A unit that widens has a 1x1 convolution as its shortcut; the strided last unit keeps
    # its width and subsamples its input instead.
    assert "block2_unit1_shortcut_conv" in names and "block2_unit4_shortcut_conv" not in names
    assert isinstance(model.get_layer("block2_unit4_skip"), keras.layers.MaxPooling2D)
    with pytest.raises(ValueError, match="ResNet-V1 depth 152 is not one of 50, 101"):
        registry.build_image_backbone("resnet_v1_50", depth=152)


def test_slim_conv2d_same_is_the_stride_1_output_subsampled():
    # Slim's conv2d_same, on an even and an odd side: what makes its strided layers line up.
    for side in (8, 9):
        x = keras.Input((side, side, 2))
        strided = keras.Model(x, resnet_v1.conv2d_same(x, 3, 3, 2, "strided"))
        dense = keras.Model(x, resnet_v1.conv2d_same(x, 3, 3, 1, "dense"))
        dense.set_weights(strided.get_weights())
        images = np.random.default_rng(side).random((2, side, side, 2), dtype="float32")
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(strided(images)),
            keras.ops.convert_to_numpy(dense(images))[:, ::2, ::2],
            atol=1e-5,
        )


@pytest.mark.backend_independent  # the layers' settings, the same on either backend
def test_inception_keeps_slims_quirks():
    v1 = registry.build_image_backbone("inception_v1", input_shape=(64, 64, 3))
    # The "5x5" branch of slim's Inception-V1 is a 3x3 convolution.
    assert v1.get_layer("mixed_3b_2b_conv").kernel_size == (3, 3)
    v2 = registry.build_image_backbone("inception_v2", input_shape=(64, 64, 3))
    stem = v2.get_layer("stem_1a_conv")
    assert isinstance(stem, keras.layers.SeparableConv2D) and stem.depth_multiplier == 8
    assert stem.use_bias and "stem_1a_bn" not in [layer.name for layer in v2.layers]
    with pytest.raises(ValueError, match="Inception version 3 is not one of 1, 2"):
        inception_net(version=3)


@pytest.mark.backend_independent  # the layers' settings, the same on either backend
def test_only_the_inception_attackers_drop_features_before_their_logits():
    """slim's Inception-V1 / -V2 logits follow a dropout keeping 80 % (VITA's nets); ResNets
    and MobileNets have none worth building (slim's MobileNet-V1 keeps 99.9 %)."""
    for name, rate in [("inception_v1", 0.2), ("inception_v2", 0.2), ("resnet_v1_50", None)]:
        model = registry.build_privacy_classifier(name, 7, input_shape=(64, 64, 3))
        dropouts = [layer for layer in model.layers if isinstance(layer, keras.layers.Dropout)]
        assert [layer.rate for layer in dropouts] == ([rate] if rate else []), name
        if rate:
            assert model.get_layer("attributes").input is dropouts[0].output


def test_same_average_pooling_leaves_the_padding_out_of_the_mean():
    # TensorFlow's "same" average pool, which slim's Inception-V2 branches rely on.
    x = np.arange(16, dtype="float32").reshape(1, 4, 4, 1)
    pooled = keras.layers.AveragePooling2D(3, strides=1, padding="same")(x)
    corner = keras.ops.convert_to_numpy(pooled)[0, 0, 0, 0]
    assert corner == pytest.approx(np.mean([0, 1, 4, 5]))


def _divisible(width: float, divisor: int = 8) -> int:
    """MobileNet-V2's channel rounding (Sandler et al.'s reference code): the nearest multiple
    of `divisor`, never below 90 % of `width`."""
    rounded = max(divisor, int(width + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * width else rounded


@pytest.mark.parametrize("alpha", [0.6, 1.2])
def test_mobilenet_v2_builds_at_a_width_keras_has_no_weights_for(alpha):
    name = f"mobilenet_v2_{alpha}"
    assert name in registry.IMAGE_MODELS and name not in dict(registry.IMAGE_MODELS)
    model = registry.build_image_backbone(name, input_shape=(32, 32, 3))
    widths = {layer.name: layer.output.shape[-1] for layer in model.layers}
    assert model.name == name
    assert widths["Conv1"] == _divisible(32 * alpha)
    # Block 1's projection (24 channels at 1.0) and block 16's (320); then 1280, or more above 1.
    assert widths["block_1_project"] == _divisible(24 * alpha)
    assert widths["block_16_project"] == _divisible(320 * alpha)
    assert widths["Conv_1"] == (_divisible(1280 * alpha) if alpha > 1 else 1280)


@pytest.mark.parametrize("name", ["mobilenet_v2_", "mobilenet_v2_wide", "mobilenet_v2_0", "x"])
def test_image_model_names_that_are_no_width_stay_unknown(name):
    assert name not in registry.IMAGE_MODELS
    with pytest.raises(ValueError, match="unknown image model"):
        registry.build_image_backbone(name)


def test_r2plus1d_mid_width_is_torchvisions():
    pairs = ((64, 64), (64, 128), (128, 128), (256, 512), (512, 512))
    assert [mid_width(i, o) for i, o in pairs] == [144, 230, 288, 921, 1152]


def test_downsampling_factor_follows_pooling_and_strides():
    assert downsampling_factor(registry.build_anonymizer("unet", widths=(4,) * 5)) == 16
    unetpp = registry.build_anonymizer(
        "unetpp", encoder_widths=(4, 4, 4, 4), encoder_blocks=(1, 1, 1), decoder_widths=(4,) * 4
    )
    assert downsampling_factor(unetpp) == 16


@pytest.mark.parametrize("name, factor", [("unetpp_tiny", 8), ("vita_tiny", 4)])
def test_new_anonymizers_make_frames_and_reload(tmp_path, name, factor):
    model = registry.build_anonymizer(name)
    assert downsampling_factor(model) == factor
    frames = np.random.default_rng(1).random((2, 2 * factor, 3 * factor, 3), dtype="float32")
    out = np.asarray(model(frames))
    assert out.shape == frames.shape
    assert out.min() >= 0.0 and out.max() <= 1.0
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    np.testing.assert_allclose(np.asarray(reloaded(frames)), out, atol=1e-6)


@pytest.mark.parametrize("name, factor", [("unetpp_tiny", 8), ("vita_tiny", 4)])
def test_new_anonymizers_export_with_padding(tmp_path, name, factor):
    tf = pytest.importorskip("tensorflow")
    model = registry.build_anonymizer(name)
    export_anonymizer(model, tmp_path / name, platforms=("cpu",))
    served = tf.saved_model.load(str(tmp_path / name))
    frames = np.random.default_rng(3).random((1, 19, 27, 3), dtype="float32")
    # Edge-padded at the bottom and right to the anonymizer's multiple, run, cropped back.
    height, width = -(-19 // factor) * factor, -(-27 // factor) * factor
    padded = np.pad(frames, ((0, 0), (0, height - 19), (0, width - 27), (0, 0)), mode="edge")
    np.testing.assert_allclose(
        served.serve(tf.constant(frames)).numpy(),
        np.asarray(model(padded, training=False))[:, :19, :27],
        atol=1e-5,
    )
    aligned = frames[:, :16, :24]
    np.testing.assert_allclose(
        served.serve(tf.constant(aligned)).numpy(),
        np.asarray(model(aligned, training=False)),
        atol=1e-5,
    )


def test_cli_lists_the_zoo(capsys):
    models_cli(["list"])
    out = capsys.readouterr().out
    for name in ("r2plus1d_18", "r3d_50", "c3d", "mobilenet_v2_0.35", "unetpp", "vita"):
        assert name in out


def test_the_penalty_configs_unetpp_runs_at_their_224_pixels():
    configs = []
    for stem in ("ucf101_vispr_penalty", "hmdb_vispr_penalty"):
        path = Path(__file__).resolve().parents[1] / "configs" / f"{stem}.cfg"
        config = parse_config([f"--flagfile={path}"])
        configs.append((config.anonymizer, config.image_size, config.action_model))
    assert configs == [("unetpp", 224, "i3d_r50")] * 2
    # TeD-SPAD's depth-4 UNet++ at narrow widths: the full-width one is measured in the README.
    model = registry.build_anonymizer(
        "unetpp", encoder_widths=(4, 4, 8, 8), encoder_blocks=(1, 1, 1), decoder_widths=(8, 8, 4, 4)
    )
    frames = np.random.default_rng(4).random((1, 224, 224, 3), dtype="float32")
    out = np.asarray(model(frames, training=False))
    assert out.shape == frames.shape and 0 <= out.min() and out.max() <= 1
