"""From dataset folders to decoded splits and per-epoch tf.data pipelines.

The built-in synthetic benchmark is written on first use into its folder and read
back through the same UCF101 and VISPR readers as the real datasets.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import numpy as np

from keras_privacy.data import pa_hmdb51, pipelines, synthetic
from keras_privacy.data.augment import CONTRASTIVE, SUPERVISED, AugmentConfig
from keras_privacy.data.cache import (
    DECODE_ERRORS,
    MANIFEST,
    failure_line,
    prepare_cache,
    read_manifest,
)
from keras_privacy.data.errors import AttributeChoiceError, DatasetFormatError
from keras_privacy.data.examples import Split
from keras_privacy.data.hmdb51 import read_hmdb51
from keras_privacy.data.images import read_image
from keras_privacy.data.tensorflow_runtime import tf
from keras_privacy.data.ucf101 import read_ucf101
from keras_privacy.data.video import read_video
from keras_privacy.data.vispr import read_vispr, requested_ids
from keras_privacy.spelling import SettingError


def synthetic_benchmark(
    directory: str | Path, seed: int = 0, version: int = synthetic.VERSION, style: str = ""
) -> Path:
    """The synthetic benchmark of `version` (and `style`) in `directory`, written first
    (`write_benchmark`) if it is not complete there or was written by another version or style
    of the generator. The generator deletes its `VERSION` file first and writes it last, so the
    file marks a complete benchmark."""
    directory = Path(directory)
    if _version_file(directory) != synthetic.version_tag(version, style):
        write_benchmark(directory, seed, version, style)
    return directory


def write_benchmark(
    directory: str | Path,
    seed: int = 0,
    version: int = synthetic.VERSION,
    style: str = "",
    setting: str = "synthetic_dir",
) -> synthetic.SyntheticPaths:
    """Write the synthetic benchmark into `directory`, only where the folder holds nothing but
    its own files, so that no one's data is overwritten (train.py and `python -m
    keras_privacy.data synthetic` alike).

    Its own files: none, or those of a stopped write (`synthetic.ENTRIES`, among them every
    folder of `synthetic.FOLDERS`, which a write makes first) and, where `VERSION` marks one
    written before (it holds a tag of the generator's, `synthetic.is_version_tag`), its
    training caches (`cache/`), which are removed with it. A folder holding anything else is
    refused, naming `<setting>` (the option that gave the folder): it is not the benchmark's,
    and its files (a cache of one's own, a dataset's `vispr/`) are left alone."""
    directory = Path(directory)
    tag = _version_file(directory)
    ours = synthetic.ENTRIES
    if tag is not None and synthetic.is_version_tag(tag):
        ours = ours | {"cache"}  # a benchmark written before: its training caches go with it
    elif tag is not None:
        ours = ours - {"VERSION"}  # another program's VERSION file
    held = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    if not set(synthetic.FOLDERS) <= set(held):
        ours = frozenset()  # not even the folders a write makes first: e.g. a real `vispr/`
    foreign = [name for name in held if name not in ours]
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise SettingError(
            f"<{setting}>={directory} holds {', '.join(foreign[:3])}{more}, which the "
            "built-in benchmark did not write: name an empty or new folder for it"
        )
    expected = synthetic.version_tag(version, style)
    logging.info("writing the synthetic benchmark %s to %s", expected, directory)
    shutil.rmtree(directory / "cache", ignore_errors=True)
    return synthetic.write_synthetic_benchmark(directory, seed=seed, version=version, style=style)


def _version_file(directory: Path) -> str | None:
    """The text of `directory`'s `VERSION` file, stripped; None where there is none."""
    marker = directory / "VERSION"
    return marker.read_text(errors="replace").strip() if marker.is_file() else None


@dataclasses.dataclass(frozen=True)
class DatasetFiles:
    """Where one dataset's files are: its `name` (synthetic, ucf101, hmdb51, vispr), its
    `annotations` and `root` folders (the built-in benchmark: the folder it is written to), or
    a prepared `cache` in their place; the official `split` of an action dataset, the
    `attributes` of a privacy dataset (vispr1, vispr2, all or comma-separated ids); the built-in
    benchmark's `synthetic_version` and `synthetic_style`."""

    name: str
    annotations: str = ""
    root: str = ""
    cache: str = ""
    split: int = 1
    attributes: str = "vispr1"
    synthetic_version: int = synthetic.VERSION
    synthetic_style: str = ""

    def synthetic_root(self) -> Path:
        """The built-in benchmark of this version and style in `root`, written first if needed."""
        return synthetic_benchmark(
            self.root, version=self.synthetic_version, style=self.synthetic_style
        )


def action_splits(files: DatasetFiles, leave_out: str | Path = "") -> dict[str, Split]:
    """The action dataset's train and test splits. `leave_out`, a PA-HMDB51 annotation folder,
    takes its videos out of the HMDB51 training split (the `pa_hmdb51` protocol, SPAct's Sec.
    5.3, which tests on them:
    `pa_hmdb51_action_test`)."""
    if files.name == "synthetic":
        root = files.synthetic_root()
        return read_ucf101(root / "ucf_splits", root / "videos", split=1)
    reader = {"ucf101": read_ucf101, "hmdb51": read_hmdb51}[files.name]
    _require_root(files)
    splits = reader(files.annotations, files.root, split=files.split)
    if leave_out:
        splits["train"] = without_pa_hmdb51(splits["train"], leave_out)
    return splits


def pa_hmdb51_videos(annotations: str | Path) -> set[str]:
    """The "<action>/<video>" names, lower case, of the videos that the PA-HMDB51 annotation
    folder `annotations` labels: compared in any case, as the test videos are found on disk
    (`resolve`). A folder without its files (a typo, an empty copy), or whose files label
    none, raises: no video would be left out."""
    if not any(Path(annotations).glob("*.json")):
        raise FileNotFoundError(
            f"{annotations}: no PA-HMDB51 '<action>.json' files, so no video would be left out"
        )
    annotated = {name.lower() for name in pa_hmdb51.read_frame_ranges(annotations)}
    if not annotated:
        raise DatasetFormatError(
            f"{annotations}: its PA-HMDB51 '<action>.json' files label no video, so no video "
            "would be left out"
        )
    return annotated


def without_pa_hmdb51(train: Split, annotations: str | Path) -> Split:
    """The HMDB51 training split `train` without the videos that the PA-HMDB51 annotation
    folder `annotations` labels (the `pa_hmdb51` protocol tests on them); a folder without
    its files raises FileNotFoundError: no video would be left out."""
    annotated = pa_hmdb51_videos(annotations)
    kept = [e for e in train.examples if _class_and_name(e.path).lower() not in annotated]
    if train.examples and not kept:
        raise SettingError(
            f"{annotations}: PA-HMDB51 labels all {len(train)} videos of the HMDB51 training "
            "split on disk, so none is left to train on once they are left out"
        )
    logging.info("HMDB51 training split: %d PA-HMDB51 videos left out", len(train) - len(kept))
    return dataclasses.replace(train, examples=kept)


def _class_and_name(path: str) -> str:
    """The "<class>/<video>" name of a video under an HMDB51-style root, as in PA-HMDB51."""
    return f"{Path(path).parent.name}/{Path(path).name}"


def pa_hmdb51_action_test(
    annotations: str | Path, root: str | Path, class_names: list[str]
) -> Split:
    """The PA-HMDB51 videos on disk (`annotations`: its PrivacyAttributes/, `root`: the HMDB51
    videos) as the action test split of the `pa_hmdb51` protocol, labelled by their action's
    index in `class_names` (HMDB51's); an action outside them raises ValueError."""
    videos = pa_hmdb51.read_pa_hmdb51(annotations, root)
    test = videos["test"]
    unknown = sorted(set(test.class_names) - set(class_names))
    if unknown:
        raise ValueError(f"PA-HMDB51 actions {unknown} are not HMDB51 classes of the action split")
    report_missing("PA-HMDB51 videos", test)
    examples = [
        dataclasses.replace(e, label=class_names.index(test.class_names[e.label]), privacy=())
        for e in test.examples
    ]
    return dataclasses.replace(
        test, examples=examples, class_names=list(class_names), attribute_names=[]
    )


def privacy_splits(files: DatasetFiles, setting: str = "privacy_attributes") -> dict[str, Split]:
    """The privacy image dataset's splits, with its `attributes`; an attribute it does not have
    (or one named twice) raises a SettingError naming `setting`, the flag that chose them."""
    try:
        if files.name == "synthetic":
            root = files.synthetic_root() / "vispr"
            attributes = synthetic.attribute_subset(files.attributes)
            return read_vispr(root, root, attributes=attributes)
        _require_root(files)
        return read_vispr(files.annotations, files.root, attributes=files.attributes)
    except AttributeChoiceError as error:
        raise SettingError(f"<{setting}>={files.attributes}: {error}") from error


def _require_root(files: DatasetFiles) -> None:
    """Raise FileNotFoundError where the dataset's root folder is given but is not a folder:
    every listed file would be missing, and the split's annotations blamed for it."""
    if files.root and not Path(files.root).is_dir():
        raise FileNotFoundError(f"{files.root}: no such folder (the {files.name} files' root)")


def report_missing(name: str, split: Split) -> None:
    """Log how many files `split` lists that are not on disk, with the first of them."""
    if split.missing:
        logging.warning(
            "%s: %d listed files are missing, e.g. %s", name, len(split.missing), split.missing[0]
        )


@dataclasses.dataclass(frozen=True)
class Batching:
    """How the training batches are cut: sizes, the clips' length, stride and side, the frame
    pairs' sampler, the augmentation of the clips, of the labelled privacy images and of the
    contrastive views, a `second_clip` of each video (the spatio-temporal adversary's
    positive), `triplet_clips` (TeD-SPAD's positive and negative, in the minimax's batches
    only), and `hold_out` > 0 where every Nth action video (by index) is held out of training
    as VITA's validation clips."""

    seed: int
    batch_size: int
    privacy_batch_size: int
    clip_length: int
    clip_stride: int
    image_size: int
    short_videos: str
    pair_sampler: str
    augmentation: AugmentConfig
    image_augmentation: AugmentConfig = SUPERVISED
    view_augmentation: AugmentConfig = CONTRASTIVE
    second_clip: bool = False
    triplet_clips: bool = False
    hold_out: int = 0


@dataclasses.dataclass
class TrainingData:
    """The training videos and privacy images (a prepared cache or a split of files), and the
    per-epoch minimax batches made of them."""

    videos: pipelines.Source
    images: pipelines.Source
    class_names: list[str]
    attribute_names: list[str]
    batching: Batching

    @property
    def hold_out(self) -> int:
        """N > 0 where every Nth action video is held out as validation clips, else 0."""
        return self.batching.hold_out

    @property
    def steps_per_epoch(self) -> int:
        """Batches in one pass over the action videos used for training."""
        count = pipelines.count_examples(self.videos)
        if self.hold_out:
            count -= -(-count // self.hold_out)
        return max(1, count // self.batching.batch_size)

    def dataset(
        self,
        epoch: int,
        steps: int,
        labelled: bool = False,
        privacy_batches: int = 1,
        validation: bool = False,
        action_batches: int = 0,
        with_clips: bool = True,
        process: tuple[int, int] = (0, 1),
        minimax: bool = False,
        pairs_only: bool = False,
    ) -> tf.data.Dataset:
        """`steps` batches of the minimax format for `epoch` (seeded by seed and epoch).

        Privacy images come as two contrastive `views` each (SPAct), or with `labelled` as
        augmented `images` with their `privacy` labels (the supervised adversaries),
        `privacy_batches` batches of them together (VITA's budget updates). With a
        `second_clip` batching each video also gives its `second_clips` (the positive of the
        video privacy encoder); with `triplet_clips` batching and `minimax` (the batches of a
        minimax phase), also its `positive_clips` and `second_clips` (TeD-SPAD's positive and
        negative: the clip's frames augmented again, another clip of the video); the views
        stay, for the identity init. With
        `validation`, a batch of held-out clips too: `validation_clips`, `validation_labels`,
        each the centred view of a random clip, not augmented (VITA's validation queue).
        With `action_batches` = K > 0, K more batches of training clips: `action_clips`,
        `action_labels` (VITA's f_T updates, a batch each), the clips that follow the step's
        own in the shuffled order; and K batches of held-out clips (its accuracy checks, a
        batch each). Without `with_clips`, the privacy batches alone: no video is read (f_B's
        initialisation on image views). With `pairs_only`, each clip's NT-Xent pair of frames
        alone, as `pair_frames`, in place of the clip (f_A's identity initialisation, which
        reads no other frame: `pipelines.action_train_dataset`).

        In a job of several processes, `process` = (index, count), every batch holds this
        process's rows of the global batch, and of the K action batches, and only those are
        decoded: put together in process order, the processes' batches are the batches a
        single process reads."""
        c = self.batching
        seed = c.seed * 1000 + epoch

        def clips(held_out: bool, batch_parts: tuple[int, ...]):
            return pipelines.action_train_dataset(
                self.videos,
                sum(batch_parts),
                c.clip_length,
                c.clip_stride,
                c.image_size,
                seed=seed,
                pair_sampler=c.pair_sampler,
                config=None if held_out else c.augmentation,
                epochs=None,
                second_clip=c.second_clip or (c.triplet_clips and minimax),
                positive_clip=c.triplet_clips and minimax,
                hold_out=self.hold_out,
                short_videos=c.short_videos,
                held_out=held_out,
                process=process,
                batch_parts=batch_parts,
                pairs_only=pairs_only,
            )

        if labelled:
            privacy = pipelines.privacy_labelled_dataset(
                self.images,
                c.privacy_batch_size * privacy_batches,
                c.image_size,
                True,
                seed=seed,
                config=c.image_augmentation,
                epochs=None,
                process=process,
            )
        else:
            privacy = pipelines.privacy_pair_dataset(
                self.images,
                c.privacy_batch_size,
                c.image_size,
                seed=seed,
                config=c.view_augmentation,
                process=process,
            )
        # The sources are endless, but their flat_map leaves the length unknown: say it, so
        # that Keras stops after the last step instead of reading on and warning that the
        # input ran out (the minimax's pairs of batches then count steps // 2).
        if not with_clips:
            return privacy.take(steps).apply(tf.data.experimental.assert_cardinality(steps))
        action = clips(held_out=False, batch_parts=(c.batch_size, c.batch_size * action_batches))
        if action_batches:
            action = action.map(lambda b: split_action_batches(b, c.batch_size // process[1]))
        if validation:
            if not self.hold_out:
                raise ValueError("validation clips need a held-out split (Batching.hold_out)")
            held = clips(held_out=True, batch_parts=(c.batch_size * max(1, action_batches),)).map(
                lambda b: {"validation_clips": b["clips"], "validation_labels": b["labels"]}
            )
            action = tf.data.Dataset.zip(action, held).map(lambda a, v: {**a, **v})
        return (
            pipelines.minimax_dataset(action, privacy)
            .take(steps)
            .apply(tf.data.experimental.assert_cardinality(steps))
        )

    def fixed_clip(self) -> np.ndarray:
        """The centre-cropped first clip of the first video, to watch the anonymization."""
        c = self.batching
        dataset = pipelines.action_eval_dataset(
            self.videos, 1, c.clip_length, c.clip_stride, c.image_size, short_videos=c.short_videos
        )
        return next(iter(dataset.take(1).as_numpy_iterator()))["clips"][0]


def split_action_batches(batch: dict, batch_size: int) -> dict:
    """A batch of (1 + K) * `batch_size` training clips as the step's first `batch_size`
    (every key) and the K batches after them as `action_clips`, `action_labels`."""
    step = {key: value[:batch_size] for key, value in batch.items()}
    step["action_clips"] = batch["clips"][batch_size:]
    step["action_labels"] = batch["labels"][batch_size:]
    return step


def training_data(
    actions: DatasetFiles,
    privacy: DatasetFiles,
    batching: Batching,
    frame_size: int,
    image_side: int,
    leave_out: str | Path = "",
) -> TrainingData:
    """The training splits of the action and privacy datasets (their caches when given), the
    videos decoded at a short side of `frame_size` and the images at `image_side`, cut by
    `batching`; `leave_out` as in `action_splits`."""
    action_split = None if actions.cache else action_splits(actions, leave_out)["train"]
    privacy_split = None if privacy.cache else privacy_splits(privacy)["train"]
    if action_split is not None:
        report_missing("action train split", action_split)
    if privacy_split is not None:
        report_missing("privacy train split", privacy_split)
    videos, images = actions.cache or action_split, privacy.cache or privacy_split
    if actions.name == "synthetic" and not actions.cache:
        videos = _synthetic_cache(action_split, "video", actions.root, frame_size)
    if privacy.name == "synthetic" and not privacy.cache:
        images = _synthetic_cache(privacy_split, "image", privacy.root, image_side)
    require_examples(videos, "action_cache" if actions.cache else "action_annotations")
    require_examples(images, "privacy_cache" if privacy.cache else "privacy_annotations")
    if actions.cache:
        expected = {"dataset": actions.name, "split": actions.split, "subset": "train"}
        if leave_out:
            expected["pa_hmdb51_left_out"] = sorted(pa_hmdb51_videos(leave_out))
        require_cache_source(actions.cache, expected, "action_cache")
    if privacy.cache and privacy.name == "vispr":
        expected = {"dataset": "vispr", "subset": "train"}
        require_cache_source(privacy.cache, expected, "privacy_cache")
        require_cache_attributes(privacy.cache, privacy.attributes)
    if isinstance(videos, Split):
        require_decodable(videos, "video", "action_annotations")
        warn_of_many_video_files(videos)
    if isinstance(images, Split):
        require_decodable(images, "image", "privacy_annotations")
    class_names = pipelines.label_names(actions.cache or action_split, "class_names")
    attribute_names = pipelines.label_names(privacy.cache or privacy_split, "attribute_names")
    return TrainingData(videos, images, class_names, attribute_names, batching)


def require_examples(source: pipelines.Source, flag: str) -> None:
    """Raise SettingError, naming the setting `flag`, the cache (or the split's missing files)
    and how it was made, when `source` holds no example: nothing to train on."""
    if pipelines.count_examples(source) > 0:
        return
    if isinstance(source, Split):
        if not source.missing:
            raise SettingError(f"<{flag}>: the split lists no example (is its list empty?)")
        root_flag = flag.replace("annotations", "root")
        raise SettingError(
            f"<{flag}>: the split has no example on disk ({len(source.missing)} listed files "
            f"missing, e.g. {source.missing[0]}): is <{root_flag}> the folder that holds the "
            "files as the list names them?"
        )
    manifest = read_manifest(source)
    failures = manifest["failures"]
    example = f", e.g. {failure_line(failures[0])}" if failures else ""
    raise SettingError(
        f"<{flag}>={source}: the cache holds no {manifest['kind']}: `python -m "
        f"keras_privacy.data prepare` wrote it from {manifest['num_examples']} listed files, "
        f"{len(failures)} failed to decode{example}, and {len(manifest['missing'])} were "
        f"missing (see {Path(source) / MANIFEST})"
    )


def require_cache_source(cache: str | Path, expected: dict, flag: str) -> None:
    """Raise SettingError, naming the setting `flag` and the cache, where what `prepare`
    recorded the cache was made from (dataset, split, subset, the PA-HMDB51 videos left out)
    differs from what the run reads, `expected`: another dataset's, split's or subset's
    videos would be trained on in silence. A cache that records nothing (made by an older
    version, or by the library itself) is taken as it is, unless the PA-HMDB51 videos must
    have been left out, which only a record can tell."""
    source = read_manifest(cache).get("source")
    if source is None:
        if not expected.get("pa_hmdb51_left_out"):
            return
        source = {}
    differ = [key for key in expected if not _as_recorded(key, source.get(key), expected[key])]
    if not differ:
        return
    left_out = ""
    if differ == ["pa_hmdb51_left_out"]:
        left_out = (
            " (the PA-HMDB51 videos, which the pa_hmdb51 protocol tests on, must be left out: "
            "`prepare --leave_out` the folder of <eval_privacy_annotations>)"
        )
        recorded = source.get("pa_hmdb51_left_out")
        if isinstance(recorded, list):
            kept = sorted(set(expected["pa_hmdb51_left_out"]) - set(recorded))
            left_out = (
                f" (it left out the videos of another PA-HMDB51 folder: <eval_privacy_annotations> "
                f"labels {len(kept)} it did not leave out, e.g. {kept[0]}, which the pa_hmdb51 "
                "protocol tests on: `prepare --leave_out` that folder)"
            )
    raise SettingError(
        f"<{flag}>={cache}: prepared from {_described(source)}, but the run reads "
        f"{_described(expected)}{left_out}; give the cache of that, or prepare it "
        "(`python -m keras_privacy.data prepare`)"
    )


def _as_recorded(key: str, recorded, expected) -> bool:
    """Whether a cache's recorded `key` is what the run reads. For the PA-HMDB51 videos left
    out: every video the run's annotations label is among the recorded ones (`True`, from a
    version that kept no names, cannot be checked further)."""
    if key != "pa_hmdb51_left_out":
        return recorded == expected
    if recorded is True:
        return True
    return isinstance(recorded, list) and set(expected) <= set(recorded)


def _described(source: dict) -> str:
    """A cache's recorded source in words: "hmdb51, split 1, train, PA-HMDB51 videos left out"."""
    if not source:
        return "a source it does not record"
    words = [str(source.get("dataset", "?"))]
    if "split" in source:
        words.append(f"split {source['split']}")
    words.append(str(source.get("subset", "?")))
    left_out = source.get("pa_hmdb51_left_out")
    if left_out:
        words.append(
            "PA-HMDB51 videos left out"
            + (f" (those of a folder of {len(left_out)})" if isinstance(left_out, list) else "")
        )
    return ", ".join(words)


def require_cache_attributes(cache: str | Path, attributes: str) -> None:
    """Raise SettingError where a prepared VISPR cache's attributes are not those that
    `<privacy_attributes>` (= `attributes`) names, in order: the models would be built for
    and trained on the cache's (held-out ones, for the novel-attributes protocol). With
    "all" only the dataset's vocabulary says which they are: not checked."""
    wanted = requested_ids(attributes)
    cached = list(read_manifest(cache)["attribute_names"])
    if wanted is not None and wanted != cached:
        raise SettingError(
            f"<privacy_cache>={cache}: holds the attributes {', '.join(cached)}, but "
            f"<privacy_attributes>={attributes} names {', '.join(wanted)}; prepare it with "
            f"--attributes {attributes}"
        )


MANY_VIDEO_FILES = 500
"""Training videos read from their files past which training warns to prepare a cache."""


def warn_of_many_video_files(split: Split) -> None:
    """Warn where training reads more than `MANY_VIDEO_FILES` videos from their files: each clip
    then decodes its whole video (the decoded videos kept in memory hold a small split only),
    about 12 clips/s on a 2-core machine against 96 from a cache (100 copies of a real
    320 x 240 clip), where a GPU step of the paper's SPAct takes 140 a second."""
    if len(split) > MANY_VIDEO_FILES:
        logging.warning(
            "training reads %d videos from their files, decoding a whole video for each clip: "
            "prepare a cache for speed (`python -m keras_privacy.data prepare`, then "
            "--action_cache; README, 'A cache for speed')",
            len(split),
        )


def require_decodable(split: Split, kind: str, flag: str) -> None:
    """Raise SettingError, naming the setting `flag` and the first failure, when no file of
    `split` (of `kind` video or image) decodes. Training from the files skips a file that
    does not decode, with a warning naming it; on a split where none does, it would wait for a
    batch forever. Decodes the files in order up to the first that does (a video's first
    frame), so a split whose first file is good costs one decode."""
    failures = []
    for example in split.examples:
        try:
            if kind == "video":
                read_video(example.path, max_frames=1)
            else:
                read_image(example.path)
            return
        except DECODE_ERRORS as error:
            failures.append(str(error))
    raise SettingError(
        f"<{flag}>: none of the split's {len(failures)} {kind}s on disk decodes, e.g. {failures[0]}"
    )


def require_short_side(cache: str | Path, flag: str, least: int, setting: str) -> None:
    """Raise SettingError, naming the setting `flag` and the cache, where a prepared cache's
    frames have a short side below `least` (the value of `setting`): the training crops would
    be cut from up-sampled frames (a cache prepared at the default 128 px under a 224-px
    config). A cache of larger or original-size frames is fine: its crops are resized down."""
    short_side = read_manifest(cache).get("short_side")
    if short_side is not None and short_side < least:
        raise SettingError(
            f"<{flag}>={cache}: its frames have a short side of {short_side} px (`python -m "
            f"keras_privacy.data prepare --short_side {short_side}`), below <{setting}>="
            f"{least}, so the crops would be cut from up-sampled frames; prepare it again "
            f"with --short_side {least}, or lower <{setting}>"
        )


def _synthetic_cache(split: Split, kind: str, root: str | Path, frame_size: int) -> str:
    """The built-in benchmark's training split as a prepared cache (written once under its
    `root`), so its input pipeline runs TensorFlow ops only. A subset of the privacy
    attributes has its own cache, so runs on different subsets never rewrite each other's."""
    name = f"{kind}_train_{frame_size}"
    if split.attribute_names and tuple(split.attribute_names) != synthetic.ATTRIBUTE_IDS:
        name += "_" + "-".join(split.attribute_names)
    directory = Path(root) / "cache" / name
    return str(prepare_cache(split, kind, directory, frame_size))
