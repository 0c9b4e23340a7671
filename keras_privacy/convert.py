"""Import PyTorch checkpoints into keras_privacy's models (no download: the file is yours).

    python -m keras_privacy.convert CKPT.pth --arch r3d_18 --normalization kinetics400 \
        --out MODEL.keras
    python -m keras_privacy.convert CKPT.pth --arch r3d_18 --out MODEL.weights.h5

`--arch` is one of `ARCHITECTURES`: torchvision's `video.r3d_18`, `video.mc3_18` and
`video.r2plus1d_18` (r3d_18 also into SPAct's `r3d_18_spact`, which has the same weights),
`resnet18` ... `resnet152`, Hara et al.'s 3D-ResNets-PyTorch `r3d_50`, the I3D-ResNet-50 of
TeD-SPAD and the penalty paper (`i3d_r50`: pytorch-resnet3d's `I3Res50` keys, as in their
Kinetics-400 file `i3d_r50_kinetics.pth`; `i3d_r50_tedspad`: the f_T their training scripts
save, the same under `i3d.` plus the embedding head `mlp.*` of its triplet term, which is no
part of f_T here and is left out, listed; `tedspad_embedding`: that head alone, SPAct's
`embedding` group, for `--embedding_weights`), TeD-SPAD's
`wrapper_r3d_18` (`r3d_18_tedspad`: torchvision's R3D-18 under `backbone.`, the classifier as
`fc`), SPAct's UNet (milesial's Pytorch-UNet, `bilinear=True`; a
bias before a BatchNorm is folded into its moving mean), TeD-SPAD's and the penalty paper's
UNet++ (`unetpp_unbounded`: segmentation_models_pytorch 0.3.3's UnetPlusPlus on ResNet-18 with
`activation=None`, as they build it; `unetpp` is the same with smp's `activation="sigmoid"`;
the encoder stage past its depth, which smp keeps, is skipped) and a SimCLR ResNet-50 with its
projection head (`simclr_resnet50`: SPAct's and TeD-SPAD's f_B, `nn.Sequential(resnet50, MLP)`,
or VISSL's checkpoint renamed as SPAct's code does) into the privacy encoder. The head's size
comes from the checkpoint's `fc.weight` (`--num_classes` to check it); a checkpoint without `fc`
gives the pooled-features model. A BatchNorm saved as pytorch-resnet3d's `FrozenBN` (`scale`
for `weight`: their I3D f_T, trained after `freeze_bn`) converts as the BatchNorm it is.

    python -m keras_privacy.convert i3d_r50_kinetics.pth --arch i3d_r50 \
        --out weights/i3d_r50_kinetics400.weights.h5
    python -m keras_privacy.convert fa_model.pth --arch unetpp_unbounded \
        --key fa_model_state_dict --normalization none --out weights/unetpp_ted_spad.keras
    python -m keras_privacy.convert model_20.pth --arch i3d_r50_tedspad \
        --key ft_model_state_dict --out weights/i3d_r50_ucf101.weights.h5
    python -m keras_privacy.convert model_20.pth --arch tedspad_embedding \
        --key ft_model_state_dict --out weights/tedspad_embedding.weights.h5

The file is read without running pickled code: `torch.load(weights_only=True)` for `.pth` /
`.pt` (needs PyTorch, a CPU build is enough), or a `.safetensors` file (read here, no extra
package). Nested checkpoints ({"state_dict": {...}}, SPAct's and TeD-SPAD's
"fa_model_state_dict" / "fb_model_state_dict" / "ft_model_state_dict", VISSL's
"classy_state_dict") are unwrapped (`--key` picks one), and
DataParallel's "module." prefix is dropped. Any missing, unexpected or mismatched tensor fails
with `ConversionError` naming each one.

Layout: PyTorch convolution kernels (O, I, [D,] H, W) become Keras' ([D,] H, W, I, O), Dense
kernels are transposed, BatchNorm's weight / bias / running_mean / running_var become gamma /
beta / moving_mean / moving_var (epsilon 1e-5 and momentum 0.9 are PyTorch's 1e-5 and 0.1).
Every model pads explicitly as PyTorch does, so outputs match to float precision.

A `.keras` output is the whole model behind an `InputNormalization` layer with the mean / std
the checkpoint family expects (`--normalization`: kinetics400, imagenet, or none for weights
trained on frames in [0, 1]); the weights flags of train.py / evaluate.py keep that layer in
front of the model they start, so frames stay in [0, 1] everywhere. A `.weights.h5` output is
the weights alone, for the registry's model of the same name and head:
`build_action_model("r3d_18", num_classes=400).load_weights("MODEL.weights.h5")`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from keras_privacy.cli import positive_int, refuse_a_file, run_command

if TYPE_CHECKING:
    import keras

# (pattern on the Keras layer name, replacement giving the PyTorch module path).
_VIDEO_RESNET = [
    (r"^stem_conv$", "stem.0"),
    (r"^stem_bn$", "stem.1"),
    (r"^layer(\d)_(\d+)_(\d)_conv$", r"layer\1.\2.conv\3.0"),
    (r"^layer(\d)_(\d+)_(\d)_bn$", r"layer\1.\2.conv\3.1"),
    (r"^layer(\d)_(\d+)_downsample_conv$", r"layer\1.\2.downsample.0"),
    (r"^layer(\d)_(\d+)_downsample_bn$", r"layer\1.\2.downsample.1"),
    (r"^fc$", "fc"),
]
_R2PLUS1D = [
    (r"^stem_spatial_conv$", "stem.0"),
    (r"^stem_spatial_bn$", "stem.1"),
    (r"^stem_temporal_conv$", "stem.3"),
    (r"^stem_bn$", "stem.4"),
    (r"^layer(\d)_(\d+)_(\d)_spatial_conv$", r"layer\1.\2.conv\3.0.0"),
    (r"^layer(\d)_(\d+)_(\d)_spatial_bn$", r"layer\1.\2.conv\3.0.1"),
    (r"^layer(\d)_(\d+)_(\d)_temporal_conv$", r"layer\1.\2.conv\3.0.3"),
    *_VIDEO_RESNET[3:],
]
_RESNET = [
    (r"^stem_conv$", "conv1"),
    (r"^stem_bn$", "bn1"),
    (r"^layer(\d)_(\d+)_(\d)_conv$", r"layer\1.\2.conv\3"),
    (r"^layer(\d)_(\d+)_(\d)_bn$", r"layer\1.\2.bn\3"),
    (r"^layer(\d)_(\d+)_downsample_conv$", r"layer\1.\2.downsample.0"),
    (r"^layer(\d)_(\d+)_downsample_bn$", r"layer\1.\2.downsample.1"),
    (r"^fc$", "fc"),
]
_UNET_PART = {"conv1": "0", "bn1": "1", "conv2": "3", "bn2": "4"}
# SPAct's and TeD-SPAD's self-supervised f_B, nn.Sequential(ResNet-50 with fc = Identity, MLP)
# (SPAct anonymization_training/model.py:17-67, TeD-SPAD aux_code/model_loaders.py:124-152).
_SIMCLR = [
    *[(pattern, f"0.{torch_name}") for pattern, torch_name in _RESNET if pattern != r"^fc$"],
    (r"^hidden$", "1.fc1"),
    (r"^output$", "1.fc2"),
]
# TeD-SPAD's f_A, segmentation_models_pytorch 0.3.3's UnetPlusPlus on a ResNet encoder
# (TeD-SPAD aux_code/model_loaders.py:19-30).
_UNETPP = [
    (r"^encoder_stem_conv$", "encoder.conv1"),
    (r"^encoder_stem_bn$", "encoder.bn1"),
    *[(p.replace("^", "^encoder_"), f"encoder.{r}") for p, r in _RESNET[2:-1]],
    (r"^decoder_x_(\d)_(\d)_(\d)_conv$", r"decoder.blocks.x_\1_\2.conv\3.0"),
    (r"^decoder_x_(\d)_(\d)_(\d)_bn$", r"decoder.blocks.x_\1_\2.conv\3.1"),
    (r"^segmentation_head$", "segmentation_head.0"),
]
# TeD-SPAD's and the penalty paper's `wrapper_i3d` (aux_code/model_loaders.py:258-263 in
# TeD-SPAD): the I3D under `i3d.`, a feature head under `mlp.`.
_I3D_WRAPPER = [(pattern, f"i3d.{module}") for pattern, module in _RESNET]
# Their `wrapper_r3d_18` (TeD-SPAD aux_code/model_loaders.py:197-208): torchvision's R3D-18
# under `backbone.` (its fc an Identity), the classifier as `fc`.
_R3D_WRAPPER = [
    (pattern, module if module == "fc" else f"backbone.{module}")
    for pattern, module in _VIDEO_RESNET
]
# The feature head of their `wrapper_i3d` (TeD-SPAD aux_code/model_loaders.py:235-254,
# `mlp`): Linear - BatchNorm1d - ReLU - Linear without bias - BatchNorm1d, here
# `resnet.embedding_head`, the `embedding` group SPAct trains for the triplet term beside f_T.
_TEDSPAD_EMBEDDING = [
    (r"^hidden$", "mlp.fc1"),
    (r"^hidden_bn$", "mlp.bn1"),
    (r"^output$", "mlp.fc2"),
    (r"^output_bn$", "mlp.bn2"),
]

ARCHITECTURES = {
    "r3d_18": ("action", _VIDEO_RESNET),
    "r3d_18_spact": ("action", _VIDEO_RESNET),
    "mc3_18": ("action", _VIDEO_RESNET),
    "r2plus1d_18": ("action", _R2PLUS1D),
    "r3d_50": ("action", _RESNET),
    "i3d_r50": ("action", _RESNET),
    "i3d_r50_tedspad": ("action", _I3D_WRAPPER),
    "r3d_18_tedspad": ("action", _R3D_WRAPPER),
    "tedspad_embedding": ("embedding", _TEDSPAD_EMBEDDING),
    **{f"resnet{depth}": ("image", _RESNET) for depth in (18, 34, 50, 101, 152)},
    "simclr_resnet50": ("privacy_encoder", _SIMCLR),
    "unet": ("anonymizer", None),
    "unetpp": ("anonymizer", _UNETPP),
    "unetpp_unbounded": ("anonymizer", _UNETPP),
}
"""Architectures this module converts: name -> (registry kind, Keras -> PyTorch name map)."""

REGISTRY_NAMES = {"i3d_r50_tedspad": "i3d_r50", "r3d_18_tedspad": "r3d_18"}
"""The registry's model of an architecture whose name is not a registry name."""

UNUSED = {
    **dict.fromkeys(("unetpp", "unetpp_unbounded"), r"^(encoder\.layer\d+)\."),
    "i3d_r50_tedspad": r"^(mlp)\.",
    "tedspad_embedding": r"^(?!mlp\.)([^.]+)\.",
}
"""Checkpoint keys that an architecture holds but never uses, by the module they start with:
smp keeps the encoder's stages past `encoder_depth` in the state dict (ResNet-18's layer4 at
TeD-SPAD's depth 4); TeD-SPAD's f_T keeps a feature head for its temporal loss under `mlp.`,
converted alone as `tedspad_embedding`, which leaves the rest of f_T (`i3d.*`) out."""

_CHECKPOINT_KEYS = (
    "state_dict",
    "model_state_dict",
    "model",
    "fa_model_state_dict",
    "fb_model_state_dict",
    "ft_model_state_dict",
)


class ConversionError(ValueError):
    """A checkpoint that does not fit the architecture, or a file that cannot be read."""


def read_state_dict(path: str | os.PathLike, key: str | None = None) -> dict[str, np.ndarray]:
    """The tensors of a `.pth` / `.pt` (torch.load with weights_only=True) or `.safetensors`
    file as NumPy arrays, unwrapped from a nested checkpoint (`key`, or the one dict of
    tensors in it) and without DataParallel's "module." prefix."""
    path = Path(path)
    if path.is_dir():
        raise ConversionError(f"{path}: a folder, not a checkpoint file")
    if not path.is_file():
        raise ConversionError(f"{path}: no such file")
    if path.suffix == ".safetensors":
        return _strip_module(_read_safetensors(path))
    try:
        import torch
    except ImportError:
        raise ConversionError(
            f"{path}: reading a PyTorch file needs PyTorch (pip install torch==2.13.0, a CPU "
            "build), or give the weights as a .safetensors file"
        ) from None
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises UnpicklingError, RuntimeError, EOFError, ...
        detail = _torch_reason(error)
        reason = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
        if not _starts_as_torch_save_writes(path):
            raise ConversionError(
                f"{path}: not a PyTorch checkpoint: it starts as neither a zip archive nor a "
                f"pickle, the two formats torch.save writes ({reason})"
            ) from None
        raise ConversionError(
            f"{path}: not readable as a PyTorch checkpoint with weights_only=True "
            f"({reason}); save the model's state_dict() alone"
        ) from None
    tensors = _unwrap(checkpoint, key, path)
    return _strip_module({name: _to_numpy(value) for name, value in tensors.items()})


def _torch_reason(error: Exception) -> str:
    """Why `torch.load(weights_only=True)` refused a file, without PyTorch's advice to load it
    with weights_only=False (which would run the pickled code we refuse): the unpickler's reason
    when it gives one, else the first line of the message."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    # The reason follows on the same line ("Unsupported global: ...") or, for bytes that are
    # no pickle, after blank lines ("Unsupported operand 110").
    found = re.search(r"WeightsUnpickler error:\s*(.*?)(?: Please use|$)", text, re.MULTILINE)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = found.group(1) if found else (lines[0] if lines else "")
    return reason.strip()[:300]


def _starts_as_torch_save_writes(path: Path) -> bool:
    """Whether the file begins as torch.save's output does: a zip archive (PyTorch 1.6 and
    later) or a pickle of protocol 2 or later (the legacy format), so that a file of another
    kind is called what it is rather than an unsafe checkpoint."""
    with open(path, "rb") as file:
        head = file.read(4)
    return head == b"PK\x03\x04" or head[:1] == b"\x80"


def _to_numpy(tensor) -> np.ndarray:
    """A torch tensor as a NumPy array; bfloat16 and float16 through float32."""
    tensor = tensor.detach().cpu()
    return (tensor.float() if tensor.is_floating_point() else tensor).numpy()


def _unwrap(checkpoint, key: str | None, path: Path) -> dict:
    """The state dict inside `checkpoint`: `checkpoint[key]`, or itself when its values are
    tensors, or its one entry among the usual names that is a dict."""
    import torch

    def is_state_dict(value) -> bool:
        return isinstance(value, Mapping) and all(
            isinstance(v, torch.Tensor) for v in value.values()
        )

    if not isinstance(checkpoint, Mapping):
        raise ConversionError(
            f"{path}: holds a {type(checkpoint).__name__}, not a state dict; save "
            "model.state_dict()"
        )
    if key is None and "classy_state_dict" in checkpoint:
        return _vissl_simclr(checkpoint, path)
    if key is not None:
        if key not in checkpoint or not is_state_dict(checkpoint[key]):
            raise ConversionError(
                f"{path}: no state dict under key {key!r}; keys: {', '.join(map(str, checkpoint))}"
            )
        return dict(checkpoint[key])
    if is_state_dict(checkpoint):
        return dict(checkpoint)
    found = [k for k in _CHECKPOINT_KEYS if k in checkpoint and is_state_dict(checkpoint[k])]
    if len(found) != 1:
        raise ConversionError(
            f"{path}: a checkpoint whose state dict is not found; give --key, one of: "
            f"{', '.join(str(k) for k, v in checkpoint.items() if is_state_dict(v)) or 'none'}"
        )
    return dict(checkpoint[found[0]])


def _vissl_simclr(checkpoint: Mapping, path: Path) -> dict:
    """A VISSL SimCLR checkpoint (trunk `_feature_blocks.*`, heads `0.clf.0` and `1.clf.0`) in
    the layout of SPAct's f_B (`0.*`, `1.fc1`, `1.fc2`), the renaming SPAct's code does
    (anonymization_training/model.py:17-67)."""
    try:
        model = checkpoint["classy_state_dict"]["base_model"]["model"]
        trunk, heads = model["trunk"], model["heads"]
    except (KeyError, TypeError):
        raise ConversionError(
            f"{path}: a VISSL checkpoint without classy_state_dict/base_model/model/trunk and heads"
        ) from None
    tensors = {f"0.{k.removeprefix('_feature_blocks.')}": v for k, v in trunk.items()}
    renames = {"0.clf.0.": "1.fc1.", "1.clf.0.": "1.fc2."}
    for name, value in heads.items():
        prefix = next((p for p in renames if name.startswith(p)), None)
        if prefix is None:
            raise ConversionError(f"{path}: unexpected VISSL head tensor {name}")
        tensors[renames[prefix] + name[len(prefix) :]] = value
    return tensors


def _strip_module(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if tensors and all(name.startswith("module.") for name in tensors):
        return {name[len("module.") :]: value for name, value in tensors.items()}
    return tensors


_SAFETENSORS_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A .safetensors file (8-byte header length, JSON header, raw little-endian data); a file
    cut short or a header that does not describe its data is named with the tensor."""
    data = path.read_bytes()
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
    except (struct.error, ValueError) as error:
        raise ConversionError(f"{path}: not a safetensors file ({error})") from None
    if not isinstance(header, dict):
        raise ConversionError(
            f"{path}: not a safetensors file (its header is a JSON {type(header).__name__}, "
            "not an object of tensors)"
        )
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _safetensor(path, name, info, body)
    return tensors


def _safetensor(path: Path, name: str, info: Any, body: memoryview) -> np.ndarray:
    """The tensor `name` of a .safetensors file, as its header entry `info` describes it."""
    try:
        dtype, shape, (start, end) = str(info["dtype"]), list(info["shape"]), info["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64))
        start, end = int(start), int(end)
    except (TypeError, KeyError, ValueError) as error:
        raise ConversionError(
            f"{path}: tensor {name}: a header entry without dtype, shape and data_offsets "
            f"({info!r:.80})"
        ) from error
    if dtype not in _SAFETENSORS_DTYPES and dtype != "BF16":
        raise ConversionError(f"{path}: tensor {name} has unsupported dtype {dtype}")
    itemsize = 2 if dtype == "BF16" else np.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
    if not 0 <= start <= end <= len(body) or end - start != count * itemsize:
        raise ConversionError(
            f"{path}: tensor {name} ({dtype} {shape}) needs {count * itemsize} bytes at "
            f"{start}-{end} of {len(body)}: the file is cut short or its header is damaged"
        )
    if dtype == "BF16":
        raw = np.frombuffer(body[start:end], dtype="<u2").astype(np.uint32) << 16
        return raw.view(np.float32).reshape(shape)
    array = np.frombuffer(body[start:end], dtype=np.dtype(_SAFETENSORS_DTYPES[dtype]))
    return array.reshape(shape)


def leaf_layers(model: keras.Model) -> list:
    """The layers with weights of `model` and of the models nested in it, in order."""
    import keras

    found = []
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            found.extend(leaf_layers(layer))
        elif layer.weights:
            found.append(layer)
    return found


def torch_module_names(model: keras.Model, arch: str, strict: bool = True) -> dict[str, str]:
    """Keras layer name -> PyTorch module path, for every layer with weights of `model` and
    its nested models; a layer with no PyTorch name fails when `strict`, else is left out (a
    head the checkpoint lacks)."""
    if arch not in ARCHITECTURES:
        raise ConversionError(f"unknown arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    patterns = ARCHITECTURES[arch][1]
    names = {}
    for layer in leaf_layers(model):
        if patterns is None:
            torch_name = _unet_module_name(layer.name, model)
        else:
            torch_name = next(
                (re.sub(p, r, layer.name) for p, r in patterns if re.match(p, layer.name)), None
            )
        if torch_name is None:
            if strict:
                raise ConversionError(f"{arch}: no PyTorch name for Keras layer {layer.name!r}")
            continue
        names[layer.name] = torch_name
    return names


def _unet_module_name(name: str, model) -> str | None:
    """milesial's Pytorch-UNet module of a `unet.unet` layer (inc, downN, upN, outc)."""
    if name == "output_conv":
        return "outc.conv"
    match = re.match(r"^(down|up)(\d+)_(conv\d|bn\d)$", name)
    if not match:
        return None
    kind, level, part = match.group(1), int(match.group(2)), match.group(3)
    double_conv = f"double_conv.{_UNET_PART[part]}"
    if kind == "down":
        return f"inc.{double_conv}" if level == 0 else f"down{level}.maxpool_conv.1.{double_conv}"
    levels = sum(1 for layer in leaf_layers(model) if re.match(r"^down\d+_conv1$", layer.name))
    return f"up{levels - 1 - level}.conv.{double_conv}"


def torch_layer_arrays(
    model: keras.Model, state_dict: Mapping[str, np.ndarray], names: Mapping[str, str]
) -> tuple[dict[str, dict[str, tuple[str, np.ndarray]]], set[str], list[str], list[str]]:
    """The arrays of the PyTorch `state_dict` in Keras' layout, per layer of `model` named in
    `names` (Keras layer name -> PyTorch module path): layer name -> {variable attribute
    (kernel, gamma, ...): (PyTorch key, array)}. Also returns the keys used, the missing keys
    and the conv biases that have no Keras home. A BatchNorm saved as pytorch-resnet3d's
    `FrozenBN` (TeD-SPAD's and the penalty authors' I3D f_T, trained after `freeze_bn`) holds
    its weight as `scale`."""
    import keras

    used = {key for key in state_dict if key.endswith("num_batches_tracked")}
    missing, homeless, arrays = [], [], {}
    previous_conv_bias = {}
    for layer in leaf_layers(model):
        if layer.name not in names:
            continue
        prefix = names[layer.name]
        found = arrays.setdefault(layer.name, {})
        if isinstance(layer, keras.layers.BatchNormalization):
            parts = {
                "gamma": "weight",
                "beta": "bias",
                "moving_mean": "running_mean",
                "moving_variance": "running_var",
            }
            if f"{prefix}.weight" not in state_dict and f"{prefix}.scale" in state_dict:
                parts["gamma"] = "scale"  # pytorch-resnet3d's FrozenBN (see the docstring)
            for attr, part in parts.items():
                array = _take(state_dict, f"{prefix}.{part}", used, missing)
                if array is not None:
                    found[attr] = (f"{prefix}.{part}", array)
            bias = previous_conv_bias.pop(layer.name, None)
            if bias is not None and "moving_mean" in found:
                # BN(conv(x) + b) equals BN(conv(x)) with running_mean - b.
                key, mean = found["moving_mean"]
                found["moving_mean"] = (key, mean - bias)
            continue
        kernel = _take(state_dict, f"{prefix}.weight", used, missing)
        if kernel is not None:
            if isinstance(layer, keras.layers.Dense):
                kernel = kernel.T
            else:
                kernel = np.transpose(kernel, (*range(2, kernel.ndim), 1, 0))
            found["kernel"] = (f"{prefix}.weight", kernel)
        bias_key = f"{prefix}.bias"
        if getattr(layer, "use_bias", False):
            bias = _take(state_dict, bias_key, used, missing)
            if bias is not None:
                found["bias"] = (bias_key, bias)
        elif bias_key in state_dict:
            bn_name = re.sub(r"conv(\d)$", r"bn\1", layer.name)
            if bn_name == layer.name or bn_name not in names:
                homeless.append(f"{bias_key} (Keras layer {layer.name} has no bias)")
            else:
                previous_conv_bias[bn_name] = _take(state_dict, bias_key, used, missing)
    return arrays, used, missing, homeless


def unused_by_design(arch: str, state_dict: Mapping, names: Mapping[str, str]) -> set[str]:
    """The keys of `state_dict` that `arch` keeps but never uses (see `UNUSED`) and that no
    layer of `names` (Keras layer -> PyTorch module) reads."""
    pattern = UNUSED.get(arch)
    if pattern is None:
        return set()
    modules = set(names.values())
    unused = set()
    for key in state_dict:
        match = re.match(pattern, key)
        if match and not any(m.startswith(f"{match.group(1)}.") for m in modules):
            unused.add(key)
    return unused


def load_torch_weights(
    model: keras.Model, state_dict: Mapping[str, np.ndarray], arch: str, source: str = "state dict"
) -> None:
    """Assign the PyTorch `state_dict` (name -> array) of architecture `arch` to the Keras
    `model` built by the registry (any width: shapes are checked, not assumed).

    Raises ConversionError naming, from `source`, every missing, unexpected and mismatched
    tensor; nothing is assigned unless everything fits.
    """
    names = torch_module_names(model, arch)
    arrays, used, missing, mismatched = torch_layer_arrays(model, state_dict, names)
    used |= unused_by_design(arch, state_dict, names)
    assignments = []
    for layer in leaf_layers(model):
        for attr, (key, array) in arrays.get(layer.name, {}).items():
            variable = getattr(layer, attr)
            if tuple(variable.shape) != array.shape:
                mismatched.append(f"{key}: {array.shape} in the file, Keras wants {variable.shape}")
            assignments.append((variable, array))
    unexpected = sorted(set(state_dict) - used)
    if missing or unexpected or mismatched:
        raise ConversionError(
            f"{source} does not fit {arch} ({model.name}):"
            + _listing("missing", missing)
            + _listing("unexpected", unexpected)
            + _listing("mismatched", mismatched)
        )
    for variable, array in assignments:
        variable.assign(array.astype(variable.dtype))


def _head_key(arch: str) -> str:
    """The checkpoint key of the classifier's weight (the module the Keras layer `fc` maps to)."""
    for pattern, module in ARCHITECTURES[arch][1] or ():
        if re.match(pattern, "fc"):
            return f"{re.sub(pattern, module, 'fc')}.weight"
    return "fc.weight"


def _take(state_dict, key: str, used: set, missing: list):
    if key not in state_dict:
        missing.append(key)
        return None
    used.add(key)
    return np.asarray(state_dict[key], dtype=np.float32)


def _listing(kind: str, keys: Sequence[str], limit: int = 20) -> str:
    if not keys:
        return ""
    shown = "; ".join(keys[:limit])
    more = f"; ... {len(keys) - limit} more" if len(keys) > limit else ""
    return f"\n  {len(keys)} {kind}: {shown}{more}"


def checkpoint_layout(
    arch: str, state_dict: Mapping[str, np.ndarray]
) -> tuple[str, Mapping[str, np.ndarray]]:
    """The architecture whose key layout `state_dict` has, and its keys in that layout, given
    the registry model `arch` it loads into: a SimCLR f_B checkpoint (`0.*` trunk, `1.fc1` /
    `1.fc2` head) for a ResNet-50 is `simclr_resnet50`; a torchvision ResNet (`conv1.weight`,
    no `encoder.*`) for a UNet++ is its encoder, as smp's `encoder_weights="imagenet"`;
    TeD-SPAD's and the penalty authors' f_T wrappers (`backbone.*` for `r3d_18`, `i3d.*` for
    `i3d_r50`) are `r3d_18_tedspad` / `i3d_r50_tedspad`; otherwise `arch` and `state_dict`
    themselves."""
    if arch == "resnet50" and "1.fc1.weight" in state_dict and "0.conv1.weight" in state_dict:
        return "simclr_resnet50", state_dict
    if arch.startswith("unetpp") and "conv1.weight" in state_dict:
        if not any(key.startswith("encoder.") for key in state_dict):
            return arch, {f"encoder.{key}": value for key, value in state_dict.items()}
    wrapped = {"r3d_18": ("backbone.", "r3d_18_tedspad"), "i3d_r50": ("i3d.", "i3d_r50_tedspad")}
    if arch in wrapped and any(key.startswith(wrapped[arch][0]) for key in state_dict):
        return wrapped[arch][1], state_dict
    return arch, state_dict


def build_for_state_dict(
    arch: str, state_dict: Mapping[str, np.ndarray], num_classes: int | None = None
) -> keras.Model:
    """The registry's model for `arch`, with the head the checkpoint has (`fc.weight`; for
    `simclr_resnet50` the projection head's widths from `1.fc1` and `1.fc2`); for
    `tedspad_embedding` the embedding head of `mlp.fc1`'s and `mlp.fc2`'s widths."""
    from keras_privacy.models import registry
    from keras_privacy.models.resnet import embedding_head, privacy_encoder, projection_head

    if arch not in ARCHITECTURES:
        raise ConversionError(f"unknown arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    kind = ARCHITECTURES[arch][0]
    if kind == "embedding":
        for key in ("mlp.fc1.weight", "mlp.fc2.weight"):
            if key not in state_dict:
                raise ConversionError(
                    f"{arch}: the checkpoint has no {key} (TeD-SPAD's f_T with its `mlp` head)"
                )
        if num_classes is not None:
            raise ConversionError(f"{arch}: --num_classes checks a classifier; the head has none")
        hidden, features = state_dict["mlp.fc1.weight"].shape
        output = state_dict["mlp.fc2.weight"].shape[0]
        return embedding_head(features, hidden=hidden, output=output)
    if kind == "privacy_encoder":
        for key in ("1.fc1.weight", "1.fc2.weight"):
            if key not in state_dict:
                raise ConversionError(f"{arch}: the checkpoint has no {key} (projection head)")
        hidden, features = state_dict["1.fc1.weight"].shape
        backbone = registry.build_image_backbone(arch.removeprefix("simclr_"))
        head = projection_head(features, hidden=hidden, output=state_dict["1.fc2.weight"].shape[0])
        return privacy_encoder(backbone, head)
    name = REGISTRY_NAMES.get(arch, arch)
    head = _head_key(arch)
    found = state_dict[head].shape[0] if head in state_dict else None
    if num_classes is not None and found is not None and num_classes != found:
        raise ConversionError(
            f"--num_classes {num_classes} but the checkpoint's {head} has {found} classes"
        )
    num_classes = num_classes or found
    if kind == "anonymizer":
        return registry.build_anonymizer(name)
    if kind == "image":
        return registry.build_image_backbone(name, num_classes=num_classes)
    if num_classes is None:
        return registry.build_action_model(name, num_classes=1, include_top=False)
    return registry.build_action_model(name, num_classes=num_classes)


def convert(
    path: str | os.PathLike,
    arch: str,
    out: str | os.PathLike,
    num_classes: int | None = None,
    key: str | None = None,
    normalization: str | None = None,
) -> keras.Model:
    """Read the checkpoint at `path`, load it into the registry's `arch` model and save it to
    `out`: a `.keras` model behind the input normalisation of the checkpoint family
    `normalization` (a key of `pretrained.NORMALIZATIONS`, required), or its weights alone
    in a `.weights.h5` file (no normalisation). Returns the Keras model written."""
    from keras_privacy.models import pretrained

    out = os.fspath(out)
    if ARCHITECTURES.get(arch, ("",))[0] == "embedding":
        if normalization not in (None, "none"):
            raise ConversionError(
                f"--normalization {normalization}: {arch} is a head on f_T's features, not on "
                "frames"
            )
        normalization = "none"
    if out.endswith(".keras"):
        if normalization is None:
            raise ConversionError(
                f"--out {out}: a .keras file records the input normalisation the weights "
                f"expect; give --normalization ({', '.join(pretrained.NORMALIZATIONS)})"
            )
        try:
            statistics = pretrained.normalization_named(normalization)
        except pretrained.WeightsError as error:
            raise ConversionError(str(error)) from None
    elif out.endswith(".weights.h5"):
        if normalization not in (None, "none"):
            raise ConversionError(
                f"--out {out}: a .weights.h5 file cannot record --normalization "
                f"{normalization}; write a .keras file"
            )
        statistics = None
    else:
        raise ConversionError(f"--out {out}: write a .keras model or a .weights.h5 file")
    refuse_a_file(Path(out).parent, f"the folder of --out {out}")
    state_dict = read_state_dict(path, key)
    model = build_for_state_dict(arch, state_dict, num_classes)
    load_torch_weights(model, state_dict, arch, source=os.fspath(path))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    if out.endswith(".weights.h5"):
        model.save_weights(out)
        return model
    if statistics is not None:
        model = pretrained.with_input_normalization(model, *statistics)
    model.save(out)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: convert a PyTorch checkpoint into a Keras `.keras` model or `.weights.h5` file; an
    error is one line (`keras_privacy.cli`)."""
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.convert",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("state_dict", help="a .pth / .pt or .safetensors file")
    parser.add_argument("--arch", required=True, choices=sorted(ARCHITECTURES))
    parser.add_argument(
        "--out", required=True, help="the Keras model (.keras) or weights (.weights.h5) to write"
    )
    parser.add_argument(
        "--normalization",
        default=None,
        help="the input normalisation the weights expect, saved in a .keras model: "
        "kinetics400, imagenet or none",
    )
    parser.add_argument(
        "--num_classes", type=positive_int, default=None, help="check the head's size"
    )
    parser.add_argument("--key", default=None, help="the state dict's key in a checkpoint dict")
    parser.add_argument("--verbose", action="store_true", help="show the traceback of an error")
    args = parser.parse_args(argv)
    return run_command(lambda: _convert_and_report(args), args.verbose)


def _convert_and_report(args: argparse.Namespace) -> int:
    """`convert` with the command line's arguments, and a line on what was written."""
    model = convert(
        args.state_dict, args.arch, args.out, args.num_classes, args.key, args.normalization
    )
    name = REGISTRY_NAMES.get(args.arch, args.arch)
    if ARCHITECTURES[args.arch][0] == "embedding":
        name = "the embedding head"
        use = "give it to --embedding_weights"
    elif args.out.endswith(".keras"):
        use = (
            "give it to a weights flag (--action_weights, ...) or load it with "
            "keras.saving.load_model"
        )
    else:
        use = f"load into the registry's {name} model of the same head"
    print(
        f"{args.state_dict} -> {args.out}: {args.arch} ({len(model.weights)} tensors, output "
        f"width {model.output_shape[-1]}); {use}"
    )
    if ARCHITECTURES[args.arch][0] == "embedding":
        print("left out: f_T itself (the checkpoint's keys outside mlp.)")
    elif args.arch in UNUSED:
        print(f"left out (no place in {name}): the checkpoint's keys matching {UNUSED[args.arch]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
