"""Starting a model from pretrained weights: partial loads by layer name, with a report."""

import re
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tiny_models
import torch  # a test dependency: a missing one fails here rather than skipping the tests
import torch_reference as ref

from keras_privacy import convert
from keras_privacy.convert import load_torch_weights
from keras_privacy.models import registry
from keras_privacy.models.pretrained import (
    NORMALIZATIONS,
    WeightsError,
    input_normalization,
    load_pretrained,
    start_from_weights,
    with_input_normalization,
)
from keras_privacy.models.resnet import privacy_encoder, projection_head

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


def assert_gives_the_torch_outputs(model, torch_model, shape: tuple) -> None:
    x = np.random.default_rng(0).random(shape, dtype="float32")
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(np.moveaxis(x, -1, 1).copy())).numpy()
    np.testing.assert_allclose(np.asarray(model(x, training=False)), expected, atol=1e-4)


@pytest.mark.parametrize(
    "reference",
    # torchvision's layout, and TeD-SPAD's `wrapper_r3d_18` (the trunk under `backbone.`).
    [ref.VideoResNet, ref.R3DWithBackbone],
)
def test_a_torch_checkpoint_loads_whole_and_gives_its_outputs(tmp_path, reference):
    torch_model = ref.randomize(reference(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    model = small_r3d(5)
    report = load_pretrained(model, saved_torch(tmp_path, torch_model), arch="r3d_18")
    assert report.new == report.mismatched == report.unused == []
    assert_gives_the_torch_outputs(model, torch_model, (2, 8, 32, 32, 3))


def test_a_file_of_which_only_the_head_matches_is_refused(tmp_path):
    """A trunk named otherwise (here `trunk.`) and a head that matches: refused, and nothing
    assigned, rather than a random trunk started under a trained head."""
    torch_model = ref.randomize(ref.R3DWithBackbone(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    renamed = {k.replace("backbone.", "trunk."): v for k, v in torch_model.state_dict().items()}
    torch.save(renamed, tmp_path / "renamed.pth")
    model = small_r3d(5)
    head = np.array(model.get_layer("fc").kernel)
    with pytest.raises(WeightsError, match=r"renamed.pth: only the head \(fc\) of 'r3d_18'"):
        load_pretrained(model, tmp_path / "renamed.pth", arch="r3d_18")
    np.testing.assert_array_equal(np.array(model.get_layer("fc").kernel), head)


def test_the_authors_saved_i3d_f_t_starts_i3d_r50_as_it_is(tmp_path):
    """TeD-SPAD's train_action.py saves {"ft_model_state_dict": wrapper_i3d, DataParallel,
    BatchNorms frozen (`scale`)}: given to `i3d_r50` as it is, every layer loads and the
    model gives the checkpoint's outputs."""
    small = {"widths": WIDTHS, "blocks": (1, 1, 1, 1), "stem_width": 8}
    torch_model = ref.randomize(ref.I3DWithFeatureHead(num_classes=5, **small))
    tensors = {f"module.{k}": v for k, v in ref.frozen_bn_state_dict(torch_model).items()}
    path = tmp_path / "model_20.pth"
    torch.save({"epoch": 20, "ft_model_state_dict": tensors}, path)
    model = registry.build_action_model("i3d_r50", 5, **small)
    report = load_pretrained(model, path, arch="i3d_r50")
    assert report.new == report.mismatched == report.unused == []
    assert_gives_the_torch_outputs(model, torch_model, (1, 8, 32, 32, 3))


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
    # The trunk inside the encoder gives the checkpoint's pooled features.
    x = np.random.default_rng(0).random((2, 32, 32, 3), dtype="float32")
    torch_model.fc = torch.nn.Identity()
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(np.moveaxis(x, -1, 1).copy())).numpy()
    np.testing.assert_allclose(np.asarray(backbone(x, training=False)), expected, atol=1e-4)


def test_keras_files_load_the_layers_they_share(tmp_path):
    source = small_r3d(5)
    tiny_models.deterministic_weights(source, 0)  # moving statistics included
    source.save_weights(tmp_path / "source.weights.h5")
    source.save(tmp_path / "source.keras")
    for name in ("source.weights.h5", "source.keras"):
        target = small_r3d(7)
        head = [np.array(v) for v in target.get_layer("fc").weights]
        report = load_pretrained(target, tmp_path / name)
        assert len(report.mismatched) == 1 and "(16, 5)" in report.mismatched[0]
        assert report.new == report.unused == []
        if name.endswith(".keras"):  # matched by name; a .weights.h5 file by structure
            assert report.mismatched[0].startswith("fc: ")
        for layer in source.layers:
            if layer.weights and layer.name != "fc":
                for got, want in zip(target.get_layer(layer.name).weights, layer.weights):
                    np.testing.assert_array_equal(np.array(got), np.array(want), err_msg=name)
        for got, kept in zip(target.get_layer("fc").weights, head):
            np.testing.assert_array_equal(np.array(got), kept)  # the mismatched head as built


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


def test_a_damaged_keras_weight_file_is_named(tmp_path):
    small_r3d(5).save(tmp_path / "source.keras")
    damaged = tiny_models.damaged_keras_file(tmp_path / "source.keras", tmp_path / "bad.keras")
    with pytest.raises(WeightsError) as raised:
        load_pretrained(small_r3d(5), damaged)
    assert str(raised.value) == (
        f"{damaged}: a damaged .keras archive (Bad CRC-32 for file 'model.weights.h5')"
    )


def rewritten_keras_file(path: Path, out: Path, members: dict) -> Path:
    """A copy of the `.keras` archive at `path` at `out`, its members replaced by `members`
    (name: bytes, or None to leave the member out)."""
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(out, "w") as copy:
        for name in source.namelist():
            data = members.get(name, source.read(name))
            if data is not None:
                copy.writestr(name, data)
    return out


def test_a_keras_file_that_keras_cannot_rebuild_is_named_with_the_reason(tmp_path):
    small_r3d(5).save(tmp_path / "source.keras")
    source = tmp_path / "source.keras"
    config = zipfile.ZipFile(source).read("config.json").decode()
    cases = [
        ("no_config.keras", {"config.json": None}, "a damaged .keras archive (There is no item "),
        ("bad_json.keras", {"config.json": b"{x"}, "not loadable as a Keras model (Expecting "),
        (
            "unknown_class.keras",
            {"config.json": config.replace('"Functional"', '"NoSuchModel"', 1).encode()},
            "not loadable as a Keras model (",
        ),
    ]
    for name, members, message in cases:
        path = rewritten_keras_file(source, tmp_path / name, members)
        with pytest.raises(WeightsError) as raised:
            load_pretrained(small_r3d(5), path)
        assert str(raised.value).startswith(f"{path}: {message}"), str(raised.value)
    cut = tmp_path / "cut.keras"
    cut.write_bytes(source.read_bytes()[:100])
    with pytest.raises(WeightsError, match=f"^{re.escape(str(cut))}: not a .keras archive "):
        load_pretrained(small_r3d(5), cut)


@pytest.mark.parametrize("name", ["diverged.keras", "diverged.weights.h5"])
def test_weights_that_are_not_finite_are_refused_before_any_is_loaded(tmp_path, name):
    """A diverged model's file would start a run that stops at its first loss, blaming the
    learning rates: it is named with its layers, and the model keeps its weights."""
    source = small_r3d(5)
    layer = next(layer for layer in source.layers if layer.weights and layer.name != "fc")
    layer.weights[0].assign(np.full(layer.weights[0].shape, np.nan, "float32"))
    path = tmp_path / name
    source.save(path) if name.endswith(".keras") else source.save_weights(path)
    target = small_r3d(5)
    before = [np.array(v) for v in target.weights]
    with pytest.raises(WeightsError, match="non-finite weights .NaN or infinity. in ") as raised:
        load_pretrained(target, path)
    # By layer name in a .keras file, by the path Keras saves it under in a .weights.h5 file.
    named = layer.name if name.endswith(".keras") else "layers/conv3d"
    assert str(raised.value).startswith(f"{path}: non-finite weights (NaN or infinity) in {named}:")
    for kept, variable in zip(before, target.weights, strict=True):
        np.testing.assert_array_equal(np.array(variable), kept)


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


KINETICS_MEAN, KINETICS_STD = NORMALIZATIONS["kinetics400"]


def kinetics_r3d_tiny(tmp_path) -> tuple:
    """A random PyTorch SPAct R3D at r3d_tiny's widths, converted into a `.keras` r3d_tiny behind
    Kinetics-400's input normalisation (what `convert --normalization kinetics400` writes)."""
    torch_model = ref.randomize(
        ref.VideoResNet(False, (8, 16, 32, 64), (1, 1, 1, 1), num_classes=6, spact=True)
    )
    model = registry.build_action_model("r3d_tiny", 6, input_shape=(8, 32, 32, 3))
    load_torch_weights(model, state_dict(torch_model), "r3d_18_spact")
    path = tmp_path / "r3d_tiny_kinetics.keras"
    with_input_normalization(model, KINETICS_MEAN, KINETICS_STD).save(path)
    return torch_model, path


def state_dict(model) -> dict:
    return {name: value.numpy() for name, value in model.state_dict().items()}


def test_a_started_model_normalises_its_input_and_keeps_it_when_saved(tmp_path, capsys):
    """The weights flag puts the file's normalisation in front of f_T: on clips in [0, 1] it
    equals PyTorch's model fed (x - mean) / std, and a saved `.keras` reloads to the same."""
    from keras_privacy.config import ExperimentConfig
    from keras_privacy.training import build_models

    torch_model, path = kinetics_r3d_tiny(tmp_path)
    config = ExperimentConfig(
        clip_length=8, image_size=32, action_model="r3d_tiny", action_weights=str(path)
    )
    action = build_models(config, num_classes=6, num_attributes=5)["action"]
    assert input_normalization(action) == (KINETICS_MEAN, KINETICS_STD)
    assert "input normalised inside the model: mean (0.43216" in capsys.readouterr().out
    x = np.random.default_rng(5).random((2, 8, 32, 32, 3), dtype="float32")
    normalised = (x - np.float32(KINETICS_MEAN)) / np.float32(KINETICS_STD)
    with torch.no_grad():
        expected = torch_model(torch.from_numpy(np.moveaxis(normalised, -1, 1).copy())).numpy()
    out = np.asarray(action(x, training=False))
    np.testing.assert_allclose(out, expected, atol=1e-4)
    action.save(tmp_path / "action.keras")
    reloaded = keras.saving.load_model(tmp_path / "action.keras", compile=False)
    np.testing.assert_allclose(np.asarray(reloaded(x, training=False)), out, atol=1e-6)
    # Started again from its own save, the model is normalised once, not twice.
    again = start_from_weights(
        registry.build_action_model("r3d_tiny", 6, input_shape=(8, 32, 32, 3)),
        str(tmp_path / "action.keras"),
        "r3d_tiny",
    )
    np.testing.assert_allclose(np.asarray(again(x, training=False)), out, atol=1e-6)


def test_a_file_without_normalisation_leaves_the_model_as_built(tmp_path, capsys):
    torch_model = ref.randomize(ref.VideoResNet(False, WIDTHS, (1, 1, 1, 1), num_classes=5))
    model = small_r3d(5)
    assert start_from_weights(model, saved_torch(tmp_path, torch_model), "r3d_18") is model
    assert "input not normalised (the file records no normalisation)" in capsys.readouterr().out


def test_a_normalised_anonymizer_exports_with_its_normalisation(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from keras_privacy.export import export_anonymizer

    mean, std = NORMALIZATIONS["imagenet"]
    model = with_input_normalization(registry.build_anonymizer("unet_tiny"), mean, std)
    export_anonymizer(model, tmp_path / "saved_model", platforms=("cpu",))
    frames = np.random.default_rng(6).random((2, 16, 24, 3), dtype="float32")
    loaded = tf.saved_model.load(str(tmp_path / "saved_model"))  # kept: it owns the variables
    served = loaded.serve(tf.constant(frames))
    np.testing.assert_allclose(served.numpy(), np.asarray(model(frames, training=False)), atol=1e-5)


def test_a_config_names_known_weights_and_a_missing_file_stops_it_with_its_source():
    """Every weight file a shipped config names is in the table of known weights (with that
    flag and config), every table entry's configs name it, and a missing one stops
    validation with its source and command; an explicit empty flag starts from scratch."""
    from keras_privacy.config import WEIGHT_FLAGS
    from keras_privacy.flags import parse_config
    from keras_privacy.known_weights import KNOWN_WEIGHTS

    def parse(*argv):
        return parse_config(argv)

    configs = Path(__file__).resolve().parents[1] / "configs"
    known = {w.path: w for w in KNOWN_WEIGHTS}
    named = set()
    for path in sorted(configs.glob("*.cfg")):
        config = parse(f"--flagfile={path}")
        files = [(flag, getattr(config, flag)) for flag in WEIGHT_FLAGS if getattr(config, flag)]
        for flag, file in files:
            named.add((file, flag, path.stem))
            assert file in known and flag in known[file].flags, f"{path.stem}: --{flag}={file}"
            assert not Path(file).exists()  # weight files are never in the repository
        if files:
            flag, file = files[0]  # validation stops at the first missing file
            with pytest.raises(ValueError) as error:
                config.validate()
            assert str(error.value).startswith(f"--{flag}={file}: no such file"), path.stem
            assert known[file].command in str(error.value)
            scratch = [f"--{flag}=" for flag in WEIGHT_FLAGS]
            parse(f"--flagfile={path}", *scratch, "--eval_action_frozen_batchnorm=false").validate()
    listed = {(w.path, f, stem) for w in KNOWN_WEIGHTS for f in w.flags for stem in w.configs}
    assert listed == named
    simclr = known["weights/simclr_resnet50_imagenet.keras"]
    with pytest.raises(ValueError) as error:
        others = [f"--{flag}=" for flag in WEIGHT_FLAGS if flag != "privacy_weights"]
        parse(f"--flagfile={configs / 'ucf101_vispr_penalty.cfg'}", *others).validate()
    message = str(error.value)
    assert message.startswith(f"--privacy_weights={simclr.path}: no such file")
    assert "dl.fbaipublicfiles.com/vissl" in message and simclr.command in message
    # evaluate.py reads only the target models' files: the training ones may be elsewhere
    penalty = parse(f"--flagfile={configs / 'ucf101_vispr_penalty.cfg'}")
    with pytest.raises(ValueError, match=r"^--eval_action_weights=weights/i3d_r50"):
        penalty.validate(training=False)
    parse(
        f"--flagfile={configs / 'ucf101_vispr_penalty.cfg'}",
        "--eval_action_weights=",
        "--eval_action_frozen_batchnorm=false",
    ).validate(training=False)


def test_the_readme_holds_the_generated_weights_table():
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "weights_table.py"
    spec = importlib.util.spec_from_file_location("weights_table", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.readme_table() == module.weights_table(), (
        "README.md's weights table differs from keras_privacy/known_weights.py: run "
        "`python scripts/weights_table.py --write`"
    )
    assert "`weights/simclr_resnet50_imagenet.keras`" in module.weights_table()


def test_a_torchvision_resnet18_starts_the_unetpp_encoder(tmp_path):
    """TeD-SPAD's UNet++ encoder from ImageNet (smp's encoder_weights="imagenet"): a plain
    torchvision ResNet-18 checkpoint fills the encoder, the decoder is reported new, the fc
    and the stage past the encoder's depth unused."""
    torch_model = ref.randomize(ref.ResNet((1, 1, 1, 1), False, WIDTHS, 5))
    anonymizer = registry.build_anonymizer(
        "unetpp", encoder_widths=(8, *WIDTHS), encoder_blocks=(1, 1, 1), decoder_widths=(16,) * 4
    )
    report = load_pretrained(anonymizer, saved_torch(tmp_path, torch_model), arch="unetpp")
    encoder = [n for n in convert.torch_module_names(anonymizer, "unetpp") if "encoder" in n]
    assert sorted(report.loaded) == sorted(encoder)
    assert report.mismatched == [] and report.unused == ["(PyTorch) encoder.fc"]
    assert all(name.startswith(("decoder_", "segmentation_head")) for name in report.new)
    stem = torch_model.state_dict()["conv1.weight"].numpy()
    np.testing.assert_array_equal(
        np.array(anonymizer.get_layer("encoder_stem_conv").kernel),
        np.transpose(stem, (2, 3, 1, 0)),
    )


# Backend-independent: weight files and configs; the penalty's JAX step trains in
# test_without_tensorflow. The penalty's run through `train()` on TensorFlow is this one.
@pytest.mark.backend_independent
def test_a_penalty_run_trains_from_normalised_weight_files(benchmark, tmp_path, capsys):
    """The penalty configs' start on the tiny benchmark: f_T and f_B from `.keras` files behind
    Kinetics-400 / ImageNet normalisation, no privacy init; the minimax trains and the saved
    models keep the normalisation."""
    import math

    import tiny_models

    from keras_privacy import training
    from keras_privacy.config import ExperimentConfig

    settings = dict(
        **tiny_models.TINY_RUN,
        synthetic_dir=str(benchmark),
        anonymizer="unet_tiny",
        method="penalty",
        penalty_weight=1.0,
        penalty_budget=0.0,
        projection_hidden=16,
        projection_dim=8,
        identity_epochs=0,
        identity_warmup_epochs=0,
        action_init_epochs=0,
        privacy_init_epochs=0,
        minimax_epochs=1,
        steps_per_epoch=4,  # four action batches: two minimax steps (pairs of batches)
    )
    donors = training.build_models(ExperimentConfig(**settings), num_classes=6, num_attributes=5)
    imagenet, kinetics = NORMALIZATIONS["imagenet"], NORMALIZATIONS["kinetics400"]
    with_input_normalization(donors["action"], *kinetics).save(tmp_path / "action.keras")
    with_input_normalization(donors["privacy"], *imagenet).save(tmp_path / "privacy.keras")
    config = ExperimentConfig(
        **settings,
        run_dir=str(tmp_path / "run"),
        action_weights=str(tmp_path / "action.keras"),
        privacy_weights=str(tmp_path / "privacy.keras"),
    )
    config.validate()
    result = training.train(config)
    assert set(result.history) == {"minimax"}
    assert all(math.isfinite(v) for values in result.history["minimax"].values() for v in values)
    assert result.history["minimax"]["penalty"][0] > 0  # the penalty reached the run's step
    assert set(result.model_paths) == {"anonymizer", "action", "privacy"}
    saved = {
        name: keras.saving.load_model(path, compile=False)
        for name, path in result.model_paths.items()
    }
    assert input_normalization(saved["action"]) == kinetics
    assert input_normalization(saved["privacy"]) == imagenet
    assert input_normalization(saved["anonymizer"]) is None
    assert capsys.readouterr().out.count("input normalised inside the model") == 2
