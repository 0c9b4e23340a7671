"""Every shipped flag file parses into a valid config, and bad flags are named."""

from pathlib import Path

import pytest
from absl import flags

from keras_privacy.config import ExperimentConfig
from keras_privacy.flags import config_from_flags, define_flags

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.cfg"))


def parse(*argv: str) -> ExperimentConfig:
    flag_values = flags.FlagValues()
    define_flags(flag_values, ExperimentConfig)
    flag_values(["train.py", *argv])
    return config_from_flags(flag_values, ExperimentConfig)


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_parses_and_validates(path):
    config = parse(f"--flagfile={path}")
    config.validate()
    assert config.run_dir.endswith(path.stem)


def test_paper_configs_use_the_papers_settings():
    config = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr.cfg'}")
    assert (config.image_size, config.clip_length, config.clip_stride) == (112, 16, 2)
    assert config.anonymizer_lr == config.action_lr == config.privacy_lr == 1e-4
    assert (config.action_model, config.privacy_backbone) == ("r3d_18_spact", "resnet50")


def test_a_flag_that_makes_no_sense_is_named():
    with pytest.raises(ValueError, match="image_size"):
        parse("--image_size=64", "--frame_size=32").validate()
    with pytest.raises(flags.Error):
        parse("--no_such_flag=1")


@pytest.mark.parametrize(
    "flag", ["--anonymizer=nope", "--action_model=nope", "--eval_privacy_model=nope"]
)
def test_an_unknown_model_name_is_named_with_its_flag(flag):
    with pytest.raises(ValueError, match=f"{flag.split('=')[0]}='nope' is not one of"):
        parse(flag).validate()


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
