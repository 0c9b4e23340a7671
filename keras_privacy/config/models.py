"""The trained models f_A, f_T, f_B and the weight files they start from."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from keras_privacy.config.setting import SettingError, at_least_one, described, names
from keras_privacy.known_weights import missing_weights_message

if TYPE_CHECKING:
    from keras_privacy.config import ExperimentConfig

WEIGHT_FLAGS = (
    "anonymizer_weights",
    "action_weights",
    "privacy_weights",
    "embedding_weights",
    "eval_action_weights",
    "eval_privacy_weights",
)
"""The settings that name a pretrained weight file."""
EVALUATION_WEIGHT_FLAGS = ("eval_action_weights", "eval_privacy_weights")
"""Those `evaluate.py` reads: the fresh target models' starts."""


@dataclasses.dataclass
class ModelSettings:
    """The trained models f_A, f_T, f_B and the weight files they start from."""

    anonymizer: str = field(default="unet_tiny", metadata=described("Anonymizer f_A.", "models"))
    action_model: str = field(
        default="r3d_tiny", metadata=described("Action model f_T (registry name).", "models")
    )
    privacy_backbone: str = field(
        default="resnet_tiny",
        metadata=described(
            "Backbone of the privacy encoder f_B; a comma-separated list trains an ensemble of "
            "encoders (SPAct Table 6), each with its own head. With "
            "<ssl_adversary>=spatiotemporal, an action model (SPAct: r3d_18) whose trunk "
            "encodes clips.",
            "models",
        ),
    )
    anonymizer_weights: str = field(
        default="",
        metadata=described(
            "Start f_A from this weight file (.keras, .weights.h5, or a PyTorch .pth / .pt / "
            ".safetensors checkpoint of <anonymizer>'s architecture); what matches loads, the "
            "rest stays fresh, and a report is printed. A .keras file converted with "
            "<normalization> puts its input normalisation in front of the model. Empty: from "
            "scratch (say so explicitly to override a config's file).",
            "models",
        ),
    )
    action_weights: str = field(
        default="",
        metadata=described(
            "Start f_T from this weight file (as <anonymizer_weights>; a PyTorch checkpoint of "
            "<action_model>'s architecture, e.g. Kinetics-400 with a new head).",
            "models",
        ),
    )
    privacy_weights: str = field(
        default="",
        metadata=described(
            "Start f_B from this weight file (as <anonymizer_weights>; a PyTorch checkpoint of "
            "<privacy_backbone>'s architecture loads into the trunk under the projection "
            "head; a SimCLR f_B checkpoint fills trunk and head). SPAct and penalty with one "
            "privacy encoder.",
            "models",
        ),
    )
    embedding_weights: str = field(
        default="",
        metadata=described(
            "Start the embedding head of the triplet term (<triplet_weight>) from this weight "
            "file: TeD-SPAD's saved f_T, whose head `mlp.*` its anonymizer training loads with "
            "f_T (a PyTorch checkpoint; often the file of <action_weights>), or a .weights.h5 "
            "/ .keras of the head (keras_privacy.convert's architecture tedspad_embedding). "
            "Empty: a fresh head.",
            "models",
        ),
    )
    projection_hidden: int = field(
        default=128, metadata=described("Hidden width of f_B's projection head.", "models")
    )
    projection_dim: int = field(
        default=64, metadata=described("Output width of f_B's projection head.", "models")
    )

    def privacy_backbone_names(self) -> list[str]:
        """The backbones of `privacy_backbone`, in order (more than one: an ensemble)."""
        return names(self.privacy_backbone)


def validate_weight_files(config: ExperimentConfig, training: bool = True) -> None:
    """Every weight file named exists (each of a target models' list; without `training`,
    only those, the files an evaluation reads); SPAct's `privacy_weights` start one encoder
    only."""
    for name in WEIGHT_FLAGS if training else EVALUATION_WEIGHT_FLAGS:
        value = getattr(config, name)
        for path in names(value) if name.startswith("eval_") else [value]:
            if path and not Path(path).is_file():
                raise SettingError(missing_weights_message(name, path))
    if config.privacy_weights and len(config.privacy_backbone_names()) > 1:
        raise SettingError(
            "<privacy_weights> starts SPAct's one privacy encoder f_B; an ensemble of "
            f"<privacy_backbone> ({config.privacy_backbone}) has several"
        )


def validate_model_names(config: ExperimentConfig) -> None:
    """Every model named is in the registry, of the kind its role needs (f_B: an action model
    under the spatio-temporal adversary, else an image model)."""
    from keras_privacy.models import registry

    at_least_one(config, ("projection_hidden", "projection_dim"))
    if not config.adversary_model_names():
        raise SettingError("<adversary_models> names no model")
    if not config.privacy_backbone_names():
        raise SettingError("<privacy_backbone> names no model")
    if len(config.privacy_backbone_names()) > 1 and config.ssl_adversary != "ntxent":
        raise SettingError(
            f"<privacy_backbone>={config.privacy_backbone} (an ensemble) trains with "
            f"<ssl_adversary>=ntxent only, got {config.ssl_adversary}"
        )
    if config.ssl_adversary == "spatiotemporal" and not config.eval_privacy_model:
        raise SettingError(
            "<ssl_adversary>=spatiotemporal needs <eval_privacy_model> (an image model): "
            "its <privacy_backbone> is a video model, which cannot be the evaluation's "
            "target privacy model"
        )
    privacy_models, reason = registry.IMAGE_MODELS, ""
    if config.ssl_adversary == "spatiotemporal":
        privacy_models = registry.ACTION_MODELS
        reason = " (<ssl_adversary>=spatiotemporal encodes clips with an action model's trunk)"
    for setting, chosen, known, why in (
        ("adversary_models", config.adversary_model_names(), registry.IMAGE_MODELS, ""),
        ("privacy_backbone", config.privacy_backbone_names(), privacy_models, reason),
    ):
        for name in chosen:
            if name not in known:
                raise SettingError(
                    f"<{setting}>: {name!r} is not one of {', '.join(sorted(known))}{why}"
                )
    for setting, known in (
        ("anonymizer", registry.ANONYMIZERS),
        ("action_model", registry.ACTION_MODELS),
    ):
        value = getattr(config, setting)
        if value and value not in known:
            raise SettingError(f"<{setting}>={value!r} is not one of {', '.join(sorted(known))}")
