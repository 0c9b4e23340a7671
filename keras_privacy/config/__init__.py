"""One experiment's settings, shared by `train.py`, `evaluate.py` and notebooks.

The settings come in sections, each a small dataclass in its own module with the functions
that check it: `run` (method, folders, seeds, devices), `data` (datasets, clips, augmentation,
batches), `models` (f_A, f_T, f_B and their weight files), `schedule` (phases and learning
rates), `method` (loss weights, supervised adversaries, SPAct's variants; `FLAG_SCOPES`),
`evaluation` (target models, protocol and its datasets). `ExperimentConfig` is their flat
view, and that is a choice: it inherits every section, so `config.batch_size` reads as before
in the hundreds of places that read a setting, `ExperimentConfig(batch_size=4)` and
`dataclasses.replace` work unchanged, and one setting is one flag (`keras_privacy.flags`) of
the same name, as in every config file; a nested `config.data.batch_size` would have changed
all of them and the flag names for no gain in what is checked. `config.section(DataSettings)`
gives one section alone to code that needs no more. The defaults are the built-in synthetic
benchmark sized for 2 CPU cores; `configs/*.cfg` hold the papers' settings.

The checks that span sections (a flag set where the method does not read it, the evaluation
datasets against the training ones) take the flat view. Their errors (`SettingError`) name
settings as `<name>`; the command line spells them as its flags.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypeVar

from keras_privacy.config.data import (
    ACTION_DATASETS,
    PRIVACY_DATASETS,
    DataSettings,
    validate_data,
    validate_dataset_files,
)
from keras_privacy.config.evaluation import (
    EVAL_DATA_FIELDS,
    EVAL_PRIVACY_DATASETS,
    EVAL_PROTOCOLS,
    FRAME_DATASETS,
    VP_VIDEOS,
    EvaluationSettings,
    methods_of_seed,
    parse_test_epochs,
    validate_evaluation,
)
from keras_privacy.config.method import (
    FLAG_SCOPES,
    IMAGE_ADVERSARIES,
    SELF_SUPERVISED,
    SSL_ADVERSARIES,
    FlagScope,
    MethodSettings,
    validate_method,
    validate_settings_in_use,
)
from keras_privacy.config.models import (
    WEIGHT_FLAGS,
    ModelSettings,
    validate_model_names,
    validate_weight_files,
)
from keras_privacy.config.run import METHODS, RunSettings, validate_run
from keras_privacy.config.schedule import ScheduleSettings, validate_schedule
from keras_privacy.config.setting import SettingError, names, one_of

__all__ = [
    "ACTION_DATASETS",
    "EVAL_PRIVACY_DATASETS",
    "EVAL_PROTOCOLS",
    "FLAG_SCOPES",
    "FRAME_DATASETS",
    "IMAGE_ADVERSARIES",
    "LEARNED_NAME_SETTINGS",
    "METHODS",
    "PRIVACY_DATASETS",
    "SELF_SUPERVISED",
    "SSL_ADVERSARIES",
    "VP_VIDEOS",
    "WEIGHT_FLAGS",
    "DataSettings",
    "EvaluationSettings",
    "ExperimentConfig",
    "FlagScope",
    "MethodSettings",
    "ModelSettings",
    "RunSettings",
    "ScheduleSettings",
    "SettingError",
]

Section = TypeVar("Section")


LEARNED_NAME_SETTINGS = (
    "method",
    "ssl_adversary",
    "adversary_crop",
    "adversary_jitter",
    "contrastive_views",
    "privacy_backbone",
    "triplet_weight",
    "penalty_weight",
)
"""The settings `ExperimentConfig.learned_name` reads."""


@dataclasses.dataclass
class ExperimentConfig(
    EvaluationSettings, MethodSettings, ScheduleSettings, ModelSettings, DataSettings, RunSettings
):
    """Every setting of a training and evaluation run, flat (see the README's flag table).

    The bases are listed last section first: a dataclass takes the fields of its bases in
    reverse order, so the settings (and the flags) keep the order run, data, models, schedule,
    method, evaluation."""

    def section(self, section_cls: type[Section]) -> Section:
        """The settings of one section (e.g. `DataSettings`), as that section's dataclass."""
        fields = dataclasses.fields(section_cls)
        return section_cls(**{f.name: getattr(self, f.name) for f in fields})

    def validate(self, training: bool = True) -> None:
        """Raise SettingError (a ValueError) naming the first setting that makes no sense.
        Without `training` (an evaluation), the weight files only training reads
        (`--anonymizer_weights`, `--action_weights`, `--privacy_weights`,
        `--embedding_weights`) may be absent."""
        for setting in dataclasses.fields(self):
            value = getattr(self, setting.name)
            # A learning rate or loss weight of inf / nan turns the weights non-finite at once.
            if isinstance(value, float) and not math.isfinite(value):
                raise SettingError(f"<{setting.name}> must be a finite number, got {value}")
        one_of("method", self.method, METHODS)
        one_of("ssl_adversary", self.ssl_adversary, SSL_ADVERSARIES)
        validate_settings_in_use(self)
        validate_run(self)
        validate_weight_files(self, training)
        validate_data(self)
        validate_schedule(self)
        validate_method(self)
        validate_model_names(self)
        validate_dataset_files(self)
        validate_evaluation(self)

    def seed_runs(self) -> list[ExperimentConfig]:
        """One config per seed of `seeds`: this one when it is 1, else seeds seed..seed+N-1,
        each with its own run_dir/seed_K and report folder seed_K in the report folder
        (`eval_dir`, default run_dir/evaluation), where the summary across seeds goes: the
        methods that share a report share it seed by seed too. A NAME=PATH of
        `eval_methods` in run_dir (validation refuses one elsewhere) moves to run_dir/seed_K,
        as `learned` does."""
        if self.seeds == 1:
            return [self]
        report_dir = self.eval_dir or f"{self.run_dir}/evaluation"
        runs = []
        for seed in range(self.seed, self.seed + self.seeds):
            seed_dir = f"{self.run_dir}/seed_{seed}"
            methods = methods_of_seed(self.eval_methods, self.run_dir, seed_dir)
            runs.append(
                dataclasses.replace(
                    self,
                    seeds=1,
                    seed=seed,
                    run_dir=seed_dir,
                    eval_dir=f"{report_dir}/seed_{seed}",
                    eval_methods=methods,
                )
            )
        return runs

    def learned_name(self) -> str:
        """The report row of this run's anonymizer: the method, and the settings that make it
        a variant of the authors' method (`LEARNED_NAME_SETTINGS`), e.g. "spact (crop 0.25,
        both views)"."""
        notes = []
        if self.method in SELF_SUPERVISED:
            if self.ssl_adversary != "ntxent":
                notes.append(self.ssl_adversary)
            if len(self.privacy_backbone_names()) > 1:
                notes.append(f"ensemble of {len(self.privacy_backbone_names())}")
            if self.adversary_crop > 0:
                notes.append(f"crop {self.adversary_crop:g}")
            if self.adversary_jitter > 0:
                notes.append(f"jitter {self.adversary_jitter:g}")
            if self.ssl_adversary != "spatiotemporal" and self.contrastive_views != "images":
                notes.append(f"{self.contrastive_views} views")
            if self.triplet_weight > 0:
                notes.append(f"triplet {self.triplet_weight:g}")
        if self.method != "penalty" and self.penalty_weight > 0:
            notes.append(f"penalty {self.penalty_weight:g}")
        return f"{self.method} ({', '.join(notes)})" if notes else self.method

    def eval_action_model_names(self) -> list[str]:
        """The target action models of `eval_action_model`, in order (default
        `action_model`)."""
        return names(self.eval_action_model) or [self.action_model]

    def eval_privacy_model_names(self) -> list[str]:
        """The target privacy backbones of `eval_privacy_model`, in order (default the first
        of `privacy_backbone`)."""
        return names(self.eval_privacy_model) or self.privacy_backbone_names()[:1]

    def eval_weight_files(self, target: str) -> list[str]:
        """The weight files of `eval_<target>_weights` (`target`: "action" or "privacy"), one
        entry per model of `eval_<target>_model` in order where it is a comma-separated list
        ("": from scratch); one file without a comma starts every model."""
        text = getattr(self, f"eval_{target}_weights")
        if "," not in text:
            return [text.strip()] * len(getattr(self, f"eval_{target}_model_names")())
        return [entry.strip() for entry in text.split(",")]

    def eval_weights(self, target: str, model_name: str) -> str:
        """The weight file the `target` model `model_name` starts from ("": from scratch)."""
        models = getattr(self, f"eval_{target}_model_names")()
        return self.eval_weight_files(target)[models.index(model_name)]

    def eval_test_epoch_list(self, target: str) -> list[int]:
        """The epochs (from 1) after which the `target` ("action" or "privacy") model is also
        tested, to keep the best (`eval_<target>_test_epochs`); empty: the last epoch's model,
        tested once."""
        setting = f"eval_{target}_test_epochs"
        return parse_test_epochs(setting, getattr(self, setting))

    def eval_learning_rate(self, target: str) -> float:
        """The learning rate of the `target` ("action" or "privacy") model of the evaluation:
        `eval_<target>_lr`, or `eval_lr` where that is 0."""
        return getattr(self, f"eval_{target}_lr") or self.eval_lr

    def eval_lr_drop_of(self, target: str) -> float:
        """The plateau drop of the `target` ("action" or "privacy") model of the evaluation:
        `eval_<target>_lr_drop`, or `eval_lr_drop` where that is 0."""
        return getattr(self, f"eval_{target}_lr_drop") or self.eval_lr_drop

    def eval_batch_size(self, target: str) -> int:
        """The batch of the `target` ("action" or "privacy") model of the evaluation:
        `eval_<target>_batch_size`, or the training batch where that is 0."""
        training = self.batch_size if target == "action" else self.privacy_batch_size
        return getattr(self, f"eval_{target}_batch_size") or training

    def pa_hmdb51_left_out(self) -> str:
        """The PA-HMDB51 annotation folder whose videos f_A's HMDB51 training split leaves out:
        with `eval_protocol=pa_hmdb51` (SPAct's Sec. 5.3) the evaluation tests on them. ""
        where f_A trains on another action dataset (Table 2's UCF101 -> PA-HMDB), or under
        another protocol."""
        if self.eval_protocol == "pa_hmdb51" and self.action_dataset == "hmdb51":
            return self.evaluation_datasets().privacy_annotations
        return ""

    def evaluation_datasets(self) -> ExperimentConfig:
        """This config with the evaluation's datasets in place of the training ones: each
        `eval_<setting>` that is set replaces `<setting>`. PA-HMDB51's and VP's attributes
        default to their five, since the training attributes are VISPR ids."""
        values = {
            name: getattr(self, f"eval_{name}") or getattr(self, name) for name in EVAL_DATA_FIELDS
        }
        if values["privacy_dataset"] in FRAME_DATASETS:
            values["privacy_attributes"] = self.eval_privacy_attributes or "all"
        return dataclasses.replace(self, **values)
