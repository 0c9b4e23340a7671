"""The documentation cannot go stale: the README's flag tables are the generated ones, its
commands name real files and flags, every public name has a docstring, and the API reference
builds without a warning."""

import dataclasses
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import warnings
from pathlib import Path

import pytest

import keras_privacy
from keras_privacy.config import ExperimentConfig

pytestmark = pytest.mark.backend_independent  # the README, docstrings and flag tables

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
KERAS_HOOKS = {"build", "call", "compute_output_shape", "get_config", "from_config", "train_step"}
"""Methods that override Keras' own: their contract is Keras' documentation."""
ABSL_FLAGS = {"flagfile", "helpfull", "backend"}
"""Flags of the scripts that are not `ExperimentConfig` fields."""


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
"""The README and the pages of docs/, whose commands are checked alike."""


def _bash_blocks() -> list[str]:
    return [
        block
        for page in DOCS
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.DOTALL)
    ]


def test_readme_flag_tables_are_the_generated_ones():
    flag_table = _load_script("flag_table")
    generated = flag_table.flag_tables()
    assert flag_table.readme_tables(README) == generated, (
        "README.md's flag tables differ from keras_privacy/config.py: run "
        "`python scripts/flag_table.py --write`"
    )
    for field in dataclasses.fields(ExperimentConfig):
        assert f"| `--{field.name}` |" in generated


def test_flag_table_escapes_pipes_and_shows_empty_defaults():
    flag_table = _load_script("flag_table")

    @dataclasses.dataclass
    class Tiny:
        mode: str = dataclasses.field(default="", metadata={"help": "a | b", "group": "odd"})

    assert flag_table.flag_tables(Tiny) == (
        "**odd**\n\n| Flag | Default | Meaning |\n| --- | --- | --- |\n"
        "| `--mode` | (empty) | a \\| b |\n"
    )


def test_documented_commands_name_existing_configs_and_known_flags():
    known = {field.name for field in dataclasses.fields(ExperimentConfig)} | ABSL_FLAGS
    blocks = _bash_blocks()
    assert blocks
    for block in blocks:
        for path in re.findall(r"configs/[\w.-]+\.cfg", block):
            assert (REPO / path).is_file(), f"the docs name {path}, which does not exist"
        # A command continued over several lines (a trailing backslash) is checked whole.
        for line in block.replace("\\\n", " ").splitlines():
            if script := re.search(r"\b(train|evaluate)\.py\b", line):
                # The flags after the script (a launcher such as srun has its own before it).
                for flag in re.findall(r"--(\w+)", line[script.end() :]):
                    assert flag in known, f"the docs use unknown flag --{flag}: {line}"


def test_quickstart_commands_are_marked():
    readme_commands = _load_script("readme_commands")
    assert "train.py --flagfile=configs/synthetic_v5.cfg" in readme_commands.quickstart_command(
        "main"
    )
    test_command = readme_commands.quickstart_command("test")
    assert "KERAS_BACKEND=tensorflow python -m pytest" in test_command
    assert "KERAS_BACKEND=jax python -m pytest" in test_command


def _public_modules():
    yield keras_privacy
    for info in pkgutil.walk_packages(keras_privacy.__path__, "keras_privacy."):
        if not any(part.startswith("_") and part != "__main__" for part in info.name.split(".")):
            yield importlib.import_module(info.name)


def _missing_docstrings(module) -> list[str]:
    missing = [] if (module.__doc__ or "").strip() else [module.__name__]
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if obj.__module__ != module.__name__:
            continue  # imported from elsewhere
        doc = obj.__doc__ or ""
        # A dataclass without a docstring gets its signature as one.
        if not doc.strip() or (inspect.isclass(obj) and doc.startswith(f"{name}(")):
            missing.append(f"{module.__name__}.{name}")
        if inspect.isclass(obj):
            for attribute, member in vars(obj).items():
                if attribute.startswith("_") or attribute in KERAS_HOOKS:
                    continue
                function = member.fget if isinstance(member, property) else member
                function = getattr(function, "__func__", function)
                # getdoc inherits the docstring of the method it overrides.
                if inspect.isfunction(function) and not inspect.getdoc(getattr(obj, attribute)):
                    missing.append(f"{module.__name__}.{name}.{attribute}")
    return missing


def test_every_public_module_function_and_class_has_a_docstring():
    missing = [name for module in _public_modules() for name in _missing_docstrings(module)]
    assert not missing, f"public names without a docstring: {missing}"


def test_the_docstring_check_finds_a_missing_one():
    module = type(keras_privacy)("keras_privacy_probe", "A module.")

    def documented():
        """Documented."""

    def bare():
        pass

    @dataclasses.dataclass
    class Plain:
        value: int = 0

    for obj in (documented, bare, Plain):
        obj.__module__ = module.__name__
        setattr(module, obj.__name__, obj)
    assert _missing_docstrings(module) == ["keras_privacy_probe.bare", "keras_privacy_probe.Plain"]


@pytest.mark.skipif(
    os.environ.get("KERAS_BACKEND") != "tensorflow", reason="built on the TensorFlow run only"
)
def test_api_reference_builds_without_warnings(tmp_path, monkeypatch):
    import pdoc  # a test dependency

    # pdoc blocks subprocesses during imports unless allowed (platform.uname() runs one).
    monkeypatch.setenv("PDOC_ALLOW_EXEC", "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc("keras_privacy", output_directory=tmp_path)
    problems = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, DeprecationWarning | PendingDeprecationWarning)
    ]
    assert not problems, problems
    pages = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.html")}
    for page in ("keras_privacy.html", "keras_privacy/config.html", "keras_privacy/export.html"):
        assert page in pages
    assert "ExperimentConfig" in (tmp_path / "keras_privacy" / "config.html").read_text()


def _documented_layout(fixtures_dir: Path) -> None:
    """In the current folder, the README's dataset folders with the real annotation files and
    one (empty) video or image per dataset."""
    datasets = Path("datasets")
    (datasets / "ucf101").mkdir(parents=True)
    (datasets / "ucf101" / "splits").symlink_to(fixtures_dir / "ucf101")
    for video in ("ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi", "YoYo/v_YoYo_g01_c01.avi"):
        (datasets / "ucf101" / "videos" / video).parent.mkdir(parents=True, exist_ok=True)
        (datasets / "ucf101" / "videos" / video).touch()
    (datasets / "hmdb51" / "videos" / "dive").mkdir(parents=True)
    (datasets / "hmdb51" / "splits").symlink_to(fixtures_dir / "hmdb51" / "splits")
    (datasets / "hmdb51" / "videos" / "dive" / "50_FIRST_DATES_dive_f_cm_np1_ri_bad_32.avi").touch()
    vispr = datasets / "vispr"
    (vispr / "annotations" / "train2017").mkdir(parents=True)
    (vispr / "images" / "train2017").mkdir(parents=True)
    for name in ("train2017.txt", "val2017.txt", "test2017.txt", "attributes.tsv"):
        (vispr / name).symlink_to(fixtures_dir / "vispr" / name)
    (vispr / "annotations" / "train2017" / "2017_10001018.json").write_text(
        '{"id": "2017_10001018", "image_path": "images/train2017/2017_10001018.jpg", '
        '"labels": ["a10_face_partial", "a16_race"]}'
    )
    (vispr / "images" / "train2017" / "2017_10001018.jpg").touch()
    (datasets / "pa_hmdb51" / "PrivacyAttributes").mkdir(parents=True)
    (datasets / "pa_hmdb51" / "PrivacyAttributes" / "dive.json").write_text(
        '{"50_FIRST_DATES_dive_f_cm_np1_ri_bad_32.avi": {"face": [[0, 10, 2]], "gender": '
        '[[0, 10, [1, 2]]], "skin_color": [[0, 10, 1]], "nudity": [[0, 10, 0]], '
        '"relationship": [[0, 10, 0]], "review": false, "note": ""}}'
    )
    (datasets / "vp_ucf101").mkdir()
    (datasets / "vp_ucf101" / "labels.csv").write_text(
        "video,face,skin_color,gender,nudity,relationship\nv_YoYo_g01_c01.avi,1,1,0,0,1\n"
    )


def test_documented_dataset_layouts_are_read(fixtures_dir, tmp_path, monkeypatch, capsys):
    import json
    import shlex

    from keras_privacy.data.__main__ import main

    monkeypatch.chdir(tmp_path)
    _documented_layout(fixtures_dir)
    prefix = "python -m keras_privacy.data stats "
    commands = [
        line for block in _bash_blocks() for line in block.splitlines() if line.startswith(prefix)
    ]
    found = {}
    for command in commands:
        capsys.readouterr()
        assert main([*shlex.split(command)[3:], "--json"]) == 0, command
        result = json.loads(capsys.readouterr().out)
        found[result["num_classes"] or result["num_attributes"]] = result["train"] + result["test"]
    # UCF101: one train and one test video; HMDB51: one train video; VISPR-1: one image.
    assert found == {101: 2, 51: 1, 7: 1}

    snippets = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    for name, privacy in (("read_pa_hmdb51", (1, 1, 0, 1, 0)), ("read_vp_labels", (1, 1, 0, 0, 1))):
        (snippet,) = [s for s in snippets if name in s]
        scope = {}
        exec(snippet, scope)
        assert [e.privacy for e in scope["test"].examples] == [privacy], name
        if name == "read_pa_hmdb51":  # frame 5 of the one video: as the video, every frame alike
            assert scope["frame_labels"] == privacy
    assert [e.privacy for e in scope["test_subset"].examples] == [(1, 0)]  # face, gender


@pytest.mark.parametrize("config", ["ucf101_vispr.cfg", "hmdb_vispr.cfg"])
def test_paper_configs_use_the_documented_folders(config):
    readme = README.read_text()
    paths = re.findall(
        r"^--(?:action|privacy)_(?:annotations|root)=(\S+)$",
        (REPO / "configs" / "base" / config).read_text(),
        flags=re.MULTILINE,
    )
    assert len(paths) == 4
    for path in paths:
        assert f"={path} " in readme or f"={path}\n" in readme or f"={path}`" in readme, path
