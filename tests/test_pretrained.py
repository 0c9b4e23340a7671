"""Starting a model from pretrained weights: partial loads by layer name, with a report."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import keras  # noqa: E402
import torch_reference as ref  # noqa: E402

from keras_privacy.models import registry  # noqa: E402
from keras_privacy.models.pretrained import WeightsError, load_pretrained  # noqa: E402
from keras_privacy.models.resnet import privacy_encoder, projection_head  # noqa: E402

WIDTHS = (8, 8, 16, 16)


def small_r3d(num_classes: int) -> keras.Model:
    return registry.build_action_model(
        "r3d_18", num_classes, widths=WIDTHS, blocks=(1, 1, 1, 1), stem_width=8
    )


def saved_torch(tmp_path, model, drop_prefix: str = "") -> str:
    """`model`'s state dict saved as a .pth file, without the keys starting `drop_prefix`."""
    tensors = {
        k: v
        for k, v in model.state_dict().items()
        if not drop_prefix or not k.startswith(drop_prefix)
    }
    path = tmp_path / "weights.pth"
    torch.save(tensors, path)
    return str(path)


def test_a_torch_checkpoint_loads_whole_and_gives_its_outputs(tmp_path):
    torch_model = ref.randomize(ref.VideoResNet(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    model = small_r3d(5)
    report = load_pretrained(model, saved_torch(tmp_path, torch_model), arch="r3d_18")
    assert report.new == report.mismatched == report.unused == []
    x = np.random.default_rng(0).random((2, 8, 32, 32, 3), dtype="float32")
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(np.moveaxis(x, -1, 1).copy())).numpy()
    np.testing.assert_allclose(np.asarray(model(x, training=False)), expected, atol=1e-4)


def test_a_new_head_is_reported_with_both_shapes_and_left_as_built(tmp_path):
    torch_model = ref.randomize(ref.VideoResNet(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    model = small_r3d(7)
    head_before = [np.array(v) for v in model.get_layer("fc").weights]
    report = load_pretrained(model, saved_torch(tmp_path, torch_model), arch="r3d_18")
    assert report.mismatched == ["fc: file [(16, 5), (5,)] vs model [(16, 7), (7,)]"]
    assert report.new == [] and report.unused == []
    assert "stem_conv" in report.loaded and "fc" not in report.loaded
    for before, after in zip(head_before, model.get_layer("fc").weights):
        np.testing.assert_array_equal(before, np.array(after))
    stem = torch_model.state_dict()["stem.0.weight"].numpy()
    np.testing.assert_array_equal(
        np.array(model.get_layer("stem_conv").kernel), np.transpose(stem, (2, 3, 4, 1, 0))
    )
    assert "1 mismatched" in str(report) and "fc: file" in str(report)


def test_an_imagenet_trunk_loads_under_a_projection_head(tmp_path):
    torch_model = ref.randomize(ref.ResNet((1, 1, 1, 1), True, WIDTHS, 5))
    backbone = registry.build_image_backbone("resnet50", widths=WIDTHS, blocks=(1, 1, 1, 1))
    encoder = privacy_encoder(backbone, projection_head(backbone.output_shape[-1], 16, 8))
    report = load_pretrained(encoder, saved_torch(tmp_path, torch_model, "fc."), arch="resnet50")
    head_layers = {
        layer.name for layer in encoder.get_layer("projection_head").layers if layer.weights
    }
    assert set(report.new) == head_layers
    assert report.mismatched == [] and report.unused == []
    assert len(report.loaded) == sum(1 for layer in backbone.layers if layer.weights)


def test_keras_files_load_the_layers_they_share(tmp_path):
    source, target = small_r3d(5), small_r3d(7)
    source.save_weights(tmp_path / "source.weights.h5")
    source.save(tmp_path / "source.keras")
    for name in ("source.weights.h5", "source.keras"):
        report = load_pretrained(target, tmp_path / name)
        assert len(report.mismatched) == 1 and "(16, 5)" in report.mismatched[0]
        assert report.new == report.unused == []
        if name.endswith(".keras"):  # matched by name; a .weights.h5 file by structure
            assert report.mismatched[0].startswith("fc: ")
        np.testing.assert_array_equal(
            np.array(target.get_layer("layer4_0_2_bn").moving_mean),
            np.array(source.get_layer("layer4_0_2_bn").moving_mean),
        )


def test_bad_weight_files_are_named(tmp_path):
    model = small_r3d(5)
    with pytest.raises(WeightsError, match="nothing.pth: no such weight file"):
        load_pretrained(model, tmp_path / "nothing.pth", arch="r3d_18")
    torch.save(torch.nn.Linear(2, 2), tmp_path / "module.pth")  # a pickled module, not a dict
    with pytest.raises(WeightsError, match="module.pth: not readable .* weights_only=True"):
        load_pretrained(model, tmp_path / "module.pth", arch="r3d_18")
    with pytest.raises(WeightsError, match="needs its architecture"):
        load_pretrained(model, tmp_path / "module.pth")
    other = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name="other")])
    other.save_weights(tmp_path / "other.weights.h5")
    with pytest.raises(WeightsError, match="no layer of the file matches"):
        load_pretrained(model, tmp_path / "other.weights.h5")


def test_weight_flags_start_the_built_models(tmp_path, capsys):
    import dataclasses

    from keras_privacy.config import ExperimentConfig
    from keras_privacy.training import build_models

    config = ExperimentConfig(
        anonymizer="unet_tiny", action_model="r3d_tiny", privacy_backbone="resnet_tiny"
    )
    donors = build_models(config, num_classes=6, num_attributes=5)
    donors["action"].save(tmp_path / "action.keras")
    backbone = donors["privacy"].layers[1]
    backbone.save(tmp_path / "trunk.keras")
    donors["anonymizer"].save_weights(tmp_path / "anonymizer.weights.h5")
    config = dataclasses.replace(
        config,
        anonymizer_weights=str(tmp_path / "anonymizer.weights.h5"),
        action_weights=str(tmp_path / "action.keras"),
        privacy_weights=str(tmp_path / "trunk.keras"),
    )
    config.validate()
    models = build_models(config, num_classes=4, num_attributes=5)  # a new action head
    for name in ("anonymizer", "action"):
        for donor, model in zip(donors[name].weights, models[name].weights):
            if model.shape == donor.shape:
                np.testing.assert_array_equal(np.array(model), np.array(donor))
    for donor, model in zip(backbone.weights, models["privacy"].layers[1].weights):
        np.testing.assert_array_equal(np.array(model), np.array(donor))
    printed = capsys.readouterr().out
    assert "action.keras -> r3d_tiny:" in printed and "1 mismatched" in printed
    assert "trunk.keras -> privacy_encoder:" in printed and "new: " in printed


def test_weight_flags_name_a_missing_file_and_a_method_without_f_b(tmp_path):
    from keras_privacy.config import ExperimentConfig

    with pytest.raises(ValueError, match="--action_weights=weights/i3d.pth: no such file"):
        ExperimentConfig(action_weights="weights/i3d.pth").validate()
    (tmp_path / "f_b.keras").write_text("")
    with pytest.raises(ValueError, match="--privacy_weights=.*: --method=vita does not read it"):
        ExperimentConfig(
            method="vita",
            adversary_models="resnet_tiny",
            privacy_weights=str(tmp_path / "f_b.keras"),
        ).validate()
