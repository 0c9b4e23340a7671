"""The pretrained weight files the paper configs name: what each starts, where it comes from and
the command that makes it, in one place.

`ExperimentConfig.validate` names the source and the command when a config's file is missing,
and `scripts/weights_table.py` writes this table into the README's "Pretrained weights".
Nothing is downloaded by keras_privacy: the files are yours to fetch and convert.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownWeights:
    """One weight file: its `path` under weights/, the `model` it starts, the `source` it is
    made from (a URL and the paper or code that uses it), the `command` that makes it, the
    `flags` that take it and the `configs` that name it."""

    path: str
    model: str
    source: str
    command: str
    flags: tuple[str, ...]
    configs: tuple[str, ...] = ()


_TORCHVISION = "https://download.pytorch.org/models/"
_VISSL_SIMCLR = (
    "https://dl.fbaipublicfiles.com/vissl/model_zoo/simclr_rn50_800ep_simclr_8node_resnet_"
    "16_07_20.7e8feed1/model_final_checkpoint_phase799.torch"
)
PENALTY = ("ucf101_vispr_penalty", "hmdb_vispr_penalty")
PRETRAINED_TARGETS = ("ucf101_vispr_pretrained_targets",)

KNOWN_WEIGHTS: tuple[KnownWeights, ...] = (
    KnownWeights(
        "weights/simclr_resnet50_imagenet.keras",
        "f_B: SimCLR ResNet-50 trained on ImageNet, projection head 2048-2048-128 included; "
        "normalises by ImageNet's mean / std",
        f"VISSL's SimCLR ResNet-50, 800 epochs ({_VISSL_SIMCLR}), the checkpoint SPAct's code "
        "names (anonymization_training/model.py:17-67, its reading commented out); penalty "
        "paper Sec. 4.2",
        "python -m keras_privacy.convert model_final_checkpoint_phase799.torch --arch "
        "simclr_resnet50 --normalization imagenet --out weights/simclr_resnet50_imagenet.keras",
        ("privacy_weights",),
        PENALTY,
    ),
    KnownWeights(
        "weights/resnet18_imagenet.pth",
        "f_A's encoder: UNet++ on an ImageNet ResNet-18 (its decoder stays fresh), read as it "
        "is (needs PyTorch); no normalisation, as TeD-SPAD feeds frames in [0, 1]",
        f"torchvision's ResNet-18 ({_TORCHVISION}resnet18-5c106cde.pth), smp's "
        "encoder_weights='imagenet' in TeD-SPAD's aux_code/model_loaders.py:19-30",
        f"curl -L -o weights/resnet18_imagenet.pth {_TORCHVISION}resnet18-5c106cde.pth",
        ("anonymizer_weights",),
        PENALTY,
    ),
    KnownWeights(
        "weights/r2plus1d_18_kinetics400.keras",
        "f'_T: torchvision's Kinetics-400 R(2+1)D-18 (`--eval_action_model=r2plus1d_18`, a new "
        "head is built); normalises by Kinetics-400's mean / std",
        f"torchvision video.r2plus1d_18 KINETICS400_V1 ({_TORCHVISION}r2plus1d_18-91a641e6.pth); "
        "SPAct supp. D.2, Table 3's Kinetics-400 column, and D.4, Table 6",
        "python -m keras_privacy.convert r2plus1d_18-91a641e6.pth --arch r2plus1d_18 "
        "--normalization kinetics400 --out weights/r2plus1d_18_kinetics400.keras",
        ("eval_action_weights",),
        PRETRAINED_TARGETS,
    ),
    KnownWeights(
        "weights/r3d_18_kinetics400.keras",
        "f_T: torchvision's Kinetics-400 R3D-18 (into `r3d_18_spact` or `r3d_18`, a new head "
        "is built); normalises by Kinetics-400's mean / std",
        f"torchvision video.r3d_18 KINETICS400_V1 ({_TORCHVISION}r3d_18-b3b3357e.pth); the "
        "--kin_pretrained of the sbatch line atop SPAct's "
        "anonymization_training/train_ssl_minimax2.py",
        "python -m keras_privacy.convert r3d_18-b3b3357e.pth --arch r3d_18 --normalization "
        "kinetics400 --out weights/r3d_18_kinetics400.keras",
        ("action_weights",),
    ),
    KnownWeights(
        "weights/resnet50_imagenet.keras",
        "f'_B: torchvision's ImageNet ResNet-50 (a new attribute head is built); normalises by "
        "ImageNet's mean / std",
        f"torchvision resnet50 IMAGENET1K_V1 ({_TORCHVISION}resnet50-0676ba61.pth); SPAct supp. "
        "D.3, Table 5; penalty paper Table 8",
        "python -m keras_privacy.convert resnet50-0676ba61.pth --arch resnet50 --normalization "
        "imagenet --out weights/resnet50_imagenet.keras",
        ("eval_privacy_weights",),
        PRETRAINED_TARGETS,
    ),
    KnownWeights(
        "weights/i3d_r50_kinetics400.weights.h5",
        "f_T and f'_T: the I3D-ResNet-50 (`--action_model=i3d_r50`) trained on Kinetics-400 (a "
        "new head is built); frames in [0, 1] as the authors feed it (the Caffe2 model was "
        "trained on (x - 0.45) / 0.225, pytorch-resnet3d utils/util.py:5-9)",
        "the Caffe2 I3D baseline of video-nonlocal-net (https://dl.fbaipublicfiles.com/"
        "video-nonlocal/i3d_baseline_32x2_IN_pretrain_400k.pkl) renamed by Tushar-N/"
        "pytorch-resnet3d to i3d_r50_kinetics.pth (`python -m utils.convert_weights PKL "
        "pretrained/i3d_r50_kinetics.pth` there), the file TeD-SPAD's and the penalty paper's "
        "build_largei3d_classifier loads",
        "python -m keras_privacy.convert i3d_r50_kinetics.pth --arch i3d_r50 --out "
        "weights/i3d_r50_kinetics400.weights.h5",
        ("action_weights", "eval_action_weights"),
        PENALTY,
    ),
    KnownWeights(
        "weights/mc3_18_kinetics400.keras",
        "f_T or f'_T: torchvision's Kinetics-400 MC3-18 (`--action_model=mc3_18`); normalises "
        "by Kinetics-400's mean / std",
        f"torchvision video.mc3_18 KINETICS400_V1 ({_TORCHVISION}mc3_18-a90a0ba3.pth)",
        "python -m keras_privacy.convert mc3_18-a90a0ba3.pth --arch mc3_18 --normalization "
        "kinetics400 --out weights/mc3_18_kinetics400.keras",
        ("action_weights",),
    ),
    KnownWeights(
        "weights/unetpp_ted_spad.keras",
        "f_A: TeD-SPAD's trained UNet++ anonymizer, unbounded as they run it "
        "(`--anonymizer=unetpp_unbounded`), to evaluate as "
        "`--eval_methods=ted_spad=weights/unetpp_ted_spad.keras` or to start f_A",
        "TeD-SPAD's released weights (https://1drv.ms/f/s!Ah-hee3NbVf7ge97m4_amfmsrmHKig?e=etleeR, "
        "their README), saved under fa_model_state_dict",
        "python -m keras_privacy.convert FA_CHECKPOINT.pth --arch unetpp_unbounded --key "
        "fa_model_state_dict --normalization none --out weights/unetpp_ted_spad.keras",
        ("anonymizer_weights",),
    ),
)
"""Every weight file a paper config names (and a few more the converters make)."""


def missing_weights_message(flag: str, path: str) -> str:
    """Why `--flag=path` cannot start: the file is missing; where to get it when it is known."""
    known = next((w for w in KNOWN_WEIGHTS if w.path == path), None)
    message = f"--{flag}={path}: no such file"
    if known is None:
        return (
            f"{message} (see the README's 'Pretrained weights' for where each weight file comes "
            "from and how to convert it)"
        )
    return (
        f"{message}. It is {known.model}. Source: {known.source}. Make it with: "
        f"{known.command}. Or give --{flag}= (empty) to start from scratch instead, which the "
        "papers did not."
    )
