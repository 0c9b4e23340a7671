"""`scripts/smoke_config.py`: every paper config's tiny twin is a valid config of small models
that keeps the method's own settings."""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from keras_privacy.config import ExperimentConfig
from keras_privacy.flags import parse_config

pytestmark = pytest.mark.backend_independent

REPO = Path(__file__).resolve().parents[1]
PAPER_CONFIGS = sorted(
    path.name for path in (REPO / "configs").glob("*.cfg") if not path.name.startswith("synthetic")
)


def _smoke_module():
    spec = importlib.util.spec_from_file_location("smoke", REPO / "scripts" / "smoke_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_flags(flagfile: Path, flags: dict[str, str]) -> ExperimentConfig:
    config = parse_config([f"--flagfile={flagfile}", *(f"--{k}={v}" for k, v in flags.items())])
    config.validate()  # refuses, among others, a flag the method does not read
    return config


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_a_paper_configs_tiny_twin_is_small_and_keeps_the_method(name, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)  # the flag files include others by paths from the repository
    smoke = _smoke_module()
    paper = parse_config([f"--flagfile={Path('configs') / name}"])
    flags = smoke.tiny_overrides(paper, tmp_path / "data", tmp_path / "run")
    tiny = _with_flags(Path("configs") / name, flags)

    assert tiny.method == paper.method
    assert tiny.anonymizer.endswith("_tiny")
    assert tiny.action_model.endswith("_tiny") or tiny.action_model.startswith("factorized_")
    for field in ("privacy_backbone", "adversary_models", "eval_privacy_model"):
        names = getattr(tiny, field).split(",")
        assert set(names) <= {*smoke.TINY_IMAGE_MODELS, ""}, (field, names)
        assert len(names) == min(len(getattr(paper, field).split(",")), 2), field
    if paper.eval_action_model:
        assert tiny.eval_action_model.endswith("_tiny")
    assert all(
        getattr(tiny, f.name) == "" for f in dataclasses.fields(tiny) if f.name.endswith("_weights")
    )
    for field in smoke.EPOCH_FIELDS:
        assert getattr(tiny, field) == min(getattr(paper, field), 1), field
    assert (tiny.image_size, tiny.clip_length, tiny.steps_per_epoch) == (32, 8, 2)
    assert tiny.action_annotations == str(tmp_path / "data" / "ucf_splits")
    # What the method does is kept: its losses, thresholds, schedules and augmentation.
    for field in (
        "privacy_weight",
        "penalty_weight",
        "penalty_budget",
        "budget_loss",
        "action_schedule",
        "meta_first_order",
        "supervised_augmentation",
        "contrastive_augmentation",
        "eval_methods",
        "eval_action_schedule",
    ):
        assert getattr(tiny, field) == getattr(paper, field), field
    if paper.method == "meta":  # every step Algorithm 1's meta update
        assert (tiny.action_threshold, tiny.adversary_threshold) == (0.0, 0.0)
    else:
        assert tiny.action_threshold == paper.action_threshold
        assert tiny.adversary_threshold == paper.adversary_threshold
    if paper.eval_protocol == "novel_attributes":
        assert tiny.eval_protocol == "novel_attributes"
        trained, novel = tiny.privacy_attributes.split(","), tiny.eval_privacy_attributes.split(",")
        assert not set(trained) & set(novel)
    if paper.method == "vita" and paper.budget_pretrain_updates:
        # One budget-only step, then minimax steps: the run trains f_A.
        assert tiny.budget_pretrain_updates == tiny.adversary_updates_per_step
        assert tiny.minimax_steps_per_epoch > 1


def test_the_tiny_action_model_is_the_registrys_own_where_it_has_one():
    smoke = _smoke_module()
    registered = {"i3d_r50", "i3d_r50_tiny", "r3d_18", "r2plus1d_18"}
    assert smoke.tiny_action_model("i3d_r50", registered) == "i3d_r50_tiny"
    assert smoke.tiny_action_model("r3d_18", registered) == "r3d_tiny"
    assert smoke.tiny_action_model("r2plus1d_18", registered) == "r2plus1d_tiny"
    assert smoke.tiny_action_model("factorized_tiny_diff", registered) == "factorized_tiny_diff"
    assert smoke.tiny_image_models("resnet50") == "resnet_tiny_small_images"
    assert smoke.tiny_image_models("a,b,c") == "resnet_tiny_small_images,resnet_tiny"
