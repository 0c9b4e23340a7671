"""Every shipped flag file parses into a valid config, and bad flags are named."""

import ast
import dataclasses
import os
import re
from pathlib import Path

import keras
import pytest
from absl import app, flags

from keras_privacy.config import (
    METHODS,
    WEIGHT_FLAGS,
    DataSettings,
    EvaluationSettings,
    ExperimentConfig,
    MethodSettings,
    ModelSettings,
    RunSettings,
    ScheduleSettings,
    SettingError,
)
from keras_privacy.flags import define_script_flags, parse_config, select_backend

pytestmark = pytest.mark.backend_independent  # settings and flag files only

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").glob("*.cfg"))
FROM_SCRATCH = [f"--{flag}=" for flag in WEIGHT_FLAGS] + ["--eval_action_frozen_batchnorm=false"]
"""Every model from scratch, explicitly: the paper configs' weight files are not in the repo
(tests/test_pretrained.py checks that a missing one stops the run); so no file's BatchNorm to
keep either."""


def parse(*argv: str) -> ExperimentConfig:
    return parse_config(argv)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_parses_and_validates(path):
    config = parse(f"--flagfile={path}", *FROM_SCRATCH)
    config.validate()
    assert config.run_dir.endswith(path.stem)


def test_paper_configs_use_the_papers_settings():
    config = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr.cfg'}")
    assert (config.image_size, config.clip_length, config.clip_stride) == (112, 16, 2)
    # VISPR cached large enough that a crop of 0.6 is resized down to the input side.
    assert config.image_side() == 192 >= config.image_size / 0.6
    penalty = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr_penalty.cfg'}")
    assert penalty.image_side() == 384 >= penalty.image_size / 0.6
    assert config.anonymizer_lr == config.action_lr == config.privacy_lr == 1e-4
    assert (config.action_model, config.privacy_backbone) == ("r3d_18_spact", "resnet50")
    assert config.contrastive_views == "images" and config.learned_name() == "spact"
    vita = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr_vita.cfg'}")
    assert (vita.budget_loss, vita.action_lr, vita.privacy_lr) == ("max_bce", 1e-5, 1e-4)


def test_a_variant_of_the_authors_method_is_reported_as_what_it_is():
    synthetic = parse(f"--flagfile={CONFIGS[0].parent / 'synthetic.cfg'}")
    assert synthetic.learned_name() == "spact (crop 0.25, both views)"
    assert parse("--adversary_jitter=0.5").learned_name() == "spact (jitter 0.5)"
    assert parse("--contrastive_views=frames").learned_name() == "spact (frames views)"
    assert parse("--ssl_adversary=rotnet").learned_name() == "spact (rotnet)"
    assert parse("--method=vita", "--contrastive_views=both").learned_name() == "vita"
    # A variant of another method's loss, or an ensemble, is named too (the penalty method's
    # own penalty is not).
    tedspad = parse(f"--flagfile={CONFIGS[0].parent / 'synthetic_tedspad.cfg'}")
    assert tedspad.learned_name() == "spact (crop 0.25, both views, triplet 1)"
    ensemble = parse(f"--flagfile={CONFIGS[0].parent / 'synthetic_ensemble.cfg'}")
    assert ensemble.learned_name() == "spact (ensemble of 2, crop 0.25, both views)"
    assert parse("--penalty_weight=0.5").learned_name() == "spact (penalty 0.5)"
    assert parse("--method=vita", "--penalty_weight=1").learned_name() == "vita (penalty 1)"
    assert parse("--method=penalty", "--penalty_weight=1").learned_name() == "penalty"


def test_a_flag_that_makes_no_sense_is_named():
    with pytest.raises(ValueError, match="image_size"):
        parse("--image_size=64", "--frame_size=32").validate()
    with pytest.raises(ValueError, match=r"--image_size \(64\) cannot exceed --privacy_image_side"):
        parse("--image_size=64", "--frame_size=64", "--privacy_image_side=48").validate()
    with pytest.raises(ValueError, match="--privacy_image_side must be 0"):
        parse("--privacy_image_side=-1").validate()
    with pytest.raises(flags.Error):
        parse("--no_such_flag=1")


def test_the_synthetic_benchmark_version_and_style_are_checked():
    config = parse(f"--flagfile={CONFIGS[0].parent / 'synthetic_v5.cfg'}")
    assert (config.synthetic_version, config.synthetic_style) == (5, "dusk")
    with pytest.raises(ValueError, match="--synthetic_style=dusk needs --synthetic_version=5"):
        parse("--synthetic_style=dusk").validate()
    with pytest.raises(ValueError, match="--synthetic_style='night': version 5 needs one of"):
        parse("--synthetic_version=5", "--synthetic_style=night").validate()
    with pytest.raises(ValueError, match="--synthetic_version=3: 4 or 5"):
        parse("--synthetic_version=3").validate()
    # An unset shell variable (--synthetic_dir=$DATA) would name the working directory.
    with pytest.raises(ValueError, match="^--synthetic_dir is empty: name the folder"):
        parse("--synthetic_dir=").validate()


def test_files_or_a_split_the_built_in_benchmark_does_not_read_are_refused():
    with pytest.raises(
        ValueError,
        match=r"^--action_dataset=synthetic does not read --action_annotations or --action_root "
        r"\(the built-in benchmark is in --synthetic_dir\): set --action_dataset to ucf101 or "
        "hmdb51 to train on those files, or leave them out$",
    ):
        parse("--action_annotations=ucf101/splits", "--action_root=ucf101/videos").validate()
    with pytest.raises(ValueError, match="read --privacy_root .* set --privacy_dataset to vispr "):
        parse("--privacy_root=vispr").validate()
    with pytest.raises(ValueError, match="^--action_split=2: the built-in benchmark has one split"):
        parse("--action_split=2").validate()
    # An evaluation on UCF101 names its own files (validate_evaluation), and reads this split.
    parse(
        "--action_split=2",
        "--eval_protocol=cross_dataset",
        "--eval_action_dataset=ucf101",
        "--eval_action_annotations=ucf101/splits",
        "--eval_action_root=ucf101/videos",
    ).validate()


@pytest.mark.parametrize("dataset", ["synthetic", "ucf101", "hmdb51"])
@pytest.mark.parametrize("split", [0, 4])
def test_an_action_split_outside_one_to_three_is_named(dataset, split):
    files = () if dataset == "synthetic" else ("--action_annotations=s", "--action_root=v")
    with pytest.raises(
        ValueError, match=f"^--action_split={split}: UCF101 and HMDB51 have splits 1, 2 and 3$"
    ):
        parse(f"--action_dataset={dataset}", *files, f"--action_split={split}").validate()
    parse(f"--action_dataset={dataset}", *files, "--action_split=1").validate()


@pytest.mark.parametrize(
    "flag", ["--identity_lr=inf", "--privacy_lr=nan", "--privacy_weight=-inf", "--eval_lr=inf"]
)
def test_an_infinite_or_nan_learning_rate_or_loss_weight_is_refused(flag):
    name, value = flag.split("=")
    with pytest.raises(ValueError, match=f"^{name} must be a finite number, got {value}$"):
        parse(flag).validate()


@pytest.mark.parametrize("name", ["action_threshold", "adversary_threshold"])
def test_a_threshold_lies_in_zero_to_one(name):
    parse("--method=meta", f"--{name}=0").validate()  # 0: the player never updates for it
    parse("--method=meta", f"--{name}=1").validate()
    for value in ("-0.1", "1.5"):
        with pytest.raises(ValueError, match=rf"--{name} must be in \[0, 1\], got {value}"):
            parse("--method=meta", f"--{name}={value}").validate()


def test_every_pa_hmdb51_frame_is_zero_frames_per_video():
    parse("--eval_privacy_frames=0").validate()  # VITA's test: every frame
    with pytest.raises(ValueError, match="--eval_privacy_frames cannot be negative"):
        parse("--eval_privacy_frames=-1").validate()


def test_the_f1_threshold_is_a_probability():
    parse("--eval_f1_threshold=0.6225").validate()  # the authors' 0.5 on the logits
    for value in ("0", "1", "nan"):
        with pytest.raises(ValueError, match=r"--eval_f1_threshold must be"):
            parse(f"--eval_f1_threshold={value}").validate()


@pytest.mark.parametrize(
    "flag", ["--anonymizer=nope", "--action_model=nope", "--eval_privacy_model=nope"]
)
def test_an_unknown_model_name_is_named_with_its_flag(flag):
    with pytest.raises(ValueError, match=f"{flag.split('=')[0]}='nope' is not one of"):
        parse(flag).validate()


@pytest.mark.parametrize(
    "methods, message",
    [
        ("raw,blur_stron", "--eval_methods: unknown method 'blur_stron'; choose learned, NAME="),
        ("raw=runs/a.keras", "--eval_methods: 'raw=runs/a.keras' needs a name that is neither"),
        ("learned=a.keras", "'learned=a.keras' needs a name that is neither learned nor a base"),
        ("mine=", "--eval_methods: 'mine=' needs a name that is neither learned nor a baseline, "),
        (" , ", "--eval_methods names no method"),
        ("learned,raw,spact=runs/a.keras", "names a method twice: spact, raw, spact"),
    ],
)
def test_eval_methods_are_checked_before_training(methods, message):
    """train.py validates the same config, so a misspelt method stops it before training."""
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(f"--eval_methods={methods}").validate()
    parse("--eval_methods=learned,other=runs/b/anonymizer.keras,face_blur").validate()


def test_the_settings_name_every_baseline():
    """The settings keep the baselines' names without importing them (OpenCV)."""
    from keras_privacy.config.evaluation import EVAL_BASELINES, PEOPLE_BASELINES
    from keras_privacy.evaluation import baselines

    assert EVAL_BASELINES == tuple(baselines.BASELINES)
    assert set(PEOPLE_BASELINES) == baselines.PEOPLE_BASELINES


def test_seeds_run_one_config_per_seed_in_its_own_folder():
    config = parse("--seed=3", "--seeds=2", "--run_dir=runs/x", "--eval_dir=runs/x/eval")
    config.validate()
    runs = config.seed_runs()
    assert [(run.seed, run.seeds) for run in runs] == [(3, 1), (4, 1)]
    assert [run.run_dir for run in runs] == ["runs/x/seed_3", "runs/x/seed_4"]
    assert [run.eval_dir for run in runs] == ["runs/x/eval/seed_3", "runs/x/eval/seed_4"]
    assert parse("--seed=3").seed_runs() == [parse("--seed=3")]
    # Without --eval_dir, the seeds' reports are in run_dir/evaluation, beside their summary.
    assert parse("--seeds=2", "--run_dir=r").seed_runs()[1].eval_dir == "r/evaluation/seed_1"
    with pytest.raises(ValueError, match="--seeds"):
        parse("--seeds=0").validate()
    with pytest.raises(ValueError, match="--anonymizer_path"):
        parse("--seeds=2", "--anonymizer_path=a.keras").validate()


def test_a_seed_outside_numpys_range_is_named():
    parse("--seed=4294967294", "--seeds=2").validate()
    with pytest.raises(ValueError, match=r"^--seed=-1: the seeds must lie in 0 \.\. 4294967295 "):
        parse("--seed=-1").validate()
    with pytest.raises(ValueError, match=r"^--seed=4294967295 \(with --seeds=2, 4294967296 the"):
        parse("--seed=4294967295", "--seeds=2").validate()


def test_seeds_read_a_named_anonymizer_of_the_run_from_each_seeds_folder():
    """A NAME=PATH in the run folder (the variant configs' own row) is each seed's own file;
    one elsewhere would be one file for every seed, so it is refused."""
    config = parse(
        "--seeds=2", "--run_dir=runs/x", "--eval_methods=learned,moco=runs/x/anonymizer.keras,raw"
    )
    config.validate()
    assert [run.eval_methods for run in config.seed_runs()] == [
        "learned,moco=runs/x/seed_0/anonymizer.keras,raw",
        "learned,moco=runs/x/seed_1/anonymizer.keras,raw",
    ]
    with pytest.raises(ValueError, match="must lie in --run_dir runs/x .* got runs/y/a.keras"):
        parse("--seeds=2", "--run_dir=runs/x", "--eval_methods=other=runs/y/a.keras").validate()
    # One seed: the path is read as it is given.
    parse("--run_dir=runs/x", "--eval_methods=other=runs/y/a.keras").validate()
    for name in ("synthetic_moco", "synthetic_rotnet"):
        runs = parse(f"--flagfile={CONFIGS[0].parent / name}.cfg", "--seeds=2").seed_runs()
        assert runs[1].eval_methods.endswith(f"runs/{name}/seed_1/anonymizer.keras"), name


BASES = sorted((CONFIGS[0].parent / "base").glob("*.cfg"))


@pytest.mark.parametrize("path", BASES, ids=[p.stem for p in BASES])
def test_a_shared_base_config_holds_no_method_specific_flag(path):
    for method in METHODS:
        extra = ["--penalty_weight=1"] if method == "penalty" else []
        parse(f"--flagfile={path}", f"--method={method}", *extra).validate()


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--method=meta", "--penalty_weight=1"], "--penalty_weight=1.0: --method=meta"),
        (["--method=vita", "--action_weight=2"], "--action_weight=2.0: --method=vita"),
        (["--method=meta", "--action_weight=2"], "--action_weight=2.0: --method=meta"),
        (["--restart_every=5"], "--restart_every=5: --method=spact"),
        (["--action_schedule=batch_gate"], "--action_schedule=batch_gate: --method=spact"),
        (["--method=meta", "--adversary_updates_per_step=2"], "--method=meta"),
        (["--method=vita", "--adversary_crop=0.5"], "--adversary_crop=0.5: --method=vita"),
        (["--method=meta", "--adversary_jitter=1"], "--adversary_jitter=1.0: --method=meta"),
        (["--method=meta", "--temperature=0.5"], "--temperature=0.5: --method=meta"),
        (["--method=vita", "--pair_sampler=far"], "--pair_sampler=far: --method=vita"),
        (["--method=vita", "--ssl_adversary=moco"], "--ssl_adversary=moco: --method=vita"),
        (["--meta_alpha=0.1"], "--meta_alpha=0.1: --method=spact"),
        (["--moco_momentum=0.9"], "--moco_momentum=0.9: --ssl_adversary=ntxent"),
        (["--penalty_budget=0.5"], "--penalty_budget=0.5: --penalty_weight is off"),
        (["--triplet_margin=2"], "--triplet_margin=2.0: --triplet_weight is off"),
        (["--embedding_weights=e.weights.h5"], "--embedding_weights=e.weights.h5: --triplet"),
        (["--init_lr_patience=3"], "--init_lr_patience=3: --init_lr_drop is off (1.0)"),
        (
            ["--method=vita", "--action_schedule=batch_gate", "--action_max_updates=3"],
            "--action_max_updates=3: --action_schedule is batch_gate, it acts at validation_loop",
        ),
        (
            ["--method=vita", "--action_schedule=batch_gate", "--action_validation_every=4"],
            "--action_validation_every=4: --action_schedule is batch_gate, it acts at",
        ),
        (
            ["--method=vita", "--privacy_backbone=resnet50", "--eval_privacy_model=resnet_tiny"],
            "--privacy_backbone=resnet50: --method=vita does not read it",
        ),
    ],
)
def test_a_flag_the_method_does_not_read_is_named(argv, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        parse(*argv).validate()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget_pretrain_updates=7"], "--budget_pretrain_updates=7 must be a non-negative"),
        (["--adversary_updates_per_step=0"], "--adversary_updates_per_step must be at least 1"),
        (["--action_max_updates=0"], "--action_max_updates must be at least 1"),
        (["--action_validation_every=1"], "--action_validation_every must be at least 2"),
        (["--action_schedule=loop"], "--action_schedule"),
        (
            ["--action_schedule=batch_gate", "--action_fresh_clips"],
            "--action_fresh_clips needs --action_schedule=validation_loop",
        ),
    ],
)
def test_bad_vita_schedules_are_refused(argv, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse("--method=vita", *argv).validate()


def test_a_method_specific_flag_at_its_default_or_where_read_is_allowed():
    parse("--method=vita", "--temperature=0.1", "--action_weight=1").validate()
    parse("--method=vita", "--penalty_weight=1", "--restart_every=5").validate()
    parse("--method=vita", "--action_max_updates=3", "--action_validation_every=4").validate()
    parse("--init_lr_drop=10", "--init_lr_patience=3").validate()
    # Without --eval_privacy_model, --privacy_backbone picks the evaluation's privacy model.
    parse("--method=meta", "--privacy_backbone=mobilenet_v1_0.25").validate()
    parse("--ssl_adversary=moco", "--moco_momentum=0.9").validate()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--projection_dim=-5"], "--projection_dim must be at least 1, got -5"),
        (["--projection_hidden=0"], "--projection_hidden must be at least 1, got 0"),
        (["--identity_warmup_epochs=-1"], "--identity_warmup_epochs cannot be negative, got -1"),
        (["--privacy_weight=-1"], "--privacy_weight cannot be negative, got -1.0 (a negative"),
        (["--action_weight=-0.5"], "--action_weight cannot be negative, got -0.5 (a negative"),
        (
            ["--eval_warmup_epochs=9", "--eval_action_epochs=20", "--eval_privacy_epochs=8"],
            "--eval_warmup_epochs (9) exceeds --eval_privacy_epochs (8): the target privacy",
        ),
        (
            ["--eval_action_epochs=8", "--eval_action_test_epochs=4,20"],
            "--eval_action_test_epochs=4,20 names epochs past the target action model's 8 "
            "(--eval_action_epochs): 20",
        ),
    ],
)
def test_sizes_and_lengths_out_of_their_range_are_named(argv, message):
    # Each would fail inside Keras after the run folder was made, or be silently ignored.
    with pytest.raises(ValueError, match=re.escape(message)):
        parse(*argv).validate()


def test_crop_min_side_is_the_action_crops_smallest_side():
    assert parse("--crop_min_side=0.8").action_augmentation().crop_side == (0.8, 1.0)
    for bad in ("0", "1.5"):
        with pytest.raises(ValueError, match=re.escape("--crop_min_side must be in (0, 1], got")):
            parse(f"--crop_min_side={bad}").validate()


SECTIONS = (
    RunSettings,
    DataSettings,
    ModelSettings,
    ScheduleSettings,
    MethodSettings,
    EvaluationSettings,
)


def test_the_sections_partition_the_settings_in_flag_order():
    section_names = [f.name for section in SECTIONS for f in dataclasses.fields(section)]
    assert section_names == [f.name for f in dataclasses.fields(ExperimentConfig)]
    config = parse("--batch_size=3", "--eval_lr=0.5", "--method=vita")
    data = config.section(DataSettings)
    assert type(data) is DataSettings and data.batch_size == 3
    assert config.section(EvaluationSettings).eval_lr == 0.5
    assert config.section(RunSettings).method == "vita"


def test_a_setting_error_names_settings_and_the_command_line_spells_them_as_flags():
    error = SettingError("<batch_size> must be at least 1 (<eval_action_*>), a < b, <Not_a_name>")
    assert error.template.startswith("<batch_size>")
    assert str(error) == "--batch_size must be at least 1 (--eval_action_*), a < b, <Not_a_name>"
    with pytest.raises(SettingError) as raised:
        ExperimentConfig(batch_size=0).validate()
    assert raised.value.template == "<batch_size> must be at least 1, got 0"


def test_every_setting_a_message_names_is_a_setting_or_an_option():
    """The `<name>`s written in the package's `SettingError` and `spell` templates and in the
    settings' help texts (`described`): each is a field of `ExperimentConfig`, a family of
    fields, or an option of a command."""
    settings = {field.name for field in dataclasses.fields(ExperimentConfig)}
    options = {
        "epochs",  # python -m keras_privacy.data arrays --epochs
        "backend",  # train.py / evaluate.py --backend
        "device",  # python -m keras_privacy.anonymize --device
        "scale",  # python -m keras_privacy.anonymize --scale
        "normalization",  # python -m keras_privacy.convert --normalization
    }
    named = set()
    for path in (ROOT / "keras_privacy").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "SettingError",
                "spell",
                "described",
            ):
                named |= {
                    name
                    for part in ast.walk(node.args[0])
                    if isinstance(part, ast.Constant) and isinstance(part.value, str)
                    for name in re.findall(r"<([a-z][a-z0-9_]*\*?)>", part.value)
                }
    assert {"batch_size", "eval_action_*", "action_threshold", "epochs", "action_model"} <= named
    unknown = {
        name
        for name in named
        if name not in settings | options
        and not (name.endswith("*") and any(s.startswith(name[:-1]) for s in settings))
    }
    assert unknown == set()


def test_select_backend_sets_keras_backend_and_refuses_arguments(monkeypatch):
    flag_values = flags.FlagValues()
    define_script_flags(flag_values)
    flag_values(["train.py", f"--backend={keras.backend.backend()}"])
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    select_backend(flag_values, ["train.py"])
    assert os.environ["KERAS_BACKEND"] == keras.backend.backend()
    with pytest.raises(app.UsageError, match="unexpected arguments: extra"):
        select_backend(flag_values, ["train.py", "extra"])
    other = "jax" if keras.backend.backend() == "tensorflow" else "tensorflow"
    flag_values["backend"].value = other
    with pytest.raises(app.UsageError, match="--backend must be chosen before keras"):
        select_backend(flag_values, ["train.py"])


def test_help_texts_name_settings_and_the_flags_spell_them():
    """A setting's help names others as `<name>`; the flag's help spells them `--name`."""
    helps = {field.name: field.metadata["help"] for field in dataclasses.fields(ExperimentConfig)}
    assert not [name for name, text in helps.items() if re.search(r"--[a-z]", text)]
    assert "default <action_model>" in helps["eval_action_model"]
    flag_values = flags.FlagValues()
    define_script_flags(flag_values)
    assert "default --action_model" in flag_values["eval_action_model"].help


def test_a_flags_help_says_where_it_acts():
    """`--helpfull` ends a scoped flag's help with the README table's "Only with" sentence."""
    flag_values = flags.FlagValues()
    define_script_flags(flag_values)
    assert flag_values["meta_alpha"].help.endswith("Only with --method=meta.")
    assert flag_values["triplet_margin"].help.endswith(
        "Only with --method=spact / penalty, --triplet_weight set."
    )
    assert flag_values["action_max_updates"].help.endswith(
        "Only with --method=vita, --action_schedule=validation_loop."
    )
    assert "Only with" not in flag_values["batch_size"].help


def test_a_config_runs_from_any_directory_and_includes_are_found_next_to_their_file(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    penalty = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr_penalty.cfg'}")
    assert (penalty.method, penalty.action_model) == ("penalty", "i3d_r50")  # and hmdb_vispr's:
    assert (penalty.image_size, penalty.eval_pa_hmdb51_labels) == (224, "vispr1")
    mine = tmp_path / "mine" / "run.cfg"
    mine.parent.mkdir()
    ours = os.path.relpath(CONFIGS[0].parent / "synthetic.cfg", mine.parent)
    mine.write_text(
        f"# a user's config including ours\n--flagfile={ours}\n\n// absl's other comment\n"
        "--batch_size=3\n"
    )
    config = parse("--flagfile", str(mine), "--minimax_epochs=2")
    assert (config.batch_size, config.minimax_epochs, config.frame_size) == (3, 2, 40)


def test_a_missing_or_circular_flag_file_is_named_with_the_line_including_it(tmp_path, monkeypatch):
    from keras_privacy.cli import FlagfileError, script_argv

    monkeypatch.chdir(tmp_path)
    outer = tmp_path / "outer.cfg"
    outer.write_text("--minimax_epochs=2\n--flagfile=inner.cfg\n")
    with pytest.raises(FlagfileError) as raised:
        parse(f"--flagfile={outer}")
    assert str(raised.value) == (
        f"inner.cfg: no such flag file (named at {outer}:2), neither in {tmp_path} nor in the "
        "working directory"
    )
    (tmp_path / "inner.cfg").write_text("--flagfile=outer.cfg\n")
    with pytest.raises(FlagfileError, match=re.escape(f"includes itself through {outer}:2 -> ")):
        parse(f"--flagfile={outer}")
    with pytest.raises(SystemExit, match=re.escape(f"error: {tmp_path / 'none.cfg'}: cannot read")):
        script_argv(["train.py", f"--flagfile={tmp_path / 'none.cfg'}"])
    with pytest.raises(FlagfileError, match="~no_such_user_here/a.cfg: cannot read this flag file"):
        parse("--flagfile=~no_such_user_here/a.cfg")
    # Included by two files is no circle.
    (tmp_path / "inner.cfg").write_text("--batch_size=3\r\n")
    (tmp_path / "middle.cfg").write_text("--flagfile=inner.cfg\n")
    outer.write_text("--flagfile=inner.cfg\n--flagfile=middle.cfg\n")
    assert parse(f"--flagfile={outer}").batch_size == 3
    # An empty --flagfile= (absl ignores it: an unset variable) is refused.
    with pytest.raises(FlagfileError, match=re.escape("--flagfile= names no file (an unset")):
        parse(f"--flagfile={outer}", "--flagfile=")
    (tmp_path / "middle.cfg").write_text("--flagfile=\n")
    with pytest.raises(FlagfileError, match=re.escape(f"{tmp_path / 'middle.cfg'}:1) (an unset")):
        parse(f"--flagfile={outer}")


def test_a_flag_that_a_later_flag_file_would_override_is_refused(tmp_path, monkeypatch):
    # A later flag wins: set before the --flagfile that sets it too, on the command line or in
    # an including file, it would lose without a word. Set after it, it wins.
    from keras_privacy.cli import FlagfileError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "inner.cfg").write_text("--method=spact\n--batch_size=3\n")
    outer = tmp_path / "outer.cfg"
    outer.write_text("--method=vita\n--flagfile=inner.cfg\n")
    expected = f"{tmp_path / 'inner.cfg'}:1: '--method=spact' would override {outer}:1"
    with pytest.raises(FlagfileError, match=re.escape(expected)):
        parse(f"--flagfile={outer}")
    outer.write_text("--flagfile=inner.cfg\n--method=vita\n")
    assert parse(f"--flagfile={outer}").method == "vita"
    with pytest.raises(
        FlagfileError,
        match=re.escape("'--batch_size=3' would override --batch_size=5 on the command line"),
    ):
        parse("--batch_size=5", f"--flagfile={outer}")
    assert parse(f"--flagfile={outer}", "--batch_size=5").batch_size == 5
    # Two flag files setting one flag to two values: on the command line, or included by one
    # file. The same value (a file included twice) loses nothing.
    (tmp_path / "other.cfg").write_text("--run_dir=runs/other\n--batch_size=4\n")
    override = f"'--batch_size=4' would override {tmp_path / 'inner.cfg'}:2"
    with pytest.raises(FlagfileError, match=re.escape(f"other.cfg:2: {override}")):
        parse(f"--flagfile={outer}", "--flagfile=other.cfg")
    outer.write_text("--flagfile=inner.cfg\n--flagfile=other.cfg\n")
    with pytest.raises(FlagfileError, match=re.escape(f"{tmp_path / 'other.cfg'}:2: {override}")):
        parse(f"--flagfile={outer}")
    (tmp_path / "other.cfg").write_text("--run_dir=runs/other\n")
    config = parse(f"--flagfile={outer}", "--flagfile=inner.cfg")
    assert (config.batch_size, config.run_dir) == (3, "runs/other")


def test_a_bad_line_of_a_flag_file_is_named_with_its_file_and_line(tmp_path, monkeypatch):
    """absl names an unknown flag or a bad value without the file (of a chain of includes),
    takes a line without a dash for a positional argument, keeps a comment after a value or
    quotes around it as part of the value, and the last of a flag set twice in one file."""
    from keras_privacy.cli import FlagfileError, require_known_flags

    monkeypatch.chdir(tmp_path)
    flag_values = flags.FlagValues()
    define_script_flags(flag_values)
    inner = tmp_path / "inner.cfg"
    (tmp_path / "outer.cfg").write_text("--minimax_epochs=2\n--flagfile=inner.cfg\n")
    lines = {
        "--bogus_flag=1": "Unknown command line flag 'bogus_flag'",
        "--batch_size 4": "Unknown command line flag 'batch_size 4'. Did you mean: batch_size ?",
        "--batch_size=abc": "flag --batch_size=abc: invalid literal for int() with base 10",
    }
    for line, message in lines.items():
        inner.write_text(f"# a comment\n\n{line}\n")
        # Named as found: next to outer.cfg, given relative to the working directory.
        with pytest.raises(SystemExit, match=f"^error: {re.escape(f'inner.cfg:3: {message}')}"):
            require_known_flags(flag_values, ["train.py", "--flagfile=outer.cfg", "--verbose"])
    misread = {
        "batch_size=4": "not a flag: a flag file holds one --name=value a line",
        "--run_dir=runs/x   # the first": "a comment goes on a line of its own",
        "--run_dir='runs/x'": "quotes would be part of the value: write it without them",
    }
    for line, message in misread.items():
        inner.write_text(f"{line}\n")
        expected = f"inner.cfg:1: {line!r}: {message}"
        with pytest.raises(FlagfileError, match=f"^{re.escape(expected)}"):
            parse("--flagfile=outer.cfg")
    # A flag set twice in one file: absl keeps the last without a word. An included file's
    # flag (outer.cfg's --minimax_epochs) may be set again by the file that includes it.
    twice = {
        "--batch_size=4\n--minimax_epochs=3\n--batch_size=8\n": (3, "--batch_size=8", "batch_size"),
        "--mixed_precision\n\n--nomixed_precision\n": (3, "--nomixed_precision", "mixed_precision"),
    }  # fmt: skip
    for text, (number, line, name) in twice.items():
        inner.write_text(text)
        expected = f"inner.cfg:{number}: {line!r}: --{name} is set again (first at line 1)"
        with pytest.raises(FlagfileError, match=f"^{re.escape(expected)}"):
            parse("--flagfile=outer.cfg")
    inner.write_text("--batch_size=4\n--run_dir=runs/a#1\n")
    require_known_flags(flag_values, ["train.py", "--flagfile=outer.cfg", "--bogus_on_the_line"])
    assert parse("--flagfile=outer.cfg").run_dir == "runs/a#1"


def test_a_linked_config_finds_its_includes_next_to_its_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.cfg").symlink_to(CONFIGS[0].parent / "synthetic.cfg")
    assert parse("--flagfile=mine.cfg").frame_size == 40  # from configs/base/synthetic.cfg


def test_a_backend_inside_a_flag_file_is_set_before_keras_is_imported(tmp_path, monkeypatch):
    from keras_privacy.cli import script_argv

    config = tmp_path / "jax.cfg"
    config.write_text("--backend=jax\n--minimax_epochs=2\n")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    argv = script_argv(["train.py", f"--flagfile={config}", "--verbose"])
    assert argv == ["train.py", "--backend=jax", "--minimax_epochs=2", "--verbose"]
    assert os.environ["KERAS_BACKEND"] == "jax"
    script_argv(["train.py", "-backend=tensorflow"])  # absl's one-dash spelling
    assert os.environ["KERAS_BACKEND"] == "tensorflow"
    # The tools that read a training config (data arrays, the smoke script) accept it too.
    assert parse(f"--flagfile={config}").minimax_epochs == 2


def test_an_unknown_backend_is_named_before_keras_is_imported(monkeypatch):
    """Keras would fail on import with a traceback; the command line names the value."""
    from keras_privacy.cli import script_argv

    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    with pytest.raises(SystemExit, match="error: --backend is 'Jax'; choose tensorflow or jax"):
        script_argv(["train.py", "--backend", "Jax"])
    monkeypatch.setenv("KERAS_BACKEND", "tf")
    with pytest.raises(SystemExit, match="environment variable KERAS_BACKEND is 'tf'"):
        script_argv(["evaluate.py"])
    monkeypatch.delenv("KERAS_BACKEND")
    assert script_argv(["evaluate.py"]) == ["evaluate.py"]  # tensorflow, Keras's default


def test_process_flags_need_num_processes_and_a_port(tmp_path):
    """--process_id / --coordinator_address only with --num_processes N > 1, a process_id of 0
    or more, and a coordinator's host:port: each refused by name before any work."""

    def refused(**settings) -> str:
        with pytest.raises(SettingError) as raised:
            ExperimentConfig(**settings).validate()
        return str(raised.value)

    assert refused(process_id=1).startswith("--process_id is read only with --num_processes N > 1")
    assert "--coordinator_address is read only" in refused(coordinator_address="h:1")
    assert "--num_processes is 0" in refused(
        num_processes=0, process_id=7, distribution="data_parallel"
    )
    assert refused(process_id=-3) == "--process_id must be 0 or more, got -3"
    parallel = dict(num_processes=2, distribution="data_parallel")
    for address in ("localhost", "localhost:", ":1234", "h:0", "h:65536", "h:port"):
        assert refused(coordinator_address=address, **parallel) == (
            f"--coordinator_address={address} is not host:port (a port of 1 .. 65535) where "
            "process 0 listens"
        )
    ExperimentConfig(coordinator_address="[::1]:1234", process_id=1, **parallel).validate()


def test_a_compilation_cache_that_is_a_file_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.write_text("")
    with pytest.raises(SettingError) as raised:
        ExperimentConfig(compilation_cache=str(cache)).validate()
    assert str(raised.value) == (
        f"{cache}: --compilation_cache names a file; name a folder (made if missing)"
    )
    ExperimentConfig(compilation_cache=str(tmp_path / "folder")).validate()
