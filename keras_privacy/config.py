"""One experiment's settings, shared by `train.py`, `evaluate.py` and notebooks.

The defaults are the built-in synthetic benchmark sized for 2 CPU cores; `configs/*.cfg` hold the
papers' settings. Scripts turn absl flags into an `ExperimentConfig` (`keras_privacy.flags`);
library code only ever sees this object.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import field
from pathlib import Path

from keras_privacy.data.augment import SUPERVISED, AugmentConfig
from keras_privacy.data.pipelines import PAIR_SAMPLERS
from keras_privacy.distribute import DISTRIBUTIONS, JIT_COMPILE, PRECISIONS
from keras_privacy.known_weights import missing_weights_message
from keras_privacy.methods.spact import SSL_ADVERSARIES
from keras_privacy.methods.steps import CONTRASTIVE_VIEWS
from keras_privacy.methods.vita import ACTION_SCHEDULES, BUDGET_LOSSES

METHODS = ("spact", "penalty", "vita", "meta")
ACTION_DATASETS = ("synthetic", "ucf101", "hmdb51")
PRIVACY_DATASETS = ("synthetic", "vispr")
EVAL_PROTOCOLS = ("same", "cross_dataset", "novel_actions", "novel_attributes", "pa_hmdb51")
EVAL_PRIVACY_DATASETS = (*PRIVACY_DATASETS, "pa_hmdb51")
WEIGHT_FLAGS = (
    "anonymizer_weights",
    "action_weights",
    "privacy_weights",
    "eval_action_weights",
    "eval_privacy_weights",
)
"""The flags that name a pretrained weight file."""
_EVAL_DATA_FIELDS = (
    "action_dataset",
    "action_annotations",
    "action_root",
    "privacy_dataset",
    "privacy_annotations",
    "privacy_root",
    "privacy_attributes",
)
"""The data fields that an evaluation may replace with its own `eval_<field>` flag."""
SELF_SUPERVISED = ("spact", "penalty")
IMAGE_ADVERSARIES = ("ntxent", "rotnet", "moco")


@dataclasses.dataclass(frozen=True)
class FlagScope:
    """Where a flag has an effect: under `methods`, with one of `ssl_adversaries` (for the
    SPAct methods), and only while the flag `needs` is on (not its default). A flag that is
    also the default of `fallback_for` acts under every method while that one is unset."""

    methods: tuple[str, ...]
    ssl_adversaries: tuple[str, ...] = SSL_ADVERSARIES
    needs: str = ""
    fallback_for: str = ""


FLAG_SCOPES = {
    "pair_sampler": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "privacy_backbone": FlagScope(SELF_SUPERVISED, fallback_for="eval_privacy_model"),
    "projection_hidden": FlagScope(SELF_SUPERVISED),
    "projection_dim": FlagScope(SELF_SUPERVISED),
    "contrastive_views": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "privacy_weights": FlagScope(SELF_SUPERVISED),
    "action_weight": FlagScope(SELF_SUPERVISED),
    "temperature": FlagScope(SELF_SUPERVISED),
    "penalty_weight": FlagScope(("spact", "penalty", "vita")),
    "penalty_budget": FlagScope(("spact", "penalty", "vita"), needs="penalty_weight"),
    "adversary_models": FlagScope(("vita", "meta")),
    "budget_loss": FlagScope(("vita",)),
    "action_threshold": FlagScope(("vita", "meta")),
    "adversary_threshold": FlagScope(("vita", "meta")),
    "restart_every": FlagScope(("vita",)),
    "action_schedule": FlagScope(("vita",)),
    "action_max_updates": FlagScope(("vita",)),
    "action_validation_every": FlagScope(("vita",)),
    "action_moves_anonymizer": FlagScope(("vita",)),
    "adversary_updates_per_step": FlagScope(("vita",)),
    "budget_pretrain_updates": FlagScope(("vita",)),
    "meta_fraction": FlagScope(("meta",)),
    "meta_alpha": FlagScope(("meta",)),
    "meta_first_order": FlagScope(("meta",)),
    "ssl_adversary": FlagScope(SELF_SUPERVISED),
    "moco_queue_size": FlagScope(SELF_SUPERVISED, ("moco",)),
    "moco_momentum": FlagScope(SELF_SUPERVISED, ("moco",)),
    "triplet_weight": FlagScope(SELF_SUPERVISED),
    "triplet_margin": FlagScope(SELF_SUPERVISED, needs="triplet_weight"),
    "adversary_crop": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
    "adversary_jitter": FlagScope(SELF_SUPERVISED, IMAGE_ADVERSARIES),
}
"""The flags that only some methods read (from `training.py`, the trainers and the input
pipeline); every other flag acts under every method. `validate` refuses a flag set to a
non-default value where it has no effect. `pair_sampler` also picks the two frames per clip
that the identity initialisation reconstructs, but its purpose, SPAct's temporal positive
pairs, exists only with an image adversary of the SPAct methods."""


def _help(text: str, group: str) -> dict:
    return {"help": text, "group": group}


@dataclasses.dataclass
class ExperimentConfig:
    """Every setting of a training and evaluation run (see the README's flag table)."""

    # Run
    method: str = field(
        default="spact",
        metadata=_help(
            "Training method: spact (self-supervised adversary), penalty (SPAct with the RMS "
            "penalty), vita (supervised budget models), meta (meta generalisation).",
            "run",
        ),
    )
    run_dir: str = field(
        default="runs/synthetic", metadata=_help("Checkpoints, logs, models, report.", "run")
    )
    seed: int = field(default=0, metadata=_help("Seed of data order, augmentation, init.", "run"))
    seeds: int = field(
        default=1,
        metadata=_help(
            "Runs of seeds seed..seed+N-1, each in run_dir/seed_K (evaluate.py: each evaluated "
            "into its own report, then a summary of mean +- std across seeds); 1 = one run in "
            "run_dir.",
            "run",
        ),
    )
    jit_compile: str = field(
        default="auto",
        metadata=_help(
            "auto | true | false: XLA-compile the training steps. auto: XLA on JAX and on a "
            "TensorFlow GPU; on a TensorFlow CPU, XLA unless a trained model has 3-D "
            "convolutions (XLA:CPU runs those several times slower than TensorFlow's graph).",
            "run",
        ),
    )
    distribution: str = field(
        default="none",
        metadata=_help(
            "none | data_parallel: replicate the models on every local GPU (else CPU device) and "
            "split each batch; batch sizes are global (see the README).",
            "run",
        ),
    )
    num_processes: int = field(
        default=1,
        metadata=_help(
            "Processes of a multi-process JAX job (with --distribution=data_parallel): 1 = this "
            "process alone; N > 1 with --process_id and --coordinator_address; 0 = read from "
            "the cluster's environment (SLURM, Open MPI, Kubernetes).",
            "run",
        ),
    )
    process_id: int = field(
        default=0, metadata=_help("This process's index in 0 .. --num_processes - 1.", "run")
    )
    coordinator_address: str = field(
        default="",
        metadata=_help("host:port where process 0 of a multi-process job listens.", "run"),
    )
    mixed_precision: str = field(
        default="float32",
        metadata=_help(
            "float32 | mixed_bfloat16 | mixed_float16 (with dynamic loss scaling).", "run"
        ),
    )

    # Data
    action_dataset: str = field(
        default="synthetic", metadata=_help("synthetic | ucf101 | hmdb51", "data")
    )
    action_annotations: str = field(
        default="", metadata=_help("Split-list folder of the action dataset.", "data")
    )
    action_root: str = field(default="", metadata=_help("Folder of the action videos.", "data"))
    action_cache: str = field(
        default="", metadata=_help("Prepared TFRecord cache of the action videos.", "data")
    )
    action_split: int = field(default=1, metadata=_help("Official split number (1-3).", "data"))
    privacy_dataset: str = field(default="synthetic", metadata=_help("synthetic | vispr", "data"))
    privacy_annotations: str = field(
        default="", metadata=_help("VISPR annotation folder (list files, JSON).", "data")
    )
    privacy_root: str = field(default="", metadata=_help("Folder of the privacy images.", "data"))
    privacy_cache: str = field(
        default="", metadata=_help("Prepared TFRecord cache of the privacy images.", "data")
    )
    privacy_attributes: str = field(
        default="vispr1",
        metadata=_help("vispr1 | vispr2 | all | comma-separated attribute ids.", "data"),
    )
    synthetic_dir: str = field(
        default="data/synthetic",
        metadata=_help("Where the built-in synthetic benchmark is written.", "data"),
    )
    frame_size: int = field(
        default=48, metadata=_help("Decoded frame side (short side, centre square).", "data")
    )
    image_size: int = field(default=32, metadata=_help("Input frame side after crop.", "data"))
    clip_length: int = field(default=8, metadata=_help("Frames per clip (T).", "data"))
    clip_stride: int = field(default=2, metadata=_help("Take every s-th frame.", "data"))
    flip_probability: float = field(
        default=0.5,
        metadata=_help(
            "Horizontal flip probability of action clips (0 where direction is the class).", "data"
        ),
    )
    crop_min_side: float = field(
        default=0.6,
        metadata=_help(
            "Smallest random crop of action clips, as a fraction of the short side.", "data"
        ),
    )
    erase_probability: float = field(
        default=0.25, metadata=_help("Random-erase probability of action clips.", "data")
    )
    pair_sampler: str = field(
        default="random",
        metadata=_help(
            "Temporal sampler of the NT-Xent frame pairs (--contrastive_views=frames|both; "
            "SPAct Table 4): random (two frames of the clip) | near (< 8 video frames apart, in "
            "the clip) | far (> 64 frames apart in the video, decoded besides the clip; a video "
            "of 65 frames or fewer gives its first and last frames).",
            "data",
        ),
    )
    batch_size: int = field(default=8, metadata=_help("Action clips per batch.", "data"))
    privacy_batch_size: int = field(
        default=16, metadata=_help("Privacy images per batch (two views each).", "data")
    )

    # Models
    anonymizer: str = field(default="unet_tiny", metadata=_help("Anonymizer f_A.", "models"))
    action_model: str = field(
        default="r3d_tiny", metadata=_help("Action model f_T (registry name).", "models")
    )
    privacy_backbone: str = field(
        default="resnet_tiny",
        metadata=_help(
            "Backbone of the privacy encoder f_B; a comma-separated list trains an ensemble of "
            "encoders (SPAct Table 6), each with its own head. With "
            "--ssl_adversary=spatiotemporal, an action model (SPAct: r3d_18) whose trunk "
            "encodes clips.",
            "models",
        ),
    )
    anonymizer_weights: str = field(
        default="",
        metadata=_help(
            "Start f_A from this weight file (.keras, .weights.h5, or a PyTorch .pth / .pt / "
            ".safetensors checkpoint of --anonymizer's architecture); what matches loads, the "
            "rest stays fresh, and a report is printed. A .keras file converted with "
            "--normalization puts its input normalisation in front of the model. Empty: from "
            "scratch (say so explicitly to override a config's file).",
            "models",
        ),
    )
    action_weights: str = field(
        default="",
        metadata=_help(
            "Start f_T from this weight file (as --anonymizer_weights; a PyTorch checkpoint of "
            "--action_model's architecture, e.g. Kinetics-400 with a new head).",
            "models",
        ),
    )
    privacy_weights: str = field(
        default="",
        metadata=_help(
            "Start f_B from this weight file (as --anonymizer_weights; a PyTorch checkpoint of "
            "--privacy_backbone's architecture loads into the trunk under the projection "
            "head; a SimCLR f_B checkpoint fills trunk and head). SPAct and penalty with one "
            "privacy encoder.",
            "models",
        ),
    )
    projection_hidden: int = field(
        default=128, metadata=_help("Hidden width of f_B's projection head.", "models")
    )
    projection_dim: int = field(
        default=64, metadata=_help("Output width of f_B's projection head.", "models")
    )

    # Training phases
    identity_epochs: int = field(
        default=2, metadata=_help("Epochs of f_A identity initialisation.", "train")
    )
    identity_lr: float = field(
        default=1e-3, metadata=_help("Identity-init learning rate.", "train")
    )
    identity_warmup_epochs: int = field(
        default=1, metadata=_help("Linear warm-up epochs of the identity init.", "train")
    )
    action_init_epochs: int = field(
        default=4, metadata=_help("Epochs of f_T on f_A(x) before the minimax.", "train")
    )
    action_init_lr: float = field(default=1e-3, metadata=_help("f_T init learning rate.", "train"))
    privacy_init_epochs: int = field(
        default=2, metadata=_help("Epochs of self-supervised f_B before the minimax.", "train")
    )
    privacy_init_lr: float = field(default=1e-3, metadata=_help("f_B init learning rate.", "train"))
    minimax_epochs: int = field(default=4, metadata=_help("Epochs of the minimax.", "train"))
    anonymizer_lr: float = field(
        default=1e-4, metadata=_help("f_A minimax learning rate.", "train")
    )
    action_lr: float = field(default=1e-4, metadata=_help("f_T minimax learning rate.", "train"))
    privacy_lr: float = field(default=1e-4, metadata=_help("f_B minimax learning rate.", "train"))
    steps_per_epoch: int = field(
        default=0, metadata=_help("Batches per epoch; 0 = one pass over the action set.", "train")
    )
    minimax_steps_per_epoch: int = field(
        default=0,
        metadata=_help(
            "Batches per epoch of the minimax (a length in steps, as VITA's authors give it: "
            "--minimax_epochs x this); 0 = --steps_per_epoch.",
            "train",
        ),
    )
    action_weight: float = field(default=1.0, metadata=_help("w_T of L_T for f_A.", "train"))
    privacy_weight: float = field(default=1.0, metadata=_help("w_B of -L_B for f_A.", "train"))
    temperature: float = field(default=0.1, metadata=_help("NT-Xent temperature.", "train"))
    penalty_weight: float = field(
        default=0.0, metadata=_help("lambda of the RMS penalty (0 = off).", "train")
    )
    penalty_budget: float = field(default=0.3, metadata=_help("B of the RMS penalty.", "train"))

    # Supervised adversaries (vita, meta)
    adversary_models: str = field(
        default="resnet_tiny",
        metadata=_help(
            "Comma-separated image models: VITA's budget ensemble / meta's training attack "
            "models. Trained on privacy labels (init: --privacy_init_*, minimax: --privacy_lr).",
            "adversary",
        ),
    )
    budget_loss: str = field(
        default="max_bce",
        metadata=_help(
            "VITA's budget term on the anonymized action clips: max_bce (the authors': per clip, "
            "BCE of the frame-averaged logits against all ones, max over the ensemble, batch "
            "mean) | entropy (negative binary entropy in its place) | image_max_bce (earlier "
            "form: BCE against all ones on the anonymized privacy images, max of batch means).",
            "adversary",
        ),
    )
    action_threshold: float = field(
        default=0.7,
        metadata=_help(
            "f_T updates while its accuracy is below this (T1; VITA's validation_loop: on the "
            "held-out clips).",
            "adversary",
        ),
    )
    adversary_threshold: float = field(
        default=0.95,
        metadata=_help(
            "An adversary updates while its batch accuracy is below this (T2); for VITA, 1 = "
            "no threshold (the authors').",
            "adversary",
        ),
    )
    restart_every: int = field(
        default=0,
        metadata=_help(
            "VITA: restart the budget models after every N minimax steps (0 = never).",
            "adversary",
        ),
    )
    action_schedule: str = field(
        default="validation_loop",
        metadata=_help(
            "VITA's f_T updates per step: validation_loop (the authors': while f_T's accuracy "
            "on held-out clips < --action_threshold, at most --action_max_updates) | "
            "batch_gate (one update, applied while its training-batch accuracy is below it).",
            "adversary",
        ),
    )
    action_max_updates: int = field(
        default=5,
        metadata=_help("VITA: the bound of the validation_loop's f_T updates a step.", "adversary"),
    )
    action_validation_every: int = field(
        default=10,
        metadata=_help(
            "VITA's validation_loop: every Nth training video (by index) is held out of "
            "training as the validation clips.",
            "adversary",
        ),
    )
    action_moves_anonymizer: bool = field(
        default=True,
        metadata=_help(
            "VITA: f_T's update also moves f_A, with an Adam of its own at --action_lr (the "
            "authors').",
            "adversary",
        ),
    )
    adversary_updates_per_step: int = field(
        default=5,
        metadata=_help(
            "VITA: updates of every budget model per step, each on its own privacy batch (the "
            "authors: 5).",
            "adversary",
        ),
    )
    budget_pretrain_updates: int = field(
        default=0,
        metadata=_help(
            "VITA: budget-model updates alone (a multiple of --adversary_updates_per_step) at "
            "the start of the minimax and after each restart (the authors: 200).",
            "adversary",
        ),
    )
    meta_fraction: float = field(
        default=0.6,
        metadata=_help("Meta: share of attributes / attack models in support sets.", "adversary"),
    )
    meta_alpha: float = field(
        default=5e-4, metadata=_help("Meta: virtual-training step size alpha.", "adversary")
    )
    meta_first_order: bool = field(
        default=False,
        metadata=_help(
            "Meta: first-order meta-gradient (no second-order term). Beta is --anonymizer_lr "
            "(an SGD step, as the paper).",
            "adversary",
        ),
    )

    # SPAct variants (spact, penalty)
    ssl_adversary: str = field(
        default="ntxent",
        metadata=_help(
            "Self-supervised adversary of the minimax (SPAct Table 5): ntxent | rotnet (4-way "
            "rotation prediction) | moco (momentum encoder and queue); its init stays NT-Xent. "
            "spatiotemporal (SPAct Table 3): f_B is a video encoder trained, in its init too, by "
            "NT-Xent on two clips of each video (needs --eval_privacy_model).",
            "variants",
        ),
    )
    moco_queue_size: int = field(
        default=4096, metadata=_help("MoCo: K, negatives kept in the queue.", "variants")
    )
    moco_momentum: float = field(
        default=0.999, metadata=_help("MoCo: m of the key encoder's EMA.", "variants")
    )
    triplet_weight: float = field(
        default=0.0,
        metadata=_help(
            "TeD-SPAD temporal triplet term in the action loss of f_A and f_T (0 = off).",
            "variants",
        ),
    )
    triplet_margin: float = field(
        default=1.0, metadata=_help("Margin mu of the triplet term (TeD-SPAD: 1).", "variants")
    )
    contrastive_views: str = field(
        default="images",
        metadata=_help(
            "Positive pairs of an image f_B (its init and the minimax): images (two augmented "
            "views of each privacy image, the authors' code) | frames (two frames of each clip, "
            "chosen by --pair_sampler, the paper's Sec. 3.2.2) | both (one NT-Xent over both).",
            "variants",
        ),
    )
    adversary_crop: float = field(
        default=0.0,
        metadata=_help(
            "Smallest area of a random resized crop (and flip) of f_A's output before an image "
            "f_B; > 0 also makes both sides of a pair augmentations of one anonymized image "
            "(0 = off).",
            "variants",
        ),
    )
    adversary_jitter: float = field(
        default=0.0,
        metadata=_help(
            "Strength of a random colour jitter (SimCLR's colour distortion) of f_A's outputs "
            "before an image f_B, in both halves of the minimax (0 = off; SimCLR: 1).",
            "variants",
        ),
    )

    # Evaluation
    eval_methods: str = field(
        default="learned,raw,downsample_4x,blur_strong,blacken",
        metadata=_help(
            "Comma-separated methods: learned (this run's anonymizer, reported under --method "
            "and its variant settings, e.g. 'spact (crop 0.25, both views)'), "
            "NAME=PATH (another saved anonymizer), raw, downsample_2x, downsample_4x, blacken, "
            "blur_strong, blur_weak.",
            "eval",
        ),
    )
    anonymizer_path: str = field(
        default="", metadata=_help("Saved anonymizer of `learned`; default run_dir's.", "eval")
    )
    eval_dir: str = field(
        default="", metadata=_help("Report folder; default run_dir/evaluation.", "eval")
    )
    eval_action_model: str = field(
        default="",
        metadata=_help(
            "Target action model f'_T; default --action_model. A comma-separated list trains "
            "and tests each per method (the first fills the report's headline columns).",
            "eval",
        ),
    )
    eval_privacy_model: str = field(
        default="",
        metadata=_help(
            "Target privacy backbone f'_B; default --privacy_backbone (its first model); "
            "required with --ssl_adversary=spatiotemporal. A comma-separated list trains and "
            "tests each per method (the first fills the report's headline columns).",
            "eval",
        ),
    )
    eval_action_weights: str = field(
        default="",
        metadata=_help(
            "Start every target action model f'_T from this weight file (as "
            "--action_weights; a PyTorch checkpoint of --eval_action_model's architecture).",
            "eval",
        ),
    )
    eval_privacy_weights: str = field(
        default="",
        metadata=_help(
            "Start every target privacy model f'_B from this weight file (as "
            "--action_weights; a PyTorch checkpoint of --eval_privacy_model's architecture).",
            "eval",
        ),
    )
    eval_action_epochs: int = field(
        default=8, metadata=_help("Epochs of the target action model.", "eval")
    )
    eval_privacy_epochs: int = field(
        default=8, metadata=_help("Epochs of the target privacy model.", "eval")
    )
    eval_lr: float = field(default=1e-3, metadata=_help("Target models' learning rate.", "eval"))
    eval_clips: int = field(
        default=10, metadata=_help("K equidistant clips per test video (video top-1).", "eval")
    )
    eval_bootstrap: int = field(
        default=1000,
        metadata=_help(
            "Bootstrap resamples of the test videos / images for each metric's 95 % interval "
            "(0 = no intervals).",
            "eval",
        ),
    )
    eval_boxes: str = field(
        default="",
        metadata=_help(
            "JSON of person boxes per file for the people baselines (else HOG).", "eval"
        ),
    )
    action_multilabel: bool = field(
        default=False,
        metadata=_help(
            "Multi-label actions (P-HVU): f'_T trains with BCE, reported by action cMAP.", "eval"
        ),
    )
    eval_protocol: str = field(
        default="same",
        metadata=_help(
            "What the target models are trained and tested on: same (the training datasets) | "
            "cross_dataset (another action or privacy dataset, e.g. PA-HMDB51) | novel_actions "
            "(an action dataset of other classes) | novel_attributes (privacy attributes "
            "disjoint from --privacy_attributes) | pa_hmdb51 (VITA's: HMDB51 without the "
            "PA-HMDB51 videos for training, action and privacy tested on the PA-HMDB51 videos; "
            "give it to train.py too). The datasets are the --eval_action_* and --eval_privacy_* "
            "flags.",
            "eval",
        ),
    )
    eval_action_dataset: str = field(
        default="",
        metadata=_help(
            "Action dataset of the target models: synthetic | ucf101 | hmdb51; default "
            "--action_dataset.",
            "eval",
        ),
    )
    eval_action_annotations: str = field(
        default="",
        metadata=_help("Its split-list folder; default --action_annotations.", "eval"),
    )
    eval_action_root: str = field(
        default="", metadata=_help("Its video folder; default --action_root.", "eval")
    )
    eval_privacy_dataset: str = field(
        default="",
        metadata=_help(
            "Privacy dataset of the target models: synthetic | vispr | pa_hmdb51 (tested on "
            "equidistant frames of its videos, trained on the VISPR of --privacy_annotations "
            "with the VISPR-1 labels merged onto its attributes); default --privacy_dataset.",
            "eval",
        ),
    )
    eval_privacy_annotations: str = field(
        default="",
        metadata=_help(
            "Its annotation folder (PA-HMDB51: PrivacyAttributes/); default --privacy_annotations.",
            "eval",
        ),
    )
    eval_privacy_root: str = field(
        default="",
        metadata=_help(
            "Its image folder (PA-HMDB51: the HMDB51 videos); default --privacy_root.", "eval"
        ),
    )
    eval_privacy_attributes: str = field(
        default="",
        metadata=_help(
            "Attributes of the target privacy models, as --privacy_attributes (PA-HMDB51: "
            "gender, face, nudity, skin_color, relationship or a comma-separated subset); "
            "default --privacy_attributes (PA-HMDB51: all five).",
            "eval",
        ),
    )
    eval_privacy_frames: int = field(
        default=5,
        metadata=_help(
            "PA-HMDB51: equidistant frames of each video taken as test images, each labelled "
            "by its own frame index.",
            "eval",
        ),
    )

    def action_augmentation(self) -> AugmentConfig:
        """The augmentation of action clips: SPAct's, with this run's flip, crop and erase."""
        return dataclasses.replace(
            SUPERVISED,
            flip=self.flip_probability,
            crop_side=(self.crop_min_side, 1.0),
            erase=self.erase_probability,
        )

    def validate(self) -> None:
        """Raise ValueError naming the first setting that makes no sense."""
        for setting in dataclasses.fields(self):
            value = getattr(self, setting.name)
            # A learning rate or loss weight of inf / nan turns the weights non-finite at once.
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"--{setting.name} must be a finite number, got {value}")
        _one_of("method", self.method, METHODS)
        _one_of("ssl_adversary", self.ssl_adversary, SSL_ADVERSARIES)
        self._validate_flags_in_use()
        _one_of("distribution", self.distribution, DISTRIBUTIONS)
        _one_of("mixed_precision", self.mixed_precision, PRECISIONS)
        _one_of("jit_compile", str(self.jit_compile).lower(), JIT_COMPILE)
        for name in WEIGHT_FLAGS:
            path = getattr(self, name)
            if path and not Path(path).is_file():
                raise ValueError(missing_weights_message(name, path))
        if self.privacy_weights and len(self.privacy_backbone_names()) > 1:
            raise ValueError(
                "--privacy_weights starts SPAct's one privacy encoder f_B; an ensemble of "
                f"--privacy_backbone ({self.privacy_backbone}) has several"
            )
        if self.num_processes != 1:
            if self.distribution != "data_parallel":
                raise ValueError(
                    f"--num_processes={self.num_processes} trains one model across processes: "
                    "it needs --distribution=data_parallel"
                )
            if self.num_processes < 0:
                raise ValueError(f"--num_processes must be 0 or more, got {self.num_processes}")
            if self.num_processes > 1 and not 0 <= self.process_id < self.num_processes:
                raise ValueError(
                    f"--process_id={self.process_id} is not in 0 .. {self.num_processes - 1}"
                )
            if self.num_processes > 1 and not self.coordinator_address:
                raise ValueError(
                    f"--num_processes={self.num_processes} needs --coordinator_address "
                    "(host:port of process 0)"
                )
        if self.distribution == "data_parallel" and self.method == "meta":
            raise ValueError(
                "--distribution=data_parallel does not support --method=meta: its batches carry "
                "per-model masks that cannot be split across devices"
            )
        _one_of("action_dataset", self.action_dataset, ACTION_DATASETS)
        _one_of("privacy_dataset", self.privacy_dataset, PRIVACY_DATASETS)
        _one_of("pair_sampler", self.pair_sampler, PAIR_SAMPLERS)
        _one_of("budget_loss", self.budget_loss, BUDGET_LOSSES)
        for name in ("seeds", "image_size", "clip_length", "clip_stride", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.image_size > self.frame_size:
            raise ValueError(
                f"--image_size ({self.image_size}) cannot exceed --frame_size ({self.frame_size})"
            )
        if not 0 <= self.flip_probability <= 1:
            raise ValueError(f"--flip_probability must be in [0, 1], got {self.flip_probability}")
        if not 0 < self.crop_min_side <= 1:
            raise ValueError(f"--crop_min_side must be in (0, 1], got {self.crop_min_side}")
        if not 0 <= self.erase_probability <= 1:
            raise ValueError(f"--erase_probability must be in [0, 1], got {self.erase_probability}")
        if self.privacy_batch_size < 1:
            raise ValueError("--privacy_batch_size must be at least 1")
        for name in (
            "identity_epochs",
            "action_init_epochs",
            "privacy_init_epochs",
            "minimax_epochs",
            "steps_per_epoch",
            "minimax_steps_per_epoch",
            "eval_bootstrap",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name} cannot be negative, got {getattr(self, name)}")
        if self.identity_warmup_epochs > self.identity_epochs:
            raise ValueError(
                f"--identity_warmup_epochs ({self.identity_warmup_epochs}) exceeds "
                f"--identity_epochs ({self.identity_epochs})"
            )
        for name in (
            "identity_lr",
            "action_init_lr",
            "privacy_init_lr",
            "anonymizer_lr",
            "action_lr",
            "privacy_lr",
            "temperature",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        for name in (
            "eval_action_epochs",
            "eval_privacy_epochs",
            "eval_clips",
            "eval_privacy_frames",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.seeds > 1 and self.anonymizer_path:
            raise ValueError(
                "--seeds evaluates each seed's own anonymizer (run_dir/seed_K): drop "
                "--anonymizer_path, which names one file"
            )
        if not self.eval_lr > 0:
            raise ValueError(f"--eval_lr must be positive, got {self.eval_lr}")
        if self.penalty_weight < 0 or self.penalty_budget < 0:
            raise ValueError("--penalty_weight and --penalty_budget cannot be negative")
        if self.method == "penalty" and self.penalty_weight == 0:
            raise ValueError("--method=penalty needs --penalty_weight > 0 (lambda of the penalty)")
        _one_of("contrastive_views", self.contrastive_views, CONTRASTIVE_VIEWS)
        if (
            self.ssl_adversary == "moco"
            and self.moco_queue_size < self.batch_size + self.privacy_batch_size
        ):
            raise ValueError(
                f"--moco_queue_size={self.moco_queue_size} must hold at least one batch of keys "
                f"(--batch_size + --privacy_batch_size = "
                f"{self.batch_size + self.privacy_batch_size})"
            )
        if not 0 <= self.moco_momentum < 1:
            raise ValueError(f"--moco_momentum must be in [0, 1), got {self.moco_momentum}")
        if self.adversary_jitter < 0:
            raise ValueError(f"--adversary_jitter cannot be negative, got {self.adversary_jitter}")
        if not 0 <= self.adversary_crop <= 1:
            raise ValueError(f"--adversary_crop must be in [0, 1], got {self.adversary_crop}")
        if self.triplet_weight < 0 or self.triplet_margin < 0:
            raise ValueError("--triplet_weight and --triplet_margin cannot be negative")
        if self.triplet_weight > 0 and self.clip_length < 2:
            raise ValueError(
                "--triplet_weight > 0 needs --clip_length >= 2 (the triplet's anchor and negative "
                f"are the two halves of a clip), got {self.clip_length}"
            )
        for name in ("action_threshold", "adversary_threshold"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"--{name} must be in (0, 1], got {getattr(self, name)}")
        if not 0 < self.meta_fraction < 1:
            raise ValueError(f"--meta_fraction must be in (0, 1), got {self.meta_fraction}")
        if self.restart_every < 0 or self.meta_alpha < 0:
            raise ValueError("--restart_every and --meta_alpha cannot be negative")
        _one_of("action_schedule", self.action_schedule, ACTION_SCHEDULES)
        for name in ("action_max_updates", "adversary_updates_per_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name} must be at least 1, got {getattr(self, name)}")
        if self.action_validation_every < 2:
            raise ValueError(
                f"--action_validation_every must be at least 2, got {self.action_validation_every}"
            )
        if (
            self.budget_pretrain_updates < 0
            or self.budget_pretrain_updates % self.adversary_updates_per_step
        ):
            raise ValueError(
                f"--budget_pretrain_updates={self.budget_pretrain_updates} must be a "
                "non-negative multiple of --adversary_updates_per_step="
                f"{self.adversary_updates_per_step}"
            )
        if not self.adversary_model_names():
            raise ValueError("--adversary_models names no model")
        if not self.privacy_backbone_names():
            raise ValueError("--privacy_backbone names no model")
        if len(self.privacy_backbone_names()) > 1 and self.ssl_adversary != "ntxent":
            raise ValueError(
                f"--privacy_backbone={self.privacy_backbone} (an ensemble) trains with "
                f"--ssl_adversary=ntxent only, got {self.ssl_adversary}"
            )
        if self.ssl_adversary == "spatiotemporal" and not self.eval_privacy_model:
            raise ValueError(
                "--ssl_adversary=spatiotemporal needs --eval_privacy_model (an image model): "
                "its --privacy_backbone is a video model, which cannot be the evaluation's "
                "target privacy model"
            )
        if self.action_dataset != "synthetic" and not (
            self.action_cache or (self.action_annotations and self.action_root)
        ):
            raise ValueError(
                f"--action_dataset={self.action_dataset} needs --action_cache, or both "
                "--action_annotations and --action_root"
            )
        if self.privacy_dataset != "synthetic" and not (
            self.privacy_cache or (self.privacy_annotations and self.privacy_root)
        ):
            raise ValueError(
                f"--privacy_dataset={self.privacy_dataset} needs --privacy_cache, or both "
                "--privacy_annotations and --privacy_root"
            )
        self._validate_model_names()
        self._validate_evaluation()

    def seed_runs(self) -> list[ExperimentConfig]:
        """One config per seed of `--seeds`: this one when it is 1, else seeds seed..seed+N-1,
        each with its own run_dir/seed_K and report folder seed_K in the report folder
        (--eval_dir, default run_dir/evaluation), where the summary across seeds goes: the
        methods that share a report share it seed by seed too."""
        if self.seeds == 1:
            return [self]
        report_dir = self.eval_dir or f"{self.run_dir}/evaluation"
        return [
            dataclasses.replace(
                self,
                seeds=1,
                seed=seed,
                run_dir=f"{self.run_dir}/seed_{seed}",
                eval_dir=f"{report_dir}/seed_{seed}",
            )
            for seed in range(self.seed, self.seed + self.seeds)
        ]

    def _validate_flags_in_use(self) -> None:
        """Refuse every flag of `FLAG_SCOPES` set (to a non-default value) where it has no
        effect, naming each and why."""
        defaults = {f.name: f.default for f in dataclasses.fields(self)}

        def is_set(name: str) -> bool:
            return getattr(self, name) != defaults[name]

        unused = []
        for name, scope in FLAG_SCOPES.items():
            if not is_set(name) or (scope.fallback_for and not is_set(scope.fallback_for)):
                continue
            setting = f"--{name}={getattr(self, name)}"
            if self.method not in scope.methods:
                why = f"--method={self.method} does not read it ({', '.join(scope.methods)} do)"
                if scope.fallback_for:
                    why += f", and --{scope.fallback_for} is set"
            elif self.ssl_adversary not in scope.ssl_adversaries:
                why = (
                    f"--ssl_adversary={self.ssl_adversary} does not read it "
                    f"({', '.join(scope.ssl_adversaries)} do)"
                )
            elif scope.needs and not is_set(scope.needs):
                why = f"--{scope.needs} is off ({defaults[scope.needs]})"
            else:
                continue
            unused.append(f"{setting}: {why}")
        if unused:
            raise ValueError(
                "flags set where they have no effect (leave them at their defaults): "
                + "; ".join(unused)
            )

    def learned_name(self) -> str:
        """The report row of this run's anonymizer: the method, and the settings that make it
        a variant of the authors' method, e.g. "spact (crop 0.25, both views)"."""
        notes = []
        if self.method in ("spact", "penalty"):
            if self.ssl_adversary != "ntxent":
                notes.append(self.ssl_adversary)
            if self.adversary_crop > 0:
                notes.append(f"crop {self.adversary_crop:g}")
            if self.adversary_jitter > 0:
                notes.append(f"jitter {self.adversary_jitter:g}")
            if self.ssl_adversary != "spatiotemporal" and self.contrastive_views != "images":
                notes.append(f"{self.contrastive_views} views")
        return f"{self.method} ({', '.join(notes)})" if notes else self.method

    def privacy_backbone_names(self) -> list[str]:
        """The backbones of `--privacy_backbone`, in order (more than one: an ensemble)."""
        return [name.strip() for name in self.privacy_backbone.split(",") if name.strip()]

    def adversary_model_names(self) -> list[str]:
        """The image models of `--adversary_models`, in order."""
        return [name.strip() for name in self.adversary_models.split(",") if name.strip()]

    def eval_action_model_names(self) -> list[str]:
        """The target action models of `--eval_action_model`, in order (default
        `--action_model`)."""
        return _names(self.eval_action_model) or [self.action_model]

    def eval_privacy_model_names(self) -> list[str]:
        """The target privacy backbones of `--eval_privacy_model`, in order (default the first
        of `--privacy_backbone`)."""
        return _names(self.eval_privacy_model) or self.privacy_backbone_names()[:1]

    def evaluation_datasets(self) -> ExperimentConfig:
        """This config with the evaluation's datasets in place of the training ones: each
        `--eval_<field>` flag that is set replaces `--<field>`. PA-HMDB51's attributes default
        to its five, since the training attributes are VISPR ids."""
        values = {
            name: getattr(self, f"eval_{name}") or getattr(self, name) for name in _EVAL_DATA_FIELDS
        }
        if values["privacy_dataset"] == "pa_hmdb51":
            values["privacy_attributes"] = self.eval_privacy_attributes or "all"
        return dataclasses.replace(self, **values)

    def _validate_evaluation(self) -> None:
        """The target models, the evaluation datasets and what `--eval_protocol` asks of them."""
        from keras_privacy.models import registry

        for flag, names, known in (
            ("eval_action_model", self.eval_action_model_names(), registry.ACTION_MODELS),
            ("eval_privacy_model", self.eval_privacy_model_names(), registry.IMAGE_MODELS),
        ):
            for name in names:
                if name not in known:
                    raise ValueError(f"--{flag}={name!r} is not one of {', '.join(sorted(known))}")
            if len(set(names)) != len(names):
                raise ValueError(f"--{flag} names a model twice: {', '.join(names)}")
        _one_of("eval_protocol", self.eval_protocol, EVAL_PROTOCOLS)
        evaluation = self.evaluation_datasets()
        _one_of("eval_action_dataset", evaluation.action_dataset, ACTION_DATASETS)
        _one_of("eval_privacy_dataset", evaluation.privacy_dataset, EVAL_PRIVACY_DATASETS)
        for kind in ("action", "privacy"):
            dataset = getattr(evaluation, f"{kind}_dataset")
            training = getattr(self, f"{kind}_dataset")
            given = getattr(self, f"eval_{kind}_annotations") and getattr(self, f"eval_{kind}_root")
            if dataset not in ("synthetic", training) and not given:
                raise ValueError(
                    f"--eval_{kind}_dataset={dataset} needs --eval_{kind}_annotations and "
                    f"--eval_{kind}_root (the training ones are --{kind}_dataset={training}'s)"
                )
        if evaluation.privacy_dataset == "pa_hmdb51" and self.privacy_dataset != "vispr":
            raise ValueError(
                "--eval_privacy_dataset=pa_hmdb51 trains the target privacy model on VISPR (its "
                "VISPR-1 labels merged onto PA-HMDB51's attributes): it needs "
                f"--privacy_dataset=vispr, got {self.privacy_dataset}"
            )
        training_ids = _attribute_ids(
            "privacy_attributes", self.privacy_dataset, self.privacy_attributes
        )
        evaluation_ids = _attribute_ids(
            "eval_privacy_attributes", evaluation.privacy_dataset, evaluation.privacy_attributes
        )
        action_changed = [
            f"--eval_{name}"
            for name in ("action_dataset", "action_annotations", "action_root")
            if getattr(evaluation, name) != getattr(self, name)
        ]
        privacy_changed = [
            f"--eval_{name}"
            for name in ("privacy_dataset", "privacy_annotations", "privacy_root")
            if getattr(evaluation, name) != getattr(self, name)
        ]
        attributes_changed = ["--eval_privacy_attributes"] if evaluation_ids != training_ids else []
        protocol = self.eval_protocol
        if protocol == "pa_hmdb51" and (
            self.action_dataset != "hmdb51"
            or action_changed
            or evaluation.privacy_dataset != "pa_hmdb51"
        ):
            raise ValueError(
                "--eval_protocol=pa_hmdb51 trains on HMDB51 and tests on the PA-HMDB51 videos: it "
                "needs --action_dataset=hmdb51 (no other --eval_action_* dataset) and "
                "--eval_privacy_dataset=pa_hmdb51 with its --eval_privacy_annotations and "
                "--eval_privacy_root"
            )
        changed = action_changed + privacy_changed + attributes_changed
        if protocol == "same" and changed:
            raise ValueError(
                "--eval_protocol=same evaluates on the training datasets, but "
                f"{', '.join(changed)} differ from them: choose --eval_protocol=cross_dataset, "
                "novel_actions or novel_attributes"
            )
        if protocol == "cross_dataset" and not (action_changed or privacy_changed):
            raise ValueError(
                "--eval_protocol=cross_dataset needs an evaluation dataset other than the "
                "training ones: set --eval_privacy_dataset (e.g. pa_hmdb51), "
                "--eval_privacy_annotations / --eval_privacy_root, or the --eval_action_* flags"
            )
        if protocol == "novel_actions" and not action_changed:
            raise ValueError(
                "--eval_protocol=novel_actions needs an action dataset of other classes than the "
                "training one: set --eval_action_dataset, --eval_action_annotations or "
                "--eval_action_root"
            )
        if protocol == "novel_attributes":
            if training_ids is None or evaluation_ids is None:
                raise ValueError(
                    "--eval_protocol=novel_attributes needs --eval_privacy_attributes disjoint "
                    "from --privacy_attributes, and `all` shares every attribute: name them"
                )
            overlap = [name for name in evaluation_ids if name in training_ids]
            if overlap:
                raise ValueError(
                    "--eval_protocol=novel_attributes needs --eval_privacy_attributes disjoint "
                    f"from --privacy_attributes, but both name {', '.join(overlap)}"
                )

    def _validate_model_names(self) -> None:
        from keras_privacy.models import registry

        privacy_models, reason = registry.IMAGE_MODELS, ""
        if self.ssl_adversary == "spatiotemporal":
            privacy_models = registry.ACTION_MODELS
            reason = " (--ssl_adversary=spatiotemporal encodes clips with an action model's trunk)"
        for flag, names, known, why in (
            ("adversary_models", self.adversary_model_names(), registry.IMAGE_MODELS, ""),
            ("privacy_backbone", self.privacy_backbone_names(), privacy_models, reason),
        ):
            for name in names:
                if name not in known:
                    raise ValueError(
                        f"--{flag}: {name!r} is not one of {', '.join(sorted(known))}{why}"
                    )

        for name, known in (
            ("anonymizer", registry.ANONYMIZERS),
            ("action_model", registry.ACTION_MODELS),
        ):
            value = getattr(self, name)
            if value and value not in known:
                raise ValueError(f"--{name}={value!r} is not one of {', '.join(sorted(known))}")


def _names(text: str) -> list[str]:
    """The names of a comma-separated flag value, in order."""
    return [name.strip() for name in text.split(",") if name.strip()]


def _attribute_ids(flag: str, dataset: str, attributes: str) -> list[str] | None:
    """The attribute ids that `--flag=attributes` names for `dataset`, checked where they are
    known without reading files (PA-HMDB51's attributes as their VISPR-1 ids, so that they
    compare with VISPR's); None for VISPR's `all` (every id of its attributes.tsv)."""
    from keras_privacy.data import pa_hmdb51, synthetic, vispr

    try:
        if dataset == "synthetic":
            return synthetic.attribute_subset(attributes)
        if dataset == "pa_hmdb51":
            chosen = pa_hmdb51.attribute_subset(attributes)
            return [i for name in chosen for i in pa_hmdb51.PA_HMDB51_TO_VISPR1[name]]
    except ValueError as error:
        raise ValueError(f"--{flag}={attributes}: {error}") from error
    if attributes == "all":
        return None
    named = {"vispr1": list(vispr.VISPR1), "vispr2": list(vispr.VISPR2)}
    return named.get(attributes) or _names(attributes)


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"--{name}={value!r} is not one of {', '.join(allowed)}")
