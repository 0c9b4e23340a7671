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
    assert config.contrastive_views == "images" and config.learned_name() == "spact"
    vita = parse(f"--flagfile={CONFIGS[0].parent / 'hmdb_vispr_vita.cfg'}")
    assert (vita.budget_loss, vita.action_lr, vita.privacy_lr) == ("max_bce", 1e-5, 1e-4)


def test_a_variant_of_the_authors_method_is_reported_as_what_it_is():
    synthetic = parse(f"--flagfile={CONFIGS[0].parent / 'synthetic.cfg'}")
    assert synthetic.learned_name() == "spact (crop 0.25, views: both)"
    assert parse("--adversary_jitter=0.5").learned_name() == "spact (jitter 0.5)"
    assert parse("--contrastive_views=frames").learned_name() == "spact (views: frames)"
    assert parse("--ssl_adversary=rotnet").learned_name() == "spact (rotnet)"
    assert parse("--method=vita", "--contrastive_views=both").learned_name() == "vita"


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
