"""The training datasets, and how their clips and images are cut, augmented and batched."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import TYPE_CHECKING

from keras_privacy.config.setting import SettingError, at_least_one, described, one_of
from keras_privacy.data.augment import (
    CONTRASTIVE,
    PENALTY_CODE_IMAGES,
    SPACT_CODE_IMAGES,
    SUPERVISED,
    SUPERVISED_PENALTY_CODE,
    SUPERVISED_SPACT_CODE,
    AugmentConfig,
)
from keras_privacy.data.pipelines import PAIR_SAMPLERS, SHORT_VIDEOS
from keras_privacy.data.sources import DatasetFiles

if TYPE_CHECKING:
    from keras_privacy.config import ExperimentConfig

ACTION_DATASETS = ("synthetic", "ucf101", "hmdb51")
SUPERVISED_AUGMENTATIONS = {
    "default": (SUPERVISED, SUPERVISED),
    "spact": (SUPERVISED_SPACT_CODE, SPACT_CODE_IMAGES),
    "penalty": (SUPERVISED_PENALTY_CODE, PENALTY_CODE_IMAGES),
}
"""The supervised branches' augmentation presets (clips, images), by
`--supervised_augmentation`."""
CONTRASTIVE_AUGMENTATIONS = {
    "simclr": CONTRASTIVE,
    "spact": SPACT_CODE_IMAGES,
    "penalty": PENALTY_CODE_IMAGES,
}
"""The augmentation presets of the contrastive views of privacy images, by
`--contrastive_augmentation`."""
PRIVACY_DATASETS = ("synthetic", "vispr")
SPLIT_DATASETS = ("ucf101", "hmdb51", "vp_ucf101", "vp_hmdb51")
"""The datasets that read <action_split>: the official ones (the VP ones, their videos' split
lists), of the training or the evaluation; the built-in benchmark has one split, 1."""


@dataclasses.dataclass
class DataSettings:
    """The training datasets, and how their clips and images are cut, augmented and batched."""

    action_dataset: str = field(
        default="synthetic", metadata=described("synthetic | ucf101 | hmdb51", "data")
    )
    action_annotations: str = field(
        default="", metadata=described("Split-list folder of the action dataset.", "data")
    )
    action_root: str = field(default="", metadata=described("Folder of the action videos.", "data"))
    action_cache: str = field(
        default="", metadata=described("Prepared TFRecord cache of the action videos.", "data")
    )
    action_split: int = field(default=1, metadata=described("Official split number (1-3).", "data"))
    privacy_dataset: str = field(
        default="synthetic", metadata=described("synthetic | vispr", "data")
    )
    privacy_annotations: str = field(
        default="", metadata=described("VISPR annotation folder (list files, JSON).", "data")
    )
    privacy_root: str = field(
        default="", metadata=described("Folder of the privacy images.", "data")
    )
    privacy_cache: str = field(
        default="", metadata=described("Prepared TFRecord cache of the privacy images.", "data")
    )
    privacy_attributes: str = field(
        default="vispr1",
        metadata=described("vispr1 | vispr2 | all | comma-separated attribute ids.", "data"),
    )
    synthetic_dir: str = field(
        default="data/synthetic",
        metadata=described("Where the built-in synthetic benchmark is written.", "data"),
    )
    synthetic_version: int = field(
        default=4,
        metadata=described(
            "Version of the synthetic benchmark: 4 (motion classes) or 5 (classes read from "
            "the hand's movement and the object it holds, in a <synthetic_style>).",
            "data",
        ),
    )
    synthetic_style: str = field(
        default="",
        metadata=described(
            "Render style of version 5: studio | street | dusk (dusk is held out: no config is "
            "tuned on it); empty for version 4.",
            "data",
        ),
    )
    frame_size: int = field(
        default=48,
        metadata=described(
            "Short side of the decoded frames (their aspect kept): the built-in benchmark's and "
            "the evaluation's caches are made at it (images: <privacy_image_side>, where set), "
            "and a prepared training cache must be at least this large (the short side it was "
            "prepared at; files are read at their own size).",
            "data",
        ),
    )
    privacy_image_side: int = field(
        default=0,
        metadata=described(
            "Short side of the privacy images (their aspect kept) in the evaluation's and the "
            "built-in benchmark's caches, and the least a prepared privacy training cache must "
            "have; 0: <frame_size>. The VISPR configs cache images large enough that every crop "
            "is resized down to <image_size>, as the authors crop the full-resolution images.",
            "data",
        ),
    )
    image_size: int = field(default=32, metadata=described("Input frame side after crop.", "data"))
    clip_length: int = field(default=8, metadata=described("Frames per clip (T).", "data"))
    clip_stride: int = field(default=2, metadata=described("Take every s-th frame.", "data"))
    short_videos: str = field(
        default="loop",
        metadata=described(
            "How a clip goes on in a video shorter than its span, (<clip_length> - 1) x "
            "<clip_stride> + 1 frames, in training and test clips alike: loop (back to the first "
            "frame) | mirror (back through the clip's frames in reverse: SPAct's loader) | "
            "halve_stride (half the stride where that fits: the penalty authors' loaders).",
            "data",
        ),
    )
    flip_probability: float = field(
        default=0.5,
        metadata=described(
            "Horizontal flip probability of action clips (0 where direction is the class).", "data"
        ),
    )
    crop_min_side: float = field(
        default=0.6,
        metadata=described(
            "Smallest random crop of action clips, as a fraction of the short side.", "data"
        ),
    )
    erase_probability: float = field(
        default=0.25,
        metadata=described(
            "Random-erase probability of action clips (of each rectangle, where the "
            "<supervised_augmentation> preset erases several).",
            "data",
        ),
    )
    supervised_augmentation: str = field(
        default="default",
        metadata=described(
            "Colour and erase of the action clips and labelled privacy images: default (all of "
            "brightness, contrast, saturation +-0.2 and hue +-0.05 on 80 % of them; erase 2-20 "
            "% of the frame in a random colour) | spact (SPAct's loaders: each op on its own "
            "12.5-15 % at +-0.1, contrast to each frame's mean, a gamma on grayscale ones; a "
            "black rectangle of 9-18 px sides at 128, never on a flipped clip) | penalty (the "
            "penalty authors' loaders: spact's colour; on clips a crop keeping the frame's "
            "aspect and two black rectangles of 1/6-1/3 of a 240-px-high video's height and "
            "width in pixels at 224 (40-79 x 53-105 px for 4:3), each with probability "
            "<erase_probability>; on images sides of 9-18 px at 224).",
            "data",
        ),
    )
    contrastive_augmentation: str = field(
        default="simclr",
        metadata=described(
            "Augmentation of each contrastive view of a privacy image: simclr (SPAct supp. "
            "C.2: SimCLR's crops, colour jitter, colour drop and cut-out) | spact (the authors' "
            "minimax loader: <supervised_augmentation>=spact's light ops, crops keeping the "
            "image's aspect, both from one corner) | penalty (the penalty authors' minimax "
            "loader: the same at 224, the erased rectangle's sides 9-18 px).",
            "data",
        ),
    )
    pair_sampler: str = field(
        default="random",
        metadata=described(
            "Temporal sampler of the NT-Xent frame pairs (<contrastive_views>=frames|both; "
            "SPAct Table 4): random (two frames of the clip) | near (< 8 video frames apart, in "
            "the clip) | far (> 64 frames apart in the video, decoded besides the clip; a video "
            "of 65 frames or fewer gives its first and last frames).",
            "data",
        ),
    )
    batch_size: int = field(default=8, metadata=described("Action clips per batch.", "data"))
    privacy_batch_size: int = field(
        default=16, metadata=described("Privacy images per batch (two views each).", "data")
    )

    def image_side(self) -> int:
        """The short side of the cached privacy images: `privacy_image_side`, or `frame_size`."""
        return self.privacy_image_side or self.frame_size

    def image_augmentation(self) -> AugmentConfig:
        """The augmentation of labelled privacy images: the `supervised_augmentation`
        preset's."""
        return SUPERVISED_AUGMENTATIONS[self.supervised_augmentation][1]

    def view_augmentation(self) -> AugmentConfig:
        """The augmentation of each contrastive view of a privacy image."""
        return CONTRASTIVE_AUGMENTATIONS[self.contrastive_augmentation]

    def action_augmentation(self) -> AugmentConfig:
        """The augmentation of action clips: the `supervised_augmentation` preset with this run's
        flip, crop and erase."""
        return dataclasses.replace(
            SUPERVISED_AUGMENTATIONS[self.supervised_augmentation][0],
            flip=self.flip_probability,
            crop_side=(self.crop_min_side, 1.0),
            erase=self.erase_probability,
        )

    def dataset_files(self, kind: str) -> DatasetFiles:
        """Where the `kind` dataset (``action`` or ``privacy``) is, with the official split of
        the action dataset and the attributes of the privacy one (the built-in benchmark:
        `synthetic_dir`)."""
        name = getattr(self, f"{kind}_dataset")
        chosen = (
            {"split": self.action_split}
            if kind == "action"
            else {"attributes": self.privacy_attributes}
        )
        return DatasetFiles(
            name,
            annotations=getattr(self, f"{kind}_annotations"),
            root=self.synthetic_dir if name == "synthetic" else getattr(self, f"{kind}_root"),
            synthetic_version=self.synthetic_version,
            synthetic_style=self.synthetic_style,
            cache=getattr(self, f"{kind}_cache"),
            **chosen,
        )


def validate_data(config: DataSettings) -> None:
    """The datasets, the clip and image sizes, the augmentation and the batch sizes."""
    one_of("action_dataset", config.action_dataset, ACTION_DATASETS)
    one_of("privacy_dataset", config.privacy_dataset, PRIVACY_DATASETS)
    one_of("pair_sampler", config.pair_sampler, PAIR_SAMPLERS)
    one_of("short_videos", config.short_videos, SHORT_VIDEOS)
    one_of(
        "supervised_augmentation", config.supervised_augmentation, tuple(SUPERVISED_AUGMENTATIONS)
    )
    one_of(
        "contrastive_augmentation",
        config.contrastive_augmentation,
        tuple(CONTRASTIVE_AUGMENTATIONS),
    )
    at_least_one(config, ("image_size", "clip_length", "clip_stride", "batch_size"))
    if config.image_size > config.frame_size:
        raise SettingError(
            f"<image_size> ({config.image_size}) cannot exceed <frame_size> ({config.frame_size})"
        )
    if config.privacy_image_side < 0:
        raise SettingError(
            "<privacy_image_side> must be 0 (<frame_size>) or more, got "
            f"{config.privacy_image_side}"
        )
    if config.image_size > config.image_side():
        raise SettingError(
            f"<image_size> ({config.image_size}) cannot exceed <privacy_image_side> "
            f"({config.privacy_image_side})"
        )
    if not 0 <= config.flip_probability <= 1:
        raise SettingError(f"<flip_probability> must be in [0, 1], got {config.flip_probability}")
    if not 0 < config.crop_min_side <= 1:
        raise SettingError(f"<crop_min_side> must be in (0, 1], got {config.crop_min_side}")
    if not 0 <= config.erase_probability <= 1:
        raise SettingError(f"<erase_probability> must be in [0, 1], got {config.erase_probability}")
    if config.privacy_batch_size < 1:
        raise SettingError("<privacy_batch_size> must be at least 1")
    if config.action_split not in (1, 2, 3):
        raise SettingError(
            f"<action_split>={config.action_split}: UCF101 and HMDB51 have splits 1, 2 and 3"
        )
    validate_synthetic(config)


def validate_synthetic(config: DataSettings) -> None:
    """<synthetic_dir> names a folder (an empty one is the working directory, where an unset
    shell variable left it); <synthetic_version> is 4 (no style) or 5 with one of the
    benchmark's styles."""
    from keras_privacy.data import synthetic

    if not config.synthetic_dir:
        raise SettingError(
            "<synthetic_dir> is empty: name the folder of the built-in benchmark (default "
            "data/synthetic)"
        )
    if config.synthetic_version not in (synthetic.VERSION, 5):
        raise SettingError(f"<synthetic_version>={config.synthetic_version}: 4 or 5")
    if config.synthetic_version == synthetic.VERSION and config.synthetic_style:
        raise SettingError(
            f"<synthetic_style>={config.synthetic_style} needs <synthetic_version>=5"
        )
    if config.synthetic_version == 5 and config.synthetic_style not in synthetic.STYLES:
        raise SettingError(
            f"<synthetic_style>={config.synthetic_style!r}: version 5 needs one of "
            f"{', '.join(synthetic.STYLES)}"
        )


def validate_dataset_files(config: ExperimentConfig) -> None:
    """Every dataset but the built-in one names its files: a prepared cache, or annotations
    and a root folder. The built-in one is in <synthetic_dir>: annotations or a root given with
    it are refused (an evaluation on another dataset names its own), and so is a split other
    than its one where no dataset of the evaluation reads <action_split> either."""
    for kind, datasets in (("action", ACTION_DATASETS), ("privacy", PRIVACY_DATASETS)):
        dataset = getattr(config, f"{kind}_dataset")
        cache = getattr(config, f"{kind}_cache")
        annotations = getattr(config, f"{kind}_annotations")
        root = getattr(config, f"{kind}_root")
        if dataset != "synthetic" and not (cache or (annotations and root)):
            raise SettingError(
                f"<{kind}_dataset>={dataset} needs <{kind}_cache>, or both "
                f"<{kind}_annotations> and <{kind}_root>"
            )
        unread = [
            f"<{kind}_{name}>"
            for name in ("annotations", "root")
            if getattr(config, f"{kind}_{name}")
        ]
        if dataset == "synthetic" and unread:
            raise SettingError(
                f"<{kind}_dataset>=synthetic does not read {' or '.join(unread)} (the built-in "
                f"benchmark is in <synthetic_dir>): set <{kind}_dataset> to "
                f"{' or '.join(datasets[1:])} to train on those files, or leave "
                f"{'them' if len(unread) > 1 else 'it'} out"
            )
    evaluation = config.evaluation_datasets()
    readers = {config.action_dataset, evaluation.action_dataset, evaluation.privacy_dataset}
    if config.action_split != 1 and not readers & set(SPLIT_DATASETS):
        raise SettingError(
            f"<action_split>={config.action_split}: the built-in benchmark has one split, 1, and "
            "no other dataset of the run reads one"
        )
