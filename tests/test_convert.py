"""PyTorch -> Keras weight import: random PyTorch models in torchvision's layouts (rebuilt in
tests/torch_reference.py), converted, must give the same outputs."""

import functools
import json
import struct

import keras
import numpy as np
import pytest
import torch  # a test dependency: a missing one fails here rather than skipping 48 tests
import torch_reference as ref

from keras_privacy.convert import (
    ConversionError,
    load_torch_weights,
    main,
    read_state_dict,
)
from keras_privacy.models import i3d, registry
from keras_privacy.models.pretrained import NORMALIZATIONS, WeightsError, load_pretrained
from keras_privacy.models.resnet import privacy_encoder, projection_head

WIDTHS = (8, 8, 16, 16)
# A narrow I3D-R50 whose blocks take both temporal kernels (3 and 1) in three stages.
I3D_SMALL = {"widths": WIDTHS, "blocks": (2, 2, 1, 2), "stem_width": 8}


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
        (lambda: ref.UNet(), 17_263_107),  # milesial's UNet, bilinear, without conv biases
        (lambda: ref.UNet(bias=True), 17_267_523),  # SPAct's copy: biases before each BN
        (lambda: ref.ResNet(video=True, num_classes=400), 47_018_576),  # Keras' r3d_50 count
        (lambda: ref.VideoResNet(mixed=True), 11_695_440),  # torchvision mc3_18
        (lambda: ref.I3Res50(), 28_043_472),  # pytorch-resnet3d's I3Res50, Kinetics-400 head
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
    # Odd sizes: the unpadded max-pools floor as PyTorch's do.
    "i3d_r50": (
        lambda: ref.I3Res50(num_classes=5, **I3D_SMALL),
        lambda: registry.build_action_model("i3d_r50", 5, **I3D_SMALL),
        (10, 40, 40, 3),
    ),
    "i3d_r50_tedspad": (
        lambda: ref.I3DWithFeatureHead(num_classes=5, **I3D_SMALL),
        lambda: registry.build_action_model("i3d_r50", 5, **I3D_SMALL),
        (9, 36, 36, 3),
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
    "mc3_18": (
        lambda: ref.VideoResNet(False, WIDTHS, (2, 1, 1, 1), num_classes=5, mixed=True),
        lambda: registry.build_action_model(
            "mc3_18", 5, widths=WIDTHS, blocks=(2, 1, 1, 1), stem_width=8
        ),
        (8, 32, 32, 3),
    ),
    "simclr_resnet50": (
        lambda: ref.simclr_resnet((1, 2, 1, 1), WIDTHS, hidden=24, output=8),
        lambda: privacy_encoder(
            registry.build_image_backbone("resnet50", widths=WIDTHS, blocks=(1, 2, 1, 1)),
            projection_head(64, hidden=24, output=8),
        ),
        (32, 32, 3),
    ),
    **{
        # smp's UnetPlusPlus with activation="sigmoid" (ours), and None (the authors').
        arch: (
            functools.partial(
                ref.UnetPlusPlus, 4, (8, 16, 16, 32), (2, 1, 1, 1), (32, 16, 8, 8), activation
            ),
            functools.partial(
                registry.build_anonymizer,
                arch,
                encoder_widths=(8, 8, 16, 16, 32),
                encoder_blocks=(2, 1, 1),
                decoder_widths=(32, 16, 8, 8),
            ),
            (32, 48, 3),
        )
        for arch, activation in [("unetpp", "sigmoid"), ("unetpp_unbounded", None)]
    },
    "r3d_18_tedspad": (
        lambda: ref.R3DWithBackbone(False, WIDTHS, (1, 1, 1, 1), num_classes=5),
        lambda: registry.build_action_model(
            "r3d_18", 5, widths=WIDTHS, blocks=(1, 1, 1, 1), stem_width=8
        ),
        (8, 32, 32, 3),
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


def test_a_safetensors_file_cut_short_or_with_a_damaged_header_is_named(tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {"fc.weight": np.ones((4, 3), "float32")})
    whole = path.read_bytes()
    (length,) = struct.unpack("<Q", whole[:8])

    def with_header(header) -> bytes:
        encoded = json.dumps(header).encode()
        return struct.pack("<Q", len(encoded)) + encoded + whole[8 + length :]

    entry = {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}
    cases = [
        (whole[:-5], "tensor fc.weight (F32 [4, 3]) needs 48 bytes at 0-48 of 43: the file is "),
        (with_header([entry]), "not a safetensors file (its header is a JSON list, not an "),
        (
            with_header({"fc.weight": {"dtype": "F32", "shape": [4, 3]}}),
            "tensor fc.weight: a header entry without dtype, shape and data_offsets (",
        ),
        (with_header({"fc.weight": "F32"}), "tensor fc.weight: a header entry without dtype, "),
        (
            with_header({"fc.weight": {**entry, "shape": [5, 3]}}),
            "tensor fc.weight (F32 [5, 3]) needs 60 bytes at 0-48 of 48: ",
        ),
    ]
    for data, message in cases:
        path.write_bytes(data)
        with pytest.raises(ConversionError) as raised:
            read_state_dict(path)
        assert str(raised.value).startswith(f"{path}: {message}"), str(raised.value)


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


@pytest.mark.backend_independent
def test_a_file_that_is_no_pytorch_checkpoint_is_called_so_with_the_unpicklers_reason(tmp_path):
    path = tmp_path / "notes.pth"
    path.write_text("not a pytorch checkpoint\n")
    with pytest.raises(ConversionError) as e:
        read_state_dict(path)
    assert str(e.value) == (
        f"{path}: not a PyTorch checkpoint: it starts as neither a zip archive nor a pickle, "
        "the two formats torch.save writes (UnpicklingError: Unsupported operand 110)"
    )


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
    assert "write a .keras model or a .weights.h5 file" in capsys.readouterr().err
    # An output under a file is named before the checkpoint is read; a folder is no checkpoint.
    (tmp_path / "notes.txt").write_text("")
    under_a_file = str(tmp_path / "notes.txt" / "out.weights.h5")
    assert main([str(path), "--arch", "resnet18", "--out", under_a_file]) == 1
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'notes.txt'}: the folder of --out {under_a_file} names a file; "
        "name a folder (made if missing)\n"
    )
    assert main([str(tmp_path), "--arch", "resnet18", "--out", out]) == 1
    assert capsys.readouterr().err == f"error: {tmp_path}: a folder, not a checkpoint file\n"


# The command's reading of TeD-SPAD's file; unetpp's outputs are compared on both backends in
# test_converted_model_gives_the_pytorch_outputs.
@pytest.mark.backend_independent
def test_cli_converts_a_ted_spad_unetpp_checkpoint_into_a_keras_model(tmp_path, capsys):
    """TeD-SPAD's f_A at full size, saved as their training saves it (DataParallel, under
    fa_model_state_dict, smp's unused encoder.layer4 included) -> a .keras anonymizer with
    their unbounded output (no sigmoid: values outside [0, 1] come out as they are)."""
    torch_model = ref.randomize(ref.UnetPlusPlus())
    assert any(key.startswith("encoder.layer4.") for key in torch_model.state_dict())
    tensors = {f"module.{k}": v for k, v in torch_model.state_dict().items()}
    path = tmp_path / "fa_ted_spad.pth"
    torch.save({"epoch": 1, "fa_model_state_dict": tensors}, path)
    out = tmp_path / "unetpp.keras"
    argv = [str(path), "--arch", "unetpp_unbounded", "--out", str(out)]
    argv += ["--normalization", "none"]
    assert main(argv) == 0
    assert str(out) in capsys.readouterr().out
    keras_model = keras.saving.load_model(out, compile=False)
    x = np.random.default_rng(3).random((1, 32, 48, 3), dtype="float32")
    expected = torch_output(torch_model, x)
    assert expected.min() < 0 or expected.max() > 1
    np.testing.assert_allclose(np.asarray(keras_model(x, training=False)), expected, atol=1e-4)


@pytest.fixture
def narrow_i3d(monkeypatch):
    """The registry's i3d_r50 at I3D_SMALL's widths, so the CLI converts a narrow checkpoint."""
    narrow = functools.partial(i3d.i3d_r50, **I3D_SMALL)
    monkeypatch.setitem(registry.ACTION_MODELS, "i3d_r50", narrow)


def test_cli_converts_the_authors_saved_f_t_and_lists_the_feature_head(
    tmp_path, capsys, narrow_i3d
):
    torch_model = ref.randomize(ref.I3DWithFeatureHead(num_classes=9, **I3D_SMALL))
    tensors = {f"module.{k}": v for k, v in torch_model.state_dict().items()}  # DataParallel
    path = tmp_path / "model_20.pth"
    torch.save({"epoch": 20, "ft_model_state_dict": tensors}, path)
    out = tmp_path / "f_t.weights.h5"
    argv = [str(path), "--arch", "i3d_r50_tedspad", "--key", "ft_model_state_dict"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "left out (no place in i3d_r50): the checkpoint's keys matching ^(mlp)\\." in printed
    keras_model = registry.build_action_model("i3d_r50", 9)
    keras_model.load_weights(out)
    x = np.random.default_rng(3).random((1, 8, 32, 32, 3), dtype="float32")
    np.testing.assert_allclose(
        np.asarray(keras_model(x, training=False)), torch_output(torch_model, x), atol=1e-4
    )


def test_an_i3d_trained_with_frozen_batchnorm_converts(tmp_path, narrow_i3d):
    """TeD-SPAD's and the penalty authors' I3D f_T train after `freeze_bn`, which saves each
    BatchNorm3d's weight as `scale`: it converts as the `weight` it is."""
    torch_model = ref.randomize(ref.I3DWithFeatureHead(num_classes=9, **I3D_SMALL))
    tensors = ref.frozen_bn_state_dict(torch_model)
    assert "i3d.bn1.scale" in tensors and "i3d.bn1.weight" not in tensors
    path = tmp_path / "ft_i3d_ucf101.pth"
    torch.save({"epoch": 20, "ft_model_state_dict": tensors}, path)
    out = tmp_path / "f_t.weights.h5"
    argv = [str(path), "--arch", "i3d_r50_tedspad", "--key", "ft_model_state_dict"]
    assert main([*argv, "--out", str(out)]) == 0
    keras_model = registry.build_action_model("i3d_r50", 9)
    keras_model.load_weights(out)
    x = np.random.default_rng(4).random((1, 8, 32, 32, 3), dtype="float32")
    np.testing.assert_allclose(
        np.asarray(keras_model(x, training=False)), torch_output(torch_model, x), atol=1e-4
    )


def torch_embedding(torch_model, features: np.ndarray) -> np.ndarray:
    """TeD-SPAD's `mlp` forward (model_loaders.py:250-254) in eval mode: the reference."""
    mlp = torch_model.mlp
    with torch.no_grad():
        x = torch.relu(mlp.bn1(mlp.fc1(torch.from_numpy(features))))
        return torch.nn.functional.normalize(mlp.bn2(mlp.fc2(x)), p=2, dim=1).numpy()


def test_cli_converts_ted_spads_embedding_head_alone(tmp_path, capsys):
    """`tedspad_embedding` takes the `mlp.*` head out of TeD-SPAD's saved f_T (its
    widths read from the file) and leaves f_T out: the head gives PyTorch's embeddings."""
    from keras_privacy.models.resnet import embedding_head

    torch_model = ref.randomize(ref.I3DWithFeatureHead(num_classes=9, **I3D_SMALL))
    path = tmp_path / "model_20.pth"
    torch.save({"epoch": 20, "ft_model_state_dict": torch_model.state_dict()}, path)
    out = tmp_path / "embedding.weights.h5"
    argv = [str(path), "--arch", "tedspad_embedding", "--key", "ft_model_state_dict"]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "tedspad_embedding (11 tensors, output width 128); give it to --embedding_weights" in (
        printed
    )
    assert "left out: f_T itself (the checkpoint's keys outside mlp.)" in printed
    head = embedding_head(WIDTHS[-1] * 4)
    head.load_weights(out)
    features = np.random.default_rng(5).normal(size=(3, WIDTHS[-1] * 4)).astype("float32")
    np.testing.assert_allclose(
        head.predict(features, verbose=0), torch_embedding(torch_model, features), atol=1e-5
    )
    assert main([*argv, "--out", str(tmp_path / "e.keras"), "--normalization", "imagenet"]) == 1
    assert "tedspad_embedding is a head on f_T's features, not on frames" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--out", str(tmp_path / "e.keras")]) == 0  # nothing to normalise
    plain = tmp_path / "i3d_r50_kinetics.pth"
    torch.save(torch_model.i3d.state_dict(), plain)
    assert main([str(plain), "--arch", "tedspad_embedding", "--out", str(out)]) == 1
    assert "the checkpoint has no mlp.fc1.weight (TeD-SPAD's f_T with its `mlp` head)" in (
        capsys.readouterr().err
    )
    with pytest.raises(
        WeightsError, match=r"no embedding head in the file .* holds bn1\.\*, conv1\.\*, fc"
    ):
        load_pretrained(head, plain, arch="tedspad_embedding")  # --embedding_weights' reader


@pytest.mark.backend_independent  # the command's files; resnet18's CLI converts on both
def test_cli_writes_a_simclr_encoder_behind_its_input_normalisation(tmp_path):
    """SPAct's f_B checkpoint (fb_model_state_dict: ResNet-50 trunk `0.*`, head `1.fc1`,
    `1.fc2`) -> a .keras privacy encoder that normalises [0, 1] images by ImageNet's
    statistics: it equals PyTorch's f_B fed (x - mean) / std."""
    torch_model = ref.randomize(ref.simclr_resnet())
    path = tmp_path / "fb_simclr.pth"
    torch.save({"fb_model_state_dict": torch_model.state_dict()}, path)
    out = tmp_path / "simclr.keras"
    argv = [str(path), "--arch", "simclr_resnet50", "--out", str(out)]
    assert main([*argv, "--normalization", "imagenet"]) == 0
    keras_model = keras.saving.load_model(out, compile=False)
    x = np.random.default_rng(4).random((2, 32, 32, 3), dtype="float32")
    mean, std = NORMALIZATIONS["imagenet"]
    expected = torch_output(torch_model, ((x - np.float32(mean)) / np.float32(std)))
    np.testing.assert_allclose(np.asarray(keras_model(x, training=False)), expected, atol=1e-4)


def test_a_keras_output_needs_its_normalisation_named(tmp_path, capsys):
    tensors, _ = small_resnet()
    path = tmp_path / "small.pth"
    torch.save({k: torch.from_numpy(v) for k, v in tensors.items()}, path)
    out = str(tmp_path / "out.keras")
    assert main([str(path), "--arch", "resnet18", "--out", out]) == 1
    assert "give --normalization (none, imagenet, kinetics400)" in capsys.readouterr().err
    assert main([str(path), "--arch", "resnet18", "--out", out, "--normalization", "x"]) == 1
    assert "unknown normalisation 'x'" in capsys.readouterr().err
    h5 = str(tmp_path / "out.weights.h5")
    assert main([str(path), "--arch", "resnet18", "--out", h5, "--normalization", "imagenet"]) == 1
    assert "cannot record --normalization imagenet" in capsys.readouterr().err


def test_a_vissl_simclr_checkpoint_is_read_in_spacts_layout(tmp_path):
    """VISSL's SimCLR checkpoint (what SPAct's code loads): trunk `_feature_blocks.*` and heads
    `0.clf.0` / `1.clf.0` under classy_state_dict, renamed to SPAct's f_B layout."""
    torch_model = ref.randomize(ref.simclr_resnet((1, 1, 1, 1), WIDTHS, hidden=24, output=8))
    tensors = torch_model.state_dict()
    trunk = {f"_feature_blocks.{k[2:]}": v for k, v in tensors.items() if k.startswith("0.")}
    heads = {
        k.replace("1.fc1.", "0.clf.0.").replace("1.fc2.", "1.clf.0."): v
        for k, v in tensors.items()
        if k.startswith("1.")
    }
    path = tmp_path / "model_final_checkpoint_phase799.torch"
    model = {"trunk": trunk, "heads": heads}
    torch.save({"phase_idx": 799, "classy_state_dict": {"base_model": {"model": model}}}, path)
    loaded = read_state_dict(path)
    assert set(loaded) == set(tensors)
    keras_model = privacy_encoder(
        registry.build_image_backbone("resnet50", widths=WIDTHS, blocks=(1, 1, 1, 1)),
        projection_head(64, hidden=24, output=8),
    )
    load_torch_weights(keras_model, loaded, "simclr_resnet50")
    x = np.random.default_rng(7).random((2, 32, 32, 3), dtype="float32")
    np.testing.assert_allclose(
        np.asarray(keras_model(x, training=False)), torch_output(torch_model, x), atol=1e-4
    )


def test_a_kinetics_i3d_starts_a_101_way_f_t_without_its_head(tmp_path, capsys, narrow_i3d):
    from keras_privacy.config import ExperimentConfig
    from keras_privacy.training import build_models

    torch_model = ref.randomize(ref.I3Res50(num_classes=400, **I3D_SMALL))
    path = tmp_path / "i3d_r50_kinetics.pth"
    torch.save(torch_model.state_dict(), path)
    out = tmp_path / "i3d_r50_kinetics400.weights.h5"
    assert main([str(path), "--arch", "i3d_r50", "--out", str(out)]) == 0
    config = ExperimentConfig(
        anonymizer="unet_tiny",
        action_model="i3d_r50",
        privacy_backbone="resnet_tiny",
        action_weights=str(out),
        clip_length=8,
        image_size=32,
    )
    config.validate()
    capsys.readouterr()
    action = build_models(config, num_classes=101, num_attributes=5)["action"]
    report = capsys.readouterr().out
    trunk = sum(1 for layer in action.layers if layer.weights) - 1  # all but the head
    assert f"i3d_r50: {trunk} layers loaded, 0 new, 1 mismatched, 0 in the file unused" in report
    assert "mismatched: layers/dense: file [(64, 400), (400,)] vs model [(64, 101), (101,)]" in (
        report
    )
    stem = torch_model.state_dict()["conv1.weight"].numpy()
    np.testing.assert_array_equal(
        np.array(action.get_layer("stem_conv").kernel), np.transpose(stem, (2, 3, 4, 1, 0))
    )
