"""Model builders: anonymizers (f_A), action models (f_T) and image models (f_B, attackers)."""

from keras_privacy.models.layers import L2Normalize, SpatialSubsample
from keras_privacy.models.r3d import r3d_18, r3d_18_spact
from keras_privacy.models.registry import (
    ACTION_MODELS,
    ANONYMIZERS,
    IMAGE_MODELS,
    build_action_model,
    build_anonymizer,
    build_image_backbone,
)
from keras_privacy.models.resnet import (
    privacy_classifier,
    privacy_encoder,
    projection_head,
    resnet,
    resnet50_encoder,
)
from keras_privacy.models.unet import apply_per_frame, downsampling_factor, unet

__all__ = [
    "ACTION_MODELS",
    "ANONYMIZERS",
    "IMAGE_MODELS",
    "L2Normalize",
    "SpatialSubsample",
    "apply_per_frame",
    "build_action_model",
    "build_anonymizer",
    "build_image_backbone",
    "downsampling_factor",
    "privacy_classifier",
    "privacy_encoder",
    "projection_head",
    "r3d_18",
    "r3d_18_spact",
    "resnet",
    "resnet50_encoder",
    "unet",
]
