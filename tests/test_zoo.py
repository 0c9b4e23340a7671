"""The architecture zoo: parameter counts of the full-size models, the new anonymizers' contract
(frames in [0, 1] -> frames in [0, 1], size factor, export, save and reload)."""

import keras
import numpy as np
import pytest

from keras_privacy.export import export_anonymizer
from keras_privacy.models import registry
from keras_privacy.models.__main__ import main as models_cli
from keras_privacy.models.__main__ import trainable_parameters
from keras_privacy.models.r2plus1d import mid_width
from keras_privacy.models.unet import downsampling_factor


@pytest.mark.parametrize(
    "name, num_classes, count",
    [
        ("r2plus1d_18", 400, 31_505_325),  # torchvision
        ("r3d_50", 400, 47_018_576),  # 3D-ResNets-PyTorch resnet50 (see test_convert.py)
        ("c3d", 487, 79_991_015),  # c3d-pytorch, Sports-1M head
    ],
)
def test_action_model_parameter_counts(name, num_classes, count):
    model = registry.build_action_model(name, num_classes=num_classes)
    assert trainable_parameters(model) == count


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


@pytest.mark.parametrize(
    "name, application",
    [("mobilenet_v1_1.0", "MobileNet"), ("mobilenet_v2_1.0", "MobileNetV2")],
)
def test_mobilenets_with_a_head_have_keras_applications_count(name, application):
    ours = registry.build_image_backbone(name, num_classes=1000)
    reference = getattr(keras.applications, application)(weights=None)
    assert ours.count_params() == reference.count_params()


@pytest.mark.parametrize(
    "name, features",
    [
        ("mobilenet_v1_0.25", 256),
        ("mobilenet_v1_0.5", 512),
        ("mobilenet_v1_0.75", 768),
        ("mobilenet_v1_1.0", 1024),
        ("mobilenet_v2_0.35", 1280),
        ("mobilenet_v2_1.0", 1280),
        ("mobilenet_v2_1.3", 1664),
        ("mobilenet_v2_1.4", 1792),
    ],
)
def test_mobilenet_width_multipliers_set_the_feature_width(name, features):
    assert registry.build_image_backbone(name).output_shape == (None, features)


def test_r2plus1d_mid_width_is_torchvisions():
    assert [
        mid_width(i, o) for i, o in ((64, 64), (64, 128), (128, 128), (256, 512), (512, 512))
    ] == [
        144,
        230,
        288,
        921,
        1152,
    ]


@pytest.mark.parametrize(
    "name, factor", [("unet", 16), ("unet_tiny", 4), ("unetpp", 16), ("unetpp_tiny", 8)]
)
def test_downsampling_factor_of_each_anonymizer(name, factor):
    assert downsampling_factor(registry.build_anonymizer(name)) == factor


def test_vita_net_factor_and_output_size():
    model = registry.build_anonymizer("vita_tiny")
    assert downsampling_factor(model) == 4
    frames = np.random.default_rng(0).random((2, 12, 20, 3), dtype="float32")
    out = np.asarray(model(frames))
    assert out.shape == frames.shape
    assert out.min() >= 0.0 and out.max() <= 1.0


def test_unetpp_output_is_a_frame_and_reloads(tmp_path):
    model = registry.build_anonymizer("unetpp_tiny")
    frames = np.random.default_rng(1).random((2, 16, 24, 3), dtype="float32")
    out = np.asarray(model(frames))
    assert out.shape == frames.shape
    assert out.min() >= 0.0 and out.max() <= 1.0
    model.save(tmp_path / "unetpp.keras")
    reloaded = keras.saving.load_model(tmp_path / "unetpp.keras")
    np.testing.assert_allclose(np.asarray(reloaded(frames)), out, atol=1e-6)


def test_vita_net_reloads(tmp_path):
    model = registry.build_anonymizer("vita_tiny")
    frames = np.random.default_rng(2).random((1, 8, 8, 3), dtype="float32")
    model.save(tmp_path / "vita.keras")
    reloaded = keras.saving.load_model(tmp_path / "vita.keras")
    np.testing.assert_allclose(np.asarray(reloaded(frames)), np.asarray(model(frames)), atol=1e-6)


@pytest.mark.parametrize("name", ["unetpp_tiny", "vita_tiny"])
def test_new_anonymizers_export_with_padding(tmp_path, name):
    tf = pytest.importorskip("tensorflow")
    model = registry.build_anonymizer(name)
    export_anonymizer(model, tmp_path / name, platforms=("cpu",))
    served = tf.saved_model.load(str(tmp_path / name))
    frames = np.random.default_rng(3).random((1, 19, 27, 3), dtype="float32")
    assert served.serve(tf.constant(frames)).shape == frames.shape
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
