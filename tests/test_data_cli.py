"""`python -m keras_privacy.data`: stats over the real fixtures, prepare, synthetic."""

import json

import pytest

from keras_privacy.data.__main__ import main
from keras_privacy.data.cache import verify_cache


@pytest.mark.parametrize(
    "dataset, folder, train, test, classes",
    [
        ("ucf101", "ucf101", 9537, 3783, 101),
        ("hmdb51", "hmdb51/splits", 3570, 1530, 51),
        ("vispr", "vispr", 10000, 8000, 0),
    ],
)
def test_stats_json_over_the_real_fixtures(
    fixtures_dir, capsys, dataset, folder, train, test, classes
):
    assert (
        main(["stats", "--dataset", dataset, "--annotations", str(fixtures_dir / folder), "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["train"], result["test"], result["num_classes"]) == (train, test, classes)


def test_stats_counts_missing_files_with_a_root(fixtures_dir, tmp_path, capsys):
    args = ["stats", "--dataset", "ucf101", "--annotations", str(fixtures_dir / "ucf101")]
    assert main([*args, "--root", str(tmp_path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["subsets"]["train"]["missing"] == 9537
    assert result["train"] == 0


def test_bad_annotations_are_named(tmp_path, capsys):
    assert main(["stats", "--dataset", "hmdb51", "--annotations", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_synthetic_then_prepare(tmp_path, capsys):
    out = tmp_path / "synthetic"
    assert main(["synthetic", "--out", str(out)]) == 0
    args = ["--dataset", "vispr", "--annotations", str(out / "vispr"), "--root", str(out / "vispr")]
    assert (
        main(
            [
                "prepare",
                *args,
                "--attributes",
                "all",
                "--out",
                str(tmp_path / "cache"),
                "--short_side",
                "32",
            ]
        )
        == 0
    )
    assert verify_cache(tmp_path / "cache" / "train")["ok"]
    assert "train: 600 cached" in capsys.readouterr().out
