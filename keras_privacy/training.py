"""A whole training run: the initialisation phases, then the minimax, with exact resume.

`train(config)` builds the models and the data, then runs each phase epoch by epoch. After every
epoch it writes a checkpoint (models + the phase's optimizer state) and an image of the
anonymized frames of a fixed clip; a restarted run continues from the last checkpoint with the
same per-epoch data (each epoch's order and augmentation are seeded by `1000 * seed + epoch`)
and each model's random state (Dropout's), so it ends where an uninterrupted run ends. The
trained models are saved as `.keras` files at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import keras
import numpy as np

from keras_privacy import backend, checkpoint, distribute, environment
from keras_privacy.cli import refuse_a_file
from keras_privacy.config import ExperimentConfig
from keras_privacy.config.schedule import LEARNING_RATES
from keras_privacy.data import pipelines, sources
from keras_privacy.data.pairs import pair_batches
from keras_privacy.files import exclusive_lock, save_atomically, write_text_atomically
from keras_privacy.learning_rates import EpochRates, LinearWarmup
from keras_privacy.methods.init import (
    ActionInit,
    IdentityInit,
    PrivacyInit,
    SupervisedPrivacyInit,
)
from keras_privacy.methods.meta import MetaGeneralization, epoch_splits
from keras_privacy.methods.spact import SPAct
from keras_privacy.methods.steps import privacy_group_names
from keras_privacy.methods.trainer import StatelessTrainer
from keras_privacy.methods.vita import VITA, budget_only_steps
from keras_privacy.models import pretrained, registry
from keras_privacy.models.resnet import embedding_head, privacy_encoder, projection_head
from keras_privacy.spelling import SettingError, spell

if TYPE_CHECKING:
    import tensorflow as tf

MODEL_FILES = {
    "anonymizer": "anonymizer.keras",
    "action": "action_model.keras",
    "privacy": "privacy_encoder.keras",
}
"""File names of the saved models; the supervised adversaries are saved as `adversary_<i>.keras`."""
SUPERVISED_METHODS = ("vita", "meta")


class TrainingDivergedError(RuntimeError):
    """A loss or a weight became NaN or infinite; the last checkpoint (always one of finite
    weights) is kept and a restart resumes from it."""


BATCH_KINDS = ("contrastive", "pairs", "views", "paired", "labelled", "meta")


@dataclasses.dataclass
class GroupRates:
    """The learning rate of the optimizers of `groups`, set before each epoch by `rates`,
    which is shown each epoch's value of the log `loss`."""

    groups: tuple[str, ...]
    rates: EpochRates
    loss: str


@dataclasses.dataclass
class Phase:
    """One stage of a run: a trainer for `epochs` epochs on batches of one kind: `contrastive`
    (clips + two views per privacy image), `pairs` (each clip's NT-Xent pair of frames alone +
    the views, for a phase that reads no other frame: f_A's identity initialisation), `views`
    (the views alone, for a phase that reads no clip), `paired` (two such batches per step,
    SPAct's alternation), `labelled` (clips + privacy images with their labels) or `meta`
    (labelled, with the epoch's attribute and model splits, `meta.epoch_splits`);
    `privacy_batches` privacy batches per step and, with `validation`, a batch of held-out clips
    (VITA's minimax); `action_batches` more batches of training clips, and as many batches of
    held-out clips (VITA's fresh f_T update and accuracy check batches); `steps_per_epoch` (0:
    the run's) its own epoch length; `epoch_rates` (where set) the learning rate of a group's
    optimizer, set before each epoch."""

    name: str
    epochs: int
    make_trainer: Callable[[], StatelessTrainer]
    optimizers: Callable[[], dict[str, keras.optimizers.Optimizer]]
    batches: str = "contrastive"
    privacy_batches: int = 1
    validation: bool = False
    action_batches: int = 0
    steps_per_epoch: int = 0
    epoch_rates: Callable[[], GroupRates] | None = None

    def __post_init__(self):
        if self.batches not in BATCH_KINDS:
            raise ValueError(
                f"phase {self.name}: batches={self.batches!r} is none of {', '.join(BATCH_KINDS)}"
            )


@dataclasses.dataclass
class TrainResult:
    """Where a finished run put its models, and the per-phase history of its logs."""

    run_dir: Path
    model_paths: dict[str, Path]
    history: dict


def build_models(
    config: ExperimentConfig, num_classes: int, num_attributes: int
) -> dict[str, keras.Model]:
    """f_A, f_T and the adversaries of `config.method`, freshly initialised: SPAct's
    self-supervised privacy encoder f_B (`privacy`; an ensemble's `privacy_0`, ...; a video
    encoder for `--ssl_adversary=spatiotemporal`), or the supervised image models of
    `--adversary_models` with one logit per attribute (`adversary_0`, ...)."""
    clip_shape = (config.clip_length, config.image_size, config.image_size, 3)
    models = {
        "anonymizer": registry.build_anonymizer(config.anonymizer),
        "action": registry.build_action_model(
            config.action_model, num_classes=num_classes, input_shape=clip_shape
        ),
    }
    models["anonymizer"] = pretrained.start_from_weights(
        models["anonymizer"], config.anonymizer_weights, config.anonymizer
    )
    models["action"] = pretrained.start_from_weights(
        models["action"], config.action_weights, config.action_model
    )
    if config.method in SUPERVISED_METHODS:
        for i, name in enumerate(config.adversary_model_names()):
            models[f"adversary_{i}"] = registry.build_privacy_classifier(
                name, num_attributes, name=f"adversary_{i}_{name}"
            )
        return models
    if config.ssl_adversary == "spatiotemporal":
        models["privacy"] = registry.build_video_privacy_encoder(
            config.privacy_backbone_names()[0],
            input_shape=clip_shape,
            hidden=config.projection_hidden,
            output=config.projection_dim,
        )
        name = config.privacy_backbone_names()[0]
        models["privacy"] = pretrained.start_from_weights(
            models["privacy"], config.privacy_weights, name
        )
        return models
    names = config.privacy_backbone_names()
    for group, name in zip(privacy_group_names(len(names)), names):
        backbone = registry.build_image_backbone(name)
        head = projection_head(
            backbone.output_shape[-1],
            hidden=config.projection_hidden,
            output=config.projection_dim,
            name="projection_head" if len(names) == 1 else f"{group}_projection_head",
        )
        models[group] = privacy_encoder(
            backbone, head, name="privacy_encoder" if len(names) == 1 else f"{group}_encoder"
        )
    models[group] = pretrained.start_from_weights(models[group], config.privacy_weights, names[0])
    return models


def embedding_head_start(config: ExperimentConfig, action: keras.Model) -> list | None:
    """The weights of TeD-SPAD's embedding head (the triplet term's `embedding` group, which
    the SPAct trainer builds on f_T's pooled features) in `--embedding_weights`, read when the
    run starts so that a file that does not fit stops it before any phase trains; None without
    the flag. TeD-SPAD's anonymizer training loads its f_T file whole, the head `mlp.*` with it
    (`convert`'s `tedspad_embedding`). The whole head or nothing: a head of other widths
    (another f_T's features) raises WeightsError naming its layers."""
    if not config.embedding_weights:
        return None
    path = config.embedding_weights
    features = registry.with_pooled_features(action).output_shape[1][-1]
    head = embedding_head(features, name="embedding_head")
    report = pretrained.load_pretrained(head, path, arch="tedspad_embedding")
    if report.mismatched or report.new:
        raise pretrained.WeightsError(
            f"--embedding_weights={path}: the file's head does not fit the one on f_T's "
            f"{features} pooled features ("
            + "; ".join(report.mismatched + [f"{name}: not in the file" for name in report.new])
            + ")"
        )
    if distribute.is_chief():
        print(report, flush=True)
    return head.get_weights()


def _plateau_rates(
    groups: Iterable[str],
    loss: str,
    rate: float,
    drop: float,
    warmup_epochs: int = 0,
    patience: int = 0,
) -> Callable[[], GroupRates] | None:
    """Where `drop` > 1, the rule of a phase's rate set per epoch: the warm-up, then `rate`
    divided by `drop` after `patience` + 1 epochs in a row whose log `loss` is no new lowest
    (patience 0: the penalty code's identity script, train_reconstruction.py:163-172, and the
    SPAct authors' lr_patience, initialization/parameters_BL.py:30); else None (the rate its
    optimizer was given)."""
    if drop == 1:
        return None
    return lambda: GroupRates(tuple(groups), EpochRates(rate, warmup_epochs, drop, patience), loss)


def training_phases(
    config: ExperimentConfig, models: dict[str, keras.Model], steps_per_epoch: int
) -> list[Phase]:
    """The phases of `config.method`, in order: identity, action and privacy initialisation,
    then the minimax."""
    adam = keras.optimizers.Adam
    anonymizer, action = models["anonymizer"], models["action"]
    warmup_steps = config.identity_warmup_epochs * steps_per_epoch
    # With a plateau drop the identity rate is set per epoch, the authors' scripts' form;
    # without one it rises by step (a Keras schedule, which a rate set per epoch would replace).
    by_epoch = config.identity_lr_drop > 1
    identity_rate = (
        config.identity_lr if by_epoch else LinearWarmup(config.identity_lr, warmup_steps)
    )
    phases = [
        Phase(
            "identity",
            config.identity_epochs,
            lambda: IdentityInit(anonymizer),
            lambda: {"anonymizer": adam(identity_rate)},
            batches="pairs",
            epoch_rates=_plateau_rates(
                ["anonymizer"],
                "reconstruction_loss",
                config.identity_lr,
                config.identity_lr_drop,
                config.identity_warmup_epochs,
            ),
        ),
        Phase(
            "action_init",
            config.action_init_epochs,
            lambda: ActionInit(anonymizer, action),
            lambda: {"action": adam(config.action_init_lr)},
            # SPAct supp. C.3: the initialisations' rate to 1/10 on a loss plateau.
            epoch_rates=_plateau_rates(
                ["action"],
                "action_loss",
                config.action_init_lr,
                config.init_lr_drop,
                patience=config.init_lr_patience,
            ),
        ),
    ]
    if config.method in SUPERVISED_METHODS:
        return phases + _supervised_phases(config, models)
    privacy_groups = privacy_group_names(len(config.privacy_backbone_names()))
    privacy = [models[group] for group in privacy_groups]
    return phases + [
        Phase(
            "privacy_init",
            config.privacy_init_epochs,
            lambda: PrivacyInit(
                anonymizer,
                privacy,
                temperature=config.temperature,
                clip_pairs=config.ssl_adversary == "spatiotemporal",
                contrastive_views=config.contrastive_views,
            ),
            lambda: {group: adam(config.privacy_init_lr) for group in privacy_groups},
            epoch_rates=_plateau_rates(
                privacy_groups,
                "privacy_loss",
                config.privacy_init_lr,
                config.init_lr_drop,
                patience=config.init_lr_patience,
            ),
            # NT-Xent on image views alone reads no clip: no video is decoded for it.
            batches=(
                "views"
                if config.contrastive_views == "images" and config.ssl_adversary != "spatiotemporal"
                else "contrastive"
            ),
            steps_per_epoch=config.privacy_init_steps_per_epoch,
        ),
        Phase(
            "minimax",
            config.minimax_epochs,
            lambda: SPAct(
                anonymizer,
                action,
                privacy,
                action_weight=config.action_weight,
                privacy_weight=config.privacy_weight,
                temperature=config.temperature,
                penalty_weight=config.penalty_weight,
                penalty_budget=config.penalty_budget,
                ssl_adversary=config.ssl_adversary,
                moco_queue_size=config.moco_queue_size,
                moco_momentum=config.moco_momentum,
                triplet_weight=config.triplet_weight,
                triplet_margin=config.triplet_margin,
                adversary_jitter=config.adversary_jitter,
                adversary_crop=config.adversary_crop,
                augment_seed=config.seed,
                contrastive_views=config.contrastive_views,
            ),
            lambda: {
                "anonymizer": adam(config.anonymizer_lr),
                "action": adam(config.action_lr),
                **{group: adam(config.privacy_lr) for group in privacy_groups},
                **_variant_optimizers(config),
            },
            batches="paired",
            steps_per_epoch=config.minimax_steps_per_epoch,
        ),
    ]


def _variant_optimizers(config: ExperimentConfig) -> dict[str, keras.optimizers.Optimizer]:
    """The minimax optimizers of the extra groups a SPAct variant trains: RotNet's rotation
    head learns with f_B, TeD-SPAD's embedding head with f_T (MoCo's momentum group has no
    optimizer: the EMA moves it)."""
    optimizers = {}
    if config.ssl_adversary == "rotnet":
        optimizers["rotation"] = keras.optimizers.Adam(config.privacy_lr)
    if config.triplet_weight > 0:
        optimizers["embedding"] = keras.optimizers.Adam(config.action_lr)
    return optimizers


def _supervised_phases(config: ExperimentConfig, models: dict[str, keras.Model]) -> list[Phase]:
    """VITA's or meta generalisation's adversary initialisation and minimax."""
    adam = keras.optimizers.Adam
    anonymizer, action = models["anonymizer"], models["action"]
    adversaries = [model for name, model in models.items() if name.startswith("adversary_")]
    init_groups = {f"adversary_{i}": model for i, model in enumerate(adversaries)}
    init = Phase(
        "privacy_init",
        config.privacy_init_epochs,
        lambda: SupervisedPrivacyInit(anonymizer, init_groups),
        lambda: {group: adam(config.privacy_init_lr) for group in init_groups},
        epoch_rates=_plateau_rates(
            init_groups,
            "privacy_loss",
            config.privacy_init_lr,
            config.init_lr_drop,
            patience=config.init_lr_patience,
        ),
        batches="labelled",
        steps_per_epoch=config.privacy_init_steps_per_epoch,
    )
    if config.method == "vita":
        minimax = Phase(
            "minimax",
            config.minimax_epochs,
            lambda: VITA(
                anonymizer,
                action,
                adversaries,
                budget_weight=config.privacy_weight,
                budget_batch_statistics=config.budget_batch_statistics,
                budget_loss=config.budget_loss,
                action_schedule=config.action_schedule,
                action_threshold=config.action_threshold,
                action_max_updates=config.action_max_updates,
                action_fresh_clips=config.action_fresh_clips,
                action_moves_anonymizer=config.action_moves_anonymizer,
                budget_updates=config.adversary_updates_per_step,
                budget_threshold=(
                    config.adversary_threshold if config.adversary_threshold < 1 else None
                ),
                restart_every=config.restart_every,
                budget_pretrain_updates=config.budget_pretrain_updates,
                penalty_weight=config.penalty_weight,
                penalty_budget=config.penalty_budget,
            ),
            lambda: {
                "anonymizer": adam(config.anonymizer_lr),
                "action": adam(config.action_lr),
                **(
                    {"anonymizer_by_action": adam(config.action_lr)}
                    if config.action_moves_anonymizer
                    else {}
                ),
                **{f"budget_{i}": adam(config.privacy_lr) for i in range(len(adversaries))},
            },
            batches="labelled",
            privacy_batches=config.adversary_updates_per_step,
            validation=config.action_schedule == "validation_loop",
            action_batches=config.action_max_updates if config.action_fresh_clips else 0,
            steps_per_epoch=config.minimax_steps_per_epoch,
        )
    else:
        minimax = Phase(
            "minimax",
            config.minimax_epochs,
            lambda: MetaGeneralization(
                anonymizer,
                action,
                adversaries,
                privacy_weight=config.privacy_weight,
                alpha=config.meta_alpha,
                fraction=config.meta_fraction,
                first_order=config.meta_first_order,
                recompute_anonymizer=config.meta_recompute,
                action_threshold=config.action_threshold,
                attack_threshold=config.adversary_threshold,
            ),
            lambda: {
                "anonymizer": keras.optimizers.SGD(config.anonymizer_lr),
                "action": adam(config.action_lr),
                **{f"attack_{i}": adam(config.privacy_lr) for i in range(len(adversaries))},
            },
            batches="meta",
            steps_per_epoch=config.minimax_steps_per_epoch,
        )
    return [init, minimax]


def training_data(config: ExperimentConfig) -> sources.TrainingData:
    """The training splits of the config's datasets (their caches when given), cut into the
    config's batches. The HMDB51 training split leaves out the videos of
    `ExperimentConfig.pa_hmdb51_left_out`."""
    leave_out = config.pa_hmdb51_left_out()
    hold_out = 0
    if config.method == "vita" and config.action_schedule == "validation_loop":
        hold_out = config.action_validation_every
    batching = sources.Batching(
        seed=config.seed,
        batch_size=config.batch_size,
        privacy_batch_size=config.privacy_batch_size,
        clip_length=config.clip_length,
        clip_stride=config.clip_stride,
        image_size=config.image_size,
        short_videos=config.short_videos,
        pair_sampler=config.pair_sampler,
        augmentation=config.action_augmentation(),
        image_augmentation=config.image_augmentation(),
        view_augmentation=config.view_augmentation(),
        second_clip=config.ssl_adversary == "spatiotemporal",
        triplet_clips=config.triplet_weight > 0,
        hold_out=hold_out,
    )
    actions, privacy = config.dataset_files("action"), config.dataset_files("privacy")
    data = sources.training_data(
        actions, privacy, batching, config.frame_size, config.image_side(), leave_out
    )
    if actions.cache:
        sources.require_short_side(actions.cache, "action_cache", config.frame_size, "frame_size")
    if privacy.cache:
        setting = "privacy_image_side" if config.privacy_image_side else "frame_size"
        sources.require_short_side(privacy.cache, "privacy_cache", config.image_side(), setting)
    return data


def _damaged_shards_named(
    config: ExperimentConfig, data: sources.TrainingData
) -> contextlib.AbstractContextManager:
    """`pipelines.damaged_shards_named` over the training caches, each with the command that
    writes its shard again: `prepare` for a cache the flags give, train.py itself for the one
    it builds of the built-in benchmark."""
    given, built = [], []
    for source, role in ((data.videos, "action"), (data.images, "privacy")):
        (given if config.dataset_files(role).cache else built).append(source)
    stack = contextlib.ExitStack()
    stack.enter_context(pipelines.damaged_shards_named(*given))
    stack.enter_context(pipelines.damaged_shards_named(*built, rerun="run train.py again"))
    return stack


def check_paired_phase_lengths(config: ExperimentConfig, phases: list[Phase], steps: int) -> None:
    """Refuse, before any training, a paired phase of fewer than two batches an epoch: it takes
    its batches two a step, so one batch would be an epoch of no step at all."""
    for phase in phases:
        if phase.batches != "paired" or phase.epochs == 0 or (phase.steps_per_epoch or steps) > 1:
            continue
        if phase.steps_per_epoch:
            source = "<minimax_steps_per_epoch> (1)"
        elif config.steps_per_epoch:
            source = "<steps_per_epoch> (1)"
        else:
            source = "one pass over the action set (1 batch; set <steps_per_epoch>)"
        raise SettingError(
            f"phase {phase.name}: {source} gives an epoch of no step: the alternating minimax "
            "takes two batches a step, so an epoch needs 2 or more"
        )


def _check_vita_trains_the_anonymizer(config: ExperimentConfig, phases: list[Phase], steps: int):
    """Refuse, before any training, a VITA minimax whose every step falls in the budget models'
    pre-training (`budget_pretrain_updates` updates alone at its start): f_A and f_T would
    never move, and the run would save and evaluate an untrained anonymizer as learned."""
    if config.method != "vita" or config.budget_pretrain_updates == 0:
        return
    budget_only = budget_only_steps(
        config.budget_pretrain_updates, config.adversary_updates_per_step
    )
    for phase in phases:
        if phase.name != "minimax" or phase.epochs == 0:
            continue
        per_epoch = phase.steps_per_epoch or steps
        if phase.epochs * per_epoch <= budget_only:
            raise SettingError(
                f"phase minimax: its {phase.epochs * per_epoch} steps (<minimax_epochs>="
                f"{phase.epochs} x {per_epoch} steps an epoch) are all budget-only steps "
                f"(<budget_pretrain_updates>={config.budget_pretrain_updates} / "
                f"<adversary_updates_per_step>={config.adversary_updates_per_step} = "
                f"{budget_only} steps train the budget models alone first), so the anonymizer "
                "would never be updated: give the minimax more steps or lower "
                "<budget_pretrain_updates>"
            )


def phase_dataset(
    phase: Phase,
    data: sources.TrainingData,
    epoch: int,
    steps: int,
    num_models: int,
    meta_fraction: float,
    process: tuple[int, int] = (0, 1),
) -> tf.data.Dataset:
    """The batches of `phase` for the run's `epoch` (a distinct seed per epoch); meta's carry
    the epoch's splits, `meta_fraction` of the attributes and models in the support sets. In
    a job of several processes, `process` = (index, count): this process's rows of each
    global batch (`TrainingData.dataset`)."""
    if phase.batches == "contrastive":
        return data.dataset(epoch=epoch, steps=steps, process=process)
    if phase.batches == "pairs":
        return data.dataset(epoch=epoch, steps=steps, pairs_only=True, process=process)
    if phase.batches == "views":
        return data.dataset(epoch=epoch, steps=steps, with_clips=False, process=process)
    if phase.batches == "paired":
        return pair_batches(data.dataset(epoch=epoch, steps=steps, process=process, minimax=True))
    if phase.batches == "meta" and process[1] > 1:
        raise ValueError("meta's per-step splits are not batch-shaped: one process only")
    labelled = data.dataset(
        epoch=epoch,
        steps=steps,
        labelled=True,
        privacy_batches=phase.privacy_batches,
        validation=phase.validation,
        action_batches=phase.action_batches,
        process=process,
    )
    if phase.batches == "labelled":
        return labelled
    splits = epoch_splits(
        data.batching.seed,
        epoch,
        steps,
        num_images=data.batching.privacy_batch_size,
        num_attributes=len(data.attribute_names),
        num_models=num_models,
        fraction=meta_fraction,
    )
    return pipelines.with_step_inputs(labelled, splits)


class _FirstStepTime(keras.callbacks.Callback):
    """Print how long a phase's first step took, its compile included: under XLA on a GPU that
    is minutes (SPAct's step about 2.5 on an H200, the eight-model meta step more than 9),
    which `--compilation_cache` saves a later run on JAX."""

    async_safe = True  # the step's end is when its logs are read, in a worker thread or not

    def __init__(self, phase: str):
        super().__init__()
        self.phase = phase
        self.started: float | None = None
        self.reported = False

    def on_train_batch_begin(self, batch, logs=None):
        if self.started is None:
            self.started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if not self.reported and self.started is not None:
            self.reported = True
            seconds = time.perf_counter() - self.started
            print(
                f"phase {self.phase}: first step {seconds:.1f} s (its compile included)", flush=True
            )


class _PhaseProgress(keras.callbacks.ProgbarLogger):
    """Keras' progress lines, counting the phase's `epochs`: training fits one epoch at a time
    (`initial_epoch=k, epochs=k + 1`), so Keras alone prints every epoch as the last."""

    async_safe = True  # as Keras' own progress bar, which it runs in worker threads

    def __init__(self, epochs: int):
        super().__init__()
        self.phase_epochs = epochs

    def set_params(self, params: dict) -> None:
        super().set_params({**params, "epochs": self.phase_epochs})


class _FailOnNonFinite(keras.callbacks.Callback):
    """Stop the fit once a batch's logs hold a NaN or an infinity, and remember the first such
    batch (counted from 1, as the epochs in its message). On JAX the logs are read in Keras'
    worker threads, where the model must not be touched (reading `self.model` there copies a
    state the running step may hold): the fit is stopped from the host's thread at the next
    batch, a step or two later, in an epoch that is not kept."""

    async_safe = True

    def __init__(self):
        super().__init__()
        self.failure: str | None = None
        self._failed_batch: int | None = None
        self._lock = threading.Lock()

    def on_train_batch_begin(self, batch, logs=None):
        if self.failure is not None:
            self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        for name, value in (logs or {}).items():
            if not math.isfinite(float(value)):
                with self._lock:
                    if self._failed_batch is None or batch < self._failed_batch:
                        self._failed_batch = batch
                        self.failure = f"batch {batch + 1}: {name} = {float(value)}"
                return


class _EpochTensorBoard(keras.callbacks.TensorBoard):
    """Keras' TensorBoard logs of every epoch, none of each batch (`update_freq="epoch"`
    writes none anyway), so that the step's logs are read off the host's thread; no graph
    (a minimax trainer's step is no model graph TensorBoard can show, and writing it reads the
    model while a JAX step holds its variables)."""

    async_safe = True

    def __init__(self, log_dir: str):
        super().__init__(log_dir=log_dir, write_graph=False)

    def on_train_batch_end(self, batch, logs=None):
        pass


def train(
    config: ExperimentConfig, callbacks: Sequence[keras.callbacks.Callback] = ()
) -> TrainResult:
    """Run (or resume) every phase of `config` and save the trained models in `run_dir`.

    Models are built, compiled and trained under the config's distribution and dtype policy.
    """
    config.validate()
    if config.compilation_cache:
        distribute.use_compilation_cache(config.compilation_cache)
    with distribute.training_scope(config.distribution, config.mixed_precision) as replicas:
        distribute.check_batch_sizes(
            replicas, batch_size=config.batch_size, privacy_batch_size=config.privacy_batch_size
        )
        return _train(config, callbacks)


def backend_note(config: ExperimentConfig) -> str | None:
    """Advice where the run's backend needs far more memory than the other: the second-order
    meta step on TensorFlow, which stores f_A's activations in each derivative pass where JAX
    recomputes them block by block (`docs/memory.md`; measured on a CPU, and nothing on a GPU
    recomputes them either)."""
    if config.method != "meta" or config.meta_first_order or backend.recomputes_checkpoints():
        return None
    return (
        "note: the second-order meta step on TensorFlow stores f_A's activations in every "
        "derivative pass: at the paper's sizes and batch 4 / 8 it passed 21 GiB on a CPU, "
        "against 11.0 GiB on JAX, which recomputes them (--backend=jax), and 10.3 GiB first "
        "order (--meta_first_order)"
    )


PHASE_EPOCHS = {
    "identity": "identity_epochs",
    "action_init": "action_init_epochs",
    "privacy_init": "privacy_init_epochs",
    "minimax": "minimax_epochs",
}
"""Each phase, in the order every method runs them, and the setting of its epoch count."""

FILE_SETTINGS = frozenset(
    {
        "run_dir",
        "compilation_cache",
        "action_annotations",
        "action_root",
        "action_cache",
        "privacy_annotations",
        "privacy_root",
        "privacy_cache",
        "synthetic_dir",
    }
)
"""Settings that say where a run's files are."""

UNKNOWN_SETTINGS = (
    "the settings the run started with are unknown; restore it, or start again in a new --run_dir"
)
"""The remedy named where a run's `config.json` is missing or damaged."""

RESUMABLE_SETTINGS = FILE_SETTINGS | {
    "seeds",
    "jit_compile",
    "distribution",
    "num_processes",
    "process_id",
    "coordinator_address",
    "privacy_weight",
    "meta_alpha",
    *LEARNING_RATES,
}
"""Settings a resumed run may change: where the files are, how the steps are run, and the
learning rates (meta's inner step's `meta_alpha` too) and privacy weight, which a restart
after a diverged run lowers (its message says so), not what is trained. The evaluation's
settings may change too, but for `eval_protocol`, which decides the training videos
(`training_data`)."""


def _require_the_runs_settings(
    config: ExperimentConfig, run_dir: Path, state: dict | None
) -> dict[str, list]:
    """Raise SettingError naming each setting that differs from the run kept in `run_dir`
    (its `config.json` and the checkpoint `state`), before anything is written: a resumed run would
    go on with the other setting from the kept weights, or, where nothing is left to train,
    save the kept models under the new settings' name. A phase's epoch count may change
    where that phase is not behind the checkpoint: a longer minimax extends a finished run.
    Settings a version before this one did not record are not compared; a checkpoint whose
    `config.json` is missing or damaged is refused (every version wrote one). Returns the
    settings that differ, all of them allowed to (name -> [before, now]; {} for a new run)."""
    if state is None:
        return {}
    recorded = run_dir / "config.json"
    kept = checkpoint.read_record(recorded, UNKNOWN_SETTINGS)
    if kept is None:
        raise checkpoint.CheckpointError(
            f"{recorded} is missing beside the checkpoint ({state['phase']} epoch "
            f"{state['epoch']}): {UNKNOWN_SETTINGS}"
        )
    now = dataclasses.asdict(config)
    free = RESUMABLE_SETTINGS | {
        field.name
        for field in dataclasses.fields(config)
        if field.metadata.get("group") == "eval" and field.name != "eval_protocol"
    }
    order = list(PHASE_EPOCHS)
    reached = order.index(state["phase"])
    differ = {
        name: [kept[name], value]
        for name, value in now.items()
        if name in kept and kept[name] != value
    }
    refused = []
    for name in differ:
        if name in free:
            continue
        phase = next((p for p, setting in PHASE_EPOCHS.items() if setting == name), None)
        if phase is not None:
            behind = order.index(phase) < reached
            if not behind and not (order.index(phase) == reached and now[name] < state["epoch"]):
                continue
        refused.append(name)
    if refused:
        listed = ", ".join(f"<{name}>={kept[name]} (now {now[name]})" for name in refused)
        raise SettingError(
            f"<run_dir>={run_dir} holds a run trained with {listed} (checkpoint: "
            f"{state['phase']} epoch {state['epoch']}): resume it with those settings, or give "
            "another <run_dir>"
        )
    return differ


def require_the_seeds_layout(config: ExperimentConfig) -> None:
    """Raise SettingError where `run_dir` holds a run laid out for another `seeds`: a single
    run (its checkpoints in run_dir) under `seeds` > 1, whose seeds train in run_dir/seed_K,
    or seed runs (run_dir/seed_K) under `seeds`=1, which trains in run_dir: either would
    train from scratch beside the kept run instead of resuming it."""
    run_dir = Path(config.run_dir)
    single = (run_dir / "checkpoints").is_dir()
    seeded = sorted(path.parent.name for path in run_dir.glob("seed_*/checkpoints"))
    if config.seeds > 1 and single:
        raise SettingError(
            f"<run_dir>={run_dir} holds a single run, and <seeds>={config.seeds} trains each "
            f"seed in <run_dir>/seed_K, from scratch beside it: give another <run_dir>, or "
            f"move the run's files into {run_dir}/seed_{config.seed} to make it the first seed"
        )
    if config.seeds == 1 and seeded and not single:
        raise SettingError(
            f"<run_dir>={run_dir} holds the seed runs of a <seeds> run ({', '.join(seeded)}), "
            "and <seeds>=1 trains one run in <run_dir>, from scratch beside them: give <seeds> "
            "to resume them, or another <run_dir>"
        )


def _finished(config: ExperimentConfig, state: dict | None) -> bool:
    """Whether the checkpoint `state` ends every phase of `config`: such a run trains nothing,
    so its `config.json` stays as it is, a changed privacy weight or learning rate (resumable
    settings) not recorded as the one it was trained with (the seeds of a `--seeds` run added
    to later are compared on it, `anonymizations.require_one_training_setting`)."""
    if state is None:
        return False
    order = list(PHASE_EPOCHS)
    reached = order.index(state["phase"])
    later = order[reached + 1 :]
    return state["epoch"] >= getattr(config, PHASE_EPOCHS[state["phase"]]) and not any(
        getattr(config, PHASE_EPOCHS[phase]) for phase in later
    )


def _environment_record(run_dir: Path, state: dict | None, changed: dict[str, list]) -> dict:
    """What `environment.json` holds after this start: where it runs (`environment.describe`),
    when it started (`started`, UTC), the checkpoint `state` it resumes from (`resumed_from`:
    phase and epoch; None for a fresh start) and the settings it `changed` from the run's
    `config.json` (`changed_settings`: name -> [before, now], e.g. a learning rate lowered
    after a divergence, which `config.json` then holds alone), with the records of the run's
    earlier starts, oldest first, under `earlier_starts`: a resumed run's earlier epochs may
    have run on another machine or backend, or at other learning rates."""
    kept = checkpoint.read_record(
        run_dir / "environment.json",
        "where the run's earlier starts ran is unknown; restore it, or remove it to keep this "
        "start's record alone",
    )
    earlier = [] if kept is None else [*kept.pop("earlier_starts", []), kept]
    resumed = None if state is None else {"phase": state["phase"], "epoch": state["epoch"]}
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        **environment.describe(),
        "started": started,
        "resumed_from": resumed,
        "changed_settings": changed,
        "earlier_starts": earlier,
    }


RUN_LOCK_FILE = ".lock"
"""In the run folder: held by the `train.py` that writes it (`files.exclusive_lock`), so that
a second one started on the same folder (a job launched once per task without
`--num_processes`) stops before it writes anything, rather than writing checkpoints beside it."""

PROCESS_OWN_SETTINGS = FILE_SETTINGS | {"process_id", "coordinator_address"}
"""Settings the processes of one job may give differently: their own index, and where the
files are (a node's own copy of the data, a shared disk mounted elsewhere); whether they
resume the same checkpoint is compared instead of `run_dir`."""


def _require_process_0s_start(config: ExperimentConfig, state: dict | None) -> None:
    """In a multi-process job, raise SettingError in a process whose settings (but
    `PROCESS_OWN_SETTINGS`) or checkpoint to resume differ from process 0's, naming each: it
    would train with mixed settings, or stop in a collective with no word of why."""
    settings = dataclasses.asdict(config)
    mine = {
        "settings": {name: settings[name] for name in settings if name not in PROCESS_OWN_SETTINGS},
        "checkpoint": None if state is None else f"{state['phase']} epoch {state['epoch']}",
    }
    process_0 = json.loads(distribute.process_0s_value("start", json.dumps(mine, sort_keys=True)))
    process = distribute.process_position()[0]
    differ = [
        f"<{name}>={value} (process 0: {process_0['settings'].get(name)})"
        for name, value in mine["settings"].items()
        if process_0["settings"].get(name) != value
    ]
    if differ:
        raise SettingError(
            f"process {process} was started with {', '.join(differ)}: start every process of "
            "the job with the same flags"
        )
    if mine["checkpoint"] != process_0["checkpoint"]:
        raise checkpoint.CheckpointError(
            f"process {process} finds {mine['checkpoint'] or 'no checkpoint'} in "
            f"{config.run_dir}, process 0 {process_0['checkpoint'] or 'none'}: every process "
            "needs the run folder on a disk they share"
        )


def _require_process_0s_data(data: sources.TrainingData) -> None:
    """In a multi-process job, raise SettingError in a process whose action videos or privacy
    images differ from process 0's (a node's copy of the data lacking or adding a file): each
    process shuffles and counts its own list, so it would read other rows than its share, or
    take another number of steps and stop in a collective with no word of why."""
    process, processes = distribute.process_position()
    if processes == 1:
        return
    mine = {
        "action videos": pipelines.examples_identity(data.videos),
        "privacy images": pipelines.examples_identity(data.images),
    }
    process_0 = json.loads(distribute.process_0s_value("data", json.dumps(mine, sort_keys=True)))
    differ = [
        f"{what}: {mine[what]} (process 0: {process_0[what]})"
        for what in mine
        if mine[what] != process_0[what]
    ]
    if differ:
        raise SettingError(
            f"process {process} reads other data than process 0 ({'; '.join(differ)}): give "
            "every process the same videos and images (a node's copy of the data that lacks or "
            "adds a file: its missing files are listed as it starts)"
        )


def _train(config: ExperimentConfig, callbacks: Sequence[keras.callbacks.Callback]) -> TrainResult:
    run_dir = Path(config.run_dir)
    refuse_a_file(run_dir, "--run_dir")
    chief = distribute.is_chief()
    note = backend_note(config)
    if note and chief:
        print(note, flush=True)
    state = checkpoint.latest_checkpoint(run_dir)
    _require_process_0s_start(config, state)
    changed = _require_the_runs_settings(config, run_dir, state)
    if state is not None:
        # Before anything is read or written: a damaged checkpoint leaves the run as it was.
        checkpoint.check_readable(state)
    with contextlib.ExitStack() as held:
        if chief:
            run_dir.mkdir(parents=True, exist_ok=True)
            what = "the lock of the run folder, which another train.py writes,"
            held.enter_context(exclusive_lock(run_dir / RUN_LOCK_FILE, what))
        return _train_holding_the_run(config, callbacks, run_dir, state, changed)


def _train_holding_the_run(
    config: ExperimentConfig,
    callbacks: Sequence[keras.callbacks.Callback],
    run_dir: Path,
    state: dict | None,
    changed: dict[str, list],
) -> TrainResult:
    """`_train`'s training from the checkpoint `state` with the settings `changed` since (as
    `_require_the_runs_settings` gives them), process 0 holding the run folder's lock."""
    chief = distribute.is_chief()
    if chief:
        warn_if_one_attack_model(config)
        record = _environment_record(run_dir, state, changed)
        if changed:
            changes = ", ".join(f"--{name} {old} -> {new}" for name, (old, new) in changed.items())
            print(f"resuming with changed settings (environment.json): {changes}", flush=True)
        if not _finished(config, state):
            checkpoint.mark_saved_models_behind(run_dir)
            # Atomic: the other processes of a run read it as this one writes it.
            write_text_atomically(
                run_dir / "config.json", json.dumps(dataclasses.asdict(config), indent=1)
            )
        write_text_atomically(run_dir / "environment.json", json.dumps(record, indent=1))
    keras.utils.set_random_seed(config.seed)

    # Process 0 writes the built-in benchmark and its caches where they are missing.
    data = distribute.chief_first(lambda: training_data(config))
    _require_process_0s_data(data)
    models = build_models(config, len(data.class_names), len(data.attribute_names))
    embedding_start = embedding_head_start(config, models["action"])
    steps = config.steps_per_epoch or data.steps_per_epoch
    phases = training_phases(config, models, steps)
    check_paired_phase_lengths(config, phases, steps)
    _check_vita_trains_the_anonymizer(config, phases, steps)
    names = [phase.name for phase in phases]

    history: dict = {}
    if state is not None:
        checkpoint.restore_models(state, models)
        history = state["history"]
        left = "nothing is left to train" if _finished(config, state) else "going on from there"
        print(
            f"resuming {run_dir} from its checkpoint after {state['phase']} epoch "
            f"{state['epoch']}: {left}",
            flush=True,
        )
    fixed_clip = data.fixed_clip()

    for index, phase in enumerate(phases):
        done = 0
        if state is not None:
            reached = names.index(state["phase"])
            if index < reached or (index == reached and state["epoch"] >= phase.epochs):
                continue
            if index == reached:
                done = state["epoch"]
        if phase.epochs == 0:
            continue
        trainer = phase.make_trainer()
        if "embedding" in trainer.groups() and done == 0 and embedding_start is not None:
            trainer.groups()["embedding"].set_weights(embedding_start)
        jit_compile, why = distribute.choose_jit_compile(
            config.jit_compile, trainer.groups().values()
        )
        trainer.compile(phase.optimizers(), jit_compile=jit_compile)
        if jit_compile and not trainer.jit_compile:
            why += (
                "; XLA cannot compile a TensorFlow data-parallel step"
                if config.distribution == "data_parallel"
                else "; Keras turned it off: TensorFlow's op determinism (TF_DETERMINISTIC_OPS)"
                " or a layer that XLA cannot compile"
            )
        print(
            f"phase {phase.name}: XLA {'on' if trainer.jit_compile else 'off'} ({why})", flush=True
        )
        # Groups the trainer owns (RotNet's head, MoCo's momentum state) live in its checkpoints.
        owned = {
            group: model
            for group, model in trainer.groups().items()
            if all(model is not built for built in models.values())
        }
        if state is not None and state["phase"] == phase.name and done > 0:
            checkpoint.restore_models(state, owned)
            checkpoint.restore_optimizer(state, trainer.optimizer)
            checkpoint.restore_restart_snapshot(state, trainer.restart_snapshot)
        first_step = _FirstStepTime(phase.name)
        group_rates = phase.epoch_rates() if phase.epoch_rates else None
        if group_rates is not None:
            # Shown the losses of the epochs already run, so that a resumed run goes on alike.
            past = history.get(phase.name, {}).get(group_rates.loss, [])[:done]
            for past_epoch, loss in enumerate(past):
                group_rates.rates.observe(past_epoch, loss)
        for epoch in range(done, phase.epochs):
            if group_rates is not None:
                rate = group_rates.rates.rate_at(epoch)
                for group in group_rates.groups:
                    trainer.group_optimizer(group).learning_rate = rate
            dataset = phase_dataset(
                phase,
                data,
                global_epoch(phases, index, epoch),
                phase.steps_per_epoch or steps,
                len(models) - 2,
                config.meta_fraction,
                distribute.process_position(),
            )
            guard = _FailOnNonFinite()
            counts_before = trainer.update_counts()
            logs_dir = run_dir / "logs" / phase.name
            with _damaged_shards_named(config, data):
                logs = trainer.fit(
                    dataset,
                    initial_epoch=epoch,
                    epochs=epoch + 1,
                    verbose=2,
                    shuffle=False,  # the pipeline shuffles (Keras would warn that it ignores True)
                    callbacks=[
                        _PhaseProgress(phase.epochs),
                        first_step,
                        guard,
                        *([_EpochTensorBoard(str(logs_dir))] if chief else []),
                        *callbacks,
                    ],
                ).history
            failure = guard.failure or _non_finite_weights(models | owned, trainer.optimizer)
            if failure:
                rates = "the learning rates"
                if config.method == "meta":
                    rates += " (--meta_alpha too, the inner step's)"
                raise TrainingDivergedError(
                    f"phase {phase.name}, epoch {epoch + 1}, {failure}; "
                    f"{_kept_checkpoint(run_dir)}. Lower {rates} or the privacy weight and "
                    "restart."
                )
            if group_rates is not None:
                logs.update({f"{group}_learning_rate": [rate] for group in group_rates.groups})
                loss = logs[group_rates.loss][-1]
                if group_rates.rates.observe(epoch, loss):
                    print(
                        f"phase {phase.name}, epoch {epoch + 1}: {group_rates.loss} {loss:.4g} "
                        f"is no new lowest: the learning rate of {', '.join(group_rates.groups)} "
                        f"divided by {group_rates.rates.drop:g} to {group_rates.rates.rate:.3g}",
                        flush=True,
                    )
            for name, values in logs.items():
                history.setdefault(phase.name, {}).setdefault(name, []).extend(
                    float(v) for v in values
                )
            counts_after = trainer.update_counts()
            counts = ", ".join(f"{name} {n}" for name, n in counts_after.items())
            print(f"phase {phase.name}, epoch {epoch + 1}: updates so far: {counts}", flush=True)
            for warning in trainer.epoch_warnings(counts_before, counts_after):
                logging.warning("phase %s, epoch %d: %s", phase.name, epoch + 1, warning)
            if chief:
                with distribute.uninterrupted_writes():
                    # The frames first: a kill between the two redoes the epoch and its frames.
                    _save_frames(models["anonymizer"], fixed_clip, run_dir, phase.name, epoch + 1)
                    checkpoint.save_checkpoint(
                        run_dir,
                        phase.name,
                        epoch + 1,
                        models | owned,
                        trainer.optimizer,
                        history,
                        trainer.restart_snapshot,
                    )
        warn_if_anonymizer_frozen(trainer, phase.name)
        if chief:  # the others' state may lag: it only skips phases at a resume
            state = checkpoint.latest_checkpoint(run_dir)

    paths = {name: run_dir / MODEL_FILES.get(name, f"{name}.keras") for name in models}
    if chief:
        with distribute.uninterrupted_writes():
            for name, model in models.items():
                save_atomically(paths[name], model.save)
            write_text_atomically(run_dir / "history.json", json.dumps(history, indent=1))
            checkpoint.record_saved_models(run_dir, state)
    return TrainResult(run_dir=run_dir, model_paths=paths, history=history)


def _non_finite_weights(
    models: dict[str, keras.Model], optimizer: keras.optimizers.Optimizer
) -> str | None:
    """What is not finite after an epoch whose logged losses all were (the loss of a batch is
    computed before its update, so the epoch's last update is seen only here), or None."""
    bad = checkpoint.non_finite_variables(models, optimizer)
    if not bad:
        return None
    return f"after the last update {len(bad)} non-finite variable(s) (e.g. {', '.join(bad[:3])})"


def _kept_checkpoint(run_dir: Path) -> str:
    """Which checkpoint a diverged run keeps, for its error message."""
    last = checkpoint.latest_checkpoint(run_dir)
    if last is None:
        return "no checkpoint was written yet, so a restart begins the run again"
    return (
        f"the last checkpoint, {last['path']} (every weight finite), is kept and a restart "
        "resumes from it"
    )


def warn_if_anonymizer_frozen(trainer: StatelessTrainer, phase: str) -> bool:
    """Warn (and return True) when `trainer` has an optimizer for f_A but never updated it.

    Gated methods update f_A only once other players pass their thresholds (meta
    generalisation's Algorithm 1): thresholds the models never reach leave the anonymizer as it
    was initialised, which the run would otherwise save without a word."""
    try:
        optimizer = trainer.group_optimizer("anonymizer")
    except KeyError:
        return False
    if int(keras.ops.convert_to_numpy(optimizer.iterations)) > 0:
        return False
    message = spell(
        "phase %s never updated the anonymizer: the players' accuracies stayed under "
        "<action_threshold> / <adversary_threshold>; lower them for these models"
    )
    logging.warning(message, phase)
    return True


def warn_if_one_attack_model(config: ExperimentConfig) -> bool:
    """Warn (and return True) when meta generalisation has a single training attack model: its
    model splits, every other meta update, then test on the model they trained on, so nothing
    teaches f_A to resist attack models it has not met (the papers' configs name eight)."""
    if config.method != "meta" or len(config.adversary_model_names()) > 1:
        return False
    logging.warning(
        spell(
            "<adversary_models>=%s names one attack model: meta's model splits (every other "
            "meta update) will test on the model they train on, so f_A learns no "
            "generalisation to other attack models; name several (configs/*_meta.cfg name "
            "eight)"
        ),
        config.adversary_models,
    )
    return True


def global_epoch(phases: list[Phase], index: int, epoch: int) -> int:
    """A distinct number per (phase, epoch), so every epoch of a run has its own data seed."""
    return sum(phase.epochs for phase in phases[:index]) + epoch


def _save_frames(anonymizer: keras.Model, clip: np.ndarray, run_dir: Path, phase: str, epoch: int):
    """Save the raw and anonymized frames of the fixed clip side by side as one PNG. The frames
    are computed on this process alone, from host copies of the weights: under JAX's data
    parallelism across processes `predict` lays its input out over every process's devices,
    and the chief, which alone calls this, could not read the frames back."""
    trainable = [variable.numpy() for variable in anonymizer.trainable_variables]
    non_trainable = [variable.numpy() for variable in anonymizer.non_trainable_variables]
    anonymized, _ = anonymizer.stateless_call(trainable, non_trainable, clip, training=False)
    anonymized = keras.ops.convert_to_numpy(anonymized)
    strip = np.concatenate(
        [np.concatenate(list(clip), axis=1), np.concatenate(list(anonymized), axis=1)], axis=0
    )
    folder = run_dir / "frames"
    folder.mkdir(exist_ok=True)
    save_atomically(
        folder / f"{phase}_epoch{epoch:03d}.png",
        lambda path: keras.utils.save_img(path, np.clip(strip, 0, 1) * 255),
    )
