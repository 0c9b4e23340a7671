"""Import PyTorch checkpoints into keras_privacy's models (no download: the file is yours).

    python -m keras_privacy.convert STATE_DICT.pth --arch r3d_18 --out MODEL.weights.h5

`--arch` is one of `ARCHITECTURES`: torchvision's `video.r3d_18` and `video.r2plus1d_18`
(also into SPAct's `r3d_18_spact`, which has the same weights), `resnet18` ... `resnet152`,
Hara et al.'s 3D-ResNets-PyTorch `r3d_50`, and SPAct's UNet (milesial's Pytorch-UNet,
`bilinear=True`; a bias before a BatchNorm is folded into its moving mean). The head's size
comes from the checkpoint's `fc.weight` (`--num_classes` to check it); a checkpoint without
`fc` gives the pooled-features model.

The file is read without running pickled code: `torch.load(weights_only=True)` for `.pth` /
`.pt` (needs PyTorch, a CPU build is enough), or a `.safetensors` file (read here, no extra
package). Nested checkpoints ({"state_dict": {...}}, SPAct's "fa_model_state_dict") are
unwrapped (`--key` picks one), and DataParallel's "module." prefix is dropped. Any missing,
unexpected or mismatched tensor fails with `ConversionError` naming each one.

Layout: PyTorch convolution kernels (O, I, [D,] H, W) become Keras' ([D,] H, W, I, O), Dense
kernels are transposed, BatchNorm's weight / bias / running_mean / running_var become gamma /
beta / moving_mean / moving_var (epsilon 1e-5 and momentum 0.9 are PyTorch's 1e-5 and 0.1).
Every model pads explicitly as PyTorch does, so outputs match to float precision.

The weights load into the registry's model of the same name and head:
`build_action_model("r3d_18", num_classes=400).load_weights("MODEL.weights.h5")`. torchvision's
Kinetics and ImageNet weights expect frames normalised by the dataset's mean and standard
deviation, while keras_privacy's models take frames in [0, 1] as they are: fine-tune them, or
normalise the input first.
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

import numpy as np

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

ARCHITECTURES = {
    "r3d_18": ("action", _VIDEO_RESNET),
    "r3d_18_spact": ("action", _VIDEO_RESNET),
    "r2plus1d_18": ("action", _R2PLUS1D),
    "r3d_50": ("action", _RESNET),
    **{f"resnet{depth}": ("image", _RESNET) for depth in (18, 34, 50, 101, 152)},
    "unet": ("anonymizer", None),
}
"""Architectures this module converts: name -> (registry kind, Keras -> PyTorch name map)."""

_CHECKPOINT_KEYS = ("state_dict", "model_state_dict", "model", "fa_model_state_dict")


class ConversionError(ValueError):
    """A checkpoint that does not fit the architecture, or a file that cannot be read."""


def read_state_dict(path: str | os.PathLike, key: str | None = None) -> dict[str, np.ndarray]:
    """The tensors of a `.pth` / `.pt` (torch.load with weights_only=True) or `.safetensors`
    file as NumPy arrays, unwrapped from a nested checkpoint (`key`, or the one dict of
    tensors in it) and without DataParallel's "module." prefix."""
    path = Path(path)
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
        raise ConversionError(
            f"{path}: not readable as a PyTorch checkpoint with weights_only=True "
            f"({type(error).__name__}: {_torch_reason(error)}); save the model's state_dict() "
            "alone"
        ) from None
    tensors = _unwrap(checkpoint, key, path)
    return _strip_module({name: _to_numpy(value) for name, value in tensors.items()})


def _torch_reason(error: Exception) -> str:
    """Why `torch.load(weights_only=True)` refused a file, without PyTorch's advice to load it
    with weights_only=False (which would run the pickled code we refuse): the unpickler's reason
    when it gives one, else the first line of the message."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    found = re.search(r"WeightsUnpickler error: (.*?)(?: Please use|$)", text, re.MULTILINE)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = found.group(1) if found else (lines[0] if lines else "")
    return reason.strip()[:300]


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
    """A .safetensors file (8-byte header length, JSON header, raw little-endian data)."""
    data = path.read_bytes()
    try:
        (length,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + length])
    except (struct.error, ValueError) as error:
        raise ConversionError(f"{path}: not a safetensors file ({error})") from None
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = info["dtype"]
        if dtype == "BF16":
            raw = np.frombuffer(body[start:end], dtype="<u2").astype(np.uint32) << 16
            array = raw.view(np.float32)
        elif dtype in _SAFETENSORS_DTYPES:
            array = np.frombuffer(body[start:end], dtype=np.dtype(_SAFETENSORS_DTYPES[dtype]))
        else:
            raise ConversionError(f"{path}: tensor {name} has unsupported dtype {dtype}")
        tensors[name] = array.reshape(info["shape"])
    return tensors


def torch_module_names(model, arch: str, strict: bool = True) -> dict[str, str]:
    """Keras layer name -> PyTorch module path, for every layer of `model` with weights; a layer
    with no PyTorch name fails when `strict`, else is left out (a head the checkpoint lacks)."""
    if arch not in ARCHITECTURES:
        raise ConversionError(f"unknown arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    patterns = ARCHITECTURES[arch][1]
    names = {}
    for layer in model.layers:
        if not layer.weights:
            continue
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
    levels = sum(1 for layer in model.layers if re.match(r"^down\d+_conv1$", layer.name))
    return f"up{levels - 1 - level}.conv.{double_conv}"


def torch_layer_arrays(
    model, state_dict: Mapping[str, np.ndarray], names: Mapping[str, str]
) -> tuple[dict[str, dict[str, tuple[str, np.ndarray]]], set[str], list[str], list[str]]:
    """The arrays of the PyTorch `state_dict` in Keras' layout, per layer of `model` named in
    `names` (Keras layer name -> PyTorch module path): layer name -> {variable attribute
    (kernel, gamma, ...): (PyTorch key, array)}. Also returns the keys used, the missing keys
    and the conv biases that have no Keras home."""
    import keras

    used = {key for key in state_dict if key.endswith("num_batches_tracked")}
    missing, homeless, arrays = [], [], {}
    previous_conv_bias = {}
    for layer in model.layers:
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


def load_torch_weights(
    model, state_dict: Mapping[str, np.ndarray], arch: str, source: str = "state dict"
) -> None:
    """Assign the PyTorch `state_dict` (name -> array) of architecture `arch` to the Keras
    `model` built by the registry (any width: shapes are checked, not assumed).

    Raises ConversionError naming, from `source`, every missing, unexpected and mismatched
    tensor; nothing is assigned unless everything fits.
    """
    names = torch_module_names(model, arch)
    arrays, used, missing, mismatched = torch_layer_arrays(model, state_dict, names)
    assignments = []
    for layer in model.layers:
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


def build_for_state_dict(arch: str, state_dict: Mapping[str, np.ndarray], num_classes=None):
    """The registry's model for `arch`, with the head the checkpoint has (`fc.weight`)."""
    from keras_privacy.models import registry

    if arch not in ARCHITECTURES:
        raise ConversionError(f"unknown arch {arch!r}; known: {', '.join(ARCHITECTURES)}")
    kind = ARCHITECTURES[arch][0]
    found = state_dict["fc.weight"].shape[0] if "fc.weight" in state_dict else None
    if num_classes is not None and found is not None and num_classes != found:
        raise ConversionError(
            f"--num_classes {num_classes} but the checkpoint's fc.weight has {found} classes"
        )
    num_classes = num_classes or found
    if kind == "anonymizer":
        return registry.build_anonymizer(arch)
    if kind == "image":
        return registry.build_image_backbone(arch, num_classes=num_classes)
    if num_classes is None:
        return registry.build_action_model(arch, num_classes=1, include_top=False)
    return registry.build_action_model(arch, num_classes=num_classes)


def convert(
    path: str | os.PathLike,
    arch: str,
    out: str | os.PathLike,
    num_classes: int | None = None,
    key: str | None = None,
):
    """Read the checkpoint at `path`, load it into the registry's `arch` model and save its
    weights to `out` (a `.weights.h5` file); returns the Keras model."""
    if not str(out).endswith(".weights.h5"):
        raise ConversionError(f"--out {out}: Keras weight files must end in .weights.h5")
    state_dict = read_state_dict(path, key)
    model = build_for_state_dict(arch, state_dict, num_classes)
    load_torch_weights(model, state_dict, arch, source=os.fspath(path))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    model.save_weights(os.fspath(out))
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: convert a PyTorch state dict into a Keras `.weights.h5` file."""
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.convert",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("state_dict", help="a .pth / .pt or .safetensors file")
    parser.add_argument("--arch", required=True, choices=sorted(ARCHITECTURES))
    parser.add_argument("--out", required=True, help="the Keras weights to write (.weights.h5)")
    parser.add_argument("--num_classes", type=int, default=None, help="check the head's size")
    parser.add_argument("--key", default=None, help="the state dict's key in a checkpoint dict")
    args = parser.parse_args(argv)
    try:
        model = convert(args.state_dict, args.arch, args.out, args.num_classes, args.key)
    except ConversionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    head = model.output_shape[-1]
    print(
        f"{args.state_dict} -> {args.out}: {args.arch} ({len(model.weights)} tensors, output "
        f"width {head}); load into the registry's {args.arch} model of the same head"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
