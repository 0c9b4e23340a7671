"""The evaluation protocol of the papers: fresh target models trained and tested on anonymized data.

For every method (a learned anonymizer or a baseline) a *new* action model f'_T is trained on
anonymized training clips and tested on anonymized test videos (video-level top-1 over K
equidistant clips), and a *new* privacy model f'_B is trained with multi-label BCE on anonymized
training images and tested on anonymized test images (cMAP, F1 at 0.5). A privacy model trained
on raw images (the "raw-trained attacker") is also tested on each method's anonymized images.
Every metric has a 95 % interval by `--eval_bootstrap` resamples of the test videos or images
(`metrics.bootstrap_interval`), kept in the report row's `intervals`.

How the anonymization is applied:
- a learned anonymizer (a frame-wise Keras model) is frozen and placed in front of the target
  model, so it sees the same augmented, resized inputs as during its own training;
- down-sampling (`downsample_2x`, `downsample_4x`) is a fixed layer in front of the target model
  (`baselines.InputDownsample`), like a learned anonymizer: what the model would see, at
  `--image_size`, goes down `factor` times per side and back up, for clips and images alike;
- a people baseline (blur or blackening of detected people) is applied once to every source
  video and image: people are found on the source frames, the frames are resized to the short
  side the target models read (`--frame_size`) with the boxes scaled alike, blurred or
  blackened there (the blur sized as SPAct's supplement C.6, `baselines.scaled_blur`), written
  under `work_dir/<method>/` and read back like a dataset: detection runs once per video, and an
  interrupted evaluation keeps the files it wrote.

Which data the target models see is `--eval_protocol` (SPAct Sec. 4): `same` trains and tests
them on the training datasets; `cross_dataset`, `novel_actions` and `novel_attributes` on the
`--eval_action_*` / `--eval_privacy_*` datasets (`ExperimentConfig.evaluation_datasets`), which
`ExperimentConfig.validate` checks against the protocol (another dataset; action classes or
privacy attributes disjoint from the training ones). The raw-trained attacker is part of every
protocol. `pa_hmdb51` is VITA's PA-HMDB51 protocol: f_A (with the same flags in train.py) and
f'_T train on the HMDB51 training split without the PA-HMDB51 videos, and action top-1 and
privacy are both tested on the PA-HMDB51 videos (`sources.pa_hmdb51_action_test`); f'_B trains
on VISPR as in `cross_dataset`. PA-HMDB51's privacy is measured at frame level: each test image is
one frame labelled by its own frame index, and cMAP is the mean over attributes of the AP over all
those frames. Several target architectures (`--eval_action_model`, `--eval_privacy_model` lists) are
each trained and tested per method: the first of each fills the report's headline columns, all
of them its `*_by_model` entries.

Multi-label actions (P-HVU, `--action_multilabel`): f'_T trains with binary cross-entropy on the
multi-hot `actions` of the split (`keras_privacy.data.phvu.read_phvu`) and is tested by video-level
action cMAP (mean sigmoid over the K clips, then AP per class): the report's action column holds
`action_cmap`, and its extra keys are `action_metric` ("cmap"), `action_ap` (AP per class) and
`action_skipped` (classes without a positive test video). For SPAct's scenes -> objects
novel-attribute protocol, train f_A on P-HVU read with `privacy="scenes"` and evaluate the saved
anonymizer (`anonymizer_path`) on P-HVU read with `privacy="objects"`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import cv2
import keras
import numpy as np
from tqdm import tqdm

from keras_privacy import distribute
from keras_privacy.config import ExperimentConfig
from keras_privacy.data import pipelines
from keras_privacy.data.cache import prepare_cache
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.examples import Split
from keras_privacy.data.video import probe_video, read_video, write_video
from keras_privacy.evaluation import metrics
from keras_privacy.evaluation.baselines import (
    BASELINES,
    FACE_BASELINES,
    FILE_BASELINES,
    InputDownsample,
    build_baseline,
)
from keras_privacy.evaluation.detection import BoxesFromFile, Detector, PersonOrFaceDetector
from keras_privacy.evaluation.faces import DEFACE_THRESHOLD, CenterFaceDetector
from keras_privacy.evaluation.report import RAW_METHOD, Report, save_frame_strip
from keras_privacy.export import load_keras_anonymizer
from keras_privacy.models import pretrained, registry
from keras_privacy.models.resnet import privacy_classifier
from keras_privacy.models.unet import apply_per_frame

LEARNED = "learned"
ClipFn = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass
class Anonymization:
    """One method to evaluate: a frozen frame-wise `model` in front of the target models (a
    learned anonymizer, or the down-sampling baseline's layer), a people `baseline` applied to
    the source files, or neither (raw data). People baselines find people with `detector`, or
    take the boxes of each file from `boxes`, looked up by file name
    (`v_ApplyEyeMakeup_g01_c01.avi`).
    `model_sha256` is the digest of the file the model was loaded from, so that a report row
    of an older anonymizer of the same name is not taken for this one's."""

    name: str
    model: keras.Layer | None = None
    model_sha256: str | None = None
    baseline: str | None = None
    detector: Detector | None = None
    boxes: BoxesFromFile | None = None

    def clip_fn(self, file_name: str, short_side: int | None, kind: str) -> ClipFn:
        """The people baseline as a function of one uint8 (T, H, W, 3) clip of the file
        `file_name` ("video" or "image" `kind`), returning it at `short_side`."""
        if self.boxes is not None:
            detector = self.boxes.detector(file_name)
        else:
            self.detector = self.detector or PersonOrFaceDetector()
            detector = self.detector
        return build_baseline(self.baseline, detector, short_side, kind)

    def detector_description(self) -> str:
        """Where the baseline's boxes come from, for the report."""
        if self.boxes is not None:
            return self.boxes.description
        self.detector = self.detector or PersonOrFaceDetector()
        return self.detector.description


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


def load_anonymizer(path: str | Path, name: str | None = None) -> Anonymization:
    """A learned anonymizer saved as `.keras`, frozen."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no saved anonymizer there (train one, or fix the path)")
    model = load_keras_anonymizer(path)
    model.trainable = False
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Anonymization(name or path.stem, model=model, model_sha256=digest)


def baseline_anonymization(
    name: str, boxes: BoxesFromFile | None = None, face_threshold: float = DEFACE_THRESHOLD
) -> Anonymization:
    """The baseline `name` (see `baselines.BASELINES`): down-sampling as a layer in front of the
    target models, people baselines applied to the files (boxes from `boxes`, else HOG + Haar),
    face baselines too (CenterFace at `face_threshold`, whatever `boxes`); raw data has no
    anonymization."""
    if name not in BASELINES:
        raise ValueError(f"unknown method {name!r}; choose {LEARNED} or one of {sorted(BASELINES)}")
    if name == "raw":
        return Anonymization(name)
    if name.startswith("downsample_"):
        factor = int(name.removeprefix("downsample_").removesuffix("x"))
        return Anonymization(name, model=InputDownsample(factor, name=name), baseline=name)
    if name in FACE_BASELINES:
        detector = CenterFaceDetector(threshold=face_threshold)
        return Anonymization(name, baseline=name, detector=detector)
    return Anonymization(name, baseline=name, boxes=boxes)


def methods_of(config: ExperimentConfig) -> list[Anonymization]:
    """The methods `config.eval_methods` names.

    `learned` is the anonymizer that `train.py` saved in `run_dir` (or `config.anonymizer_path`),
    reported under the training method's name with its variant settings (`spact`, `vita`,
    `spact (crop 0.25, both views)`, see `ExperimentConfig.learned_name`); `NAME=PATH` is any other
    saved anonymizer, reported as NAME, so the runs of several methods share one report."""
    boxes = BoxesFromFile(config.eval_boxes) if config.eval_boxes else None
    result = []
    for entry in (entry.strip() for entry in config.eval_methods.split(",")):
        if not entry:
            continue
        if entry == LEARNED:
            path = config.anonymizer_path or Path(config.run_dir) / "anonymizer.keras"
            result.append(load_anonymizer(path, name=config.learned_name()))
        elif "=" in entry:
            name, path = (part.strip() for part in entry.split("=", 1))
            if not name or name in BASELINES:
                raise ValueError(f"--eval_methods: {entry!r} needs a name that is not a baseline")
            result.append(load_anonymizer(path, name=name))
        else:
            result.append(baseline_anonymization(entry, boxes, config.face_threshold))
    names = [method.name for method in result]
    if not result:
        raise ValueError("--eval_methods names no method")
    if len(set(names)) != len(names):
        raise ValueError(f"--eval_methods names a method twice: {', '.join(names)}")
    return result


# ---------------------------------------------------------------------------- baselines on files


def anonymize_videos(
    split: Split, method: Anonymization, out_dir: Path, desc: str, short_side: int | None
) -> Split:
    """Write the people baseline of every video of `split` under `out_dir` (kept if already
    there), at `short_side`, and return the split of the written files. Undecodable videos are
    skipped and named."""
    out_dir.mkdir(parents=True, exist_ok=True)
    examples, missing = [], list(split.missing)
    for index, example in enumerate(tqdm(split.examples, desc=desc, unit="video", leave=False)):
        target = out_dir / f"{index:06d}_{Path(example.path).stem}.mp4"
        if not target.exists():
            try:
                frames = read_video(example.path)
                fps = probe_video(example.path).fps
            except VideoDecodeError as error:
                logging.warning("skipping %s", error)
                missing.append(str(error))
                continue
            anonymized = method.clip_fn(Path(example.path).name, short_side, "video")(frames)
            partial = target.with_suffix(".partial.mp4")
            write_video(partial, anonymized, fps=fps, codec="libx264", quality=0)
            partial.rename(target)
        examples.append(dataclasses.replace(example, path=str(target)))
    return dataclasses.replace(split, examples=examples, missing=missing)


def anonymize_images(
    split: Split, method: Anonymization, out_dir: Path, desc: str, short_side: int | None
) -> Split:
    """Write the people baseline of every image of `split` (as a one-frame clip), at
    `short_side`, under `out_dir` as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    examples, missing = [], list(split.missing)
    for index, example in enumerate(tqdm(split.examples, desc=desc, unit="image", leave=False)):
        target = out_dir / f"{index:06d}_{Path(example.path).stem}.png"
        if not target.exists():
            image = cv2.imread(example.path, cv2.IMREAD_COLOR)
            if image is None:
                logging.warning("skipping %s: unreadable image", example.path)
                missing.append(f"{example.path}: unreadable image")
                continue
            clip_fn = method.clip_fn(Path(example.path).name, short_side, "image")
            anonymized = clip_fn(np.ascontiguousarray(image[None, ..., ::-1]))[0]
            cv2.imwrite(str(target), np.ascontiguousarray(anonymized[..., ::-1]))
        examples.append(dataclasses.replace(example, path=str(target)))
    return dataclasses.replace(split, examples=examples, missing=missing)


def anonymized_data(
    data: EvaluationData, method: Anonymization, work_dir: Path, short_side: int | None
) -> EvaluationData:
    """The splits of the people baseline `method` applied to the files of `data` at
    `short_side` (written once)."""
    root = work_dir / method.name
    name = method.name
    return EvaluationData(
        action_train=anonymize_videos(
            data.action_train, method, root / "action_train", f"{name}: train", short_side
        ),
        action_test=anonymize_videos(
            data.action_test, method, root / "action_test", f"{name}: test", short_side
        ),
        privacy_train=anonymize_images(
            data.privacy_train, method, root / "privacy_train", f"{name}: images", short_side
        ),
        privacy_test=anonymize_images(
            data.privacy_test, method, root / "privacy_test", f"{name}: images", short_side
        ),
    )


# ---------------------------------------------------------------------------- target models


def with_anonymizer(target: keras.Model, anonymizer: keras.Layer | None, clips: bool):
    """`target` behind a frozen frame-wise `anonymizer` (clips: applied frame by frame)."""
    if anonymizer is None:
        return target
    anonymizer.trainable = False
    inputs = keras.Input(target.input_shape[1:], name="inputs")
    anonymized = apply_per_frame(anonymizer, inputs) if clips else anonymizer(inputs)
    return keras.Model(inputs, target(anonymized), name=f"anonymized_{target.name}")


def cached_data(data: EvaluationData, directory: Path, short_side: int) -> EvaluationData:
    """The four splits of `data` as prepared caches under `directory` (written once), so that
    target models read their data with TensorFlow ops only."""
    return EvaluationData(
        *(
            prepare_cache(getattr(data, name), kind, directory / name, short_side)
            for name, kind in (
                ("action_train", "video"),
                ("action_test", "video"),
                ("privacy_train", "image"),
                ("privacy_test", "image"),
            )
        )
    )


def train_action_target(
    config: ExperimentConfig,
    train: pipelines.Source,
    num_classes: int,
    anonymizer: keras.Layer | None,
    model_name: str | None = None,
) -> keras.Model:
    """A fresh f'_T `model_name` (default the first of `--eval_action_model`) trained with
    cross-entropy on (anonymized) training clips."""
    c = config
    keras.utils.set_random_seed(c.seed)
    target = registry.build_action_model(
        model_name or c.eval_action_model_names()[0],
        num_classes=num_classes,
        input_shape=(c.clip_length, c.image_size, c.image_size, 3),
    )
    target = pretrained.start_from_weights(
        target, c.eval_action_weights, model_name or c.eval_action_model_names()[0]
    )
    model = with_anonymizer(target, anonymizer, clips=True)
    if c.action_multilabel:
        loss, accuracy, labels = keras.losses.BinaryCrossentropy(from_logits=True), [], "actions"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        accuracy, labels = ["accuracy"], "labels"
    model.compile(
        keras.optimizers.Adam(c.eval_lr),
        loss,
        metrics=accuracy,
        jit_compile=distribute.choose_jit_compile(c.jit_compile, [target])[0],
    )
    dataset = pipelines.action_train_dataset(
        train,
        c.batch_size,
        c.clip_length,
        c.clip_stride,
        c.image_size,
        seed=c.seed,
        config=c.action_augmentation(),
        epochs=None,
    )
    if labels not in dataset.element_spec:
        raise ValueError(
            "--action_multilabel needs multi-hot action labels (a P-HVU split from read_phvu)"
        )
    dataset = dataset.map(lambda batch: (batch["clips"], batch[labels]))
    steps = c.steps_per_epoch or max(1, pipelines.count_examples(train) // c.batch_size)
    model.fit(dataset, epochs=c.eval_action_epochs, steps_per_epoch=steps, verbose=2)
    return model


def test_action_target(
    config: ExperimentConfig, model: keras.Model, test: pipelines.Source
) -> dict:
    """Video-level top-1 of `model` on `test`: mean softmax over K equidistant clips (with
    `--action_multilabel`, action cMAP of the mean sigmoid: see the module docstring), and its
    95 % interval by `--eval_bootstrap` resamples of the test videos (`<metric>_interval`)."""
    c = config
    dataset = pipelines.action_eval_dataset(
        test, c.eval_clips, c.clip_length, c.clip_stride, c.image_size
    )
    probs, labels, videos = [], [], []
    for video in tqdm(dataset.as_numpy_iterator(), desc="testing f'_T", unit="video", leave=False):
        logits = np.asarray(model.predict_on_batch(video["clips"]), np.float64)
        if c.action_multilabel:
            probs.append(1.0 / (1.0 + np.exp(-logits)))
            labels.append(np.repeat(video["actions"][None], len(logits), axis=0))
        else:
            probs.append(_softmax(logits))
            labels.append(np.full(len(logits), video["label"]))
        videos.append(np.full(len(logits), video["video_index"]))
    probs, labels, videos = np.concatenate(probs), np.concatenate(labels), np.concatenate(videos)
    samples, seed = c.eval_bootstrap, c.seed
    if c.action_multilabel:
        names = pipelines.label_names(test, "class_names")
        cmap = metrics.video_action_cmap(probs, videos, labels, names)
        result = {
            "action_cmap": cmap.value,
            "action_metric": "cmap",
            "action_ap": cmap.per_attribute,
            "action_skipped": list(cmap.skipped),
            "action_test_videos": int(len(np.unique(videos))),
        }
        if samples:
            _, video_probs = metrics.video_scores(probs, videos)
            _, video_labels = metrics.video_scores(labels, videos)
            interval = metrics.cmap_interval(video_labels, video_probs, samples, seed)
            result["action_cmap_interval"] = list(interval)
        return result
    result = {
        "action_top1": metrics.video_top1(probs, videos, labels),
        "action_clip_top1": metrics.top1(probs, labels),
        "action_test_videos": int(len(np.unique(videos))),
    }
    if samples:
        interval = metrics.video_top1_interval(probs, videos, labels, samples, seed)
        result["action_top1_interval"] = list(interval)
    return result


def train_privacy_target(
    config: ExperimentConfig,
    train: pipelines.Source,
    num_attributes: int,
    anonymizer: keras.Layer | None,
    model_name: str | None = None,
) -> keras.Model:
    """A fresh f'_B on the backbone `model_name` (default the first of `--eval_privacy_model`)
    trained with multi-label BCE on (anonymized) training images."""
    c = config
    keras.utils.set_random_seed(c.seed)
    backbone = registry.build_image_backbone(
        model_name or c.eval_privacy_model_names()[0],
        input_shape=(c.image_size, c.image_size, 3),
    )
    target = privacy_classifier(backbone, num_attributes)
    target = pretrained.start_from_weights(
        target, c.eval_privacy_weights, model_name or c.eval_privacy_model_names()[0]
    )
    model = with_anonymizer(target, anonymizer, clips=False)
    model.compile(
        keras.optimizers.Adam(c.eval_lr),
        keras.losses.BinaryCrossentropy(from_logits=True),
        jit_compile=distribute.choose_jit_compile(c.jit_compile, [target])[0],
    )
    dataset = pipelines.privacy_labelled_dataset(
        train, c.privacy_batch_size, c.image_size, training=True, seed=c.seed, epochs=None
    ).map(lambda batch: (batch["images"], batch["privacy"]))
    steps = max(1, pipelines.count_examples(train) // c.privacy_batch_size)
    model.fit(dataset, epochs=c.eval_privacy_epochs, steps_per_epoch=steps, verbose=2)
    return model


def test_privacy_target(
    config: ExperimentConfig,
    model: keras.Model,
    test: pipelines.Source,
    names: Sequence[str],
    prefix: str = "privacy",
) -> dict:
    """cMAP and mean F1 (at probability 0.5) of `model` on the test images, and their 95 %
    intervals by `--eval_bootstrap` resamples of the test images (`<metric>_interval`)."""
    dataset = pipelines.privacy_labelled_dataset(
        test, config.privacy_batch_size, config.image_size, training=False
    )
    probs, labels = [], []
    for batch in dataset.as_numpy_iterator():
        logits = np.asarray(model.predict_on_batch(batch["images"]), np.float64)
        probs.append(1.0 / (1.0 + np.exp(-logits)))
        labels.append(batch["privacy"])
    probs, labels = np.concatenate(probs), np.concatenate(labels)
    cmap = metrics.privacy_cmap(labels, probs, names)
    f1 = metrics.privacy_f1(labels, probs, names=names)
    result = {
        f"{prefix}_cmap": cmap.value,
        f"{prefix}_f1": f1.value,
        f"{prefix}_ap": cmap.per_attribute,
        f"{prefix}_skipped": list(cmap.skipped),
    }
    if config.eval_bootstrap:
        samples, seed = config.eval_bootstrap, config.seed
        cmap_interval = metrics.cmap_interval(labels, probs, samples, seed)
        f1_interval = metrics.privacy_f1_interval(labels, probs, samples=samples, seed=seed)
        result[f"{prefix}_cmap_interval"] = list(cmap_interval)
        result[f"{prefix}_f1_interval"] = list(f1_interval)
    return result


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------------- the whole run


def evaluate(
    config: ExperimentConfig,
    data: EvaluationData,
    methods: Sequence[Anonymization],
    out_dir: str | Path,
) -> Report:
    """Evaluate every method not yet in `out_dir/report.json`, writing the report after each
    one, then the trade-off plot and the strip of anonymized frames. A learned method whose
    row was measured on another anonymizer file (retrained since) is evaluated again. A report
    of another protocol or other labels in `out_dir` raises ValueError (its rows would not
    compare)."""
    out_dir = Path(out_dir)
    report = Report(out_dir)
    report.set_evaluation(evaluation_record(config, data))
    source = cached_data(data, out_dir / "cache" / "source", config.frame_size)
    classes, names = len(data.class_names), data.attribute_names
    attackers = {
        name: _raw_attacker(config, source.privacy_train, len(names), out_dir, name)
        for name in config.eval_privacy_model_names()
    }
    action_key = "action_cmap" if config.action_multilabel else "action_top1"
    for method in methods:
        if report.has(method.name):
            reported = report.get(method.name).extra.get("anonymizer_sha256")
            if reported == method.model_sha256:
                logging.info("%s: already in %s, skipped", method.name, out_dir / "report.json")
                continue
            logging.warning(
                "%s: the row in %s is of another anonymizer file; evaluating it again",
                method.name,
                out_dir / "report.json",
            )
        logging.info("evaluating %s", method.name)
        seen = source
        if method.baseline in FILE_BASELINES:
            written = anonymized_data(data, method, out_dir / "anonymized", config.frame_size)
            seen = cached_data(written, out_dir / "cache" / method.name, config.frame_size)
        result = _target_results(config, seen, method, attackers, classes, names)
        if method.baseline in FILE_BASELINES:
            result["detector"] = method.detector_description()
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
    report.plot_tradeoff()
    save_frame_strip(_frames_of_report(config, data, methods, report), out_dir / "frames.png")
    return report


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
    for name, clip in _example_frames(config, data, methods, report.out_dir).items():
        np.save(frames_dir / f"{name}.npy", clip)
    names = dict.fromkeys([RAW_METHOD, *report.methods])
    return {
        name: np.load(frames_dir / f"{name}.npy")
        for name in names
        if (frames_dir / f"{name}.npy").is_file()
    }


def _target_results(
    config: ExperimentConfig,
    seen: EvaluationData,
    method: Anonymization,
    attackers: dict[str, keras.Model],
    classes: int,
    names: list[str],
) -> dict:
    """Every target architecture trained on `seen` (`classes` actions, attributes `names`)
    through `method` and tested: the first action and privacy architectures' full results, and
    every architecture's headline metrics in `<metric>_by_model` ({architecture: value})."""
    action_key = "action_cmap" if config.action_multilabel else "action_top1"
    result, by_model = {}, {}
    for index, name in enumerate(config.eval_action_model_names()):
        model = train_action_target(config, seen.action_train, classes, method.model, name)
        scores = test_action_target(config, model, seen.action_test)
        if index == 0:
            result |= scores
        by_model.setdefault(f"{action_key}_by_model", {})[name] = scores[action_key]
    raw = method.model is None and method.baseline is None
    for index, name in enumerate(config.eval_privacy_model_names()):
        if raw:
            # On raw data the fresh f'_B is the raw-trained attacker (same images, seed, model).
            model = attackers[name]
        else:
            model = train_privacy_target(config, seen.privacy_train, len(names), method.model, name)
        scores = test_privacy_target(config, model, seen.privacy_test, names)
        attacker = with_anonymizer(attackers[name], method.model, False)
        scores |= test_privacy_target(config, attacker, seen.privacy_test, names, "raw_attacker")
        if index == 0:
            result |= scores
        for key in ("privacy_cmap", "privacy_f1", "raw_attacker_cmap", "raw_attacker_f1"):
            by_model.setdefault(f"{key}_by_model", {})[name] = scores[key]
    return result | by_model


def _raw_attacker(
    config: ExperimentConfig,
    images: pipelines.Source,
    num_attributes: int,
    out_dir: Path,
    model_name: str,
) -> keras.Model:
    """A privacy model `model_name` trained on raw images (trained once, kept in out_dir)."""
    path = out_dir / f"raw_attacker_{model_name}.keras"
    if path.is_file():
        return keras.saving.load_model(path, compile=False)
    model = train_privacy_target(config, images, num_attributes, None, model_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return model


def _example_frames(
    config: ExperimentConfig,
    data: EvaluationData,
    methods: Sequence[Anonymization],
    out_dir: Path,
) -> dict[str, np.ndarray]:
    """The first test clip as each method shows it."""
    source = data.action_test.examples[0]
    clip = read_video(source.path, max_frames=config.clip_length * config.clip_stride)
    frames = {"raw": clip}
    for method in methods:
        if method.model is not None:
            size = (config.image_size, config.image_size)
            resized = np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in clip])
            anonymized = method.model(keras.ops.convert_to_tensor(resized / 255.0, "float32"))
            frames[method.name] = keras.ops.convert_to_numpy(anonymized)
        elif method.baseline is not None:
            written = out_dir / "anonymized" / method.name / "action_test"
            first = sorted(written.glob("000000_*.mp4"))
            frames[method.name] = read_video(first[0], max_frames=len(clip)) if first else clip
    return frames


def report_dir(config: ExperimentConfig) -> Path:
    """The report folder: `--eval_dir`, default `run_dir/evaluation`."""
    return Path(config.eval_dir or Path(config.run_dir) / "evaluation")


def evaluation_data(config: ExperimentConfig) -> EvaluationData:
    """The train and test splits of the evaluation datasets (`config.evaluation_datasets()`:
    the training ones unless `--eval_*` dataset flags are set; PA-HMDB51's frames are written
    under the report folder). With `--eval_protocol=novel_actions`, an action class that the
    training action set also has raises ValueError."""
    from keras_privacy.data.sources import (
        action_splits,
        evaluation_privacy_splits,
        pa_hmdb51_action_test,
    )

    actions = action_splits(config.evaluation_datasets())
    if config.eval_protocol == "pa_hmdb51":
        actions["test"] = pa_hmdb51_action_test(config, actions["train"].class_names)
    images = evaluation_privacy_splits(config, report_dir(config) / "pa_hmdb51_frames")
    if config.eval_protocol == "novel_actions":
        if config.action_cache:
            trained = pipelines.label_names(config.action_cache, "class_names")
        else:
            trained = action_splits(config)["train"].class_names
        shared = sorted(set(actions["train"].class_names) & set(trained))
        if shared:
            raise ValueError(
                "--eval_protocol=novel_actions needs action classes new to the training set, "
                f"but both have {', '.join(shared)}"
            )
    return EvaluationData(actions["train"], actions["test"], images["train"], images["test"])


def evaluation_record(config: ExperimentConfig, data: EvaluationData) -> dict:
    """What the results of an evaluation mean, kept in report.json: the protocol, the datasets
    the target models were trained and tested on, and their label names."""
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
    if config.eval_protocol == "pa_hmdb51":
        datasets["action_dataset"] |= {
            "trained_on": "HMDB51 training split without the PA-HMDB51 videos",
            "tested_on": "PA-HMDB51 videos",
        }
    if evaluation.privacy_dataset == "pa_hmdb51":
        datasets["privacy_dataset"] |= {
            "frames_per_video": config.eval_privacy_frames,
            "trained_on": f"VISPR-1 of {config.privacy_annotations}, merged",
        }
    return {
        "protocol": config.eval_protocol,
        **datasets,
        "class_names": data.class_names,
        "attribute_names": data.attribute_names,
    }
