"""Model builders: anonymizers (f_A), action models (f_T) and image models (f_B, attackers).

Anonymizers: SPAct's UNet (`unet`), UNet++ (`unetpp`), VITA's image-transformation net
(`vita_net`). Action models: R3D-18 and SPAct's variant (`r3d`), R(2+1)D-18
(`r2plus1d`), R3D-50 (`r3d`), C3D (`c3d`), a factorised CPU model (`factorized`). Image
models: ResNet-18 ... 152 (`resnet`), MobileNet-V1 / V2 and ResNet-V2-50 / 101
(`applications`), Inception-V1 / V2 (`inception`). Every one is registered
by name in `registry`; `keras_privacy.convert` imports PyTorch weights into several of them.
"""

from keras_privacy.models.applications import mobilenet_v1, mobilenet_v2, resnet_v2
from keras_privacy.models.inception import inception_net
from keras_privacy.models.layers import L2Normalize, SpatialSubsample
from keras_privacy.models.r2plus1d import r2plus1d_18
from keras_privacy.models.r3d import r3d_18, r3d_18_spact, r3d_50
from keras_privacy.models.registry import (
    ACTION_MODELS,
    ANONYMIZERS,
    IMAGE_MODELS,
    build_action_model,
    build_action_trunk,
    build_anonymizer,
    build_image_backbone,
    build_video_privacy_encoder,
    with_pooled_features,
)
from keras_privacy.models.resnet import (
    embedding_head,
    privacy_classifier,
    privacy_encoder,
    projection_head,
    resnet,
)
from keras_privacy.models.unet import apply_per_frame, downsampling_factor, unet
from keras_privacy.models.unetpp import unet_plus_plus
from keras_privacy.models.vita_net import vita_transform

__all__ = [
    "ACTION_MODELS",
    "ANONYMIZERS",
    "IMAGE_MODELS",
    "L2Normalize",
    "SpatialSubsample",
    "apply_per_frame",
    "build_action_model",
    "build_action_trunk",
    "build_anonymizer",
    "build_image_backbone",
    "build_video_privacy_encoder",
    "downsampling_factor",
    "embedding_head",
    "inception_net",
    "mobilenet_v1",
    "mobilenet_v2",
    "privacy_classifier",
    "privacy_encoder",
    "projection_head",
    "r2plus1d_18",
    "r3d_18",
    "r3d_18_spact",
    "r3d_50",
    "resnet",
    "resnet_v2",
    "unet",
    "unet_plus_plus",
    "vita_transform",
    "with_pooled_features",
]
