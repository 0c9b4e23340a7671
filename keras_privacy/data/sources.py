"""From an `ExperimentConfig` to decoded datasets and per-epoch tf.data pipelines.

The built-in synthetic benchmark is written on first use into `config.synthetic_dir` and read
back through the same UCF101 and VISPR readers as the real datasets.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_privacy.config import ExperimentConfig
from keras_privacy.data import pa_hmdb51, pipelines, synthetic
from keras_privacy.data.cache import MANIFEST, failure_line, prepare_cache, read_manifest
from keras_privacy.data.examples import Split
from keras_privacy.data.hmdb51 import read_hmdb51
from keras_privacy.data.ucf101 import read_ucf101
from keras_privacy.data.vispr import read_vispr


def synthetic_benchmark(
    directory: str | Path, seed: int = 0, version: int = synthetic.VERSION, style: str = ""
) -> Path:
    """The synthetic benchmark of `version` (and `style`) in `directory`, written first if it
    is not complete there or was written by another version or style of the generator (the
    generator writes its `VERSION` file last, so the file marks a complete benchmark). A
    rewritten benchmark's training caches are removed with it."""
    directory = Path(directory)
    marker = directory / "VERSION"
    expected = synthetic.version_tag(version, style)
    if not (marker.is_file() and marker.read_text().strip() == expected):
        logging.info("writing the synthetic benchmark %s to %s", expected, directory)
        shutil.rmtree(directory / "cache", ignore_errors=True)
        synthetic.write_synthetic_benchmark(directory, seed=seed, version=version, style=style)
    return directory


def _synthetic_root(config: ExperimentConfig) -> Path:
    """The benchmark the config names, written first if needed."""
    return synthetic_benchmark(
        config.synthetic_dir, version=config.synthetic_version, style=config.synthetic_style
    )


def action_splits(config: ExperimentConfig) -> dict[str, Split]:
    """The action dataset's train and test splits as the config names them. With
    `--eval_protocol=pa_hmdb51` (VITA's), the HMDB51 training split leaves out the PA-HMDB51
    videos, on which the evaluation tests (`pa_hmdb51_action_test`)."""
    if config.action_dataset == "synthetic":
        root = _synthetic_root(config)
        return read_ucf101(root / "ucf_splits", root / "videos", split=1)
    reader = {"ucf101": read_ucf101, "hmdb51": read_hmdb51}[config.action_dataset]
    splits = reader(config.action_annotations, config.action_root, split=config.action_split)
    if config.eval_protocol == "pa_hmdb51":
        annotated = set(
            pa_hmdb51.read_frame_ranges(config.evaluation_datasets().privacy_annotations)
        )
        train = splits["train"]
        kept = [e for e in train.examples if _class_and_name(e.path) not in annotated]
        logging.info("HMDB51 training split: %d PA-HMDB51 videos left out", len(train) - len(kept))
        splits["train"] = dataclasses.replace(train, examples=kept)
    return splits


def _class_and_name(path: str) -> str:
    """The "<class>/<video>" name of a video under an HMDB51-style root, as in PA-HMDB51."""
    return f"{Path(path).parent.name}/{Path(path).name}"


def pa_hmdb51_action_test(config: ExperimentConfig, class_names: list[str]) -> Split:
    """The PA-HMDB51 videos on disk as the action test split of `--eval_protocol=pa_hmdb51`,
    labelled by their action's index in `class_names` (HMDB51's); an action outside them raises
    ValueError."""
    evaluation = config.evaluation_datasets()
    videos = pa_hmdb51.read_pa_hmdb51(evaluation.privacy_annotations, evaluation.privacy_root)
    test = videos["test"]
    unknown = sorted(set(test.class_names) - set(class_names))
    if unknown:
        raise ValueError(f"PA-HMDB51 actions {unknown} are not HMDB51 classes of the action split")
    _report_missing("PA-HMDB51 videos", test)
    examples = [
        dataclasses.replace(e, label=class_names.index(test.class_names[e.label]), privacy=())
        for e in test.examples
    ]
    return dataclasses.replace(
        test, examples=examples, class_names=list(class_names), attribute_names=[]
    )


def privacy_splits(config: ExperimentConfig) -> dict[str, Split]:
    """The privacy image dataset's splits as the config names them."""
    if config.privacy_dataset == "synthetic":
        root = _synthetic_root(config) / "vispr"
        attributes = synthetic.attribute_subset(config.privacy_attributes)
        return read_vispr(root, root, attributes=attributes)
    return read_vispr(
        config.privacy_annotations, config.privacy_root, attributes=config.privacy_attributes
    )


def evaluation_privacy_splits(config: ExperimentConfig, frames_dir: str | Path) -> dict[str, Split]:
    """The "train" and "test" privacy splits of the evaluation (`config.evaluation_datasets()`).

    PA-HMDB51 has labelled test videos only: its test images are `--eval_privacy_frames`
    equidistant frames of each video (written under `frames_dir`), and the target privacy model
    trains on the training VISPR (`--privacy_annotations`), its VISPR-1 labels merged onto
    PA-HMDB51's attributes."""
    evaluation = config.evaluation_datasets()
    if evaluation.privacy_dataset != "pa_hmdb51":
        return privacy_splits(evaluation)
    vispr = privacy_splits(dataclasses.replace(config, privacy_attributes="vispr1"))["train"]
    test = pa_hmdb51.privacy_images(
        evaluation.privacy_annotations,
        evaluation.privacy_root,
        frames_dir,
        config.eval_privacy_frames,
        evaluation.privacy_attributes,
    )
    _report_missing("PA-HMDB51 videos", test)
    train = pa_hmdb51.vispr_as_pa_hmdb51(vispr, evaluation.privacy_attributes)
    return {"train": train, "test": test}


def _report_missing(name: str, split: Split) -> None:
    if split.missing:
        logging.warning(
            "%s: %d listed files are missing, e.g. %s", name, len(split.missing), split.missing[0]
        )


@dataclasses.dataclass
class TrainingData:
    """The training videos and privacy images (a prepared cache or a split of files), and the
    per-epoch minimax batches made of them."""

    config: ExperimentConfig
    videos: pipelines.Source
    images: pipelines.Source
    class_names: list[str]
    attribute_names: list[str]

    @property
    def hold_out(self) -> int:
        """N > 0 where every Nth action video (by index) is held out of training as VITA's
        validation clips (`--action_schedule=validation_loop`), else 0."""
        c = self.config
        if c.method == "vita" and c.action_schedule == "validation_loop":
            return c.action_validation_every
        return 0

    @property
    def steps_per_epoch(self) -> int:
        """Batches in one pass over the action videos used for training."""
        count = pipelines.count_examples(self.videos)
        if self.hold_out:
            count -= -(-count // self.hold_out)
        return max(1, count // self.config.batch_size)

    def dataset(
        self,
        epoch: int,
        steps: int,
        labelled: bool = False,
        privacy_batches: int = 1,
        validation: bool = False,
    ):
        """`steps` batches of the minimax format for `epoch` (seeded by seed and epoch).

        Privacy images come as two contrastive `views` each (SPAct), or with `labelled` as
        augmented `images` with their `privacy` labels (the supervised adversaries),
        `privacy_batches` batches of them together (VITA's budget updates). With
        `--ssl_adversary=spatiotemporal` each video also gives its `second_clips` (the positive
        of the video privacy encoder); the views stay, for the identity init. With
        `validation`, a batch of held-out clips too: `validation_clips`, `validation_labels`."""
        c = self.config
        seed = c.seed * 1000 + epoch

        def clips(held_out: bool):
            return pipelines.action_train_dataset(
                self.videos,
                c.batch_size,
                c.clip_length,
                c.clip_stride,
                c.image_size,
                seed=seed,
                pair_sampler=c.pair_sampler,
                config=c.action_augmentation(),
                epochs=None,
                second_clip=c.ssl_adversary == "spatiotemporal",
                hold_out=self.hold_out,
                held_out=held_out,
            )

        action = clips(held_out=False)
        if validation:
            if not self.hold_out:
                raise ValueError(
                    "validation clips need a held-out split (--action_validation_every)"
                )
            held = clips(held_out=True).map(
                lambda b: {"validation_clips": b["clips"], "validation_labels": b["labels"]}
            )
            action = tf.data.Dataset.zip(action, held).map(lambda a, v: {**a, **v})
        if labelled:
            privacy = pipelines.privacy_labelled_dataset(
                self.images,
                c.privacy_batch_size * privacy_batches,
                c.image_size,
                True,
                seed=seed,
                epochs=None,
            )
        else:
            privacy = pipelines.privacy_pair_dataset(
                self.images, c.privacy_batch_size, c.image_size, seed=seed
            )
        return pipelines.minimax_dataset(action, privacy).take(steps)

    def fixed_clip(self) -> np.ndarray:
        """The centre-cropped first clip of the first video, to watch the anonymization."""
        c = self.config
        dataset = pipelines.action_eval_dataset(
            self.videos, 1, c.clip_length, c.clip_stride, c.image_size
        )
        return next(iter(dataset.take(1).as_numpy_iterator()))["clips"][0]


def training_data(config: ExperimentConfig) -> TrainingData:
    """The training splits of the config's action and privacy datasets (their caches when
    given)."""
    actions = action_splits(config)["train"] if not config.action_cache else None
    images = privacy_splits(config)["train"] if not config.privacy_cache else None
    if actions is not None:
        _report_missing("action train split", actions)
    if images is not None:
        _report_missing("privacy train split", images)
    videos, pictures = config.action_cache or actions, config.privacy_cache or images
    if config.action_dataset == "synthetic" and not config.action_cache:
        videos = _synthetic_cache(actions, "video", config)
    if config.privacy_dataset == "synthetic" and not config.privacy_cache:
        pictures = _synthetic_cache(images, "image", config)
    require_examples(videos, "action_cache" if config.action_cache else "action_annotations")
    require_examples(pictures, "privacy_cache" if config.privacy_cache else "privacy_annotations")
    return TrainingData(
        config=config,
        videos=videos,
        images=pictures,
        class_names=pipelines.label_names(config.action_cache or actions, "class_names"),
        attribute_names=pipelines.label_names(config.privacy_cache or images, "attribute_names"),
    )


def require_examples(source: pipelines.Source, flag: str) -> None:
    """Raise ValueError, naming the cache (or the split's missing files) and how it was made,
    when `source` holds no example: nothing to train on."""
    if pipelines.count_examples(source) > 0:
        return
    if isinstance(source, Split):
        missing = f", e.g. {source.missing[0]}" if source.missing else ""
        raise ValueError(
            f"--{flag}: the split has no example on disk ({len(source.missing)} listed files "
            f"missing{missing})"
        )
    manifest = read_manifest(source)
    failures = manifest["failures"]
    example = f", e.g. {failure_line(failures[0])}" if failures else ""
    raise ValueError(
        f"--{flag}={source}: the cache holds no {manifest['kind']}: `python -m "
        f"keras_privacy.data prepare` wrote it from {manifest['num_examples']} listed files, "
        f"{len(failures)} failed to decode{example}, and {len(manifest['missing'])} were "
        f"missing (see {Path(source) / MANIFEST})"
    )


def _synthetic_cache(split: Split, kind: str, config: ExperimentConfig) -> str:
    """The built-in benchmark's training split as a prepared cache (written once next to it),
    so its input pipeline runs TensorFlow ops only. A subset of the privacy attributes has its
    own cache, so runs on different subsets never rewrite each other's."""
    name = f"{kind}_train_{config.frame_size}"
    if split.attribute_names and tuple(split.attribute_names) != synthetic.ATTRIBUTE_IDS:
        name += "_" + "-".join(split.attribute_names)
    directory = Path(config.synthetic_dir) / "cache" / name
    return str(prepare_cache(split, kind, directory, config.frame_size))
