"""PyTorch -> Keras weight import: random PyTorch models in torchvision's layouts (rebuilt in
tests/torch_reference.py), converted, must give the same outputs."""

import json
import struct

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch_reference as ref  # noqa: E402

from keras_privacy.convert import (  # noqa: E402
    ConversionError,
    load_torch_weights,
    main,
    read_state_dict,
)
from keras_privacy.models import registry  # noqa: E402

WIDTHS = (8, 8, 16, 16)


def torch_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "model, count",
    [
        (lambda: ref.VideoResNet(), 33_371_472),  # torchvision r3d_18
        (lambda: ref.VideoResNet(factorized=True), 31_505_325),  # r2plus1d_18
        (lambda: ref.ResNet((2, 2, 2, 2), bottleneck=False), 11_689_512),  # resnet18
        (lambda: ref.ResNet((3, 4, 6, 3)), 25_557_032),  # resnet50
        (lambda: ref.ResNet((3, 8, 36, 3)), 60_192_808),  # resnet152
        (lambda: ref.UNet(), 17_263_107),  # milesial's UNet, bilinear
        (lambda: ref.ResNet(video=True, num_classes=400), 47_018_576),  # Keras' r3d_50 count
    ],
)
def test_torch_references_have_the_published_parameter_counts(model, count):
    assert torch_parameters(model()) == count


def state_dict(model) -> dict:
    return {name: value.numpy() for name, value in model.state_dict().items()}


def torch_output(model, x: np.ndarray) -> np.ndarray:
    """`model` on channels-last `x`, channels moved for PyTorch and back for images out."""
    with torch.no_grad():
        out = model(torch.from_numpy(np.moveaxis(x, -1, 1).copy())).numpy()
    return np.moveaxis(out, 1, -1) if out.ndim == 4 else out


CASES = {
    "r3d_18": (
        lambda: ref.VideoResNet(False, WIDTHS, (2, 1, 1, 1), num_classes=5),
        lambda: registry.build_action_model(
            "r3d_18", 5, widths=WIDTHS, blocks=(2, 1, 1, 1), stem_width=8
        ),
        (8, 32, 32, 3),
    ),
    "r2plus1d_18": (
        lambda: ref.VideoResNet(True, WIDTHS, (1, 1, 1, 1), stem_mid=6, num_classes=5),
        lambda: registry.build_action_model(
            "r2plus1d_18", 5, widths=WIDTHS, blocks=(1, 1, 1, 1), stem_width=8, stem_mid_width=6
        ),
        (8, 32, 32, 3),
    ),
    "r3d_50": (
        lambda: ref.ResNet((1, 2, 1, 1), True, WIDTHS, 5, video=True),
        lambda: registry.build_action_model(
            "r3d_50", 5, widths=WIDTHS, blocks=(1, 2, 1, 1), stem_width=8
        ),
        (8, 32, 32, 3),
    ),
    "resnet18": (
        lambda: ref.ResNet((2, 1, 1, 1), False, WIDTHS, 5),
        lambda: registry.build_image_backbone(
            "resnet18", num_classes=5, widths=WIDTHS, blocks=(2, 1, 1, 1)
        ),
        (32, 32, 3),
    ),
    "resnet50": (
        lambda: ref.ResNet((1, 2, 1, 1), True, WIDTHS, 5),
        lambda: registry.build_image_backbone(
            "resnet50", num_classes=5, widths=WIDTHS, blocks=(1, 2, 1, 1)
        ),
        (32, 32, 3),
    ),
    "unet": (
        lambda: ref.UNet((8, 8, 16, 16)),
        lambda: registry.build_anonymizer("unet", widths=(8, 8, 16, 16)),
        (16, 24, 3),
    ),
}


@pytest.mark.parametrize("arch", sorted(CASES))
def test_converted_model_gives_the_pytorch_outputs(arch):
    torch_model, keras_model, shape = CASES[arch]
    torch_model, keras_model = ref.randomize(torch_model()), keras_model()
    load_torch_weights(keras_model, state_dict(torch_model), arch)
    x = np.random.default_rng(0).random((2, *shape), dtype="float32")
    out = np.asarray(keras_model(x, training=False))
    np.testing.assert_allclose(out, torch_output(torch_model, x), atol=1e-4)


def test_r3d_18_weights_load_into_spacts_variant():
    torch_model = ref.randomize(ref.VideoResNet(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    keras_model = registry.build_action_model(
        "r3d_18_spact", 5, widths=WIDTHS, blocks=(1, 1, 1, 1), stem_width=8
    )
    load_torch_weights(keras_model, state_dict(torch_model), "r3d_18_spact")
    np.testing.assert_array_equal(
        np.asarray(keras_model.get_layer("fc").kernel), state_dict(torch_model)["fc.weight"].T
    )


def test_unet_conv_biases_are_folded_into_the_batchnorm():
    torch_model = ref.randomize(ref.UNet((8, 16, 16), bias=True))
    keras_model = registry.build_anonymizer("unet", widths=(8, 16, 16))
    load_torch_weights(keras_model, state_dict(torch_model), "unet")
    x = np.random.default_rng(1).random((1, 16, 16, 3), dtype="float32")
    np.testing.assert_allclose(
        np.asarray(keras_model(x, training=False)), torch_output(torch_model, x), atol=1e-5
    )


def test_cli_converts_a_full_size_resnet18_checkpoint(tmp_path, capsys):
    torch_model = ref.randomize(ref.ResNet((2, 2, 2, 2), bottleneck=False, num_classes=7))
    path = tmp_path / "resnet18.pth"
    torch.save({"epoch": 3, "state_dict": torch_model.state_dict()}, path)
    out = tmp_path / "resnet18.weights.h5"
    assert main([str(path), "--arch", "resnet18", "--out", str(out)]) == 0
    assert str(out) in capsys.readouterr().out
    keras_model = registry.build_image_backbone("resnet18", num_classes=7)
    keras_model.load_weights(out)
    x = np.random.default_rng(2).random((1, 32, 32, 3), dtype="float32")
    np.testing.assert_allclose(
        np.asarray(keras_model(x, training=False)), torch_output(torch_model, x), atol=1e-4
    )


def write_safetensors(path, tensors: dict) -> None:
    """A .safetensors file: header length, JSON header, little-endian data."""
    header, chunks, offset = {}, [], 0
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        dtype = {"float32": "F32", "int64": "I64"}[str(array.dtype)]
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def test_safetensors_and_dataparallel_prefix_are_read(tmp_path):
    torch_model = ref.randomize(ref.ResNet((1, 1, 1, 1), False, WIDTHS, 3))
    tensors = {f"module.{k}": v for k, v in state_dict(torch_model).items()}
    write_safetensors(tmp_path / "model.safetensors", tensors)
    loaded = read_state_dict(tmp_path / "model.safetensors")
    assert set(loaded) == set(state_dict(torch_model))
    np.testing.assert_array_equal(loaded["fc.weight"], tensors["module.fc.weight"])


def small_resnet():
    keras_model = registry.build_image_backbone(
        "resnet18", num_classes=3, widths=WIDTHS, blocks=(1, 1, 1, 1)
    )
    return state_dict(ref.ResNet((1, 1, 1, 1), False, WIDTHS, 3)), keras_model


def test_missing_unexpected_and_mismatched_keys_are_named():
    tensors, keras_model = small_resnet()
    del tensors["layer2.0.bn1.running_var"]
    tensors["layer9.extra.weight"] = np.zeros(3, "float32")
    tensors["fc.weight"] = np.zeros((4, 16), "float32")
    before = [np.array(v) for v in keras_model.weights]
    with pytest.raises(ConversionError) as error:
        load_torch_weights(keras_model, tensors, "resnet18", source="ckpt.pth")
    message = str(error.value)
    assert "ckpt.pth" in message
    assert "1 missing: layer2.0.bn1.running_var" in message
    assert "1 unexpected: layer9.extra.weight" in message
    assert "fc.weight: (16, 4) in the file, Keras wants (16, 3)" in message
    for old, variable in zip(before, keras_model.weights):  # nothing assigned
        np.testing.assert_array_equal(old, np.array(variable))


def test_a_pickled_module_is_refused_without_running_it(tmp_path):
    path = tmp_path / "whole_model.pth"
    torch.save(ref.ResNet((1, 1, 1, 1), False, WIDTHS, 3), path)
    with pytest.raises(ConversionError, match="whole_model.pth: not readable .*weights_only") as e:
        read_state_dict(path)
    # PyTorch's reason is kept; its advice to retry with weights_only=False is not.
    assert "Unsupported global: GLOBAL torch_reference.ResNet" in str(e.value)
    assert "weights_only=False" not in str(e.value) and "\n" not in str(e.value)


def test_checkpoint_dict_needs_a_key_when_ambiguous(tmp_path):
    tensors, _ = small_resnet()
    tensors = {k: torch.from_numpy(v) for k, v in tensors.items()}
    path = tmp_path / "two.pth"
    torch.save({"ema": tensors, "student": tensors}, path)
    with pytest.raises(ConversionError, match="give --key, one of: ema, student"):
        read_state_dict(path)
    assert "fc.weight" in read_state_dict(path, key="student")


def test_cli_reports_a_wrong_head_and_a_bad_output_name(tmp_path, capsys):
    tensors, _ = small_resnet()
    path = tmp_path / "small.pth"
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)
    out = str(tmp_path / "out.weights.h5")
    assert main([str(path), "--arch", "resnet18", "--out", out, "--num_classes", "9"]) == 1
    assert "fc.weight has 3 classes" in capsys.readouterr().err
    assert main([str(path), "--arch", "resnet18", "--out", str(tmp_path / "out.h5")]) == 1
    assert "must end in .weights.h5" in capsys.readouterr().err
