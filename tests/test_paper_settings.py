"""The table of the papers' settings is the generated one, and each row's value is what its
configs set."""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from keras_privacy.config import ExperimentConfig
from keras_privacy.flags import parse_config
from keras_privacy.paper_settings import AUTHORS_CODE, METHODS, SETTINGS

pytestmark = pytest.mark.backend_independent

REPO = Path(__file__).resolve().parents[1]
FIELDS = {field.name: field for field in dataclasses.fields(ExperimentConfig)}
WITHOUT_FLAG = {
    ("spact", "stopping rules th_A0, th_T0, th_B0, th_Bmax"),
    ("spact", "f_T and f_B initialisations' batches"),
    ("spact", "Adam's epsilon"),
    ("spact", "people detector of the blur and blackening baselines"),
    ("vita", "weight decay"),
    ("penalty", "target models' reported score"),
    ("spact", "target models' reported score"),
    ("spact", "anonymizer checkpoint evaluated"),
    ("vita", "f_d random start"),
    ("penalty", "f_A identity checkpoint"),
    ("penalty", "target action model precision"),
    ("spact", "down-sampling baselines"),
    ("spact", "pretrained target models' input"),
    ("meta", "privacy figure reported"),
    ("spact", "f_A's batches in its update"),
    ("penalty", "minimax update order"),
    ("penalty", "f_A's batches in its update"),
    ("spact", "f_B's batches in its update"),
    ("penalty", "f_B's batches in its update"),
    ("spact", "f_A identity data"),
    ("penalty", "f_A identity data"),
    ("spact", "frames' channel order"),
    ("spact", "cMAP and F1 over attributes without a positive test image"),
    ("vita", "budget models' training images"),
    ("vita", "initialisation"),
    ("vita", "budget models' random start"),
    ("vita", "checkpoints evaluated"),
    ("vita", "target privacy models' start and images"),
    ("meta", "T1 / T2 measured on"),
    ("meta", "attack-model updates per iteration"),
    ("meta", "support / query attack models"),
    ("meta", "action term of the support / query losses"),
    ("meta", "f_A's BatchNorm in the meta update"),
    ("meta", "privacy term"),
    ("meta", "mixed samples' sets"),
    ("meta", "images without a positive in an attribute split"),
    ("meta", "models' modes in the updates"),
    ("spact", "test image view"),
    ("spact", "raw-trained attacker"),
    ("penalty", "test image view"),
    ("penalty", "clips into f_A"),
    ("penalty", "target action model dropout"),
    ("penalty", "frames' channel order"),
    ("penalty", "penalty term"),
    ("penalty", "f_A kept after the minimax"),
    ("spact", "models' random start"),
    ("penalty", "models' random start"),
    ("spact", "resize of a crop"),
    ("penalty", "resize of a crop"),
}
"""The rows whose setting has no flag yet: not checked against the configs."""
FLAGGED = [row for row in SETTINGS if row.flag]


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _config(stem: str) -> ExperimentConfig:
    """The config a flag file gives, `--flagfile` includes and defaults included."""
    return parse_config([f"--flagfile={REPO / 'configs' / f'{stem}.cfg'}"])


def _typed(text: str, default):
    """`text` as a flag of `default`'s type would read it."""
    if isinstance(default, bool):
        return {"true": True, "false": False}[text]
    return type(default)(text)


def test_the_document_holds_the_generated_tables():
    table = _load_script("deviations_table")
    assert table.document_tables() == table.settings_tables(), (
        "docs/paper_settings.md differs from keras_privacy/paper_settings.py: run "
        "`python scripts/deviations_table.py --write`"
    )


def test_every_row_is_complete_and_the_rows_without_a_flag_are_the_listed_ones():
    for row in SETTINGS:
        assert row.method in METHODS
        assert all((row.setting, row.paper, row.source, row.configs, row.why)), row
        assert row.ours or row.flag, f"{row}: a row without a flag says what ours is"
        assert "unknown" not in f"{row.paper} {row.why}".lower(), row
        assert not row.flag or row.flag in FIELDS, f"--{row.flag} is not a flag"
        for stem in row.configs:
            assert (REPO / "configs" / f"{stem}.cfg").is_file(), stem
    assert {(row.method, row.setting) for row in SETTINGS if not row.flag} == WITHOUT_FLAG


@pytest.mark.parametrize(
    "row", FLAGGED, ids=[f"{row.method}-{row.flag}-{row.setting}" for row in FLAGGED]
)
def test_the_configs_set_the_rows_value(row):
    expected = _typed(row.ours, FIELDS[row.flag].default)
    for stem in row.configs:
        assert getattr(_config(stem), row.flag) == expected, f"{stem}.cfg --{row.flag}"


def test_the_document_names_each_authors_repository_at_the_commit_the_sources_cite():
    document = (REPO / "docs" / "paper_settings.md").read_text(encoding="utf-8")
    for repository, commit in AUTHORS_CODE.items():
        assert f"`{repository}` at `{commit}`" in document.replace("`\n  at", "` at")
