"""Start a model from pretrained weights, loading whatever part of it the file matches.

A weight file is a `.keras` model, a `.weights.h5` file, or a PyTorch checkpoint (`.pth`, `.pt`,
`.safetensors`, read without running pickled code and converted on the fly by
`keras_privacy.convert` for the architecture named by `arch`). Partial loads are the normal case:
a Kinetics-400 backbone under a new 101-way head, an ImageNet trunk under SPAct's projection
head. A `.keras` file or a PyTorch checkpoint is matched by layer name (the registry's models
name every layer: `stem_conv`, `layer1_0_1_conv`, ...), through nested models; a `.weights.h5`
file (which keeps no layer names) by the structure Keras saves, so it loads into the
architecture it was saved from, a different head included. A layer loads only when every one of
its variables has the file's shape, else it is reported as mismatched and keeps its fresh
weights.
`LoadReport` says what was loaded, what is new, what did not fit and what the file held that the
model has no place for.

Input normalisation travels with the weights: a `.keras` file written by
`python -m keras_privacy.convert ... --normalization kinetics400|imagenet` holds an
`InputNormalization` layer (mean / std in its config), and `start_from_weights` puts the same
layer in front of the model it starts, so pipelines keep feeding frames in [0, 1] and the saved
or exported model carries the normalisation. A `.weights.h5` file or a PyTorch checkpoint
records none (the report says so).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import keras
import numpy as np

from keras_privacy import convert
from keras_privacy.files import load_keras_model
from keras_privacy.models.layers import InputNormalization

NORMALIZATIONS: dict[str, tuple[tuple[float, ...], tuple[float, ...]] | None] = {
    "none": None,
    # torchvision's ImageNet statistics (its ResNets, and the SimCLR ResNet-50s trained on them).
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    # torchvision's Kinetics-400 statistics (video.r3d_18, mc3_18, r2plus1d_18).
    "kinetics400": ((0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989)),
}
"""Input normalisation (mean, std per RGB channel, frames in [0, 1]) by checkpoint family."""

TORCH_SUFFIXES = (".pth", ".pt", ".safetensors")
"""Suffixes read as PyTorch checkpoints."""


class WeightsError(ValueError):
    """A weight file that cannot be read, or that matches nothing of the model."""


@dataclasses.dataclass
class LoadReport:
    """What `load_pretrained` did: layer names loaded, new (left as built), mismatched
    ("name: file shapes vs model shapes"), unused (in the file, not in the model), and the
    input normalisation (mean, std) the file records, if any."""

    source: str
    model: str
    loaded: list[str]
    new: list[str]
    mismatched: list[str]
    unused: list[str]
    normalization: tuple[tuple[float, ...], tuple[float, ...]] | None = None

    def __str__(self) -> str:
        lines = [
            f"{self.source} -> {self.model}: {len(self.loaded)} layers loaded, "
            f"{len(self.new)} new, {len(self.mismatched)} mismatched, "
            f"{len(self.unused)} in the file unused"
        ]
        for kind in ("new", "mismatched", "unused"):
            names = getattr(self, kind)
            if names:
                more = f", ... {len(names) - 12} more" if len(names) > 12 else ""
                lines.append(f"  {kind}: {', '.join(names[:12])}{more}")
        if self.normalization:
            mean, std = self.normalization
            lines.append(f"  input normalised inside the model: mean {mean}, std {std}")
        else:
            lines.append("  input not normalised (the file records no normalisation)")
        return "\n".join(lines)


def load_pretrained(
    model: keras.Model, path: str | os.PathLike, arch: str | None = None
) -> LoadReport:
    """Load the layers of the weight file at `path` that match `model`; returns the report.

    `arch` names the architecture of a PyTorch checkpoint (one of `convert.ARCHITECTURES`,
    e.g. "r3d_18", "resnet50", "unet"); it is not needed for Keras files. Raises WeightsError
    when the file is missing or unreadable, or when not one layer matches.
    """
    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"{path}: no such weight file")
    if path.name.endswith(".weights.h5"):
        return _load_h5(model, path)
    normalization = None
    if path.suffix in TORCH_SUFFIXES:
        source = _torch_arrays(model, path, arch)
    elif path.suffix == ".keras":
        try:
            saved = load_keras_model(path)
        except ValueError as error:
            raise WeightsError(str(error)) from error
        source = {
            name: [np.asarray(v) for v in layer.weights]
            for name, layer in _leaf_layers(saved).items()
        }
        normalization = input_normalization(saved)
    else:
        raise WeightsError(
            f"{path}: not a weight file (.keras, .weights.h5, or a PyTorch .pth / .pt / "
            ".safetensors checkpoint)"
        )
    targets = _leaf_layers(model)
    loaded, mismatched, assignments = [], [], []
    for name, layer in targets.items():
        if name not in source:
            continue
        arrays = source[name]
        variables = _variables(layer, arrays)
        shapes = [tuple(v.shape) for v in variables]
        file_shapes = [a.shape for a in _values(arrays)]
        if len(variables) != len(layer.weights) or shapes != file_shapes:
            model_shapes = [tuple(v.shape) for v in layer.weights]
            mismatched.append(f"{name}: file {file_shapes} vs model {model_shapes}")
            continue
        assignments += zip(variables, _values(arrays))
        loaded.append(name)
    hint = f"the file's layers: {', '.join(list(source)[:8])}{', ...' if len(source) > 8 else ''}"
    report = _report(path, model, list(targets), list(source), loaded, mismatched, hint)
    _require_more_than_heads(path, model, [targets[name] for name in loaded], hint)
    _require_finite(path, {name: _values(source[name]) for name in loaded})
    for variable, array in assignments:
        variable.assign(np.asarray(array).astype(variable.dtype))
    report.normalization = normalization
    return report


def _require_finite(path: Path, arrays: dict[str, list]) -> None:
    """Raise WeightsError naming the layers whose arrays (by layer) hold a NaN or an infinity:
    the weights of a diverged model, which would stop the run at its first loss with a
    misleading remedy. Checked before anything is assigned."""
    bad = [
        name
        for name, values in arrays.items()
        if any(
            np.issubdtype(np.asarray(a).dtype, np.floating) and not np.isfinite(a).all()
            for a in values
        )
    ]
    if bad:
        more = f", ... {len(bad) - 3} more" if len(bad) > 3 else ""
        raise WeightsError(
            f"{path}: non-finite weights (NaN or infinity) in {', '.join(bad[:3])}{more}: the "
            "weights of a diverged model; give another file"
        )


def _require_more_than_heads(
    path: Path, model: keras.Model, loaded: list[keras.layers.Layer], hint: str
) -> None:
    """Raise WeightsError where only Dense layers (a classifier or projection head) of a model
    with other weighted layers matched the file: its trunk is named otherwise (TeD-SPAD's
    `wrapper_r3d_18` keeps it under `backbone.`), and a start from the head alone would train
    on a random trunk without a word."""
    if any(not isinstance(layer, keras.layers.Dense) for layer in loaded):
        return
    if all(isinstance(layer, keras.layers.Dense) for layer in _walk(model)):
        return
    raise WeightsError(
        f"{path}: only the head ({', '.join(layer.name for layer in loaded)}) of "
        f"{model.name!r} matches the file, none of its trunk; a checkpoint of another "
        f"architecture or layout? ({hint})"
    )


def _report(
    path: Path,
    model: keras.Model,
    targets: list[str],
    sources: list[str],
    loaded: list[str],
    mismatched: list[str],
    hint: str,
) -> LoadReport:
    """The report of a load that matched the layers `targets` of the model against `sources`
    of the file; a WeightsError ending in `hint` when nothing loaded."""
    if not loaded:
        raise WeightsError(
            f"{path}: no layer of the file matches {model.name!r} ({len(mismatched)} "
            f"with other shapes; {hint})"
        )
    return LoadReport(
        source=str(path),
        model=model.name,
        loaded=loaded,
        new=[name for name in targets if name not in sources],
        mismatched=mismatched,
        unused=[name for name in sources if name not in targets],
    )


def start_from_weights(model: keras.Model, path: str, arch: str) -> keras.Model:
    """`model` started from the weight file `path` where it matches (left as built when `path`
    is empty), behind the file's input normalisation if it records one; prints the report (in
    process 0 of a multi-process job). `arch` is the registry name of a PyTorch checkpoint's
    architecture."""
    if not path:
        return model
    from keras_privacy import distribute

    report = load_pretrained(model, path, arch=arch)
    if distribute.is_chief():
        print(report, flush=True)
    if report.normalization is None or input_normalization(model) == report.normalization:
        return model
    return with_input_normalization(model, *report.normalization)


def input_normalization(model: keras.Model) -> tuple[tuple, tuple] | None:
    """(mean, std) of the first `InputNormalization` layer in `model` or its nested models."""
    for layer in model.layers:
        if isinstance(layer, InputNormalization):
            return layer.mean, layer.std
        if isinstance(layer, keras.Model):
            found = input_normalization(layer)
            if found:
                return found
    return None


def with_input_normalization(
    model: keras.Model, mean: Sequence[float], std: Sequence[float]
) -> keras.Model:
    """`model` behind an `InputNormalization(mean, std)` layer, under the same name: it takes
    what `model` took, in [0, 1]."""
    inputs = keras.Input(model.input_shape[1:], name=model.inputs[0].name)
    normalized = InputNormalization(mean, std, name="input_normalization")(inputs)
    return keras.Model(inputs, model(normalized), name=model.name)


def normalization_named(name: str) -> tuple[tuple, tuple] | None:
    """The (mean, std) of the family `name` in `NORMALIZATIONS` (None for "none")."""
    if name not in NORMALIZATIONS:
        raise WeightsError(f"unknown normalisation {name!r}; known: {', '.join(NORMALIZATIONS)}")
    return NORMALIZATIONS[name]


def _leaf_layers(model: keras.Model) -> dict[str, keras.layers.Layer]:
    """The layers with weights of `model` and of the models nested in it, by name; a name
    that occurs twice is left out (it could not be matched safely)."""
    counts: dict[str, int] = {}
    found = {}
    for layer in _walk(model):
        counts[layer.name] = counts.get(layer.name, 0) + 1
        found[layer.name] = layer
    return {name: layer for name, layer in found.items() if counts[name] == 1}


def _walk(model) -> Iterator[keras.layers.Layer]:
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            yield from _walk(layer)
        elif layer.weights:
            yield layer


def _h5_datasets(path: Path) -> dict[str, np.ndarray]:
    """Every array of a Keras `.weights.h5` file by its path in the file."""
    import h5py

    arrays = {}
    try:
        with h5py.File(path, "r") as file:
            file.visititems(
                lambda name, item: (
                    arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
                )
            )
    except OSError as error:
        raise WeightsError(f"{path}: not readable as a Keras .weights.h5 file ({error})") from None
    return arrays


def _load_h5(model: keras.Model, path: Path) -> LoadReport:
    """Load a `.weights.h5` file by the structure Keras saves (a path per layer, in the order
    of the model's layers, with generated names): every layer path that the model's own
    weight file also has, with the same shapes; reported by those paths."""
    import tempfile

    source = _h5_datasets(path)
    with tempfile.TemporaryDirectory() as folder:
        own_path = Path(folder) / "own.weights.h5"
        model.save_weights(own_path)
        own = _h5_datasets(own_path)

        def by_layer(arrays: dict) -> dict[str, list[str]]:
            layers: dict[str, list[str]] = {}
            for key in arrays:
                layers.setdefault(key.rsplit("/vars/", 1)[0], []).append(key)
            return layers

        source_layers, own_layers = by_layer(source), by_layer(own)
        loaded, mismatched = [], []
        for layer, keys in own_layers.items():
            if layer not in source_layers:
                continue
            if sorted(keys) == sorted(source_layers[layer]) and all(
                source[k].shape == own[k].shape for k in keys
            ):
                loaded.append(layer)
            else:
                file_shapes = [source[k].shape for k in sorted(source_layers[layer])]
                model_shapes = [own[k].shape for k in sorted(keys)]
                mismatched.append(f"{layer}: file {file_shapes} vs model {model_shapes}")
        hint = (
            "a .weights.h5 file loads into the architecture it was saved from: give a .keras "
            "file to load by layer names"
        )
        report = _report(
            path, model, list(own_layers), list(source_layers), loaded, mismatched, hint
        )
        _require_finite(path, {layer: [source[k] for k in own_layers[layer]] for layer in loaded})
        import h5py

        with h5py.File(own_path, "r+") as file:
            for layer in loaded:
                for key in own_layers[layer]:
                    file[key][...] = source[key]
        model.load_weights(own_path)
    return report


def _torch_arrays(model: keras.Model, path: Path, arch: str | None) -> dict[str, dict]:
    """The PyTorch checkpoint's arrays in Keras' layout, by Keras layer name, for every
    (nested) model of `model` whose layers the architecture `arch` names."""
    if arch is None or arch not in convert.ARCHITECTURES:
        raise WeightsError(
            f"{path}: a PyTorch checkpoint needs its architecture, one of "
            f"{', '.join(convert.ARCHITECTURES)}; got {arch!r}"
        )
    try:
        state_dict = convert.read_state_dict(path)
    except convert.ConversionError as error:
        raise WeightsError(str(error)) from None
    arch, state_dict = convert.checkpoint_layout(arch, state_dict)
    if convert.ARCHITECTURES[arch][0] == "embedding" and not any(
        key.startswith("mlp.") for key in state_dict
    ):
        raise WeightsError(
            f"{path}: no embedding head in the file (TeD-SPAD's f_T keeps it under mlp.; "
            f"this one holds {_modules(state_dict)})"
        )
    names = convert.torch_module_names(model, arch, strict=False)
    found, used, _, _ = convert.torch_layer_arrays(model, state_dict, names)
    arrays: dict[str, dict] = {name: values for name, values in found.items() if values}
    used |= convert.unused_by_design(arch, state_dict, names)
    for key in sorted(set(state_dict) - used):
        module = key.rsplit(".", 1)[0]
        arrays.setdefault(f"(PyTorch) {module}", {})
    return arrays


def _modules(state_dict: dict) -> str:
    """The top-level modules of a PyTorch state dict, for a message: "i3d.*, fc.*"."""
    modules = sorted({key.split(".", 1)[0] for key in state_dict})
    more = f", ... {len(modules) - 8} more" if len(modules) > 8 else ""
    return ", ".join(f"{module}.*" for module in modules[:8]) + more


def _variables(layer, arrays) -> list:
    """The variables of `layer` that `arrays` fills: by attribute for a converted PyTorch
    layer ({attr: (key, array)}), else all of them in order."""
    if isinstance(arrays, dict):
        return [getattr(layer, attr) for attr in arrays]
    return list(layer.weights)


def _values(arrays) -> list[np.ndarray]:
    if isinstance(arrays, dict):
        return [array for _, array in arrays.values()]
    return list(arrays)
