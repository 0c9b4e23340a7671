"""Registries of every model by name, so flags like `--action_model=NAME` work everywhere.

python -m keras_privacy.models list
python -m keras_privacy.models count r3d_18 --num_classes 400
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import keras

from keras_privacy.models import (
    applications,
    c3d,
    factorized,
    i3d,
    inception,
    layers,
    r2plus1d,
    r3d,
    resnet,
    resnet_v1,
    unet,
    unetpp,
    vita_net,
)

ACTION_MODELS: dict[str, Callable[..., keras.Model]] = {
    "r3d_18": r3d.r3d_18,
    "r3d_18_spact": r3d.r3d_18_spact,
    "mc3_18": r3d.mc3_18,
    "r2plus1d_18": r2plus1d.r2plus1d_18,
    "r3d_50": r3d.r3d_50,
    # TeD-SPAD's and the penalty paper's f_T (their `largei3d`): clips of >= 7 frames.
    "i3d_r50": i3d.i3d_r50,
    # C3D flattens its last pooled volume: fixed clip shape, 16 frames of 112 x 112 by default.
    "c3d": c3d.c3d,
    # SPAct's R3D at 1/8 width and one block per stage, for the synthetic benchmark and tests.
    "r3d_tiny": functools.partial(
        r3d.r3d_18_spact,
        widths=(8, 16, 32, 64),
        blocks=(1, 1, 1, 1),
        stem_width=8,
        name="r3d_tiny",
    ),
    # Small variants of the above (1/8 width, one block per stage) for tests and CPU runs.
    "r2plus1d_tiny": functools.partial(
        r2plus1d.r2plus1d_18,
        widths=(8, 16, 32, 64),
        blocks=(1, 1, 1, 1),
        stem_width=8,
        stem_mid_width=6,
        name="r2plus1d_tiny",
    ),
    "r3d_50_tiny": functools.partial(
        r3d.r3d_50, widths=(4, 8, 16, 32), blocks=(1, 1, 1, 1), stem_width=8, name="r3d_50_tiny"
    ),
    "i3d_r50_tiny": functools.partial(
        i3d.i3d_r50, widths=(4, 8, 16, 32), blocks=(1, 1, 1, 1), stem_width=8, name="i3d_r50_tiny"
    ),
    # Global average pooling instead of the flatten: clips of >= 16 frames, any size.
    "c3d_tiny": functools.partial(
        c3d.c3d, widths=(8, 16, 32, 64, 64), fc_width=64, flatten=False, name="c3d_tiny"
    ),
    # A (2+1)D CNN built from 2-D convolutions, ~20x faster than r3d_tiny on a CPU: the
    # synthetic benchmark's f_T. Needs a fixed input_shape.
    "factorized_tiny": functools.partial(factorized.factorized_cnn, name="factorized_tiny"),
    # The same with frame differences at the input: learns motion in a few epochs.
    "factorized_tiny_diff": functools.partial(
        factorized.factorized_cnn, difference_stem=True, name="factorized_tiny_diff"
    ),
}
"""Clips (B, T, H, W, 3) in [0, 1] -> action logits. Builders take `num_classes` and
`input_shape` (T, H, W, 3)."""


class _ImageModels(dict):
    """The image models by name; any `mobilenet_v2_<alpha>` (alpha > 0) is known beside the
    registered ones (Keras' six widths with ImageNet weights), since without weights
    `keras.applications.MobileNetV2` builds any width (the meta paper's 8 attack models)."""

    PREFIX = "mobilenet_v2_"

    def _mobilenet_v2(self, name) -> Callable[..., keras.Model] | None:
        if not isinstance(name, str) or not name.startswith(self.PREFIX):
            return None
        try:
            alpha = float(name[len(self.PREFIX) :])
        except ValueError:
            return None
        if not 0 < alpha < float("inf"):
            return None
        return functools.partial(applications.mobilenet_v2, alpha=alpha, name=name)

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or self._mobilenet_v2(name) is not None

    def __missing__(self, name):
        builder = self._mobilenet_v2(name)
        if builder is None:
            raise KeyError(name)
        return builder


IMAGE_MODELS: dict[str, Callable[..., keras.Model]] = {
    "resnet18": functools.partial(
        resnet.resnet, blocks=(2, 2, 2, 2), bottleneck=False, name="resnet18"
    ),
    "resnet34": functools.partial(
        resnet.resnet, blocks=(3, 4, 6, 3), bottleneck=False, name="resnet34"
    ),
    "resnet50": functools.partial(resnet.resnet, blocks=(3, 4, 6, 3), name="resnet50"),
    "resnet101": functools.partial(resnet.resnet, blocks=(3, 4, 23, 3), name="resnet101"),
    "resnet152": functools.partial(resnet.resnet, blocks=(3, 8, 36, 3), name="resnet152"),
    "resnet_tiny": functools.partial(
        resnet.resnet,
        blocks=(1, 1, 1, 1),
        widths=(8, 16, 32, 64),
        bottleneck=False,
        name="resnet_tiny",
    ),
    # The same with a 3x3/1 stem and no max-pool, for 32-px images (the synthetic benchmark).
    "resnet_tiny_small_images": functools.partial(
        resnet.resnet,
        blocks=(1, 1, 1, 1),
        widths=(8, 16, 32, 64),
        bottleneck=False,
        small_images=True,
        name="resnet_tiny_small_images",
    ),
    **{
        f"mobilenet_v1_{alpha}": functools.partial(
            applications.mobilenet_v1, alpha=alpha, name=f"mobilenet_v1_{alpha}"
        )
        for alpha in (0.25, 0.5, 0.75, 1.0)
    },
    **{
        f"mobilenet_v2_{alpha}": functools.partial(
            applications.mobilenet_v2, alpha=alpha, name=f"mobilenet_v2_{alpha}"
        )
        for alpha in (0.35, 0.5, 0.75, 1.0, 1.3, 1.4)
    },
    # TF-slim's models of VITA's code: its budget ensemble and the meta paper's test attackers.
    "resnet_v1_50": functools.partial(resnet_v1.resnet_v1, depth=50, name="resnet_v1_50"),
    "resnet_v1_101": functools.partial(resnet_v1.resnet_v1, depth=101, name="resnet_v1_101"),
    "resnet_v2_50": functools.partial(applications.resnet_v2, depth=50, name="resnet_v2_50"),
    "resnet_v2_101": functools.partial(applications.resnet_v2, depth=101, name="resnet_v2_101"),
    "inception_v1": functools.partial(inception.inception_net, version=1, name="inception_v1"),
    "inception_v2": functools.partial(inception.inception_net, version=2, name="inception_v2"),
}
IMAGE_MODELS = _ImageModels(IMAGE_MODELS)
"""Images (B, H, W, 3) in [0, 1] -> pooled features (with `num_classes`: logits). Besides
those listed, `mobilenet_v2_<alpha>` at any width multiplier alpha > 0."""

ANONYMIZERS: dict[str, Callable[..., keras.Model]] = {
    "unet": unet.unet,
    "unet_small": functools.partial(unet.unet, widths=(16, 32, 64, 128)),
    "unet_tiny": functools.partial(unet.unet, widths=(8, 16, 32)),
    # TeD-SPAD's f_A: UNet++ on a ResNet-18 encoder of depth 4 (H, W multiples of 16).
    "unetpp": unetpp.unet_plus_plus,
    # The same as TeD-SPAD and the penalty authors run it: no output activation (unbounded).
    "unetpp_unbounded": functools.partial(unetpp.unet_plus_plus, output_activation=None),
    "unetpp_tiny": functools.partial(
        unetpp.unet_plus_plus,
        encoder_depth=3,
        encoder_widths=(8, 8, 16),
        encoder_blocks=(1, 1),
        decoder_widths=(16, 8, 8),
    ),
    # VITA's f_d, the residual image-transformation network (H, W multiples of 4).
    "vita": vita_net.vita_transform,
    "vita_tiny": functools.partial(vita_net.vita_transform, widths=(8, 16, 32), residual_blocks=2),
}
"""Frames (B, H, W, 3) in [0, 1] -> frames in [0, 1] (`unetpp_unbounded`: unbounded)."""


def _lookup(registry: dict, kind: str, name: str) -> Callable[..., keras.Model]:
    if name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; known: {', '.join(sorted(registry))}")
    return registry[name]


def build_action_model(name: str, num_classes: int, **kwargs: Any) -> keras.Model:
    """The action model registered as `name`, with a `num_classes`-way head."""
    return _lookup(ACTION_MODELS, "action model", name)(num_classes=num_classes, **kwargs)


def build_image_backbone(name: str, **kwargs: Any) -> keras.Model:
    """The image model registered as `name`, pooled features out (or logits with num_classes)."""
    return _lookup(IMAGE_MODELS, "image model", name)(**kwargs)


def build_privacy_classifier(
    backbone_name: str, num_attributes: int, name: str = "privacy_classifier", **kwargs: Any
) -> keras.Model:
    """`resnet.privacy_classifier` on the image model `backbone_name` (built with `kwargs`),
    its attribute head started as that model's code starts logits: TF-slim's start for the
    models VITA's code builds with slim (ResNet-V1 / -V2, Inception-V1 / -V2, MobileNet-V1),
    else PyTorch's nn.Linear (SPAct's and the penalty code's heads). The Inceptions drop 20 %
    of the pooled features before it, as slim's (`dropout_keep_prob=0.8`, VITA's
    nets/inception_v1.py:260)."""
    if backbone_name.startswith(("resnet_v1_", "resnet_v2_", "inception_v")):
        head_initializer = layers.slim_variance_scaling()
    elif backbone_name.startswith("mobilenet_v1_"):
        head_initializer = layers.slim_mobilenet_start()
    else:
        head_initializer = None
    return resnet.privacy_classifier(
        build_image_backbone(backbone_name, **kwargs),
        num_attributes,
        name=name,
        head_initializer=head_initializer,
        dropout=0.2 if backbone_name.startswith("inception_v") else 0.0,
    )


def build_anonymizer(name: str, **kwargs: Any) -> keras.Model:
    """The anonymizer registered as `name`."""
    return _lookup(ANONYMIZERS, "anonymizer", name)(**kwargs)


def build_action_trunk(name: str, input_shape: tuple) -> keras.Model:
    """The action model registered as `name` without its classifier: clips -> the features its
    last Dense layer reads (the pooled features of the 3D ResNets)."""
    model = build_action_model(name, num_classes=1, input_shape=input_shape)
    classifier = model.layers[-1]
    if not isinstance(classifier, keras.layers.Dense):
        raise ValueError(f"action model {name!r} does not end with a Dense classifier")
    return keras.Model(model.inputs, classifier.input, name=f"{name}_trunk")


def with_pooled_features(action_model: keras.Model) -> keras.Model:
    """A model of clips -> [the logits of `action_model`, its pooled features] in one pass,
    sharing its layers: the features are what its classifier reads, before any dropout.
    `action_model` is a Functional model ending in a Dense classifier, or in such a model
    behind layers of its input, as `pretrained.with_input_normalization` puts it. The two
    models hold the same variables."""
    classifier = action_model.layers[-1] if action_model.layers else None
    name = f"{action_model.name}_with_features"
    if isinstance(classifier, keras.Model):
        x = action_model.input
        for layer in action_model.layers[:-1]:
            if not isinstance(layer, keras.layers.InputLayer):
                x = layer(x)
        return keras.Model(action_model.input, with_pooled_features(classifier)(x), name=name)
    if not isinstance(classifier, keras.layers.Dense) or not hasattr(action_model, "inputs"):
        raise ValueError(
            f"action model {action_model.name!r} is not a Functional model ending with a Dense "
            "classifier, whose input would be its pooled features"
        )
    features = classifier.input
    for layer in reversed(action_model.layers[:-1]):
        if isinstance(layer, keras.layers.Dropout) and layer.output is features:
            features = layer.input
    return keras.Model(action_model.input, [action_model.output, features], name=name)


def build_video_privacy_encoder(
    name: str = "r3d_18",
    input_shape: tuple = (16, 112, 112, 3),
    hidden: int = 512,
    output: int = 128,
) -> keras.Model:
    """f_B of SPAct's spatio-temporal privacy branch (SPAct supplement, Sec. C): clips
    (B, T, H, W, 3) -> L2-normalised embeddings. The trunk of the action model `name` (SPAct:
    R3D-18), then the projection head Dense(hidden) - ReLU - Dense(output) (SPAct: 512, 128)."""
    trunk = build_action_trunk(name, input_shape)
    head = resnet.projection_head(trunk.output_shape[-1], hidden=hidden, output=output)
    return resnet.privacy_encoder(trunk, head)
