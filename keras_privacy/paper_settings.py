"""The papers' settings against the paper configs: one row per setting.

`scripts/deviations_table.py` writes these rows into `docs/paper_settings.md`, and
`tests/test_paper_settings.py` checks that each row's `ours` is what its configs set. Sources
name a paper section or table, or an authors' file and line at the commits of `AUTHORS_CODE`.
"""

from __future__ import annotations

from dataclasses import dataclass

AUTHORS_CODE = {
    "DAVEISHAN/SPAct": "7cf3770b4f85794e0b41b1d0f68e35c7b2644703",
    "VITA-Group/Privacy-AdversarialLearning": "939ca4af65b65c3c5018bb2686903ac5ae9c6b13",
    "UCF-CRCV/TeD-SPAD": "d374a916e1b40fe98719cd0f5ff810872382ea7f",
    "Rabusi/Balancing-Privacy-and-Action-Performance-A-Penalty-Driven-Approach-to-Image-"
    "Anonymization": "545cb7809091bc69259e0a999b08c6b9e000dd67",
}
"""The authors' repositories the sources cite, at the commit that was read."""

METHODS = {
    "spact": "SPAct (Dave et al., CVPR 2022)",
    "vita": "VITA (Wu et al.), as in the authors' PA-HMDB51-VISPR code",
    "penalty": "Penalty-driven (Aslam & Nasrollahi, 2025)",
    "meta": "Meta generalisation (NeurIPS 2023)",
}
"""Table headings, in order."""

SPACT = ("ucf101_vispr", "hmdb_vispr")
VITA = ("ucf101_vispr_vita", "hmdb_vispr_vita")
PENALTY = ("ucf101_vispr_penalty", "hmdb_vispr_penalty")
META = ("ucf101_vispr_meta", "hmdb_vispr_meta")

SAME = "same"

_S_INIT = "SPAct initialization/"
_S_ANON = "SPAct anonymization_training/"
_VITA = "VITA adversarial_training/adv_training/"
_TED = "TeD-SPAD "
_PEN = "Penalty code "

_MINIMAX_LR = (
    "not stated for the minimax (supp. C.3 gives every network a base 1e-3, to 1/10 on a loss "
    "plateau); the authors' code: 1e-4 (Adam, constant)"
)
_AS_THE_CODE = "the authors' code's"


@dataclass(frozen=True)
class Setting:
    """One setting: the paper's value and where it is stated, our flag and value in `configs`
    (flag "" when no flag exists yet), and "same" or why ours differs."""

    method: str
    setting: str
    paper: str
    source: str
    configs: tuple[str, ...]
    flag: str
    ours: str
    why: str = SAME


SETTINGS: tuple[Setting, ...] = (
    # SPAct: data and augmentation.
    Setting(
        "spact",
        "privacy attributes",
        "VISPR-1 (7)",
        "SPAct supp. B, Table 1",
        SPACT,
        "privacy_attributes",
        "vispr1",
    ),
    Setting(
        "spact",
        "input side",
        "112",
        "SPAct supp. C.2; " + _S_ANON + "parameters_SSL.py:17-18",
        SPACT,
        "image_size",
        "112",
        "same as the paper and parameters_SSL.py; the minimax's loaders import "
        "anonymization_training/parameters_BL.py, whose 128 is marked 'For Attention "
        "Visualization' (:20-22), against 112 in its initialisation copy",
    ),
    Setting(
        "spact",
        "frames per clip",
        "16",
        "SPAct supp. C.2; " + _S_ANON + "parameters_SSL.py:3",
        SPACT,
        "clip_length",
        "16",
    ),
    Setting(
        "spact",
        "frame skip",
        "2",
        "SPAct supp. C.2; " + _S_ANON + "parameters_SSL.py:11",
        SPACT,
        "clip_stride",
        "2",
    ),
    Setting(
        "spact",
        "videos shorter than a clip",
        "the clip from frame 0, its last index clamped to the video's last frame, then padded "
        "with itself reversed; a video of 8 clip frames or fewer fails and leaves the batch "
        "(test clips padded alike)",
        _S_ANON + "dl_ft_nov.py:94-110, 151-154, 340",
        SPACT,
        "short_videos",
        "mirror",
        "the clip turns back through its own frames (and forward again where it must), "
        "without reading the video's last frame once more before turning; no clip is dropped",
    ),
    Setting(
        "spact",
        "decoded frames",
        "not stated in the paper; authors' code crops the original 320 x 240 frames",
        _S_ANON + "parameters_SSL.py:20-21",
        SPACT,
        "frame_size",
        "128",
        "our choice: frames decoded once at a short side of 128 px, their aspect kept "
        "(`prepare --short_side`, the memory of the cache; a smaller cache is refused), so "
        "the crops are cut from 128-px frames, not 240-px ones (a cache at --short_side 240, "
        "or the files, give theirs), anywhere in the 4:3 frame: theirs draw x0 below "
        "320 (1 - side) for a square 240 x side wide (dl_ft_nov.py:123, 174), so their crops "
        "never reach the frame's right 48-80 px, a slip we do not copy; from 128-px frames a "
        "crop under 0.875 of the side (about 69 % of the training crops, and the test clips' "
        "0.8) is up-sampled to 112, where all of theirs are down-sampled: softer inputs for "
        "f_T and the attackers alike",
    ),
    Setting(
        "spact",
        "random crop side",
        "0.6-1.0 of the frame height, same for every frame",
        "SPAct supp. C.2; " + _S_ANON + "dl_ft_nov.py:122",
        SPACT,
        "crop_min_side",
        "0.6",
    ),
    Setting(
        "spact",
        "horizontal flip",
        "p = 0.5 per clip",
        _S_ANON + "dl_ft_nov.py:191",
        SPACT,
        "flip_probability",
        "0.5",
    ),
    Setting(
        "spact",
        "random erase",
        "p = 0.25 per clip: a black rectangle, each side 9-18 px of the loaders' 128 (reso_h, "
        "reso_w of parameters_BL.py), its corner anywhere in the frame",
        _S_ANON + "dl_ft_nov.py:10, 50, 118-119, 133-134, 191, 196-197; parameters_BL.py:21-22",
        SPACT,
        "erase_probability",
        "0.25",
        "same probability, sides and fill (with --supervised_augmentation=spact, the sides as "
        "fractions of the frame); as theirs, the erase reads the flip's draw, so a flipped "
        "clip is never erased",
    ),
    Setting(
        "spact",
        "colour jitter, grayscale",
        "supervised: grayscale 'with less strength' (no jitter named); the authors' loaders, "
        "per clip: contrast on 12.5 %, hue, saturation and brightness each on 15 % of clips "
        "(factors 0.9-1.1, hue +-0.05), 10 % grayscale, a gamma of 0.85-1.15 on 3/4 of those",
        "SPAct supp. C.2; " + _S_ANON + "dl_ft_nov.py:117-130, 177-190; dl_vispr.py:89-102, "
        "136-149",
        SPACT,
        "supervised_augmentation",
        "spact",
        "same kinds, rates and ranges, on action clips and labelled privacy images; ours "
        "composes the ops in one order (theirs moves contrast after brightness in half its "
        "draws: the same map here, to 1.5e-6, where every op is linear and keeps the grey "
        "axis; their rounding to bytes and clipping after each op is what the order changes); "
        "as theirs, contrast pulls each frame to its own mean luminance (theirs rounded to a "
        "whole grey level); the hue is theirs, torchvision's shift of the HSV hue (before "
        "2026-12-07 a turn of YIQ's IQ plane: on real frames with all four ops drawn, a mean "
        "0.0072 per pixel from their ops in float, 0.0002 now)",
    ),
    Setting(
        "spact",
        "privacy image crop",
        "random crop and scaling (supp. C.2); the authors' loaders: 0.6-1.0 of the image's "
        "height and of its width (its aspect kept), resized to 112 x 112",
        "SPAct supp. C.2; " + _S_ANON + "dl_vispr.py:94-96, 133; dl_vispr_ssl.py:95-97, 138",
        SPACT,
        "supervised_augmentation",
        "spact",
        "same, for the labelled images (the contrastive views: next row)",
    ),
    Setting(
        "spact",
        "contrastive views' augmentation",
        "SimCLR's strengths: crops, colour jitter, cut-out, colour drop (supp. C.2); the "
        "authors' minimax loader: the supervised loaders' light ops on each view, both views "
        "cropped from one corner",
        "SPAct supp. C.2; " + _S_ANON + "dl_vispr_ssl.py:90-114, 132-163; "
        "train_ssl_minimax2.py:24, 443",
        SPACT,
        "contrastive_augmentation",
        "simclr",
        "the paper's: SimCLR's random resized crop (area 8-100 % of the image, aspect 3/4-4/3, "
        "as torchvision's RandomResizedCrop; before 2026-12-01 a side of 28-100 % of the short "
        "side, smaller crops), jitter 0.8/0.8/0.8/0.2 on 80 %, 20 % colour drop, cut-out (the "
        "HSV hue shift first, then brightness, contrast and saturation fused into one colour "
        "map, clipped to [0, 1] once, where torchvision's ColorJitter takes a random order and "
        "clips after each: on real frames a mean 0.009 per pixel apart, 0.019 before "
        "2026-12-07, when the hue turned YIQ's IQ plane; ours a little milder where a "
        "brightened image loses contrast); the code's light views are "
        "--contrastive_augmentation=spact (as theirs, "
        "both crops from one corner, the second black where it overruns the image)",
    ),
    Setting(
        "spact",
        "action clips per batch",
        "24",
        _S_ANON + "parameters_SSL.py:43",
        SPACT,
        "batch_size",
        "24",
    ),
    Setting(
        "spact",
        "privacy images per batch",
        "64 (two views each)",
        _S_ANON + "parameters_SSL.py:46",
        SPACT,
        "privacy_batch_size",
        "64",
    ),
    Setting(
        "spact",
        "L_B views",
        "two frames of the same anonymized clip, picked by a temporal sampler; the authors' "
        "code: two augmented views of each privacy image only",
        "SPAct Sec. 3.2.2, Fig. 3, Table 4; " + _S_ANON + "train_ssl_minimax2.py:75",
        SPACT,
        "contrastive_views",
        "images",
        "the authors' code (the code the reported numbers came from; `--contrastive_views="
        "frames` or `both` gives the paper's frame pairs)",
    ),
    # SPAct: models.
    Setting(
        "spact",
        "f_A",
        "UNet (milesial), 3 output channels",
        "SPAct supp. C.1",
        SPACT,
        "anonymizer",
        "unet",
    ),
    Setting("spact", "f_T", "R3D-18", "SPAct Sec. 5.2", SPACT, "action_model", "r3d_18_spact"),
    Setting("spact", "f_B", "ResNet-50", "SPAct Sec. 5.2", SPACT, "privacy_backbone", "resnet50"),
    Setting(
        "spact",
        "f_T initial weights",
        "not stated for the main results (supp. D.2 adds Kinetics-400 starts for target models "
        "only); the authors' code: --kin_pretrained off by default, so the minimax loads their "
        "f_T initialisation's model_50 into an R3D-18 built without weights (that run's start "
        "is not released), not torchvision's Kinetics-400 weights; but the sbatch line left at "
        "the file's top passes --kin_pretrained (f_T from torchvision's Kinetics-400 R3D-18, "
        "layer4's first and shortcut convolutions rebuilt at random, a new head, no f_T "
        "initialisation), beside a commented-out tenth of the rates for it",
        "SPAct supp. C.4, D.2; " + _S_ANON + "train_ssl_minimax2.py:2, 393-396, 407-410, 603; "
        "model.py:105-111, 134-138",
        SPACT,
        "action_weights",
        "",
        "same as the authors' default: random weights (no file), then the f_T initialisation; "
        "their launch line's Kinetics-400 start is --action_weights with a converted "
        "torchvision R3D-18 (`convert --arch r3d_18`) and --action_init_epochs=0, a stronger "
        "f_T under f_A than ours if that is how the tables were run",
    ),
    Setting(
        "spact",
        "f_B initial weights",
        "not stated (supp. C.4: NT-Xent for 400 epochs); the authors' minimax loads their "
        "NT-Xent run's model_160.pth (that run's start is not released) into a ResNet-50 and "
        "MLP whose reading of VISSL's SimCLR ImageNet checkpoint is commented out for the trunk "
        "(and for the file itself, so the head's reading, left in, stops on an undefined name)",
        "SPAct supp. C.4; " + _S_ANON + "model.py:17-31, 60-66, 78-83; train_ssl_minimax2.py:398",
        SPACT,
        "privacy_weights",
        "",
        "ours: random weights (no file), then the NT-Xent initialisation, as the trunk the "
        "code builds; `--privacy_weights=weights/simclr_resnet50_imagenet.keras` starts from "
        "the SimCLR checkpoint the code names, as the penalty config does",
    ),
    Setting(
        "spact",
        "resize of a crop",
        "not stated; the authors' loaders crop whole pixels and resize with torchvision's "
        "`resized_crop` / `resize`: video frames as PIL images (bilinear, antialiased where "
        "it shrinks), VISPR's images as uint8 tensors (`torchvision.io.read_image`), which "
        "torchvision before 0.17 (their `torchvision.models.utils` import needs one) resizes "
        "bilinear without antialias, from the image's full resolution",
        _S_ANON + "dl_ft_nov.py:173-174, 356; dl_vispr_ssl.py:78, 138, 170; dl_vispr.py:77, 133, "
        "164-165; model.py:15",
        SPACT,
        "",
        "whole-pixel crops resized by TensorFlow's antialiased bilinear resize "
        "(`augment.crop_and_resize`; equal to PyTorch's `interpolate(antialias=True)` within "
        "1e-6, to PIL's within its uint8 rounding), in every training and test view, images "
        "included",
        "same for the video frames; our choice for the privacy images: one resize for every "
        "view, and theirs aliases an image several times larger than 112 px with no filter, "
        "which a cache at 192 px (`--privacy_image_side`) could not repeat; before "
        "2026-12-05 `tf.image.crop_and_resize`: no antialias, the box's corners on pixel "
        "centres, about 0.019 from PIL on average over a 240-px frame cut to 112",
    ),
    Setting(
        "spact",
        "models' random start",
        "not stated; the authors' code builds torchvision's R3D-18 and ResNet-50 (convolutions "
        "N(0, 2 / fan_out): kaiming_normal_, fan_out; BatchNorm 1 and 0) and puts nn.Linear "
        "heads on them (weights and bias uniform in +-1 / sqrt(fan_in)); layer4's first "
        "convolution and shortcut, which it rebuilds, take nn.Conv3d's default start",
        _S_ANON + "model.py:21, 44-46, 88, 106-111, 134",
        SPACT,
        "",
        "torchvision's: the convolutions of every ResNet-layout model (R3D-18, R(2+1)D-18, "
        "R3D-50, I3D-ResNet-50, the 2-D ResNets) N(0, 2 / fan_out), their Dense heads and "
        "projection heads as nn.Linear (`models/layers.py`); `r3d_18_spact`'s rebuilt "
        "layer4 convolution and shortcut as nn.Conv3d",
        "same (`r3d_18_spact` starts the two rebuilt layers as nn.Conv3d since 2026-12-05; "
        "kaiming_normal_ before); before 2026-12-05 Keras' Glorot-uniform weights and zero "
        "biases. The UNet keeps Keras' "
        "defaults (milesial's: PyTorch's default start), and the f_A initialisation trains it "
        "to reproduce its input before the minimax",
    ),
    Setting(
        "spact",
        "projection hidden width",
        "2048",
        "SPAct supp. C.1",
        SPACT,
        "projection_hidden",
        "2048",
    ),
    Setting(
        "spact",
        "projection output width",
        "128",
        "SPAct supp. C.1, C.3",
        SPACT,
        "projection_dim",
        "128",
    ),
    # SPAct: initialisation.
    Setting(
        "spact",
        "f_A identity epochs",
        "100",
        "SPAct supp. C.4; " + _S_ANON + "train_ssl_minimax2.py:392",
        SPACT,
        "identity_epochs",
        "100",
        "same as the paper; the f_A the authors' minimax loads is the checkpoint their identity "
        "run saved at epoch 20, its lowest loss by then in the pass the script calls validation, "
        "which reads the training loader, not the test one it builds (recon1/"
        "model_20_bestAcc_0.0100.pth; train_recon.py:251-266)",
    ),
    Setting(
        "spact",
        "f_A identity learning rate",
        "1e-3 (Adam)",
        "SPAct supp. C.3; " + _S_INIT + "parameters_BL.py:6",
        SPACT,
        "identity_lr",
        "1e-3",
    ),
    Setting(
        "spact",
        "f_A identity warm-up",
        "5 epochs, linear",
        _S_INIT + "parameters_BL.py:26-27; train_recon.py:191-192",
        SPACT,
        "identity_warmup_epochs",
        "5",
        "same length; ours rises by step (from 1 / steps of the rate), the authors' code sets "
        "it per epoch at 0.01, 0.26, 0.51, 0.75 and 1 of it (linspace(0.01, 1, 5))",
    ),
    Setting(
        "spact",
        "f_A identity data",
        "not stated; the authors' code: VISPR's training images and 1 % of UCF101's training "
        "frames, shuffled together, 32 images a batch",
        _S_INIT + "dl_reconstruction.py:29-56; parameters_BL.py:5; train_recon.py:158-161",
        SPACT,
        "",
        "each batch: two frames of each of --batch_size clips and the two views of each of "
        "--privacy_batch_size images (176 at 24 / 64)",
        "our choice: the minimax's batches, so both domains are in every batch as in theirs, "
        "in other proportions (three in four of ours are VISPR views) and in batches 5.5 times "
        "larger; our epoch is one pass over the action videos (UCF101: 397 batches, about "
        "70,000 images), theirs one over VISPR's 10,000 training images and 1 % of UCF101's "
        "training frames (about 28,000), so --identity_epochs=100 shows f_A about 2.5 times "
        "as many images; our VISPR views are the minimax's (--contrastive_augmentation), "
        "theirs mild colour changes and a 5-10 px erase (dl_reconstruction.py:97-110)",
    ),
    Setting(
        "spact",
        "f_T init epochs",
        "150",
        "SPAct supp. C.4; " + _S_ANON + "train_ssl_minimax2.py:396",
        SPACT,
        "action_init_epochs",
        "150",
        "same as the paper; the f_T the authors' minimax loads is named after epoch 50 "
        "(model_50_bestAcc_0.6262.pth; the f_T initialisation's code is not released)",
    ),
    Setting(
        "spact",
        "f_T init learning rate",
        "1e-3 (Adam)",
        "SPAct supp. C.3",
        SPACT,
        "action_init_lr",
        "1e-3",
    ),
    Setting(
        "spact",
        "f_B init epochs (NT-Xent)",
        "400",
        "SPAct supp. C.4; " + _S_ANON + "train_ssl_minimax2.py:398",
        SPACT,
        "privacy_init_epochs",
        "400",
        "same as the paper; the f_B the authors' minimax loads is named after epoch 160 "
        "(SSL_unet_recon/model_160.pth; the f_B initialisation's code is not released)",
    ),
    Setting(
        "spact",
        "f_B init epoch length",
        "not stated (the initialisation's code is not released)",
        "SPAct supp. C.4",
        SPACT,
        "privacy_init_steps_per_epoch",
        "150",
        "ours: one pass over VISPR's training images as the authors' minimax reads them "
        "(9,578 at 64: " + _S_ANON + "parameters_SSL.py:45-46), the only data f_B's "
        "initialisation reads; before 2026-11-30 a pass over the action videos, 397 batches "
        "for UCF101 (1,060 VISPR passes in 400 epochs)",
    ),
    Setting(
        "spact",
        "f_B init learning rate",
        "1e-3 (Adam)",
        "SPAct supp. C.3",
        SPACT,
        "privacy_init_lr",
        "1e-3",
    ),
    Setting(
        "spact",
        "f_A identity learning-rate drop",
        "to 1/10 on a loss plateau",
        "SPAct supp. C.3; " + _S_INIT + "train_recon.py:188, 212-224 (1/5)",
        SPACT,
        "identity_lr_drop",
        "1",
        "same as the authors' code, which never drops: train_recon.py keeps its best loss as a "
        "maximum, from 1000 (lines 188, 223-224), and drops only on a loss above it: constant "
        "after the warm-up",
    ),
    Setting(
        "spact",
        "f_T and f_B init learning-rate drop",
        "to 1/10 on a loss plateau",
        "SPAct supp. C.3; " + _S_INIT + "parameters_BL.py:30 (lr_patience 0)",
        SPACT,
        "init_lr_drop",
        "10",
        "same as the paper (the initialisations' code is not released), with the authors' "
        "lr_patience 0: a drop after each epoch without a new lowest loss, no floor, as "
        "TeD-SPAD's train_privacy.py:205-213 (a noisy loss can drop it by orders of magnitude: "
        "each drop is printed; --init_lr_patience waits longer); before 2026-12-01 constant, "
        "from the identity code's rule",
    ),
    Setting(
        "spact",
        "target models' learning-rate drop",
        "to 1/10 on a loss plateau",
        "SPAct supp. C.3",
        SPACT,
        "eval_lr_drop",
        "10",
        "same as the paper (the authors' evaluation code is not released; their "
        "initialisations' parameter files give / 5 after a 5-epoch warm-up: "
        + _S_INIT
        + "parameters_BL.py:26-31)",
    ),
    Setting(
        "spact",
        "target models' plateau patience",
        "not given",
        _S_INIT + "parameters_BL.py:30; " + _TED + "privacy_training/params_privacy.py:22",
        SPACT,
        "eval_lr_patience",
        "0",
        "the authors' lr_patience 0: a drop after the first epoch without a new lowest loss",
    ),
    Setting(
        "spact",
        "Adam's epsilon",
        "not stated; the authors' code: PyTorch's default, 1e-8 added to sqrt(v) after its bias "
        "correction",
        _S_ANON + "train_ssl_minimax2.py:430-432; " + _S_INIT + "train_recon.py:156",
        SPACT,
        "",
        "Keras' default, 1e-7 added before the bias correction: as PyTorch's epsilon of "
        "1e-7 / sqrt(1 - 0.999^t) at step t (3e-6 at the first step, 1e-7 from a few thousand)",
        "ours: Keras' default, the optimizers of every method and target model alike (no flag)",
    ),
    Setting(
        "spact",
        "target action model batch",
        "not stated (the evaluation's code is not released)",
        "SPAct supp. C.4",
        SPACT,
        "eval_action_batch_size",
        "0",
        "ours: the minimax's 24 clips (0: --batch_size)",
    ),
    Setting(
        "spact",
        "target privacy model batch",
        "not stated (the evaluation's code is not released)",
        "SPAct supp. C.4; " + _TED + "privacy_training/params_privacy.py:14",
        SPACT,
        "eval_privacy_batch_size",
        "0",
        "ours: the minimax's 64 images (0: --privacy_batch_size); the same authors' later "
        "TeD-SPAD evaluation trains its target privacy model at 32",
    ),
    Setting(
        "spact",
        "f_T and f_B initialisations' batches",
        "not stated (the initialisations' code is not released)",
        "SPAct supp. C.4",
        SPACT,
        "",
        "the minimax's batches: 24 clips, 64 images (two views each for f_B)",
        "ours: the minimax's batches",
    ),
    Setting(
        "spact",
        "stopping rules th_A0, th_T0, th_B0, th_Bmax",
        "stop each phase at a loss threshold (no value given); the authors' code: no threshold, "
        "a fixed number of epochs",
        "SPAct Sec. 3.3, Eq. 6-9; " + _S_ANON + "train_ssl_minimax2.py:468",
        SPACT,
        "",
        "fixed epoch counts",
        "same as the authors' code (no flag: the paper gives no threshold values); supp. C.4 "
        "gives the epochs we use",
    ),
    # SPAct: minimax.
    Setting(
        "spact",
        "minimax epochs",
        "100",
        "SPAct supp. C.4",
        SPACT,
        "minimax_epochs",
        "100",
        "same as the paper (the authors' file says 300: " + _S_ANON + "parameters_SSL.py:7)",
    ),
    Setting(
        "spact",
        "UCF101 minimax epoch length",
        "not stated; the authors' loop: zip(VISPR, UCF101) ends with the shorter, VISPR's 150 "
        "batches of 64 (9,578 images) against UCF101's 397 of 24: 75 f_A updates and 75 "
        "f_B / f_T updates",
        _S_ANON + "train_ssl_minimax2.py:57, 438-446; parameters_SSL.py:42-46",
        ("ucf101_vispr",),
        "minimax_steps_per_epoch",
        "150",
        "same (75 steps of two batches); before 2026-11-30 one pass over UCF101, 2.6 times "
        "as many updates",
    ),
    Setting(
        "spact",
        "HMDB51 minimax epoch length",
        "not stated (the released code has no HMDB51 loader); the UCF101 loop's zip, given "
        "HMDB51, would end with its 149 batches of 24 (3,570 videos), before VISPR's 150",
        _S_ANON + "train_ssl_minimax2.py:57; parameters_SSL.py:42-46",
        ("hmdb_vispr",),
        "minimax_steps_per_epoch",
        "0",
        "same: one pass over HMDB51 (148 full batches: ours leaves out the last 18 videos, a "
        "new shuffle each epoch)",
    ),
    Setting(
        "spact",
        "f_A's batches in its update",
        "not stated; the authors' code calls f_A in training mode on the first views, the "
        "second views and the clips' frames in turn: BatchNorm normalises each by its own "
        "statistics and updates its running averages after each",
        _S_ANON + "train_ssl_minimax2.py:71, 75, 80",
        SPACT,
        "",
        "three calls, in that order",
        "same as the authors' code; the f_T and f_B update, where f_A runs in inference mode, "
        "anonymizes all of them in one call (the same outputs)",
    ),
    Setting(
        "spact",
        "f_B's batches in its update",
        "not stated; the authors' code calls f_B in training mode on the anonymized first views, "
        "then the second views: BatchNorm normalises each by its own statistics",
        _S_ANON + "train_ssl_minimax2.py:106, 108",
        SPACT,
        "",
        "two calls, in that order",
        "same as the authors' code, and in f_B's NT-Xent initialisation (its code is not released)",
    ),
    Setting(
        "spact",
        "f_A learning rate",
        _MINIMAX_LR,
        "SPAct supp. C.3; " + _S_ANON + "parameters_SSL.py:6, 38",
        SPACT,
        "anonymizer_lr",
        "1e-4",
        _AS_THE_CODE,
    ),
    Setting(
        "spact",
        "f_T learning rate",
        _MINIMAX_LR,
        "SPAct supp. C.3; " + _S_ANON + "parameters_SSL.py:6, 40",
        SPACT,
        "action_lr",
        "1e-4",
        _AS_THE_CODE,
    ),
    Setting(
        "spact",
        "f_B learning rate",
        _MINIMAX_LR,
        "SPAct supp. C.3; " + _S_ANON + "parameters_SSL.py:6, 39",
        SPACT,
        "privacy_lr",
        "1e-4",
        _AS_THE_CODE,
    ),
    Setting(
        "spact",
        "w_T",
        "1",
        _S_ANON + "parameters_SSL.py:36; train_ssl_minimax2.py:88",
        SPACT,
        "action_weight",
        "1.0",
    ),
    Setting(
        "spact",
        "omega (w_B)",
        "paper: omega in (0, 1); code: 1",
        "SPAct Eq. 9; " + _S_ANON + "train_ssl_minimax2.py:88",
        SPACT,
        "privacy_weight",
        "1.0",
        "same as the code (the paper gives no value)",
    ),
    Setting(
        "spact",
        "NT-Xent temperature",
        "0.1",
        "SPAct supp. C.3; " + _S_ANON + "train_ssl_minimax2.py:83",
        SPACT,
        "temperature",
        "0.1",
    ),
    # SPAct: evaluation.
    Setting(
        "spact",
        "target action model",
        "R3D-18",
        "SPAct Sec. 5.2, supp. C.4",
        SPACT,
        "eval_action_model",
        "r3d_18",
        "same as the paper: torchvision's R3D-18 (the authors' evaluation code is not "
        "released; every R3D-18 their minimax builds keeps time in layer4, as our f_T, "
        "r3d_18_spact: " + _S_ANON + "model.py:108-109)",
    ),
    Setting(
        "spact",
        "target models' start",
        "not stated for the tables; supp. D.2's study trains target action models from "
        "scratch (R3D-18, C3D, R(2+1)D-18) and one from Kinetics-400, an R(2+1)D-18 (its "
        "Table 3; D.4's Table 6 the same). SPAct's evaluation code is not released",
        "SPAct supp. D.2",
        SPACT,
        "eval_action_weights",
        "",
        "ours: random weights (no file), the start of the row above; "
        "`--eval_action_weights` / `--eval_privacy_weights` take converted files for D.2's "
        "study (ucf101_vispr_pretrained_targets.cfg)",
    ),
    Setting(
        "spact",
        "target privacy model",
        "ResNet-50",
        "SPAct Sec. 5.2, supp. C.4",
        SPACT,
        "eval_privacy_model",
        "resnet50",
    ),
    Setting(
        "spact",
        "target action model epochs",
        "150",
        "SPAct supp. C.4",
        SPACT,
        "eval_action_epochs",
        "150",
    ),
    Setting(
        "spact",
        "target privacy model epochs",
        "150",
        "SPAct supp. C.4",
        SPACT,
        "eval_privacy_epochs",
        "150",
    ),
    Setting(
        "spact",
        "target models' learning rate",
        "1e-3 (Adam)",
        "SPAct supp. C.3",
        SPACT,
        "eval_lr",
        "1e-3",
    ),
    Setting(
        "spact",
        "clips per test video",
        "10 equidistant",
        "SPAct supp. C.5",
        SPACT,
        "eval_clips",
        "10",
        "same as the paper (the authors' validation in the minimax: 5, "
        + _S_ANON
        + "parameters_SSL.py:12). Ours start from the first frame to the last start whose "
        "clip fits (N - (L - 1) s - 1); the authors' loader spreads them to N - L s - 10 "
        "(dl_ft_nov.py:281-284), a margin for OpenCV's estimated frame count, which our "
        "decoders count exactly: their last clip ends 11 frames before ours",
    ),
    Setting(
        "spact",
        "test clip view",
        "not stated; the authors' test loader as their validation calls it: the centred "
        "square of 0.8 of the frame's height (192 px of 240), resized to 128 (the reso_h / "
        "reso_w of parameters_BL.py, which dl_ft_nov.py imports)",
        _S_ANON + "parameters_SSL.py:15; train_ssl_minimax2.py:496-498; dl_ft_nov.py:10, 354-356; "
        "parameters_BL.py:20-22",
        SPACT,
        "eval_action_crop",
        "0.8",
        "same crop as the authors' code (before 2026-11-30 1.0: the loader's default argument, "
        "which their call overrides), resized to the paper's 112 (--image_size; the input "
        "side row)",
    ),
    Setting(
        "spact",
        "test image view",
        "not stated; the authors' VISPR test loader: the centred square of the whole short "
        "side, resized to 128 (parameters_BL.py's reso_h / reso_w)",
        _S_ANON + "dl_vispr.py:161-166; parameters_BL.py:20-22",
        SPACT,
        "",
        "the centred square of the whole short side, resized to --image_size "
        "(`augment.evaluation_clip`; the f'_B tests and the raw-trained attacker's alike)",
        "same view as the authors' code, at the paper's 112 (the input side row)",
    ),
    Setting(
        "spact",
        "raw-trained attacker",
        "a ResNet-50 trained on the raw training images, tested on the anonymized test images "
        "(D.1; Table 2's raw row is Table 4's from-scratch ResNet-50); D.4's Table 6 reads "
        "ResNet-18 / 50 / 101 so trained, from scratch",
        "SPAct supp. D.1, D.4, Tables 2, 4, 6",
        SPACT,
        "",
        "the raw row's f'_B: trained once on the raw images with every f'_B setting "
        "(architecture, start file, epochs, rate), kept as raw_attacker_<model>.keras in the "
        "evaluation folder and tested on each method's anonymized test images; with "
        "--eval_privacy_test_epochs, at its best raw test cMAP",
        "same (from scratch in these configs); ucf101_vispr_pretrained_targets.cfg's starts "
        "from ImageNet as its f'_B does: Table 6 is that config with --eval_privacy_weights= "
        "(its header)",
    ),
    Setting(
        "spact",
        "target models' reported score",
        "not stated; SPAct's evaluation code is not released, but its minimax tests f_T(f_A) "
        "on UCF101's testlist01 at every epoch from 50 and loads checkpoints named by their "
        "best test accuracy and AP (model_50_bestAcc_0.6262.pth, model_57_bestAP_0.6271.pth); "
        "TeD-SPAD, the authors' later code, keeps the best test score's checkpoint",
        _S_ANON
        + "train_ssl_minimax2.py:396, 400, 450, 477-554; "
        + _TED
        + "action_training/train_anonymized_action.py:335-403; "
        "privacy_training/train_privacy.py:180, 216-236",
        SPACT,
        "",
        "the last epoch's models, each tested once",
        "no choice is made on the test split: a best of many test scores stands above a last "
        "epoch's for action top-1 and for the attacker's cMAP alike, so the authors' figures "
        "may stand above ours by that margin on both axes; --eval_action_test_epochs and "
        "--eval_privacy_test_epochs make that choice, for comparison with their tables",
    ),
    Setting(
        "spact",
        "anonymizer checkpoint evaluated",
        "not stated; the authors' minimax saves f_A, f_B and f_T every 3rd epoch and its latest "
        "epoch, and tests f_T(f_A) on UCF101's testlist01 at the epochs of its val_array (every "
        "epoch from 50), printing the accuracy: the tables' checkpoint may have been chosen by "
        "it",
        _S_ANON + "train_ssl_minimax2.py:450, 477-551, 556-575",
        SPACT,
        "",
        "the minimax's last weights",
        "ours: one anonymizer, the last; nothing is chosen on test scores, so an f_A the "
        "authors chose by its test accuracy would stand above ours on the action axis",
    ),
    Setting(
        "spact",
        "down-sampling baselines",
        "not stated (Table 1's Downsample-2x / -4x rows); VITA's code resizes each frame "
        "bilinearly down by the factor and back up (no anti-aliasing on the way down)",
        "SPAct Table 1, supp. C.6; VITA PA-HMDB51-VISPR-exp/utils.py:221-232",
        SPACT,
        "",
        "each frame area-averaged down by the factor and bilinearly back up, in front "
        "of the target models (`evaluation/baselines.py`, InputDownsample)",
        "ours: area averaging (what a camera's scaler or OpenCV's INTER_AREA does); VITA's "
        "bilinear down-sampling without a filter skips pixels and aliases, leaving sharper "
        "edges than ours at the same factor",
    ),
    Setting(
        "spact",
        "pretrained target models' input",
        "not stated (supp. D.2: f'_T an R(2+1)D-18 from Kinetics-400; D.3: f'_B from "
        "ImageNet); the authors' "
        "later code feeds them [0, 1] frames without the weights' normalisation and divides "
        "the rate by 5 after the warm-up ('Pretrained drop')",
        "SPAct supp. D.2, D.3, Tables 3, 5; "
        + _TED
        + "aux_code/vispr_dl.py:129, model_loaders.py:157-167; "
        "privacy_training/train_privacy.py:198",
        ("ucf101_vispr_pretrained_targets",),
        "",
        "each weight file's own normalisation (ImageNet or Kinetics mean and std, "
        "`models/pretrained.py`) in front of the model; --eval_lr=1e-3 as the other targets",
        "ours: the weights see inputs as they were trained on; the authors' [0, 1] inputs "
        "shift every first-layer activation, which fine-tuning must undo",
    ),
    Setting(
        "spact",
        "privacy images' resolution",
        "not stated; the authors crop VISPR's full-resolution images, then resize the crop to "
        "128 (the reso_h / reso_w of parameters_BL.py, which both VISPR loaders import)",
        _S_ANON + "dl_vispr.py:10, 131-133, 164-168; dl_vispr_ssl.py:10, 138; "
        "parameters_BL.py:20-22",
        SPACT,
        "privacy_image_side",
        "192",
        "our choice: the images cached at a short side of 192 px (the memory of the cache; a "
        "prepared VISPR cache below it is refused, the files give theirs), so a crop of 0.6 "
        "(115 px) is resized down to the paper's 112 (theirs to 128); before 2026-11-30 "
        "evaluate.py cached them at --frame_size (128), and a crop of 0.6 was up-sampled from "
        "77 px",
    ),
    Setting(
        "spact",
        "cMAP and F1 over attributes without a positive test image",
        "not stated; the authors' validation averages sklearn's per-attribute AP and F1 over "
        "every attribute (one without a positive counts as 0 in each)",
        _S_ANON + "train_ssl_minimax2.py:251, 260-262",
        SPACT,
        "",
        "the means over the attributes with a positive test image; the report lists those left out",
        "ours: an AP without a positive is undefined, so it is left out and named, from F1 too "
        "(both metrics average the same attributes; none on "
        "VISPR-1's test split; it matters for small or novel attribute sets; a bootstrap "
        "resample lacking a positive of an averaged attribute is left out as undefined)",
    ),
    Setting(
        "spact",
        "frames' channel order",
        "not stated; the authors' video loader keeps OpenCV's BGR, their VISPR loader reads RGB",
        _S_ANON + "dl_ft_nov.py:139, 173; dl_vispr_ssl.py:78",
        SPACT,
        "",
        "RGB for videos and images",
        "ours: RGB throughout; their f_A and f_B meet the two datasets with swapped channels, "
        "a slip of their code we do not copy",
    ),
    Setting(
        "spact",
        "F1 threshold",
        "not stated; the authors' validation: 0.5 on the logits (0.62 in probability)",
        _S_ANON + "train_ssl_minimax2.py:251",
        SPACT,
        "eval_f1_threshold",
        "0.5",
        "ours: macro F1 at probability 0.5 (their threshold on logits reads as a slip; the "
        "penalty code's privacy_training/train_privacy.py:110 and TeD-SPAD's :104 have it too); "
        "--eval_f1_threshold=0.62246 scores F1 as their code does, to compare with their "
        "tables; cMAP does not depend on it",
    ),
    # VITA.
    Setting(
        "vita",
        "f_d",
        "the residual degradation network",
        "VITA modules/degradNet.py:5-19, 49-56; VITA input_data.py:40",
        VITA,
        "anonymizer",
        "vita",
        "same function: theirs reads frames in 0..255 in the minimax (its pre-training divides "
        "them by 255, pretrain_fd.py:124) and writes (tanh + 1) * 127.5, ours "
        "reads and writes [0, 1], its first instance normalisation's epsilon 1e-3 / 255^2 so "
        "that it normalises as theirs does (before 2026-12-06 1e-3, 255^2 times theirs "
        "against the first convolution's variance: it damped dark and low-contrast frames)",
    ),
    Setting(
        "vita",
        "f_d random start",
        "not stated; the authors' code: every convolution's weights from a truncated normal of "
        "standard deviation 0.1 (seed 1)",
        "VITA modules/degradNet.py:3, 66",
        VITA,
        "",
        "Keras' defaults (Glorot-uniform kernels, zero biases)",
        "ours: the identity initialisation trains f_d from either start before the minimax "
        "(theirs as ours)",
    ),
    Setting(
        "vita",
        "HMDB51 action split",
        "not stated; the authors' records: PA-HMDB51's privacy split, whose test list is the "
        "PA-HMDB51 videos (506 names) and whose training list is every other HMDB51 video "
        "(about 6,260); f_T's threshold is checked, and eval_fT.py's accuracy taken, on those "
        "test videos",
        "VITA data-preparation/HMDB51/convert2records.py:77-83; data-preparation/PA_HMDB51/"
        "privacy_split/privacy_train_test_split.py:20-39; VITA utils.py:140-141, 153-160; "
        "adversarial_training/eval/eval_fT.py:53-55",
        ("hmdb_vispr_vita",),
        "action_split",
        "1",
        "ours: HMDB51's official split 1 (about 3,570 training videos, every 10th held out for "
        "f_T's checks) and its test list, SPAct's protocol, with which SPAct supp. C.6 "
        "evaluated VITA; the authors' f_T trains on about 1.75 times the videos and is tested "
        "on others, so their accuracies do not compare with ours",
    ),
    Setting(
        "vita",
        "clips",
        "not stated; the authors' records: every run of 16 consecutive frames (no skip) of "
        "each video, each frame resized to 160 x 120 (bicubic), the centre 112 x 112 cut from "
        "it (0.93 of the height, 0.7 of the width), no other resize",
        "VITA data-preparation/HMDB51/VideoReader.py:40-65; convert2records.py:78; VITA "
        "input_data.py:26-30",
        VITA,
        "clip_stride",
        "2",
        "ours: the SPAct config's clips (SPAct supp. C.6 ran VITA with SPAct's data): a frame "
        "skip of 2 (about 1 s of video where theirs cover 0.5 s), one random clip of each "
        "video a pass (theirs every clip, so a long video weighs more), square crops of frames "
        "at a 128-px short side resized to 112",
    ),
    Setting(
        "vita",
        "action metric",
        "not stated; the authors' eval_fT.py: the clip-level accuracy of the adversarially "
        "trained f_T over every 16-frame clip of the test videos",
        "VITA adversarial_training/eval/eval_fT.py:50-55, 84-92",
        VITA,
        "eval_clips",
        "10",
        "ours: SPAct's video-level top-1 of a fresh f'_T over 10 clips of each test video "
        "(SPAct supp. C.6's protocol); a clip-level accuracy stands below a video-level one "
        "of the same model",
    ),
    Setting(
        "vita",
        "f_T",
        "C3D, from Sports-1M weights",
        "VITA modules/targetNet.py:12-17; common_flags.py:16; adversarial_training/pre_training/"
        "pretrain_fTfd.py:304",
        VITA,
        "action_model",
        "r3d_18_spact",
        "SPAct's R3D-18, as SPAct supp. C.6 compared VITA (the exact same model architectures "
        "as SPAct's)",
    ),
    Setting(
        "vita",
        "gamma",
        "0.5",
        _VITA + "adv_flags.py:21; adv_training.py:81",
        VITA,
        "privacy_weight",
        "0.5",
    ),
    Setting(
        "vita",
        "budget term",
        "per clip: logits averaged over frames, BCE to all ones "
        "averaged over attributes, max over the ensemble; then the batch mean",
        _VITA + "adv_training.py:64-79",
        VITA,
        "budget_loss",
        "max_bce",
    ),
    Setting(
        "vita",
        "budget ensemble",
        "ResNet-V1-50, ResNet-V2-50, MobileNet-V1 1.0, 0.75 (M = 4; the released flags' "
        "default is M = 1, ResNet-V1-50 alone)",
        _VITA + "adv_training.py:116-120; adv_flags.py:8, 17",
        VITA,
        "adversary_models",
        "resnet_v1_50,resnet_v2_50,mobilenet_v1_1.0,mobilenet_v1_0.75",
        "same models, as TF-slim builds them (VITA's nets/: ResNet-V1 strides a stage's last "
        "unit; outputs equal tf_slim's to 4e-6)",
    ),
    Setting(
        "vita",
        "budget models' random start",
        "not stated; the authors' code builds them under TF-slim's arg scopes: the ResNets' "
        "convolutions and logits He normal on fan_in, truncated (variance_scaling_initializer), "
        "MobileNet-V1's truncated normal of std 0.09; the logits' biases 0",
        "VITA nets/nets_factory.py:123; nets/resnet_utils.py:260; nets/mobilenet_v1.py:385, "
        "432, 454; nets/resnet_v1.py:234",
        VITA,
        "",
        "slim's: ResNet-V1 / -V2 convolutions and heads He normal on fan_in, truncated; "
        "MobileNet-V1's truncated normal of std 0.09; biases 0 (`models/layers.py` "
        "slim_variance_scaling, slim_mobilenet_start; `registry.build_privacy_classifier`)",
        "same (slim draws std sqrt(1.3 * 2 / fan_in) before truncating, a variance of 2.01 / "
        "fan_in; Keras' 2 / fan_in exactly); before 2026-12-05 Keras' Glorot uniform. The "
        "meta paper's test attackers of these architectures start alike, and its "
        "Inception-V1 / -V2 as VITA's nets/inception_v1.py:57-59 and inception_v2.py start "
        "them (`models/inception.py`)",
    ),
    Setting(
        "vita",
        "f_d learning rate",
        "1e-4 (Adam)",
        _VITA + "adv_training.py:112",
        VITA,
        "anonymizer_lr",
        "1e-4",
    ),
    Setting(
        "vita",
        "f_T learning rate",
        "1e-5 (Adam)",
        _VITA + "adv_training.py:113",
        VITA,
        "action_lr",
        "1e-5",
    ),
    Setting(
        "vita",
        "f_b learning rate",
        "1e-4 (Adam; the unused --fb_lr flag says 1e-2)",
        _VITA + "adv_training.py:114; adv_flags.py:25",
        VITA,
        "privacy_lr",
        "1e-4",
    ),
    Setting(
        "vita",
        "f_T threshold",
        "0.70 validation accuracy",
        _VITA + "adv_flags.py:27; adv_training.py:399",
        VITA,
        "action_threshold",
        "0.7",
    ),
    Setting(
        "vita",
        "f_T updates per step",
        "after the f_A update: measure f_T's validation accuracy; while below the threshold, "
        "one f_T update on a training batch and measure again",
        _VITA + "adv_training.py:393-406",
        VITA,
        "action_schedule",
        "validation_loop",
        "same loop, bounded below",
    ),
    Setting(
        "vita",
        "f_T update batches",
        "a fresh training batch for each f_T update (update_fT reads its mini-batches from "
        "the training queue)",
        _VITA + "adv_training.py:268-283, 402-404",
        VITA,
        "action_fresh_clips",
        "true",
        "same: --action_max_updates batches of --batch_size clips read with each step, one for "
        "each f_T update the loop may make (those it does not make are read and left)",
    ),
    Setting(
        "vita",
        "bound of the f_T loop",
        "none (`while True`)",
        _VITA + "adv_training.py:393",
        VITA,
        "action_max_updates",
        "10",
        "one fit step has a fixed size: at most 10 f_T updates a step (the loop stops "
        "earlier where f_T reaches the threshold; the log's action_updates says how many ran). "
        "The authors' f_T (C3D from Sports-1M weights) passes 0.7; the configs' R3D-18 from "
        "scratch may never (SPAct's raw-data top-1, video level: 62 % on UCF101, 44 % on "
        "PA-HMDB51): then every step makes the 10 updates, each also moving f_A at f_T's "
        "rate, and the run warns of it at each such epoch's end",
    ),
    Setting(
        "vita",
        "validation clips",
        "clips of the validation queue, which reads the test videos (HMDB51/test): 80 / #GPU "
        "mini-batches of 2 per GPU (160 clips) per accuracy check",
        _VITA + "adv_training.py:394-396; adv_flags.py:34, 53; VITA utils.py:140-141, "
        "153-160; common_flags.py:9",
        VITA,
        "action_validation_every",
        "10",
        "every 10th training video held out of training, so that the test videos stay unseen "
        "until the evaluation; each clip centre-cropped and not augmented, as their queue reads "
        "it (VITA input_data.py:12-13; ours before 2026-12-01: the training augmentation); a "
        "fresh batch of --batch_size (24) clips for each check "
        "(--action_fresh_clips; 160 clips would cost more forward passes per check than the "
        "f_T update it decides)",
    ),
    Setting(
        "vita",
        "budget models in the f_d update",
        "training mode: batch normalisation by the anonymized batch's statistics (is_training "
        "fed True in every update); the moving averages never change in the minimax (its "
        "gradient accumulators run no UPDATE_OPS)",
        _VITA + "adv_training.py:168-170, 253-258; VITA utils.py:96-117",
        VITA,
        "budget_batch_statistics",
        "true",
        "same mode (our budget updates still move their moving averages, which nothing in the "
        "minimax reads); their statistics are each GPU tower's 2 clips (32 frames: "
        "video_batch_size 2, adv_flags.py:34; adv_training.py:129-136), ours the step's "
        "--batch_size clips at once",
    ),
    Setting(
        "vita",
        "f_T step also moves f_d",
        "yes: L_T's gradients for f_T and f_d, applied by f_T's Adam (1e-5)",
        _VITA + "adv_training.py:149, 170",
        VITA,
        "action_moves_anonymizer",
        "true",
        "same (f_A's share by an Adam of its own at --action_lr, as their opt_fT)",
    ),
    Setting(
        "vita",
        "budget-model updates",
        "5 per step, each on fresh privacy batches",
        _VITA + "adv_training.py:409-413",
        VITA,
        "adversary_updates_per_step",
        "5",
    ),
    Setting(
        "vita",
        "budget-model threshold",
        "none",
        _VITA + "adv_training.py:409-413",
        VITA,
        "adversary_threshold",
        "1.0",
        "same (1 = no threshold)",
    ),
    Setting(
        "vita",
        "restarts",
        "optional (off by default), every 200 steps: reload the pre-trained budget models' "
        "weights; their Saver holds the weights alone, so the Adam state goes on",
        _VITA + "adv_flags.py:29, 31; adv_training.py:89, 370-377",
        VITA,
        "restart_every",
        "200",
        "ours on, the authors' restarting option (their default is off); a restart goes back "
        "to the budget models' weights at the start of the minimax (the end of their "
        "pre-training, as theirs), their Adam state goes on (as theirs), and a resumed run's "
        "restarts go back to the same weights (its checkpoints keep them)",
    ),
    Setting(
        "vita",
        "budget re-training",
        "200 budget updates (f_d, f_T fixed) at step 0 and after every restart",
        _VITA + "adv_flags.py:48; adv_training.py:378-381",
        VITA,
        "budget_pretrain_updates",
        "200",
        "same (40 steps of 5 updates)",
    ),
    Setting(
        "vita",
        "training length",
        "800 steps (--max_steps), plus the 200 budget updates at step 0 and each restart",
        _VITA + "adv_flags.py:47-48; adv_training.py:369",
        VITA,
        "minimax_steps_per_epoch",
        "120",
        "same: --minimax_epochs=8 x 120 steps = 800 minimax steps + 4 x 40 budget-only steps",
    ),
    Setting(
        "vita",
        "batches",
        "2 videos and 8 images per GPU, gradients accumulated over 80 / #GPU mini-batches",
        _VITA + "adv_flags.py:34-35, 53",
        VITA,
        "batch_size",
        "24",
        "the SPAct config's batches (SPAct supp. C.6 ran VITA with SPAct's models and "
        "augmentations); no flag for gradient accumulation",
    ),
    Setting(
        "vita",
        "training augmentation",
        "none: training clips centre-cropped, budget images as stored (distort=False)",
        "VITA input_data.py:12-13, 43, 112; utils.py:147-153, 191-196",
        VITA,
        "supervised_augmentation",
        "spact",
        "the base configs' SPAct augmentations on the training clips and the budget models' "
        "images (random crop, colour jitter, grayscale, flip, erase), as SPAct supp. C.6 ran "
        "VITA with SPAct's models and augmentations; no preset turns them all off",
    ),
    Setting(
        "vita",
        "weight decay",
        "--weight_decay=0.002 reaches only the budget networks' regularizers, whose losses no "
        "minimised loss includes; f_T's own L2 of 5e-4 (C3D) is in L_T",
        _VITA + "adv_flags.py:36; adv_training.py:49-55, 126; modules/targetNet.py:12-17; "
        "loss.py:29-32",
        VITA,
        "",
        "no weight decay",
        "same on the budget models (in effect none); f_T's L2 belongs to their C3D, not to "
        "the R3D-18 here: no flag",
    ),
    Setting(
        "vita",
        "target privacy model learning rate",
        "not stated; the authors' two-fold evaluation: 1e-4 (Adam), constant, from ImageNet, "
        "400-1000 steps; SPAct supp. C.6 evaluated VITA with SPAct's protocol: 1e-3, to 1/10 "
        "on a loss plateau",
        "VITA two_fold_evaluation/eval_2fold.py:82, 104-105, 171; SPAct supp. C.3, C.6",
        VITA,
        "eval_privacy_lr",
        "0",
        "SPAct's (0: --eval_lr=1e-3, dropped on a plateau), as this f'_B's start, images and "
        "epochs are SPAct's, so that the VITA and SPAct reports test one attacker; before "
        "2026-12-04 the two-fold evaluation's 1e-4, constant, on SPAct's from-scratch f'_B",
    ),
    Setting(
        "vita",
        "target action model schedule",
        "VITA trains no fresh f_T (its evaluation restores the trained one); SPAct supp. C.6 "
        "evaluated VITA with SPAct's protocol: 1e-3, to 1/10 on a loss plateau",
        "VITA adversarial_training/eval/eval_fT.py:79-80; SPAct supp. C.3, C.6",
        VITA,
        "eval_lr_drop",
        "10",
        "same as SPAct's target action model (before 2026-11-30 its rate never dropped)",
    ),
    Setting(
        "vita",
        "budget models' training images",
        "VISPR's training, validation and test images together, in their pre-training and "
        "the minimax",
        "VITA utils.py:191",
        VITA,
        "",
        "VISPR's training split",
        "ours: the test images stay out of every training (theirs also trains on the images "
        "a target could be tested on)",
    ),
    Setting(
        "vita",
        "privacy attributes",
        "the released code: 5 (skin colour, face, gender, nudity, relationship)",
        "VITA common_flags.py:34-35",
        VITA,
        "privacy_attributes",
        "vispr1",
        "SPAct supp. C.6's comparison, on VISPR-1's 7 as the SPAct config",
    ),
    Setting(
        "vita",
        "initialisation",
        "f_d to identity with a VGG perceptual and a smoothness loss; f_d and f_T (from "
        "Sports-1M C3D) trained together 500 steps; the budget models from scratch, 1,000 "
        "updates at 1e-3",
        "VITA adversarial_training/pre_training/pretrain_fd.py:124-145; pretrain_fTfd.py:124-126, "
        "315, 389-393; pretrain_flags.py:12, 25",
        VITA,
        "",
        "SPAct's: f_A to identity (L1, 100 epochs), f_T 150 epochs through the frozen f_A, "
        "the budget models 400 epochs",
        "ours: SPAct supp. C.6 ran VITA from SPAct's initialisations, as these configs do; "
        "f_A and f_T never train together before the minimax",
    ),
    Setting(
        "vita",
        "f_T and budget-model initialisation learning-rate drop",
        "none: the budget models' 1,000 updates at a constant 1e-3",
        "VITA adversarial_training/pre_training/pretrain_flags.py:12, 25",
        VITA,
        "init_lr_drop",
        "10",
        "ours: SPAct's initialisations, their drop included (to 1/10 after each epoch without a "
        "new lowest loss, SPAct supp. C.3); before 2026-12-04 constant, unlike the SPAct configs",
    ),
    Setting(
        "vita",
        "target privacy models' start and images",
        "the authors' two-fold evaluation restores ImageNet checkpoints for 8 of its 10 "
        "architectures (all but MobileNet-V1 0.5 and 0.25), trains on VISPR's training, "
        "validation and test images and tests on PA-HMDB51's annotated frames, each whole "
        "frame resized to 112 without augmentation",
        "VITA two_fold_evaluation/eval_2fold.py:108, 206-207, 326-337; VITA utils.py:191, "
        "197-203; input_data.py:92-110",
        VITA,
        "",
        "from scratch, on VISPR's training split, tested on VISPR's test split (PA-HMDB51's "
        "frames with --eval_privacy_dataset=pa_hmdb51)",
        "ours: SPAct supp. C.6 evaluated VITA with SPAct's fresh target models; "
        "--eval_privacy_weights takes one file per --eval_privacy_model, but `convert` reads "
        "PyTorch checkpoints, not the TF-slim ImageNet checkpoints of VITA's architectures",
    ),
    Setting(
        "vita",
        "checkpoints evaluated",
        "the authors' scripts evaluate every kept checkpoint (one every 20 steps, the last 5 kept)",
        _VITA + "adv_training.py:432-434; VITA two_fold_evaluation/eval_2fold.py:344",
        VITA,
        "",
        "the minimax's last weights",
        "ours: one anonymizer, the last; nothing is chosen on test scores",
    ),
    # Penalty-driven.
    Setting(
        "penalty",
        "f_A",
        "UNet++ on 224 x 224 frames (the authors' code: ResNet-18 encoder, depth 4)",
        "Penalty Sec. 4.2; " + _PEN + "aux_code/model_loaders.py:24-36",
        PENALTY,
        "anonymizer",
        "unetpp",
    ),
    Setting("penalty", "input side", "224", "Penalty Sec. 4.2", PENALTY, "image_size", "224"),
    Setting(
        "penalty",
        "decoded frames",
        "not stated; crop 0.8 of the original scale, resize to 224",
        "Penalty Sec. 4.2",
        PENALTY,
        "frame_size",
        "256",
        "our choice: the 112 / 128 ratio of the SPAct configs (prepare the video caches with "
        "--short_side 256: a smaller one is refused; VISPR's: next row)",
    ),
    Setting(
        "penalty",
        "privacy images' resolution",
        "not stated; the authors crop VISPR's full-resolution images, then resize the crop to 224",
        _PEN + "aux_code/vispr_dl_edit.py:52, 81-98",
        PENALTY,
        "privacy_image_side",
        "384",
        "our choice: the images cached at a short side of 384 px (a prepared VISPR cache below "
        "it is refused), so a crop of 0.6 (230 px) is resized down to 224 as theirs is; "
        "before 2026-11-30 at --frame_size (256), a crop of 0.6 up-sampled from 154 px",
    ),
    Setting(
        "penalty",
        "random crop side",
        "random crop (size not stated); the authors' code: 0.6-1.0",
        "Penalty Sec. 4.2; " + _PEN + "anonymization_training/params_anonymization.py:73",
        PENALTY,
        "crop_min_side",
        "0.6",
        "same as the authors' code (the paper gives no size)",
    ),
    Setting(
        "penalty",
        "frame skip",
        "4 (the authors' released parameter files: 2, for f_A's minimax and f'_T alike)",
        "Penalty Sec. 4.2; " + _PEN + "anonymization_training/params_anonymization.py:18; "
        "action_training/params_anonymized_action.py:16",
        PENALTY,
        "clip_stride",
        "4",
        "same as the paper (for the minimax and the target action models)",
    ),
    Setting("penalty", "frames per clip", "16", "Penalty Sec. 4.2", PENALTY, "clip_length", "16"),
    Setting(
        "penalty",
        "videos shorter than a clip",
        "the skip halved where 16 x 4 frames do not fit; a clip that still does not fit fails",
        _PEN + "aux_code/ucf101_dl.py:74-81, 263-266; hmdb51_dl.py:86-92, 290-293",
        PENALTY,
        "short_videos",
        "halve_stride",
        "halved where the span, 15 x 4 + 1 = 61 frames, does not fit (theirs: 64); where even "
        "half does not fit, the clip loops back to its first frame rather than fail",
    ),
    Setting(
        "penalty",
        "colour jitter and crop",
        "'standard augmentations' (not named); the authors' loaders: SPAct's colour ops, rates "
        "and ranges; a crop keeping the frame's (the image's) aspect, resized to 224 x 224",
        "Penalty Sec. 4.2; " + _PEN + "aux_code/ucf101_dl.py:101-119, 150-174; "
        "vispr_dl_edit.py:81-117",
        PENALTY,
        "supervised_augmentation",
        "penalty",
        "same kinds, rates and ranges, contrast to each frame's mean luminance (the SPAct "
        "row's notes on the order of the ops and on the hue hold)",
    ),
    Setting(
        "penalty",
        "contrastive views' augmentation",
        "not stated (L_B follows SPAct); the authors' minimax loader: the light ops of their "
        "image loader on each view at 224 (a 9-18 px erase), both views cropped from one corner",
        "Penalty Sec. 3.1, 4.2; Penalty supp. 7; " + _PEN + "aux_code/vispr_dl_edit.py:190-242; "
        "anonymization_training/train_anonymizer_balance.py:474",
        PENALTY,
        "contrastive_augmentation",
        "penalty",
        "same as the authors' code (the paper gives none), both crops from one corner, the "
        "second black where it overruns the image (torchvision's crop pads with zeros)",
    ),
    Setting(
        "penalty",
        "random erase",
        "part of 'standard augmentations' (not sized); the authors' loaders: on clips up to "
        "two black rectangles, each with p = 0.4, 1/6-1/3 of the video's height and width in "
        "pixels at 224; on images one, p = 0.25, sides of 9-18 px at 224, never on a flipped "
        "image",
        "Penalty Sec. 4.2; " + _PEN + "aux_code/ucf101_dl.py:96-98, 120-121, 179-182; "
        "hmdb51_dl.py:132-133; vispr_dl_edit.py:79-80, 90-91, 117, 122-123 (f'_B's images), "
        "196-197, 207-208, 236-237, 241-242 (the minimax's views)",
        PENALTY,
        "erase_probability",
        "0.4",
        "same as the authors' code (--supervised_augmentation=penalty): heights of 40-79 px, "
        "widths from the frame's aspect (53-105 px for 4:3), as theirs for videos 240 px "
        "high (every UCF101 and HMDB51 video; theirs would grow with a taller one)",
    ),
    Setting(
        "penalty",
        "B",
        "0.3 (best of 0.3, 0.5, 0.7, 0.9; the authors' released parameter file: 0.5)",
        "Penalty Table 1; " + _PEN + "anonymization_training/params_anonymization.py:37",
        PENALTY,
        "penalty_budget",
        "0.3",
    ),
    Setting("penalty", "lambda", "1", "Penalty Table 3", PENALTY, "penalty_weight", "1.0"),
    Setting(
        "penalty", "anonymizer batch", "8 clips", "Penalty Sec. 4.2", PENALTY, "batch_size", "8"
    ),
    Setting(
        "penalty",
        "privacy images per batch",
        "not stated; the authors' code: 8 (TeD-SPAD's: 12)",
        _PEN + "anonymization_training/params_anonymization.py:43; "
        "train_anonymizer_balance.py:474-480",
        PENALTY,
        "privacy_batch_size",
        "8",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "f_A identity epochs",
        "100",
        "Penalty Sec. 4.2",
        PENALTY,
        "identity_epochs",
        "100",
    ),
    Setting(
        "penalty",
        "f_A identity learning rate",
        "not stated (L1); the authors' code: Adam 1e-3, set per epoch, after a warm-up over "
        "their epochs 1-4 at 0.26, 0.51, 0.75 and 1 of it (warmup_array[1:5] of linspace(0.01, "
        "1, 5); their epochs count from 1)",
        _PEN + "fa_pretraining/parameters.py:12-15; train_reconstruction.py:119, 135, 155-157",
        PENALTY,
        "identity_lr",
        "1e-3",
        "the authors' base rate (the paper gives none), set per epoch with "
        "--identity_warmup_epochs=4: 0.25, 0.5, 0.75 and 1 of it",
    ),
    Setting(
        "penalty",
        "f_A identity learning-rate drop",
        "not stated; the authors' code: the rate divided by 5 after each epoch whose loss is "
        "above the lowest so far (patience 0); one decided in the warm-up gives way to it",
        _PEN + "fa_pretraining/parameters.py:16-17; train_reconstruction.py:155-172",
        PENALTY,
        "identity_lr_drop",
        "5",
        "same (an epoch whose loss equals the lowest drops it too: ours asks for a new lowest, "
        "theirs for a higher loss)",
    ),
    Setting(
        "penalty",
        "f_A identity data",
        "not stated; the authors' code: VISPR's training images and the first 1 % of a glob "
        "listing of UCF101's training frames (not a random 1 %: the frames of the folders "
        "listed first; UCF101's for the HMDB51 runs too), shuffled together, 32 images a "
        "batch, as SPAct's",
        _PEN + "fa_pretraining/reconstruction_dl.py:17-42; parameters.py:10; "
        "train_reconstruction.py:137-138",
        PENALTY,
        "",
        "each batch: two frames of each clip and the two views of each image of the minimax's "
        "batches",
        "our choice, as in the SPAct table",
    ),
    Setting(
        "penalty",
        "f_A identity checkpoint",
        "not stated; the authors' identity run keeps the checkpoint of the lowest loss on the "
        "test split (VISPR's test images and all of UCF101's test frames); their minimax loads "
        "a file named by hand (fa_recon.pth)",
        _PEN + "fa_pretraining/train_reconstruction.py:182-199; "
        "anonymization_training/params_anonymization.py:11",
        PENALTY,
        "",
        "the last identity epoch's f_A",
        "ours: nothing is chosen on the test split",
    ),
    Setting(
        "penalty",
        "target action model precision",
        "not stated; the authors' f'_T trains under float16 autocast with a gradient scaler",
        _PEN + "action_training/train_anonymized_action.py:8, 66-76, 198",
        PENALTY,
        "",
        "float32, as every target model",
        "ours: float32 (the same loss, without float16's rounding)",
    ),
    Setting(
        "penalty", "anonymizer epochs", "100", "Penalty Sec. 4.2", PENALTY, "minimax_epochs", "100"
    ),
    Setting(
        "penalty",
        "minimax epoch length",
        "not stated; the authors' loop: zip(VISPR, video) at 8 ends with UCF101's 1,192 "
        "batches (HMDB51's 446; drop_last) before VISPR's 1,250",
        _PEN + "anonymization_training/train_anonymizer_balance.py:59, 474-480, 511-516",
        PENALTY,
        "minimax_steps_per_epoch",
        "0",
        "same: one pass over the action videos (not the SPAct config's 150)",
    ),
    Setting(
        "penalty",
        "VP-HMDB51 column: what f'_B trains on",
        "VISPR-1's training set by Sec. 4.3.1's text for Table 1 (X_privacy^t = VISPR1 "
        "trainset); VP-HMDB51's training set by Sec. 4.3.2's for Table 2 (X_privacy^nt)",
        "Penalty Sec. 4.3.1-4.3.2",
        ("hmdb_vispr_penalty",),
        "eval_vp_privacy_training",
        "vp",
        "ours: both are a flag away (vispr: VISPR-1 merged onto the five attributes, as for "
        "PA-HMDB51); the default follows Table 2's text; both tables give VP-HMDB51's raw "
        "row a cMAP of 76.62 but F1s of 0.684 and 0.699, so which f'_B each used is unclear",
    ),
    Setting(
        "penalty",
        "VP-HMDB51 privacy images",
        "not stated: the authors' VP loader is not released",
        _PEN + "anonymization_training/train_anonymizer_balance.py:24 (imports the missing "
        "aux_code.VPUCF_dl)",
        ("hmdb_vispr_penalty",),
        "eval_privacy_frames",
        "5",
        "ours: 5 equidistant frames of each split-1 video, each labelled by its video; scored "
        "per frame, as their train_privacy.py scores the images it is given",
    ),
    Setting(
        "penalty",
        "f_A learning rate",
        "not stated (Adam); the authors' code: 0.4 x 1e-4 = 4e-5 (TeD-SPAD's: 4e-6)",
        _PEN + "anonymization_training/params_anonymization.py:46, 54; "
        "train_anonymizer_balance.py:405-406",
        PENALTY,
        "anonymizer_lr",
        "4e-5",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "f_T learning rate",
        "not stated (Adam); the authors' code: 1e-4 (TeD-SPAD's: 1e-5)",
        _PEN + "anonymization_training/params_anonymization.py:46, 56; "
        "train_anonymizer_balance.py:408",
        PENALTY,
        "action_lr",
        "1e-4",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "f_B learning rate",
        "not stated (Adam); the authors' code: 1e-4 (TeD-SPAD's: 1e-5)",
        _PEN + "anonymization_training/params_anonymization.py:46, 55; "
        "train_anonymizer_balance.py:407",
        PENALTY,
        "privacy_lr",
        "1e-4",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "minimax update order",
        "Algorithm 1: f_A, then f_T and f_B; the authors' code: f_A on one batch with f_T and "
        "f_B in inference mode, then f_T and f_B together on the next batch with f_A in "
        "inference mode",
        "Penalty Algorithm 1; " + _PEN + "anonymization_training/train_anonymizer_balance.py:"
        "107-111, 188-191, 262-266",
        PENALTY,
        "",
        "the same, on the two halves of each step's paired batches (`SPAct.updates`)",
        "same as the authors' code",
    ),
    Setting(
        "penalty",
        "w_T",
        "1 (Eq. 3: L_T - L_B + lambda penalty; the authors' code: ft_loss_weight = 1)",
        "Penalty Eq. 3; " + _PEN + "anonymization_training/params_anonymization.py:57; "
        "train_anonymizer_balance.py:169",
        PENALTY,
        "action_weight",
        "1.0",
    ),
    Setting(
        "penalty",
        "w_B",
        "1 (Eq. 3; the authors' code: fb_loss_weight = 1)",
        "Penalty Eq. 3; " + _PEN + "anonymization_training/params_anonymization.py:58; "
        "train_anonymizer_balance.py:169",
        PENALTY,
        "privacy_weight",
        "1.0",
    ),
    Setting(
        "penalty",
        "NT-Xent temperature",
        "0.1, on the L2-normalised projections",
        _PEN + "anonymization_training/train_anonymizer_balance.py:134, 245; "
        "aux_code/model_loaders.py:159",
        PENALTY,
        "temperature",
        "0.1",
    ),
    Setting(
        "penalty",
        "f_A's batches in its update",
        "not stated; the authors' code calls f_A in training mode on the first views, the "
        "second views and the clips' frames in turn, as SPAct's",
        _PEN + "anonymization_training/train_anonymizer_balance.py:109, 116, 148",
        PENALTY,
        "",
        "three calls, in that order",
        "same as the authors' code",
    ),
    Setting(
        "penalty",
        "f_B's batches in its update",
        "not stated; the authors' code calls f_B in training mode on the anonymized first views, "
        "then the second views, as SPAct's",
        _PEN + "anonymization_training/train_anonymizer_balance.py:190, 228",
        PENALTY,
        "",
        "two calls, in that order",
        "same as the authors' code",
    ),
    Setting(
        "penalty",
        "f_T",
        "I3D ResNet-50, Kinetics-400 pre-trained (the authors' code: pytorch-resnet3d's "
        "I3Res50, `largei3d`, from i3d_r50_kinetics.pth, no non-local blocks)",
        "Penalty Sec. 4.2; " + _PEN + "anonymization_training/params_anonymization.py:8; "
        "aux_code/model_loaders.py:262-274; aux_code/models/large_i3d.py:130-171",
        PENALTY,
        "action_model",
        "i3d_r50",
        "same architecture; the Kinetics-400 file is converted by `python -m "
        "keras_privacy.convert --arch i3d_r50` and named by --action_weights",
    ),
    Setting(
        "penalty",
        "f_T initialisation",
        "Kinetics-400 weights; the authors' code: a new head, straight into the minimax",
        "Penalty Sec. 4.2; " + _PEN + "anonymization_training/params_anonymization.py:12; "
        "anonymization_training/train_anonymizer_balance.py:400",
        PENALTY,
        "action_init_epochs",
        "0",
        "same; the authors' head has 102 outputs for UCF101's 101 classes "
        "(params_anonymization.py:16; aux_code/model_loaders.py:272-273), ours one per "
        "class: their extra output is never a target",
    ),
    Setting(
        "penalty",
        "f_B",
        "ResNet-50 with SimCLR ImageNet weights",
        "Penalty Sec. 4.2",
        PENALTY,
        "privacy_backbone",
        "resnet50",
    ),
    Setting(
        "penalty",
        "f_B initial weights",
        "SimCLR trained on ImageNet (Algorithm 1: theta_B); which checkpoint is not stated",
        "Penalty Sec. 4.2",
        PENALTY,
        "privacy_weights",
        "weights/simclr_resnet50_imagenet.keras",
        "our choice of checkpoint: VISSL's SimCLR ResNet-50 (800 epochs, projection head "
        "included), the one SPAct's code names (its reading commented out: SPAct "
        "anonymization_training/model.py:18-29); our model normalises its input by ImageNet's "
        "mean / std, where the authors' code feeds f_B [0, 1] images and f_A's output without "
        "one (aux_code/model_loaders.py:163-172, vispr_dl_edit.py:244; "
        "anonymization_training/train_anonymizer_balance.py:116-117), as TeD-SPAD's does",
    ),
    Setting(
        "penalty",
        "f_B training before the minimax",
        "none: the SimCLR weights are used as they are",
        "Penalty Sec. 4.2, Algorithm 1; " + _PEN + "anonymization_training/"
        "params_anonymization.py:13; aux_code/model_loaders.py:126-135",
        PENALTY,
        "privacy_init_epochs",
        "0",
        "same as the paper; the authors' code loads f_B from fb_ssl.pth, a checkpoint under "
        "the key its own training scripts save (fb_model_state_dict), so it may hold an f_B "
        "already trained further; the file is not released",
    ),
    Setting(
        "penalty",
        "f_A encoder weights",
        "not stated; the authors' code: smp's UNet++ with an ImageNet ResNet-18 encoder",
        _PEN + "aux_code/model_loaders.py:24-36",
        PENALTY,
        "anonymizer_weights",
        "weights/resnet18_imagenet.pth",
    ),
    Setting(
        "penalty",
        "SSL margin mu",
        "1",
        "Penalty Sec. 4.2",
        PENALTY,
        "triplet_margin",
        "1.0",
        "same value; the paper's f_A update (Algorithm 1) has no term using it, so "
        "--triplet_weight stays 0",
    ),
    Setting(
        "penalty",
        "positive frame pairs",
        "4 frames apart",
        "Penalty supp. Sec. 7",
        PENALTY,
        "pair_sampler",
        "random",
        "no fixed-gap sampler (near: < 8 frames apart); moot here: the penalty configs take "
        "the authors' image views (--contrastive_views=images), so no frame pairs are drawn",
    ),
    Setting(
        "penalty",
        "target action model",
        "not stated; the authors' code: I3D-ResNet-50, Kinetics-400 pre-trained",
        _PEN + "action_training/params_anonymized_action.py:7; "
        "action_training/train_anonymized_action.py:187",
        PENALTY,
        "eval_action_model",
        "i3d_r50",
        "same, from the same converted Kinetics-400 file (--eval_action_weights)",
    ),
    Setting(
        "penalty",
        "target privacy model",
        "ResNet-50 (Sec. 4.2's f_B; Tables 7-8 vary f'_B); the authors' code: ResNet-152 "
        "from random weights",
        "Penalty Sec. 4.2, Tables 6-8; " + _PEN + "privacy_training/params_privacy.py:10; "
        "train_privacy.py:162",
        PENALTY,
        "eval_privacy_model",
        "resnet50",
        "the paper's ResNet-50, as SPAct's target and the paper's raw-trained attacker (Table "
        "6); the released file's ResNet-152 is one of Table 7's architectures",
    ),
    Setting(
        "penalty",
        "resize of a crop",
        "not stated; the authors' loaders: torchvision's `resized_crop` / `resize` with "
        "antialias=True (bilinear)",
        _PEN + "aux_code/hmdb51_dl.py:168-170, 338, 474",
        PENALTY,
        "",
        "the same (`augment.crop_and_resize`, equal to PyTorch's antialiased interpolation "
        "within 1e-6)",
        "same; before 2026-12-05 `tf.image.crop_and_resize`, without antialias",
    ),
    Setting(
        "penalty",
        "models' random start",
        "not stated; the authors' code builds torchvision's ResNets and R3D-18 (convolutions "
        "N(0, 2 / fan_out): kaiming_normal_, fan_out) and I3Res50 (kaiming_normal_, fan_out), "
        "with nn.Linear heads (weights and bias uniform in +-1 / sqrt(fan_in))",
        _PEN + "aux_code/model_loaders.py:151-153, 181-189, 234-242, 303-310; "
        "aux_code/models/large_i3d.py:147-152",
        PENALTY,
        "",
        "the same start (`models/layers.py`), for every model not read from a file",
        "same; before 2026-12-05 Keras' Glorot-uniform weights and zero biases. The UNet++ "
        "decoder's convolutions start as segmentation_models_pytorch's (kaiming_uniform_, "
        "fan_in: `smp_decoder_start`; before 2026-12-05 the ResNets' start), its encoder from "
        "the ImageNet file the configs name",
    ),
    Setting(
        "penalty",
        "clips into f_A",
        "frame by frame; the authors' code folds (B, C, T, H, W) into images of three "
        "consecutive (channel, time) slices, so most images f_A sees hold three time steps of "
        "one colour channel (2 of each clip's 16 span two channels)",
        _PEN + "anonymization_training/train_anonymizer_balance.py:93, 145; "
        "action_training/train_anonymized_action.py:52, 61",
        PENALTY,
        "",
        "frame by frame, RGB",
        "ours: each frame as an RGB image (their fold is a layout slip, TeD-SPAD's too; SPAct's "
        "code folds correctly)",
    ),
    Setting(
        "penalty",
        "frames' channel order",
        "not stated; the authors' video loaders flip decord's RGB to BGR, their VISPR loader "
        "reads RGB",
        _PEN + "aux_code/ucf101_dl.py:125, 288; aux_code/hmdb51_dl.py:137",
        PENALTY,
        "",
        "RGB for videos and images",
        "ours: RGB throughout (their Kinetics I3D and ImageNet UNet++ encoder meet BGR clips "
        "and RGB images), a slip we do not copy",
    ),
    Setting(
        "penalty",
        "f_A output",
        "not stated; the authors' UNet++ has no output activation (unbounded, TeD-SPAD's "
        "too): they clamp f_A's VISPR outputs to +-1e5 and skip batches with NaN or Inf",
        _PEN + "aux_code/model_loaders.py:24-36; "
        "anonymization_training/train_anonymizer_balance.py:72-91, 200",
        PENALTY,
        "anonymizer",
        "unetpp",
        "ours: `unetpp` ends in a sigmoid, frames in [0, 1], as SPAct's UNet, so f_A's output "
        "stays an image; `--anonymizer=unetpp_unbounded` builds the authors' unbounded one "
        "(without their clamp and NaN skip)",
    ),
    Setting(
        "penalty",
        "penalty term",
        "max(0, RMS(x - f_A(x)) - B) (Eq. 4); the authors' code: one RMS over the whole batch, "
        "taken with .item(): a constant, with no gradient",
        "Penalty Eq. 4, Sec. 3.2; "
        + _PEN
        + "anonymization_training/train_anonymizer_balance.py:150-156, 175, 432",
        PENALTY,
        "",
        "Eq. 4 per clip, differentiable, averaged over the batch's clips",
        "ours: the term reaches f_A's gradient (in their code it never does, so their f_A "
        "loss is SPAct's); per clip, so one clip's change is not diluted by the batch's. The "
        "released script cannot have made the tables as it stands: it stops at params.B.item() "
        "(B is a float) and reads a params.temporal_loss its parameter file lacks, and Table 3's "
        "lambda changes the accuracy that a term without gradient could not. Sec. 3.2 also "
        "writes the term as RMS(X - f_T(f_A(X))) - B, which compares a clip with f_T's logits; "
        "Eq. 4 is the one the code computes",
    ),
    Setting(
        "penalty",
        "precision",
        "not stated; the authors' minimax: float16 autocast, with no gradient scaler",
        _PEN + "anonymization_training/train_anonymizer_balance.py:114, 174, 226, 262-263",
        PENALTY,
        "mixed_precision",
        "float32",
        "ours: float32 (--mixed_precision=mixed_float16 scales the loss; float16 without a "
        "scaler can flush small gradients to zero)",
    ),
    Setting(
        "penalty",
        "f_A kept after the minimax",
        "not stated; the authors save f_A after each epoch whose f_T(f_A) test accuracy is "
        "above 0.6 (named by epoch and accuracy); their evaluation scripts load a file named "
        "by hand",
        _PEN + "anonymization_training/train_anonymizer_balance.py:590-607",
        PENALTY,
        "",
        "the minimax's last epoch",
        "ours: the last epoch's f_A; nothing is chosen on test scores",
    ),
    Setting(
        "penalty",
        "target action model BatchNorm",
        "not stated; the authors' f'_T (their I3D) keeps the Kinetics file's BatchNorm: "
        "statistics, scale and offset fixed (freeze_bn)",
        _PEN + "action_training/train_anonymized_action.py:45-46; aux_code/models/"
        "large_i3d.py:8-38",
        PENALTY,
        "eval_action_frozen_batchnorm",
        "true",
        "same as the authors' code",
    ),
    Setting(
        "penalty",
        "target action model dropout",
        "not stated; the authors' f'_T (their I3D, dropout 0.5 before its head) trains with "
        "it in epoch 1 only: their training epoch never sets f'_T back to training mode (for "
        "the I3D it only freezes BatchNorm) after the test after epoch 1 put it in eval mode",
        _PEN + "action_training/train_anonymized_action.py:44-48, 104-106; "
        "params_anonymized_action.py:37; aux_code/models/large_i3d.py:148",
        PENALTY,
        "",
        "dropout 0.5 in every epoch",
        "ours: the model's dropout in every training epoch, as the I3D trains; theirs is a "
        "by-product of switching modes for the test, in a script that cannot run as released "
        "(its loss is never computed with loss='ce', train_anonymized_action.py:71-72)",
    ),
    Setting(
        "penalty",
        "HMDB51 evaluation protocol",
        "PA-HMDB: f'_T and f'_B both tested on its videos",
        "Penalty Sec. 4.3.1",
        ("hmdb_vispr_penalty",),
        "eval_protocol",
        "same",
        "ours: HMDB51's and VISPR-1's test sets, as SPAct's hmdb_vispr (its row says why); "
        "--eval_protocol=pa_hmdb51 with --eval_privacy_dataset=pa_hmdb51 and its two paths is "
        "the paper's",
    ),
    Setting(
        "penalty",
        "test image view",
        "'we first crop each image to 0.8 of its original scale and then resize it to "
        "224x224' (said of every input); the authors' VISPR test loader takes the centred "
        "square of the whole short side, resized to 224",
        "Penalty Sec. 4.2; " + _PEN + "aux_code/vispr_dl_edit.py:124-130",
        PENALTY,
        "",
        "the centred square of the whole short side, resized to --image_size (224; "
        "`augment.evaluation_clip`)",
        "the authors' code; the paper's 0.8 crop is the clips' (the test clip view row)",
    ),
    Setting(
        "penalty",
        "test clip view",
        "the centre 0.8 of each frame, resized to 224 x 224; the authors' test loader keeps "
        "the frame's aspect (0.8 of its height and of its width)",
        "Penalty Sec. 4.2; " + _PEN + "aux_code/ucf101_dl.py:203, 285, 298-312; "
        "action_training/params_anonymized_action.py:43-46",
        PENALTY,
        "eval_action_crop",
        "0.8",
        "same as the paper (its aspect kept as the training crops' is, "
        "--supervised_augmentation=penalty); the authors' test loaders swap height and width "
        "(ucf101_dl.py:285 against :93; hmdb51_dl.py:311, 447): its 256 x 192 centre crop of "
        "a 240 x 320 frame pads the height with black and keeps 0.6 of the width, a slip we do "
        "not copy",
    ),
    Setting(
        "penalty",
        "clips per test video",
        "not stated; the authors' code: 5 equidistant",
        _PEN + "action_training/params_anonymized_action.py:17; train_anonymized_action.py:"
        "226, 301-304; aux_code/ucf101_dl.py:271",
        PENALTY,
        "eval_clips",
        "5",
        "same as the authors' code (the paper gives none); their starts reach N - L s - 10 "
        "(ucf101_dl.py:268-271), ours the last start whose clip fits, N - (L - 1) s - 1; "
        "their test loader also drops each pass's last partial batch of 16, shuffled "
        "(train_anonymized_action.py:310-316, params_anonymized_action.py:32), so up to 15 "
        "random videos a pass lose a clip: ours tests every clip",
    ),
    Setting(
        "penalty",
        "target action model epochs",
        "100",
        "Penalty Sec. 4.2; " + _PEN + "action_training/params_anonymized_action.py:35",
        PENALTY,
        "eval_action_epochs",
        "100",
        "same as the paper; the authors' code runs 50",
    ),
    Setting(
        "penalty",
        "target action model batch",
        "16 clips",
        "Penalty Sec. 4.2",
        PENALTY,
        "eval_action_batch_size",
        "16",
    ),
    Setting(
        "penalty",
        "target action model learning rate",
        "not stated; the authors' code: 1e-4 (Adam)",
        _PEN + "action_training/params_anonymized_action.py:34; train_anonymized_action.py:217-218",
        PENALTY,
        "eval_action_lr",
        "1e-4",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "target action model schedule",
        "not stated; the authors' script: cosine when the parameter file asks for it, which "
        "theirs does not set; TeD-SPAD's file does: 5 warm-up epochs from 0.01 to 1, then "
        "(cos(x) + 1) / 2 over the other 95, x from 0 to pi / 0.99",
        _PEN
        + "action_training/train_anonymized_action.py:267-269; "
        + _TED
        + "action_training/params_anonymized_action.py:40-41",
        PENALTY,
        "eval_action_schedule",
        "cosine",
        "same shape: the warm-up is --eval_warmup_epochs' (4 epochs at 0.25 to 1, as f'_B's; "
        "theirs starts with an epoch at 0.01), then (1 + cos(pi k / 96)) / 2 for k = 0 to 95: "
        "the last epoch at 2.7e-4 of the rate, theirs at 2.5e-4",
    ),
    Setting(
        "penalty",
        "target privacy model epochs",
        "not stated; the authors' code: 100",
        _PEN + "privacy_training/params_privacy.py:21",
        PENALTY,
        "eval_privacy_epochs",
        "100",
        "same as the authors' code (the paper gives none)",
    ),
    Setting(
        "penalty",
        "target privacy learning rate",
        "1e-3, linear warm-up, / 5 on stagnation",
        "Penalty Sec. 4.2",
        PENALTY,
        "eval_lr",
        "1e-3",
        "same base rate; the authors' warm-up also divides the rate by 5 ('Pretrained drop', "
        "their train_privacy.py:213, TeD-SPAD's :198), which then holds (2e-4): we keep the "
        "paper's 1e-3",
    ),
    Setting(
        "penalty",
        "target privacy model batch",
        "32 images (the authors' code: 8)",
        "Penalty Sec. 4.2; " + _PEN + "privacy_training/params_privacy.py:17",
        PENALTY,
        "eval_privacy_batch_size",
        "32",
        "same as the paper",
    ),
    Setting(
        "penalty",
        "target privacy model warm-up",
        "linear",
        "Penalty Sec. 4.2; " + _PEN + "privacy_training/params_privacy.py:22-23, "
        "train_privacy.py:211-213",
        PENALTY,
        "eval_warmup_epochs",
        "4",
        "same: the authors' epochs 1-4 run at 0.26, 0.51, 0.75 and 1.0 of the rate (its "
        "linspace(0.01, 1, 5) from index 1), ours at 0.25, 0.5, 0.75 and 1.0",
    ),
    Setting(
        "penalty",
        "target privacy model learning-rate drop",
        "/ 5 on loss stagnation",
        "Penalty Sec. 4.2; " + _PEN + "privacy_training/params_privacy.py:24-25, "
        "train_privacy.py:220-226",
        PENALTY,
        "eval_lr_drop",
        "5",
    ),
    Setting(
        "penalty",
        "target models' reported score",
        "not stated; the authors' scripts test f'_T and f'_B on the test split (UCF101's "
        "testlist, VISPR's test images) at the epochs of their val_array and keep the best "
        "test score's checkpoint (13 tests of f'_T in their 50 epochs, 61 of f'_B in 100)",
        _PEN + "action_training/train_anonymized_action.py:298-375, "
        "params_anonymized_action.py:37; privacy_training/train_privacy.py:188, 200, 231-251; "
        "aux_code/ucf101_dl.py:200-211",
        PENALTY,
        "",
        "the last epoch's models, each tested once",
        "no choice is made on the test split: a best of many test scores is a biased estimate, "
        "above the last epoch's for action top-1 and for the attacker's cMAP alike, so the "
        "authors' figures may stand above ours by that margin on both axes; "
        "--eval_action_test_epochs and --eval_privacy_test_epochs make their choice, for "
        "comparison with their tables",
    ),
    # Meta generalisation.
    Setting(
        "meta",
        "alpha (virtual training)",
        "5e-4",
        "Meta supp. Parameter Analysis, Fig. 1",
        META,
        "meta_alpha",
        "5e-4",
    ),
    Setting(
        "meta",
        "beta (meta update)",
        "1e-4",
        "Meta supp. Parameter Analysis, Fig. 1",
        META,
        "anonymizer_lr",
        "1e-4",
    ),
    Setting(
        "meta",
        "meta gradient",
        "second order",
        "Meta supp. Algorithm 1, line 21",
        META,
        "meta_first_order",
        "false",
    ),
    Setting(
        "meta",
        "support share",
        "60 % of attributes / attack models",
        "Meta supp. Impact of splitting; Details of Set Construction",
        META,
        "meta_fraction",
        "0.6",
    ),
    Setting(
        "meta",
        "T1 (f_T accuracy)",
        "0.70",
        "Meta supp. Training Algorithm",
        META,
        "action_threshold",
        "0.7",
    ),
    Setting(
        "meta",
        "T2 (attack-model accuracy)",
        "0.95",
        "Meta supp. Training Algorithm",
        META,
        "adversary_threshold",
        "0.95",
    ),
    Setting(
        "meta",
        "T1 / T2 measured on",
        "the accuracy of f_T and of each attack model (on which data is not stated)",
        "Meta supp. Algorithm 1, lines 5, 8",
        META,
        "",
        "the step's own batch (24 clips, 64 images), before any update, in inference mode; "
        "T2 on the attack models' per-label accuracy",
        "ours: the supplement names no validation data (VITA's f_T gate reads held-out clips)",
    ),
    Setting(
        "meta",
        "attack-model updates per iteration",
        "update f_i^P, an attack model below T2",
        "Meta supp. Algorithm 1, lines 8-9",
        META,
        "",
        "every attack model below T2, each on the step's images",
        "ours: the supplement's f_i^P read as each such model",
    ),
    Setting(
        "meta",
        "support / query attack models",
        "sampled from f_1^P / f_2^P (how many is not stated); the basic model samples one "
        "f^P from f_train^P at each iteration",
        "Meta supp. Training Algorithm; Details of Set Construction",
        META,
        "",
        "all of f_1^P / f_2^P (an attribute split: all 8), their losses averaged",
        "ours: on the support loss the expectation of a uniform sample; on the query loss only "
        "to first order in alpha (it is taken at phi minus alpha times the averaged support "
        "gradient, not a sampled model's); without a sample's variance; every step runs every "
        "attack model",
    ),
    Setting(
        "meta",
        "action term of the support / query losses",
        "Eq. 1 of the main paper (not held here); the sets are split by privacy attributes "
        "and attack models only",
        "Meta supp. Details of Set Construction",
        META,
        "",
        "the action loss of the step's clips, the same clips in both sets",
        "ours: the supplement splits no action data, so L_S and L_Q differ only in their "
        "privacy terms",
    ),
    Setting(
        "meta",
        "f_A's BatchNorm in the meta update",
        "not stated",
        "Meta supp. Algorithm 1",
        META,
        "",
        "batch statistics of the step's frames and all its images in one batch, in every pass "
        "(support, query at phi', Hessian-vector product); the moving statistics updated from "
        "the query pass at phi'",
        "ours: the supplement is silent; the support and query losses share the batch's "
        "statistics, so each also depends on the other set's images through them",
    ),
    Setting(
        "meta",
        "images without a positive in an attribute split",
        "not stated: steps (2)-(5) place the images whose positives lie in Attr1, in Attr2 or "
        "in both",
        "Meta supp. Details of Set Construction",
        META,
        "",
        "as the images with positives in both: --meta_fraction of them to X_1 with Attr2's "
        "labels unavailable, the others to X_2 with Attr1's (`methods/meta.py`, "
        "attribute_masks)",
        "ours: the steps leave them out; as negatives of the kept group they supervise one set, "
        "as the images of steps (2) and (3) do, and X_1 and X_2 stay disjoint",
    ),
    Setting(
        "meta",
        "models' modes in the updates",
        "not stated; Algorithm 1's action-model update uses Eq. 2 of the main paper (not held "
        "here)",
        "Meta supp. Algorithm 1",
        META,
        "",
        "the meta loss runs f_T and the attack models in inference mode (f_A with batch "
        "statistics, the row above); f_T's and the attack models' updates run f_A in inference "
        "mode on frames it does not receive gradients through",
        "ours: each update moves its own player only; VITA's code, which the supplement "
        "follows for T1 and T2, also moves f_A in its f_T update (the VITA rows)",
    ),
    Setting(
        "meta",
        "privacy term",
        "Eq. 1 of the main paper (not held here); gamma follows [1, 2]",
        "Meta supp. Parameter Analysis",
        META,
        "",
        "minus the masked BCE of the attack models against the true labels, times gamma",
        "ours: the attack models' loss maximised, as SPAct's f_A maximises its adversary's "
        "NT-Xent (L_T - w_B L_B); unlike NT-Xent, the BCE has no upper bound, but Algorithm 1's "
        "T2 retrains every attack model that falls below 95 % before f_A moves again (VITA's "
        "gamma of 0.5 weights another term, BCE against all ones)",
    ),
    Setting(
        "meta",
        "mixed samples' sets",
        "X_1 / X_2 built at each epoch, then the support / query sets sampled from them",
        "Meta supp. Details of Set Construction",
        META,
        "",
        "the attribute split drawn each epoch; which mixed samples of a batch go to X_1 drawn "
        "each batch (60 %)",
        "ours: an image can change sets within an epoch (a batch is drawn from the images, "
        "not from fixed X_1 / X_2)",
    ),
    Setting(
        "meta",
        "gamma",
        "as VITA: 0.5",
        "Meta supp. Parameter Analysis (follows [1, 2]); " + _VITA + "adv_flags.py:21",
        META,
        "privacy_weight",
        "0.5",
    ),
    Setting(
        "meta",
        "training attack models",
        "8 MobileNet-V2 width multipliers (not listed)",
        "Meta supp. list of attack models",
        META,
        "adversary_models",
        "mobilenet_v2_0.35,mobilenet_v2_0.5,mobilenet_v2_0.6,mobilenet_v2_0.75,"
        "mobilenet_v2_0.9,mobilenet_v2_1.0,mobilenet_v2_1.3,mobilenet_v2_1.4",
        "the paper names no widths: ours are Keras' six (0.35-1.4) and 0.6 and 0.9 between them",
    ),
    Setting(
        "meta",
        "test attack models",
        "ResNet-V1-50/101, ResNet-V2-50/101, Inception-V1/V2, MobileNet-V1 0.25/0.5/0.75/1.0",
        "Meta supp. list of attack models",
        META,
        "eval_privacy_model",
        "resnet_v1_50,resnet_v1_101,resnet_v2_50,resnet_v2_101,inception_v1,inception_v2,"
        "mobilenet_v1_0.25,mobilenet_v1_0.5,mobilenet_v1_0.75,mobilenet_v1_1.0",
        "same ten, as TF-slim builds them (VITA's nets/: the same parameter counts; the "
        "ResNet-V1s' outputs equal tf_slim's)",
    ),
    Setting(
        "spact",
        "HMDB51 evaluation protocol",
        "PA-HMDB: f'_T and f'_B both tested on its videos",
        "SPAct Sec. 5.3",
        ("hmdb_vispr",),
        "eval_protocol",
        "same",
        "ours: HMDB51's and VISPR-1's test sets, which need no PA-HMDB51 copy; "
        "--eval_protocol=pa_hmdb51 with --eval_privacy_dataset=pa_hmdb51 and its two paths is "
        "SPAct's (hmdb_vispr.cfg's header), and also leaves the PA-HMDB51 videos out of the "
        "training of f_A and f'_T, which SPAct does not mention",
    ),
    Setting(
        "spact",
        "PA-HMDB51 privacy labels",
        "6 attributes, VISPR-1's but a65_rel_soci (Sec. 5.1 says 5); the same authors' penalty "
        "code scores the VISPR-1 model's first six APs on PA-HMDB51",
        "SPAct supp. B; " + _PEN + "privacy_training/train_privacy.py:96, 126, 140",
        ("hmdb_vispr",),
        "eval_pa_hmdb51_labels",
        "vispr1",
        "same as the supplement (the penalty config includes it): complete (value 2) and "
        "partial (value 1) face as two columns, relationship as a64_rel_personal, f'_B trained "
        "on those six VISPR-1 columns; their PA-HMDB51 loader is not released, so which "
        "nudity values count as a12_semi_nudity is ours: any (> 0), VITA's rule",
    ),
    Setting(
        "spact",
        "PA-HMDB51 privacy test frames",
        "not stated; VITA's code tests every annotated frame, resized to 112 x 112 without a crop",
        "VITA repository data-preparation/PA_HMDB51/extract_hmdb_testing_frames.py:32-44, "
        "resize_images.py:25",
        ("hmdb_vispr",),
        "eval_privacy_frames",
        "5",
        "ours: 5 equidistant frames of each video's labelled frames (each video weighs alike "
        "in the AP; every labelled frame of the 515 videos would be about 52,000 test "
        "images), each the centred square of the frame resized to 112, as the VISPR test "
        "images; each labelled by its own frame index, as VITA's; a frame no range of an "
        "attribute holds is never tested (the release's viewer shows it as N/A; 14 videos "
        "start all their ranges at frames 1 to 13, one more its nudity ranges at frame 1); "
        "--eval_privacy_frames=0 takes every labelled frame, as VITA's code",
    ),
    Setting(
        "spact",
        "people detector of the blur and blackening baselines",
        "MS-COCO pretrained YOLOv5x on each frame",
        "SPAct supp. C.6",
        ("ucf101_vispr", "hmdb_vispr"),
        "",
        "OpenCV's HOG people detector and Haar face cascades on 4 keyframes, the "
        "union of their boxes on every frame; frames larger than 640 px a side (VISPR's "
        "photographs) are detected reduced to it, YOLOv5's inference size (a PA-HMDB51 or "
        "VP test frame takes the boxes of its frame in its video); --eval_boxes takes a "
        "detector's boxes instead (not yet with PA-HMDB51's or VP's test frames, which a box "
        "file cannot name: refused)",
        "ours: no pretrained detector can be downloaded at run time; HOG misses seated, bent "
        "and small people, so these baselines leak more privacy than SPAct's Table 1 rows "
        "(README, Methods: what HOG misses): give YOLOv5x's boxes with --eval_boxes to match "
        "the paper; the keyframes' union over a whole video also misses a moving person "
        "between keyframes (on test.avi 34 % of what per-frame detection covers). The kernels "
        "(21 / 13, sigma 10) and VISPR's side of 512 are the supplement's; the side of 240 for "
        "videos is UCF101's and HMDB51's own (the supplement names no resize of videos). The "
        "whole frame is blurred and copied inside the boxes, our reading of 'blur on the "
        "bounding boxes regions' (a box's crop blurred alone differs within half a kernel of "
        "its edges)",
    ),
    Setting(
        "vita",
        "PA-HMDB51 privacy labels",
        "5 attributes (gender, face, nudity, skin colour, relationship), VISPR's ids merged "
        "onto them, present when a value is > 0",
        "VITA repository data-preparation/PA_HMDB51/attributes_pa_hmdb51.csv, "
        "vispr_anno_conversion.py:22-26, 36; data-preparation/VISPR/utils.py:36-37",
        ("hmdb_vispr_vita",),
        "eval_pa_hmdb51_labels",
        "merged",
        "same columns; two frame rules differ: where two ranges of an attribute overlap ours "
        "reads the first, as the release's viewer (GUI/Reviewer.py), VITA's conversion the "
        "last (one frame of hug.json), and a per-person list of values counts when one is > 0, "
        "where VITA's `value != 0` counts any list, [0, 0] too. And VITA's `labels_to_vec` "
        "marks a frame or image with none of the attributes as gender-positive (column 0): "
        "350 of PA-HMDB51's 52,411 labelled frames (a third of its gender negatives) and about "
        "half of VISPR's images, in its training and test records alike; ours leaves them "
        "negative for every attribute, so VITA's gender AP and cMAP are not comparable with ours",
    ),
    Setting(
        "meta",
        "PA-HMDB51 privacy labels",
        "5 attributes: skin colour, nudity, personal relationship (training), gender, face "
        "(testing); which test images is not stated, but the attributes are PA-HMDB51's and "
        "the supplement follows VITA [1, 2], whose HMDB51-VISPR evaluation tests on "
        "PA-HMDB51's frames",
        "Meta supp. list of attributes; VITA two_fold_evaluation/eval_2fold.py:108, "
        "utils.py:197-203",
        ("hmdb_vispr_meta",),
        "eval_pa_hmdb51_labels",
        "merged",
        "the config tests gender and face on VISPR's test images (--eval_privacy_attributes="
        "a4_gender,a9_face_complete,a10_face_partial: face as two columns), needing no "
        "PA-HMDB51; VITA's test is --eval_privacy_dataset=pa_hmdb51 with its annotations and "
        "root and --eval_privacy_attributes=gender,face, over these merged labels "
        "(relationship personal or social, face complete or partial)",
    ),
    Setting(
        "meta",
        "privacy figure reported",
        "one 'Privacy' figure per benchmark, lower better, which Fig. 1 calls privacy "
        "accuracy; how the ten test attack models' results are combined is not stated (the "
        "main paper's definition is not held here)",
        "Meta supp. Tables 1-3, Fig. 1",
        META,
        "",
        "report.md's main table gives the first --eval_privacy_model's (ResNet-V1-50) "
        "cMAP and F1, and its table by target architecture a column each for the ten",
        "ours: the report's metrics (cMAP, F1) for each attack model, none combined: compare "
        "with the paper's figure only once its definition (an accuracy, a mean or a maximum "
        "over the ten) is known",
    ),
    Setting(
        "meta",
        "evaluation protocol",
        "novel attributes",
        "Meta supp. list of attributes",
        META,
        "eval_protocol",
        "novel_attributes",
    ),
    Setting(
        "meta",
        "UCF101-VISPR training attributes",
        "7: colour, gender, complete / partial face, semi-nudity, personal / social relationship",
        "Meta supp. list of attributes",
        ("ucf101_vispr_meta",),
        "privacy_attributes",
        "vispr1",
    ),
    Setting(
        "meta",
        "UCF101-VISPR test attributes",
        "7: hair colour, race, sports, age, weight, landmark, tattoo",
        "Meta supp. list of attributes",
        ("ucf101_vispr_meta",),
        "eval_privacy_attributes",
        "vispr2",
    ),
    Setting(
        "meta",
        "HMDB51-VISPR training attributes",
        "3: skin colour, nudity, personal relationship",
        "Meta supp. list of attributes; VITA repository "
        "data-preparation/PA_HMDB51/vispr_anno_conversion.py:8-9",
        ("hmdb_vispr_meta",),
        "privacy_attributes",
        "a17_color,a12_semi_nudity,a64_rel_personal",
        "same: VISPR's columns as VITA maps PA-HMDB51's attributes onto them (relationship "
        "is a64_rel_personal), split 2/1 at 60/40; before 2026-12-07 a65_rel_social too",
    ),
    Setting(
        "meta",
        "HMDB51-VISPR test attributes",
        "2: gender, face",
        "Meta supp. list of attributes",
        ("hmdb_vispr_meta",),
        "eval_privacy_attributes",
        "a4_gender,a9_face_complete,a10_face_partial",
        "same attributes, on VISPR's test images (the supplement does not say which images), "
        "as 3 label columns: face counts twice in the cMAP",
    ),
    Setting(
        "meta",
        "epochs",
        "not stated (no public code; the main paper is not held here)",
        "Meta supp.",
        META,
        "minimax_epochs",
        "100",
        "not stated anywhere we can read: the SPAct config's 100, each one pass over the "
        "action videos (the UCF101 SPAct config's epoch is the authors' 150 batches)",
    ),
    Setting(
        "meta",
        "f_T and attack-model learning rates",
        "not stated (no public code; the main paper is not held here)",
        "Meta supp.",
        META,
        "action_lr",
        "1e-4",
        "not stated anywhere we can read: the SPAct config's 1e-4 (--privacy_lr too)",
    ),
    Setting(
        "meta",
        "f_T and attack-model initialisation learning-rate drop",
        "not stated (no public code; the main paper is not held here)",
        "Meta supp.",
        META,
        "init_lr_drop",
        "10",
        "not stated anywhere we can read: SPAct's initialisations, their drop included (to 1/10 "
        "after each epoch without a new lowest loss); before 2026-12-04 constant, unlike the "
        "SPAct configs",
    ),
    Setting(
        "meta",
        "target models' schedule",
        "not stated (no public code; the main paper is not held here)",
        "Meta supp.",
        META,
        "eval_lr_drop",
        "10",
        "not stated anywhere we can read: SPAct's (1e-3, to 1/10 on a loss plateau; before "
        "2026-11-30 constant)",
    ),
)
"""Every row of the table, grouped by method in the order of `METHODS`."""
