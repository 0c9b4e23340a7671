"""Which data an evaluation's target models see: the four splits of `--eval_protocol`'s
datasets (`EvaluationData`), their prepared caches, the report folder, and the record of what
the results mean (kept in report.json)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from keras_privacy import environment
from keras_privacy.config import (
    FRAME_DATASETS,
    VP_VIDEOS,
    ExperimentConfig,
    SettingError,
)
from keras_privacy.config.data import SPLIT_DATASETS
from keras_privacy.config.evaluation import require_single_label_actions, vp_split_lists
from keras_privacy.data import pa_hmdb51, phvu, pipelines, sources, vp_labels
from keras_privacy.data.cache import MANIFEST, failure_line, prepare_cache, read_manifest
from keras_privacy.data.examples import Split
from keras_privacy.evaluation.anonymizations import Anonymization
from keras_privacy.evaluation.targets import target_settings


@dataclasses.dataclass
class EvaluationData:
    """The four splits of an evaluation, each a `Split` of files or a prepared cache's folder
    (`cached_data`), with the names of their labels."""

    action_train: pipelines.Source
    action_test: pipelines.Source
    privacy_train: pipelines.Source
    privacy_test: pipelines.Source

    @property
    def class_names(self) -> list[str]:
        """The action class names, in label order."""
        return pipelines.label_names(self.action_train, "class_names")

    @property
    def attribute_names(self) -> list[str]:
        """The privacy attribute names, in label order."""
        return pipelines.label_names(self.privacy_train, "attribute_names")


def cached_data(
    data: EvaluationData,
    directory: Path,
    video_side: int,
    image_side: int,
    baseline: Anonymization | None = None,
    frame_splits: tuple[str, ...] = (),
    prepared: Sequence[Path] = (),
) -> EvaluationData:
    """The four splits of `data` as prepared caches under `directory` (written once, resumable),
    so that target models read their data with TensorFlow ops only: videos at a short side of
    `video_side`, images at `image_side`. With a people `baseline`, every source video and image
    is anonymized as it is cached: its people are found on the source frames, which are
    blackened at their cache's side, or blurred at the scale of their kind
    (`baselines.BLUR_REFERENCE_SIDE`; the privacy splits named in `frame_splits`, frames of
    videos (`video_frame_splits`), at a video's, with the boxes of the frame in its video) and
    then resized to it. Without a baseline, a split that one of the `prepared` folders holds
    finished, the same files at the same settings (`cache.find_prepared`), is read there."""

    def cached(name: str, kind: str) -> pipelines.Source:
        split = getattr(data, name)
        short_side = video_side if kind == "video" else image_side
        scale = "video" if kind == "video" or name in frame_splits else "image"
        frame_sources = split.frame_sources if name in frame_splits else None
        transform = (
            None if baseline is None else baseline.frame_transform(short_side, scale, frame_sources)
        )
        return prepare_cache(
            split, kind, directory / name, short_side, transform, prepared=prepared
        )

    return EvaluationData(
        cached("action_train", "video"),
        cached("action_test", "video"),
        cached("privacy_train", "image"),
        cached("privacy_test", "image"),
    )


def training_caches(config: ExperimentConfig) -> list[Path]:
    """The prepared caches of training that an evaluation may read instead of copies: those
    of `--action_cache` and `--privacy_cache` with the subsets beside them (`prepare --out`
    writes one folder per subset), and the built-in benchmark's under `synthetic_dir`.
    `cached_data` reads one only where it holds a split's very files at its settings."""
    parents = [Path(cache).parent for cache in (config.action_cache, config.privacy_cache) if cache]
    if "synthetic" in (config.action_dataset, config.privacy_dataset):
        parents.append(Path(config.synthetic_dir) / "cache")
    found = [path.parent for parent in parents for path in sorted(parent.glob(f"*/{MANIFEST}"))]
    return list(dict.fromkeys(found))


def video_frame_splits(config: ExperimentConfig) -> tuple[str, ...]:
    """The privacy splits of the evaluation whose images are frames of videos: PA-HMDB51's
    test split, VP-UCF101's or VP-HMDB51's test split, and their training split where f'_B
    trains on it (`--eval_vp_privacy_training=vp`)."""
    dataset = config.evaluation_datasets().privacy_dataset
    if dataset in VP_VIDEOS and config.eval_vp_privacy_training == "vp":
        return ("privacy_train", "privacy_test")
    if dataset in FRAME_DATASETS:
        return ("privacy_test",)
    return ()


SPLITS = ("action_train", "action_test", "privacy_train", "privacy_test")
"""The four splits of an evaluation, as `EvaluationData` names them."""


def require_test_positives(data: EvaluationData) -> None:
    """Raise ValueError, before any training, where no privacy test example is positive for
    any attribute (cMAP and F1 are then undefined); warn naming the attributes without a
    positive, which the metrics leave out (`metrics.privacy_cmap`), and those without a
    negative, whose AP is 1 whatever the scores (as in the authors' scikit-learn code, so
    counted): they lift every method's cMAP alike and shrink its drop from raw."""
    split = data.privacy_test
    if not isinstance(split, Split) or not split.examples:
        return  # a prepared cache, or a split that examples_used refuses
    labelled = [example.privacy for example in split.examples if example.privacy]
    if not labelled:
        return
    positives = [sum(column) for column in zip(*labelled, strict=True)]
    without = [name for name, count in zip(split.attribute_names, positives) if not count]
    if len(without) == len(positives):
        raise ValueError(
            f"privacy_test: none of its {len(labelled)} examples is positive for "
            f"{', '.join(without)}: cMAP and F1 are undefined; choose other attributes "
            "(--privacy_attributes, or --eval_privacy_attributes)"
        )
    if without:
        logging.warning(
            "privacy_test: no example is positive for %s; cMAP and F1 leave it out",
            ", ".join(without),
        )
    every = [
        name for name, count in zip(split.attribute_names, positives) if count == len(labelled)
    ]
    if every:
        logging.warning(
            "privacy_test: every example is positive for %s: its AP is 1 whatever the "
            "anonymizer, in every method's cMAP alike (choose other attributes to leave it out)",
            ", ".join(every),
        )


def warn_of_classes_never_trained(data: EvaluationData) -> None:
    """Warn, before any training, naming the action classes of test videos that no training
    video has (their files missing, or split lists of other classes): the target models
    cannot learn them, so every such video counts as wrong, for every method alike."""
    train, test = data.action_train, data.action_test
    if not (isinstance(train, Split) and isinstance(test, Split)):
        return  # prepared caches: their files were checked when they were prepared
    trained = {example.label for example in train.examples}
    untrained = [e.label for e in test.examples if e.label >= 0 and e.label not in trained]
    if untrained:
        names = [test.class_names[label] for label in sorted(set(untrained))]
        classes = f"{len(names)} class" + ("es" if len(names) > 1 else "")
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
        logging.warning(
            "action_test: %d test videos of %s without a training video (%s): every method's "
            "action model counts them as wrong",
            len(untrained),
            classes,
            shown,
        )


def examples_used(cached: EvaluationData) -> dict[str, dict]:
    """Per split of `cached` (prepared caches): the examples the target models see (`used`),
    how many listed files were not on disk (`missing`) or failed to decode (`failed`), and how
    many of those used seem cut short (`cut_short`: used with the frames that decode). Each
    split that lost or cut files is logged with a warning naming the first and its manifest,
    which lists them all: the metrics are then those of a smaller test (or training) set than
    the dataset's. A split left with no example raises ValueError, before any training."""
    counts = {}
    for name in SPLITS:
        cache = Path(getattr(cached, name))
        manifest = read_manifest(cache)
        missing, failures = manifest["missing"], manifest["failures"]
        cut_short = manifest.get("cut_short", [])
        counts[name] = {
            "used": manifest["num_records"],
            "missing": len(missing),
            "failed": len(failures),
            "cut_short": len(cut_short),
        }
        if not manifest["num_records"]:
            raise ValueError(
                f"{name}: no example to evaluate ({len(missing)} listed files missing, "
                f"{len(failures)} failed to decode; the list is in {cache / MANIFEST}): check "
                "the split's annotations and root"
            )
        if missing or failures:
            first = missing[0] if missing else failure_line(failures[0])
            logging.warning(
                "%s: %d listed files are not evaluated (%d missing, %d failed to decode), e.g. "
                "%s; all are in %s",
                name,
                len(missing) + len(failures),
                len(missing),
                len(failures),
                first,
                cache / MANIFEST,
            )
        if cut_short:
            logging.warning(
                "%s: %d files seem cut short and are evaluated with the frames that decode, "
                "e.g. %s; all are in %s",
                name,
                len(cut_short),
                failure_line(cut_short[0]),
                cache / MANIFEST,
            )
    return counts


def report_dir(config: ExperimentConfig) -> Path:
    """The report folder: `--eval_dir`, default `run_dir/evaluation`."""
    return Path(config.eval_dir or Path(config.run_dir) / "evaluation")


def evaluation_data(config: ExperimentConfig) -> EvaluationData:
    """The train and test splits of the evaluation datasets (`config.evaluation_datasets()`:
    the training ones unless `--eval_*` dataset flags are set; PA-HMDB51's and VP's frames are
    written under the report folder). With `--eval_protocol=novel_actions`, an action class that the
    training action set also has raises ValueError."""
    require_single_label_actions(config)
    evaluation = config.evaluation_datasets()
    leave_out = evaluation.privacy_annotations if config.eval_protocol == "pa_hmdb51" else ""
    actions = sources.action_splits(evaluation.dataset_files("action"), leave_out)
    if config.eval_protocol == "pa_hmdb51":
        actions["test"] = sources.pa_hmdb51_action_test(
            evaluation.privacy_annotations, evaluation.privacy_root, actions["train"].class_names
        )
    images = evaluation_privacy_splits(config, report_dir(config))
    if config.eval_protocol == "novel_actions":
        if config.action_cache:
            trained = pipelines.label_names(config.action_cache, "class_names")
        else:
            trained = sources.action_splits(config.dataset_files("action"))["train"].class_names
        shared = sorted(set(actions["train"].class_names) & set(trained))
        if shared:
            raise SettingError(
                "<eval_protocol>=novel_actions needs action classes new to the training set, "
                f"but both have {', '.join(shared)}"
            )
    return EvaluationData(actions["train"], actions["test"], images["train"], images["test"])


def evaluation_privacy_splits(config: ExperimentConfig, out_dir: str | Path) -> dict[str, Split]:
    """The "train" and "test" privacy splits of the evaluation (`config.evaluation_datasets()`).

    PA-HMDB51 has labelled test videos only: its test images are `--eval_privacy_frames`
    equidistant frames of each video (written under `out_dir/pa_hmdb51_frames`), and the target
    privacy model trains on the training VISPR (`--privacy_annotations`); both are labelled over
    the columns of `--eval_pa_hmdb51_labels`. VP-UCF101 and VP-HMDB51: `vp_privacy_splits`."""
    evaluation = config.evaluation_datasets()
    if evaluation.privacy_dataset in VP_VIDEOS:
        return vp_privacy_splits(config, Path(out_dir) / f"{evaluation.privacy_dataset}_frames")
    if evaluation.privacy_dataset != "pa_hmdb51":
        return sources.privacy_splits(
            evaluation.dataset_files("privacy"), "eval_privacy_attributes"
        )
    frames_dir = Path(out_dir) / "pa_hmdb51_frames"
    vispr = _vispr_training_split(config)
    test = pa_hmdb51.privacy_images(
        evaluation.privacy_annotations,
        evaluation.privacy_root,
        frames_dir,
        config.eval_privacy_frames,
        evaluation.privacy_attributes,
        config.eval_pa_hmdb51_labels,
    )
    sources.report_missing("PA-HMDB51 videos", test)
    train = pa_hmdb51.vispr_as_pa_hmdb51(
        vispr, evaluation.privacy_attributes, config.eval_pa_hmdb51_labels
    )
    return {"train": train, "test": test}


def _vispr_training_split(config: ExperimentConfig) -> Split:
    """The training split of the VISPR of `--privacy_annotations`, labelled over at least the
    VISPR-1 ids, which the PA-HMDB51 and VP columns merge from."""
    vispr_files = dataclasses.replace(config.dataset_files("privacy"), attributes="vispr1")
    return sources.privacy_splits(vispr_files)["train"]


def vp_privacy_splits(config: ExperimentConfig, frames_dir: Path) -> dict[str, Split]:
    """VP-UCF101's or VP-HMDB51's "train" and "test" privacy images: `--eval_privacy_frames`
    equidistant frames of each video of the split lists' training and test splits
    (`vp_split_lists`, split `--action_split`), written under `frames_dir/<split>`, each with
    its video's labels (`--eval_privacy_annotations`) over `--eval_privacy_attributes`; with
    `--eval_vp_privacy_training=vispr`, the training images are the VISPR of
    `--privacy_annotations` with its VISPR-1 labels merged onto those attributes, as for
    PA-HMDB51. The authors' `train_privacy.py` scores every image, so each frame counts once.
    Videos without labels or not on disk are left out, and the first is named in a warning."""
    evaluation = config.evaluation_datasets()
    names = vp_labels.vp_attribute_subset(evaluation.privacy_attributes)
    if not Path(evaluation.privacy_annotations).is_file():
        raise FileNotFoundError(
            f"{evaluation.privacy_annotations}: no such {evaluation.privacy_dataset} labels file "
            "(--eval_privacy_annotations)"
        )
    labels = vp_labels.read_vp_labels(
        evaluation.privacy_annotations, names, vp_labels.VP_ATTRIBUTES
    )
    split_lists = vp_split_lists(config)
    try:
        videos = sources.action_splits(
            sources.DatasetFiles(
                name=VP_VIDEOS[evaluation.privacy_dataset],
                annotations=split_lists,
                root=evaluation.privacy_root,
                split=evaluation.action_split,
            )
        )
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"{error} (the split lists of {evaluation.privacy_dataset}: --eval_vp_splits, "
            "default the action dataset's annotations)"
        ) from error
    if config.eval_privacy_frames == 0:
        logging.warning(
            "--eval_privacy_frames=0: every frame of the %d listed videos is written as a PNG "
            "under %s (VP-UCF101's videos hold about 2.5 million frames)",
            sum(len(split) + len(split.missing) for split in videos.values()),
            frames_dir,
        )
    if config.eval_vp_privacy_training == "vispr":
        vispr = _vispr_training_split(config)
        train = pa_hmdb51.vispr_as_pa_hmdb51(vispr, ",".join(names), "merged")
        test = _vp_frames(config, "test", videos["test"], labels, names, frames_dir)
        return {"train": train, "test": test}
    return {
        name: _vp_frames(config, name, split, labels, names, frames_dir)
        for name, split in videos.items()
    }


def _vp_frames(
    config: ExperimentConfig,
    name: str,
    split: Split,
    labels: dict[str, tuple[int, ...]],
    names: list[str],
    frames_dir: Path,
) -> Split:
    """The frames of the videos of `split` (`name`: "train" or "test"), written under
    `frames_dir/<name>`, each with its video's `labels` over `names`."""
    evaluation = config.evaluation_datasets()
    try:
        labelled = vp_labels.attach_privacy_labels(split, labels, names)
    except ValueError as error:
        raise ValueError(f"{evaluation.privacy_annotations}: {error}") from error
    if labelled.missing:
        logging.warning(
            "%s %s split: %d of its %d listed videos have no VP labels or are not on disk, e.g. %s",
            evaluation.privacy_dataset,
            name,
            len(labelled.missing),
            len(split.examples) + len(split.missing),
            labelled.missing[0],
        )
    if not labelled.examples:
        raise FileNotFoundError(
            f"{evaluation.privacy_dataset}: no {name} video of the split lists in "
            f"{vp_split_lists(config)} is both under {evaluation.privacy_root} and labelled "
            f"in {evaluation.privacy_annotations}, e.g. "
            f"{labelled.missing[0] if labelled.missing else 'none listed'}"
        )
    return phvu.frame_images(labelled, frames_dir / name, config.eval_privacy_frames)


def _videos_digest(data: EvaluationData) -> str | None:
    """A SHA-256 of the action videos' names and labels in `data` (its splits of files; None
    where they are caches), so that a report of other videos (a partial download completed
    since, other split lists of the same classes) never mixes its rows with this one's."""
    splits = [split for split in (data.action_train, data.action_test) if isinstance(split, Split)]
    if not splits:
        return None
    labelled = [
        [Path(example.path).name, example.label, list(example.actions)]
        for split in splits
        for example in split.examples
    ]
    return hashlib.sha256(json.dumps(labelled).encode()).hexdigest()


def _labels_digest(data: EvaluationData) -> str:
    """A SHA-256 of the privacy images' names and labels in `data` (its splits of files), so
    that a report or raw-trained attacker of other labels (a corrected labels file, another
    list order) is never taken for this evaluation's."""
    labelled = [
        [Path(example.path).name, list(example.privacy)]
        for split in (data.privacy_train, data.privacy_test)
        if isinstance(split, Split)
        for example in split.examples
    ]
    return hashlib.sha256(json.dumps(labelled).encode()).hexdigest()


def evaluation_record(config: ExperimentConfig, data: EvaluationData) -> dict:
    """What the results of an evaluation mean, kept in report.json: `evaluation_settings`, the
    label names, the digests of the labels and videos, and where this evaluation ran
    (`environment.describe`)."""
    settings = evaluation_settings(config)
    evaluation = config.evaluation_datasets()
    if evaluation.privacy_dataset != "synthetic":
        settings["privacy_dataset"]["labels_sha256"] = _labels_digest(data)
    if evaluation.action_dataset != "synthetic" and (videos := _videos_digest(data)):
        settings["action_dataset"]["videos_sha256"] = videos
    names = {"class_names": data.class_names, "attribute_names": data.attribute_names}
    return {**settings, **names, "environment": environment.describe()}


def evaluation_settings(config: ExperimentConfig) -> dict:
    """The part of `evaluation_record` known before any data is read: the protocol, the
    datasets the target models were trained and tested on, the epochs at which they were
    tested to keep the best (`--eval_<target>_test_epochs`, where set), the privacy images'
    cache side (`--privacy_image_side`, where set) and how the target models were trained and
    tested (`targets.target_settings`)."""
    evaluation = config.evaluation_datasets()
    datasets = {}
    for kind in ("action", "privacy"):
        name = getattr(evaluation, f"{kind}_dataset")
        datasets[f"{kind}_dataset"] = (
            {"name": name, "root": config.synthetic_dir}
            if name == "synthetic"
            else {
                "name": name,
                "annotations": getattr(evaluation, f"{kind}_annotations"),
                "root": getattr(evaluation, f"{kind}_root"),
            }
        )
    # Kept only where not the first split, so that earlier reports compare with runs alike.
    if evaluation.action_dataset in SPLIT_DATASETS and evaluation.action_split != 1:
        datasets["action_dataset"]["split"] = evaluation.action_split
    if config.eval_protocol == "pa_hmdb51":
        datasets["action_dataset"] |= {
            "trained_on": "HMDB51 training split without the PA-HMDB51 videos",
            "tested_on": "PA-HMDB51 videos",
        }
    if evaluation.privacy_dataset in VP_VIDEOS:
        trained_on = "frames of the training split's videos, labelled by their video"
        if config.eval_vp_privacy_training == "vispr":
            trained_on = f"VISPR-1 of {config.privacy_annotations}, merged"
        datasets["privacy_dataset"] |= {
            "frames_per_video": config.eval_privacy_frames,
            "split": evaluation.action_split,
            "trained_on": trained_on,
            "tested_on": "frames of the test split's videos, labelled by their video",
        }
    if evaluation.privacy_dataset == "pa_hmdb51":
        datasets["privacy_dataset"] |= {
            "frames_per_video": config.eval_privacy_frames,
            "trained_on": f"VISPR-1 of {config.privacy_annotations}, merged",
        }
        # Kept only where not the default, so that earlier reports compare with runs alike.
        if config.eval_pa_hmdb51_labels != "merged":
            datasets["privacy_dataset"] |= {
                "labels": config.eval_pa_hmdb51_labels,
                "trained_on": f"VISPR-1 of {config.privacy_annotations}, "
                f"as PA-HMDB51's {config.eval_pa_hmdb51_labels} columns",
            }
    # Kept only where set, so that reports written before them compare with runs without them.
    image_side = {"privacy_image_side": side} if (side := config.privacy_image_side) else {}
    test_epochs = {
        target: epochs
        for target in ("action", "privacy")
        if (epochs := config.eval_test_epoch_list(target))
    }
    return {
        "protocol": config.eval_protocol,
        **datasets,
        **({"test_epochs": test_epochs} if test_epochs else {}),
        **image_side,
        "target_models": target_settings(config),
    }
