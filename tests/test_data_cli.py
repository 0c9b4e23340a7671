"""`python -m keras_privacy.data`: stats over the real fixtures, prepare, synthetic."""

import dataclasses
import json
import shutil

import pytest

from keras_privacy.data import cache
from keras_privacy.data.__main__ import main
from keras_privacy.data.cache import read_image_cache, read_manifest, verify_cache

pytestmark = pytest.mark.backend_independent


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


def test_synthetic_version_5_style_is_named(tmp_path, capsys):
    assert main(["synthetic", "--out", str(tmp_path), "--version", "5", "--style", "night"]) == 2
    assert "unknown synthetic style 'night'" in capsys.readouterr().err
    assert main(["synthetic", "--out", str(tmp_path), "--style", "dusk"]) == 2
    assert "styles are version 5's" in capsys.readouterr().err
    assert not (tmp_path / "VERSION").exists()


def _vispr_copy(benchmark, tmp_path):
    """The tiny benchmark's VISPR folder (lists, JSONs, images), to break in place."""
    folder = tmp_path / "vispr"
    shutil.copytree(benchmark / "vispr", folder)
    return folder


def _prepare(folder, out) -> int:
    args = ["--dataset", "vispr", "--annotations", str(folder), "--root", str(folder)]
    return main(["prepare", *args, "--attributes", "all", "--out", str(out), "--short_side", "16"])


def test_an_image_whose_json_is_missing_is_named_and_left_out_of_the_cache(
    benchmark, tmp_path, capsys
):
    folder = _vispr_copy(benchmark, tmp_path)
    first = (folder / "train2017.txt").read_text().split()[0]
    (folder / first).unlink()
    assert _prepare(folder, tmp_path / "cache") == 0
    out, err = capsys.readouterr()
    assert "train: 11 cached, 0 failed, 1 missing" in out
    assert f"{folder / first}: annotation JSON not found, image skipped" in err
    report = verify_cache(tmp_path / "cache" / "train")
    assert report["ok"] and report["records"] == 11
    labels = len(read_manifest(tmp_path / "cache" / "train")["attribute_names"])
    assert all(len(r["privacy"]) == labels for r in read_image_cache(tmp_path / "cache" / "train"))


def test_a_subset_whose_every_file_failed_is_an_error_naming_them(benchmark, tmp_path, capsys):
    folder = _vispr_copy(benchmark, tmp_path)
    broken = sorted((folder / "images" / "test2017").iterdir())
    for path in broken:
        path.write_bytes(b"not an image")
    assert _prepare(folder, tmp_path / "cache") == 1
    out, err = capsys.readouterr()
    assert "test: 0 cached, 8 failed, 0 missing" in out
    assert "train: 12 cached" in out and "val: 2 cached" in out  # the others are still written
    named = [line for line in err.splitlines() if line.endswith(".jpg: unreadable image")]
    assert len(named) == 5 and all(line.strip().split(":")[0] in map(str, broken) for line in named)
    assert "test: failed (8):" in err
    assert "... and 3 more, listed in the manifest" in err
    assert f"error: {tmp_path / 'cache' / 'test'}: no example could be cached" in err


def test_a_cache_that_does_not_read_back_fails_prepare(benchmark, tmp_path, capsys, monkeypatch):
    # A record written with fewer privacy labels than the manifest's attributes (what a missing
    # annotation used to give) cannot be parsed: prepare verifies before reporting success.
    folder = _vispr_copy(benchmark, tmp_path)
    real_record = cache.image_record

    def short_labels(example, index, short_side, quality, transform=None):
        unlabelled = dataclasses.replace(example, privacy=())
        return real_record(unlabelled, index, short_side, quality, transform)

    monkeypatch.setattr(cache, "image_record", short_labels)
    monkeypatch.setattr(cache, "_with_label_check", lambda encode, count: encode)
    assert _prepare(folder, tmp_path / "cache") == 1
    err = capsys.readouterr().err
    assert f"error: {tmp_path / 'cache' / 'train'}: the cache does not read back" in err
