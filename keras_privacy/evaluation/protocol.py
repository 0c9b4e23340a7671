"""The evaluation protocol of the papers: fresh target models trained and tested on anonymized data.

For every method (a learned anonymizer or a baseline) a *new* action model f'_T is trained on
anonymized training clips and tested on anonymized test videos (video-level top-1 over K
equidistant clips), and a *new* privacy model f'_B is trained with multi-label BCE on anonymized
training images and tested on anonymized test images (cMAP, F1 at `--eval_f1_threshold`). A
privacy model trained on raw images (the "raw-trained attacker") is also tested on each method's
anonymized images.
Every metric has a 95 % interval by `--eval_bootstrap` resamples of the test videos or images
(`metrics.bootstrap_interval`), kept in the report row's `intervals`.

How the anonymization is applied:
- a learned anonymizer (a frame-wise Keras model) is frozen and placed in front of the target
  model, so it sees the same augmented, resized inputs as during its own training;
- down-sampling (`downsample_2x`, `downsample_4x`) is a fixed layer in front of the target model
  (`baselines.InputDownsample`), like a learned anonymizer: what the model would see, at
  `--image_size`, goes down `factor` times per side and back up, for clips and images alike;
- a people baseline (blur or blackening of detected people) is applied once to every source
  video and image as it is cached (`datasets.cached_data`): people are found on the source
  frames, blackened at the short side the target models read (`--frame_size`; images at
  `--privacy_image_side` where set) with the boxes scaled alike, or blurred at the short side
  where SPAct's supplement C.6 sizes its kernels (`baselines.BLUR_REFERENCE_SIDE`) and then
  resized, and stored in `out_dir/cache/<method>/`: detection runs once per video, no
  anonymized video is encoded and decoded again, and an interrupted evaluation keeps the cache
  shards it finished.

Which data the target models see is `--eval_protocol` (SPAct Sec. 4): `same` trains and tests
them on the training datasets; `cross_dataset`, `novel_actions` and `novel_attributes` on the
`--eval_action_*` / `--eval_privacy_*` datasets (`ExperimentConfig.evaluation_datasets`), which
`ExperimentConfig.validate` checks against the protocol (another dataset; privacy attributes
disjoint from the training ones), and `evaluation_data`, once the split files are read, for
action classes disjoint from the training ones. The raw-trained attacker is part of every
protocol. `pa_hmdb51` is SPAct's HMDB51 to PA-HMDB protocol (Sec. 5.3; VITA's code trains on
more HMDB51 videos, README): f_A (with the same flags in train.py) and
f'_T train on the HMDB51 training split without the PA-HMDB51 videos (an f_A trained on another
action dataset with `--eval_action_dataset=hmdb51`: f'_T only, Table 2's UCF101 -> PA-HMDB
column of SPAct and of the penalty paper), and action top-1 and
privacy are both tested on the PA-HMDB51 videos (`data.sources.pa_hmdb51_action_test`); f'_B trains
on VISPR as in `cross_dataset`. PA-HMDB51's privacy is measured at frame level: each test image is
one frame labelled by its own frame index, and cMAP is the mean over attributes of the AP over all
those frames. VP-UCF101 and VP-HMDB51 (`--eval_privacy_dataset=vp_ucf101|vp_hmdb51`, the
penalty paper's VP columns) label whole videos: f'_B is tested on frames of the test split's
videos, each labelled by its video, and trains on those of the training split's or on VISPR-1
merged onto the five attributes (`--eval_vp_privacy_training`, `datasets.vp_privacy_splits`).
Several target architectures (`--eval_action_model`, `--eval_privacy_model` lists) are each
trained and tested per method: the first of each fills the report's headline columns, all of
them its `*_by_model` entries.

Multi-label actions (P-HVU, `--action_multilabel`): f'_T trains with binary cross-entropy on the
multi-hot `actions` of the split (`keras_privacy.data.phvu.read_phvu`) and is tested by video-level
action cMAP (mean sigmoid over the K clips, then AP per class): the report's action column holds
`action_cmap`, and its extra keys are `action_metric` ("cmap"), `action_ap` (AP per class) and
`action_skipped` (classes without a positive test video). P-HVU is evaluated from Python (the
command line's action datasets have one label a video): an anonymizer trained elsewhere is
evaluated on P-HVU splits with fresh target models. Training f_A on P-HVU is not built: the
trainers' f_T takes one action label a clip.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import operator
from collections.abc import Iterator, Sequence
from pathlib import Path

import keras
import numpy as np

from keras_privacy.config import FRAME_DATASETS, VP_VIDEOS, ExperimentConfig
from keras_privacy.config.evaluation import LEARNED, eval_methods
from keras_privacy.config.setting import names
from keras_privacy.data import augment, pipelines
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.examples import Split
from keras_privacy.data.video import read_video
from keras_privacy.evaluation.anonymizations import Anonymization, methods_of
from keras_privacy.evaluation.baselines import FACE_BASELINES, FILE_BASELINES
from keras_privacy.evaluation.datasets import (
    SPLITS,
    EvaluationData,
    cached_data,
    evaluation_data,
    evaluation_record,
    evaluation_settings,
    examples_used,
    report_dir,
    require_test_positives,
    training_caches,
    video_frame_splits,
    warn_of_classes_never_trained,
)
from keras_privacy.evaluation.report import RAW_METHOD, Report, comparable, save_frame_strip
from keras_privacy.evaluation.targets import (
    TargetDivergedError,
    action_test_epochs,
    epoch_tests_record,
    privacy_target_settings,
    privacy_test_epochs,
    test_action_target,
    test_privacy_target,
    train_action_target,
    train_privacy_target,
    with_anonymizer,
)
from keras_privacy.files import load_keras_model, save_atomically
from keras_privacy.spelling import spell

__all__ = [
    "evaluate",
    "evaluation_data",
    "ignored_run_settings",
    "methods_of",
    "report_dir",
    "settings_without_effect",
]
"""A run of the protocol: `evaluate(config, evaluation_data(config), methods_of(config),
report_dir(config))`; the steps live in `datasets`, `anonymizations` and `targets`."""


IGNORED_RUN_SETTINGS = {
    "distribution": "none",
    "mixed_precision": "float32",
    "num_processes": 1,
    "process_id": 0,
    "coordinator_address": "",
}
"""`train.py`'s settings that the evaluation ignores, with their defaults."""


def ignored_run_settings(config: ExperimentConfig) -> str | None:
    """A warning naming each of `IGNORED_RUN_SETTINGS` that `config` sets (None if none): the
    evaluation trains its target models in float32 on one device, in this process alone. A
    warning, not a refusal: `evaluate.py` takes the flag file of the training."""
    given = [
        f"<{name}>={getattr(config, name)}"
        for name, default in IGNORED_RUN_SETTINGS.items()
        if getattr(config, name) != default
    ]
    if not given:
        return None
    return spell(
        f"{', '.join(given)} ignored: evaluate.py trains its target models in float32 on one "
        "device, in this process alone (start it once, not once per process)"
    )


def settings_without_effect(config: ExperimentConfig) -> str | None:
    """A warning naming each evaluation setting that `config` sets (to a non-default value)
    where the rest of it leaves the setting unread (None if none), and why: a misspelt or
    misread flag file shows. A warning, not a refusal: one flag file serves the evaluations of
    several protocols and methods."""
    privacy_dataset = config.evaluation_datasets().privacy_dataset
    cosine = config.eval_action_schedule == "cosine"
    plateaus = [config.eval_lr_drop_of("privacy")] + (
        [] if cosine else [config.eval_lr_drop_of("action")]
    )
    not_vp = (
        privacy_dataset not in VP_VIDEOS,
        f"the evaluation's privacy dataset is {privacy_dataset}, not VP-UCF101 or VP-HMDB51",
    )
    unread = {
        "face_threshold": (
            not FACE_BASELINES & {name for name, _ in eval_methods(config)},
            f"<eval_methods> has no face baseline ({', '.join(sorted(FACE_BASELINES))})",
        ),
        "eval_lr_patience": (
            all(drop == 1 for drop in plateaus),
            "no target model's learning rate drops on a plateau (every drop is 1)",
        ),
        "eval_action_lr_drop": (cosine, "<eval_action_schedule>=cosine has no plateau"),
        "eval_privacy_frames": (
            privacy_dataset not in FRAME_DATASETS,
            f"f'_B is tested on {privacy_dataset}'s images, not on frames of videos",
        ),
        "eval_vp_splits": not_vp,
        "eval_vp_privacy_training": not_vp,
        "anonymizer_path": (
            LEARNED not in names(config.eval_methods),
            f"<eval_methods> has no {LEARNED}, the method it names the file of",
        ),
    }
    defaults = {field.name: field.default for field in dataclasses.fields(config)}
    given = [
        f"<{name}>={getattr(config, name)}: {why}"
        for name, (is_unread, why) in unread.items()
        if is_unread and getattr(config, name) != defaults[name]
    ]
    if not given:
        return None
    return spell("evaluation settings without effect here: " + "; ".join(given))


def refuse_another_evaluation(config: ExperimentConfig) -> None:
    """Raise ValueError when `report_dir(config)` holds results of an evaluation with other
    settings (`Report.refuse_another`): checked before any data is read or test frame
    written, so that a refused evaluation leaves that folder as it was."""
    Report(report_dir(config)).refuse_another(evaluation_settings(config), names_known=False)


def evaluate(
    config: ExperimentConfig,
    data: EvaluationData,
    methods: Sequence[Anonymization],
    out_dir: str | Path,
    cache_dir: str | Path | None = None,
) -> Report:
    """Evaluate every method not yet in `out_dir/report.json`, writing the report and its
    trade-off plot after each one, then the strip of anonymized frames. A learned method whose
    row was measured on another anonymizer file (retrained since) is evaluated again. A report
    of another protocol or other labels in `out_dir` raises ValueError (its rows would not
    compare). The decoded data and the file baselines' videos are cached in `cache_dir`
    (default `out_dir/cache`): nothing in them depends on the seed, so the seeds of one
    evaluation share one."""
    _require_boxes(methods, data)
    require_test_positives(data)
    warn_of_classes_never_trained(data)
    out_dir = Path(out_dir)
    cache_dir = out_dir / "cache" if cache_dir is None else Path(cache_dir)
    report = Report(out_dir)
    record = evaluation_record(config, data)
    report.set_evaluation(record)
    source = cached_data(
        data,
        cache_dir / "source",
        config.frame_size,
        config.image_side(),
        prepared=training_caches(config),
    )
    record["examples"] = examples_used(source)
    report.set_evaluation(record)
    classes, names = len(data.class_names), data.attribute_names
    with _damaged_shards_named(source, cache_dir, config), _divergence_explained(report):
        attackers = {
            name: _raw_attacker(config, source, names, out_dir, name, record["privacy_dataset"])
            for name in config.eval_privacy_model_names()
        }
    action_key = "action_cmap" if config.action_multilabel else "action_top1"
    for method in methods:
        if report.has(method.name):
            stale = _stale_row(report.get(method.name).extra, method)
            if stale is None:
                logging.info("%s: already in %s, skipped", method.name, out_dir / "report.json")
                continue
            logging.warning(
                "%s: the row in %s is %s; evaluating it again",
                method.name,
                out_dir / "report.json",
                stale,
            )
        logging.info("evaluating %s", method.name)
        seen = source
        if method.baseline in FILE_BASELINES:
            seen = cached_data(
                data,
                cache_dir / method.name,
                config.frame_size,
                config.image_side(),
                method,
                frame_splits=video_frame_splits(config),
            )
        with _damaged_shards_named(seen, cache_dir, config), _divergence_explained(report):
            result = _target_results(config, seen, method, attackers, classes, names)
        if method.baseline in FILE_BASELINES:
            result["detector"] = method.detector_description()
            result["boxes"] = method.boxes_key()
        if method.model_sha256 is not None:
            result["anonymizer_sha256"] = method.model_sha256
        intervals = {
            field: result.pop(f"{key}_interval")
            for field, key in (
                ("action_top1", action_key),
                ("privacy_cmap", "privacy_cmap"),
                ("privacy_f1", "privacy_f1"),
            )
            if f"{key}_interval" in result
        }
        report.add(
            method.name,
            result.pop(action_key),
            result.pop("privacy_cmap"),
            result.pop("privacy_f1"),
            extra=result,
            intervals=intervals,
        )
        report.plot_tradeoff()  # with the rows so far: a later method's failure keeps it
    report.plot_tradeoff()
    save_frame_strip(_frames_of_report(config, data, methods, report), out_dir / "frames.png")
    return report


@contextlib.contextmanager
def _divergence_explained(report: Report) -> Iterator[None]:
    """A target model's divergence, told that a lower rate needs another report folder when
    `report` holds finished rows: they were measured at the rate that diverged, and rows of
    two rates would not compare (`Report.set_evaluation` refuses the lower one there)."""
    try:
        yield
    except TargetDivergedError as error:
        if not report.methods:
            raise
        raise TargetDivergedError(
            spell(
                f"{error} and evaluate again in a new <eval_dir>: "
                f"{report.out_dir / 'report.json'} holds {', '.join(report.methods)}, trained "
                "at this rate, and rows of another rate would not compare"
            )
        ) from error


def _damaged_shards_named(
    cached: EvaluationData, cache_dir: Path, config: ExperimentConfig
) -> contextlib.AbstractContextManager:
    """`pipelines.damaged_shards_named` over the four caches of `cached`, each with the command
    that writes its shard again, as training names them: evaluate.py for its own (under
    `cache_dir`), train.py for the built-in benchmark's training cache, `prepare` for a cache
    the flags give (`datasets.training_caches`)."""
    caches = [Path(getattr(cached, name)) for name in SPLITS]
    own = [cache for cache in caches if cache.is_relative_to(cache_dir)]
    built = [
        cache
        for cache in caches
        if cache not in own and cache.is_relative_to(Path(config.synthetic_dir) / "cache")
    ]
    given = [cache for cache in caches if cache not in own + built]
    stack = contextlib.ExitStack()
    stack.enter_context(pipelines.damaged_shards_named(*own, rerun="run evaluate.py again"))
    stack.enter_context(pipelines.damaged_shards_named(*built, rerun="run train.py again"))
    stack.enter_context(pipelines.damaged_shards_named(*given))
    return stack


def _stale_row(reported: dict, method: Anonymization) -> str | None:
    """Why a report row (its `extra`) is not `method`'s as it is now, or None: measured on
    another anonymizer file (retrained since), or a people or face baseline made with other
    boxes (another `--eval_boxes` file or detector, another `--face_threshold`)."""
    if reported.get("anonymizer_sha256") != method.model_sha256:
        return "of another anonymizer file"
    if method.baseline in FILE_BASELINES and reported.get("boxes") != method.boxes_key():
        return f"of other boxes ({reported.get('detector', 'unrecorded')})"
    return None


def _require_boxes(methods: Sequence[Anonymization], data: EvaluationData) -> None:
    """Raise ValueError where a people baseline's box file (`--eval_boxes`) lacks a file of
    the evaluation's splits of files, before anything is trained (a cache's files are not
    listed here: they are checked as the baseline reaches them)."""
    names = [
        Path(example.path).name
        for split in (data.action_train, data.action_test, data.privacy_train, data.privacy_test)
        if isinstance(split, Split)
        for example in split.examples
    ]
    for boxes in {id(m.boxes): m.boxes for m in methods if m.boxes is not None}.values():
        boxes.require(names)


def _frames_of_report(
    config: ExperimentConfig,
    data: EvaluationData,
    methods: Sequence[Anonymization],
    report: Report,
) -> dict[str, np.ndarray]:
    """The example clip as raw data and every method of the report show it. Each method's
    clip is kept in `out_dir/frames/<method>.npy`, so methods evaluated by earlier runs into
    the same report keep their row in frames.png."""
    frames_dir = report.out_dir / "frames"
    frames_dir.mkdir(parents=True, exist_ok=True)
    for name, clip in _example_frames(config, data, methods).items():
        save_atomically(frames_dir / f"{name}.npy", lambda path, clip=clip: np.save(path, clip))
    frames = {}
    for name in dict.fromkeys([RAW_METHOD, *report.methods]):
        path = frames_dir / f"{name}.npy"
        if not path.is_file():
            continue
        try:
            frames[name] = np.load(path)
        except (OSError, ValueError, EOFError) as error:  # EOFError: an empty or cut file
            logging.warning("%s: unreadable (%s), left out of frames.png; remove it", path, error)
    return frames


def _target_results(
    config: ExperimentConfig,
    seen: EvaluationData,
    method: Anonymization,
    attackers: dict[str, tuple[keras.Model, dict]],
    classes: int,
    names: list[str],
) -> dict:
    """Every target architecture trained on `seen` (`classes` actions, attributes `names`)
    through `method` and tested: the first action and privacy architectures' full results, and
    every architecture's headline metrics in `<metric>_by_model` ({architecture: value}).
    With `--eval_<target>_test_epochs` each is also tested during its training, and the
    results hold those tests' scores and the epoch kept (`BestTestEpoch.record`)."""
    action_key = "action_cmap" if config.action_multilabel else "action_top1"
    result, by_model = {}, {}
    for index, name in enumerate(config.eval_action_model_names()):
        test_epochs = action_test_epochs(config, seen.action_test)
        model = train_action_target(
            config, seen.action_train, classes, method.model, name, test_epochs
        )
        scores = test_action_target(config, model, seen.action_test)
        scores |= epoch_tests_record(test_epochs, "action")
        if index == 0:
            result |= scores
        by_model.setdefault(f"{action_key}_by_model", {})[name] = scores[action_key]
    raw = method.model is None and method.baseline is None
    for index, name in enumerate(config.eval_privacy_model_names()):
        attacker, attacker_record = attackers[name]
        if raw:
            # On raw data the fresh f'_B is the raw-trained attacker (same images, seed, model).
            model, record = attacker, attacker_record
        else:
            test_epochs = privacy_test_epochs(config, seen.privacy_test, names)
            model = train_privacy_target(
                config, seen.privacy_train, len(names), method.model, name, test_epochs
            )
            record = epoch_tests_record(test_epochs, "privacy")
        tested = test_privacy_target(config, model, seen.privacy_test, names)
        scores = tested | record
        if raw:
            # The raw attacker is the model just tested: its scores, not a second test pass.
            scores |= {
                "raw_attacker" + key.removeprefix("privacy"): copy.deepcopy(value)
                for key, value in tested.items()
            }
        else:
            attacker = with_anonymizer(attacker, method.model, False)
            scores |= test_privacy_target(
                config, attacker, seen.privacy_test, names, "raw_attacker"
            )
        if index == 0:
            result |= scores
        for key in ("privacy_cmap", "privacy_f1", "raw_attacker_cmap", "raw_attacker_f1"):
            by_model.setdefault(f"{key}_by_model", {})[name] = scores[key]
    return result | by_model


def _raw_attacker(
    config: ExperimentConfig,
    source: EvaluationData,
    names: list[str],
    out_dir: Path,
    model_name: str,
    privacy_dataset: dict,
) -> tuple[keras.Model, dict]:
    """A privacy model `model_name` trained on the raw images of `source` (trained once, kept
    in out_dir), and the record of its tests: with `--eval_privacy_test_epochs` it has the
    weights of its best cMAP on the raw test images (`BestTestEpoch.record`), else the record
    is empty. Its settings (`privacy_dataset` as the evaluation record names it, the attribute
    `names` it predicts, and how it was trained) are kept beside it in
    `raw_attacker_<model>.json`. A kept attacker of other settings,
    or whose files are damaged, raises ValueError: the report's rows were measured against
    it."""
    path = out_dir / f"raw_attacker_{model_name}.keras"
    record_path = path.with_suffix(".json")
    remedy = (
        f"choose another --eval_dir, or remove {path.name} and {record_path.name} to train it again"
    )
    # Its folders are left out, as the report leaves them out: a moved dataset is the same.
    dataset = {k: v for k, v in privacy_dataset.items() if k not in ("root", "annotations")}
    settings = {
        "privacy_dataset": dataset,
        "attribute_names": list(names),
        **privacy_target_settings(config),
        "weights": config.eval_weights("privacy", model_name),  # this attacker's own start
    }
    if path.is_file():
        record = _attacker_record(record_path, path, remedy)
        kept = record.pop("settings", None)
        if kept is None:
            logging.warning("%s: its settings were not recorded; it is reused as it is", path)
        elif differ := sorted(
            key for key in settings if operator.ne(*comparable(kept.get(key), settings[key]))
        ):
            raise ValueError(
                f"{path} was trained with other settings (its {', '.join(differ)} differ): {remedy}"
            )
        try:
            return load_keras_model(path), record
        except ValueError as error:
            raise ValueError(f"{error}: {remedy}") from error
    test_epochs = privacy_test_epochs(config, source.privacy_test, names)
    model = train_privacy_target(
        config, source.privacy_train, len(names), None, model_name, test_epochs
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    record = epoch_tests_record(test_epochs, "privacy")
    # The record first: a process killed between the two leaves no model, trained again.
    text = json.dumps({"settings": settings, **record}, indent=2)
    save_atomically(record_path, lambda temporary: temporary.write_text(text))
    save_atomically(path, model.save)
    return model, record


def _attacker_record(record_path: Path, path: Path, remedy: str) -> dict:
    """The record kept beside the raw-trained attacker at `path` ({} where there is none, as
    versions before the record wrote it); a damaged one raises ValueError naming it."""
    if not record_path.is_file():
        return {}
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{record_path}: not the record of {path.name} ({error}): {remedy}"
        ) from error
    if not isinstance(record, dict):
        raise ValueError(f"{record_path}: not the record of {path.name}: {remedy}")
    return record


def _example_frames(
    config: ExperimentConfig,
    data: EvaluationData,
    methods: Sequence[Anonymization],
) -> dict[str, np.ndarray]:
    """The first test clip that decodes as each method shows it (an undecodable test video,
    left out of the scores, is passed over), every row in one view: the action test clips' crop
    (`--eval_action_crop` of the centre, square or keeping the frame's aspect as the config's
    augmentation does) at `image_size`, what the target action models see. A model (learned,
    down-sampling) anonymizes that view; a baseline applied to the files anonymizes the whole
    decoded video, as the cache does (its boxes may come from any of its frames), then is cut
    to it."""
    for source in data.action_test.examples:
        try:
            video = read_video(source.path)
            break
        except VideoDecodeError as error:
            logging.warning("frames.png: %s; taking the next test video", error)
    else:
        raise VideoDecodeError(f"no test video of {len(data.action_test)} decodes")
    clip = video[: config.clip_length * config.clip_stride]
    keeps_aspect = config.action_augmentation().crop_keeps_aspect

    def view(frames: np.ndarray) -> np.ndarray:
        """Float32 in [0, 1], as the test pipeline crops and resizes its clips."""
        size, fraction = config.image_size, config.eval_action_crop
        return augment.evaluation_clip(frames, size, fraction, keeps_aspect).numpy()

    frames = {"raw": view(clip)}
    for method in methods:
        if method.model is not None:
            anonymized = method.model(keras.ops.convert_to_tensor(frames["raw"]))
            frames[method.name] = keras.ops.convert_to_numpy(anonymized)
        elif method.baseline is not None:
            anonymize = method.clip_fn(Path(source.path).name, config.frame_size, "video")
            frames[method.name] = view(anonymize(video)[: len(clip)])
    return frames
