"""`python -m keras_privacy.data`: stats over the real fixtures, prepare, synthetic."""

import dataclasses
import json
import shutil
from unittest import mock

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
    assert len(result["subsets"]["train"]["missing_files"]) == 9537
    assert result["train"] == 0


def test_stats_names_the_first_missing_files(fixtures_dir, tmp_path, capsys):
    args = ["stats", "--dataset", "ucf101", "--annotations", str(fixtures_dir / "ucf101")]
    assert main([*args, "--root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "train: missing (9537):" in err
    assert "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi" in err
    assert "and 9532 more" in err


@pytest.mark.parametrize("command", ["stats", "prepare"])
def test_a_root_that_is_not_a_folder_is_named_before_any_work(fixtures_dir, tmp_path, command):
    args = [command, "--dataset", "hmdb51", "--annotations", str(fixtures_dir / "hmdb51/splits")]
    args += ["--root", str(tmp_path / "videoss")] + (
        ["--out", str(tmp_path / "cache")] if command == "prepare" else []
    )
    with pytest.raises(FileNotFoundError, match="videoss: --root is not a folder"):
        main([*args, "--verbose"])
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--short_side", "0", "argument --short_side: must be at least 1, got 0"),
        ("--short_side", "-4", "argument --short_side: must be at least 1, got -4"),
        ("--workers", "two", "argument --workers: not a whole number: 'two'"),
    ],
)
def test_prepare_refuses_a_nonsense_size_or_worker_count(tmp_path, capsys, option, value, message):
    args = ["prepare", "--dataset", "ucf101", "--annotations", "a", "--root", "r"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--out", str(tmp_path / "cache"), option, value])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()


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


def test_synthetic_refuses_a_folder_holding_other_data(tmp_path, capsys):
    datasets = tmp_path / "datasets"
    (datasets / "vispr").mkdir(parents=True)
    (datasets / "vispr" / "test2017.txt").write_text("annotations/test2017/2017_1.json\n")
    assert main(["synthetic", "--out", str(datasets)]) == 2
    assert capsys.readouterr().err == (
        f"error: --out={datasets} holds vispr, which the built-in benchmark did not write: "
        "name an empty or new folder for it\n"
    )
    assert [path.name for path in datasets.rglob("*")] == ["vispr", "test2017.txt"]
    assert (datasets / "vispr" / "test2017.txt").read_text() == "annotations/test2017/2017_1.json\n"


def test_synthetic_version_5_style_is_named(tmp_path, capsys):
    assert main(["synthetic", "--out", str(tmp_path), "--version", "5", "--style", "night"]) == 2
    assert "unknown synthetic style 'night'" in capsys.readouterr().err
    assert main(["synthetic", "--out", str(tmp_path), "--style", "dusk"]) == 2
    assert "styles are version 5's" in capsys.readouterr().err
    assert not (tmp_path / "VERSION").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["synthetic"],
        ["prepare", "--dataset", "ucf101", "--annotations", "{fixtures}/ucf101", "--root", "x"],
        ["arrays", "--flagfile", "configs/synthetic.cfg"],
    ],
)
def test_an_out_that_is_a_file_is_named_before_any_work(fixtures_dir, tmp_path, capsys, command):
    out = tmp_path / "cache.txt"
    out.write_text("kept")
    args = [part.format(fixtures=fixtures_dir) for part in command]
    assert main([*args, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"error: {out}: --out names a file; name a folder (made if missing)\n"
    )
    assert out.read_text() == "kept"


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


def test_the_summary_counts_and_names_the_images_cached_cut_short(benchmark, tmp_path, capsys):
    # Their warnings scroll by inside the progress line: the summary counts them after it.
    folder = _vispr_copy(benchmark, tmp_path)
    cut = sorted((folder / "images" / "train2017").iterdir())[0]
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    assert _prepare(folder, tmp_path / "cache") == 0
    out, err = capsys.readouterr()
    assert "train: 12 cached (1 cut short, as much as decodes), 0 failed, 0 missing" in out
    assert "val: 2 cached, 0 failed, 0 missing" in out
    reason = "a JPEG without its end marker, probably cut short"
    assert f"train: cut short (1):\n  {cut}: {reason}\n" in err
    cut_short = read_manifest(tmp_path / "cache" / "train")["cut_short"]
    assert cut_short == [{"path": str(cut), "reason": reason}]
    # A shard kept from a prepare that did not list them: the summary says so, not "none".
    for sidecar in (tmp_path / "cache" / "train").glob("shard-*.json"):
        info = json.loads(sidecar.read_text())
        sidecar.write_text(json.dumps({k: v for k, v in info.items() if k != "cut_short"}))
    assert _prepare(folder, tmp_path / "cache") == 0
    out, _ = capsys.readouterr()
    assert "train: 12 cached, 0 failed, 0 missing" in out
    assert (
        "train: 1 of 1 shards were kept from a prepare that did not record the files it cached "
        "cut short (prepare into a new --out to list them)"
    ) in out


def test_a_subset_whose_every_file_failed_is_an_error_naming_them(benchmark, tmp_path, capsys):
    folder = _vispr_copy(benchmark, tmp_path)
    broken = sorted((folder / "images" / "test2017").iterdir())
    for path in broken:
        path.write_bytes(b"not an image")
    assert _prepare(folder, tmp_path / "cache") == 1
    out, err = capsys.readouterr()
    assert "test: 0 cached, 8 failed, 0 missing" in out
    assert "train: 12 cached" in out and "val: 2 cached" in out  # the others are still written
    named = [line for line in err.splitlines() if ".jpg: unreadable image: not a JPEG" in line]
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


def test_prepare_over_a_damaged_shard_names_it_and_what_to_do(benchmark, tmp_path, capsys):
    # Its sidecar still matches, so the shard is kept: the error says how to have it rewritten,
    # in TensorFlow's words without its op and device names.
    folder = _vispr_copy(benchmark, tmp_path)
    assert _prepare(folder, tmp_path / "cache") == 0
    shard = next((tmp_path / "cache" / "train").glob("shard-*.tfrecord"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    shard.write_bytes(bytes(data))
    capsys.readouterr()
    assert _prepare(folder, tmp_path / "cache") == 1
    err = capsys.readouterr().err
    assert f"{shard.name}: unreadable after " in err and "corrupted record at" in err
    assert "remove each shard named and the .json beside it, and run this prepare again" in err
    assert "{{" not in err and "Op:" not in err


def test_stats_reads_the_split_asked_for(fixtures_dir, tmp_path, capsys):
    """`--split 2` reads trainlist02 / testlist02; a split whose lists are absent is named, and
    a split number that is not official is a usage error."""
    for name in ("classInd.txt", "trainlist01.txt", "testlist01.txt"):
        shutil.copy(fixtures_dir / "ucf101" / name, tmp_path / name)
    train = (tmp_path / "trainlist01.txt").read_text().splitlines()
    test = (tmp_path / "testlist01.txt").read_text().splitlines()
    (tmp_path / "trainlist02.txt").write_text("\n".join(train[-40:]) + "\n")
    (tmp_path / "testlist02.txt").write_text("\n".join(test[:7]) + "\n")
    args = ["stats", "--dataset", "ucf101", "--annotations", str(tmp_path)]
    assert main([*args, "--split", "2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (result["train"], result["test"]) == (40, 7)
    assert list(result["subsets"]["train"]["per_class"]) == ["YoYo"]
    assert list(result["subsets"]["test"]["per_class"]) == ["ApplyEyeMakeup"]
    assert main([*args, "--split", "3"]) == 2
    assert f"{tmp_path / 'trainlist03.txt'}: annotation file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--split", "4"])
    assert exit_info.value.code == 2
    assert "--split: invalid choice: 4" in capsys.readouterr().err


def test_prepare_writes_the_same_cache_on_any_number_of_workers(benchmark, tmp_path, capsys):
    """Decoding threads keep the records' order: one worker and three write the same shards."""
    args = ["--dataset", "ucf101", "--annotations", str(benchmark / "ucf_splits")]
    args += ["--root", str(benchmark / "videos"), "--short_side", "16"]
    shards = {}
    for workers in (1, 3):
        out = tmp_path / f"workers_{workers}"
        assert main(["prepare", *args, "--out", str(out), "--workers", str(workers)]) == 0
        assert "train: 12 cached, 0 failed, 0 missing" in capsys.readouterr().out
        shards[workers] = {
            path.relative_to(out): path.read_bytes() for path in sorted(out.rglob("*.tfrecord*"))
        }
    assert shards[1] and shards[1] == shards[3]


def test_arrays_start_from_a_finished_runs_models(benchmark, tmp_path, capsys):
    """`arrays --models_from RUN` saves the run's trained weights as the export's start (not
    freshly built ones), and names a run folder without them; the minimax takes its own steps
    per epoch, and an epoch of one batch (no alternating step) is refused as training does."""
    import keras
    import numpy as np

    from keras_privacy.training import MODEL_FILES

    flags = [f"--synthetic_dir={benchmark}", "--steps_per_epoch=1", "--frame_size=32"]
    flags += ["--minimax_steps_per_epoch=4"]
    flags += ["--image_size=16", "--clip_length=4", "--batch_size=4"]
    args = ["arrays", "--flagfile", "configs/synthetic.cfg", "--epochs", "1"]
    fresh, run, started = tmp_path / "fresh", tmp_path / "run", tmp_path / "started"
    assert main([*args, "--out", str(fresh), *flags]) == 0
    with np.load(fresh / "batches.npz") as arrays:
        assert arrays["clips"].shape[:3] == (1, 2, 4)  # epochs, minimax steps (4 / 2), batch
        assert arrays["clips"].dtype == np.uint8
        size = sum(arrays[key].nbytes for key in arrays.files)
    with mock.patch("keras_privacy.data.arrays.LARGEST_EXPORT_BYTES", size - 1):
        assert main([*args, "--out", str(tmp_path / "large"), *flags]) == 2
    assert f"the export's 2 batches would take {size / 2**30:.1f} GiB" in capsys.readouterr().err
    run.mkdir()
    rng = np.random.default_rng(0)
    trained = {}
    for name in MODEL_FILES.values():
        model = keras.saving.load_model(fresh / name, compile=False)
        model.set_weights(
            [w + rng.normal(0, 0.1, w.shape).astype(w.dtype) for w in model.get_weights()]
        )
        model.save(run / name)
        trained[name] = model.get_weights()
    assert main([*args, "--out", str(started), "--models_from", str(run), *flags]) == 0
    assert f"models from {run}" in capsys.readouterr().out
    for name, weights in trained.items():
        saved = keras.saving.load_model(started / name, compile=False).get_weights()
        for expected, actual in zip(weights, saved, strict=True):
            np.testing.assert_array_equal(actual, expected)
    other = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])  # other settings
    other.save(run / MODEL_FILES["action"])
    assert main([*args, "--out", str(tmp_path / "other"), "--models_from", str(run), *flags]) == 2
    assert (
        f"{run / MODEL_FILES['action']}: a model of other settings than this export's "
        "(2 weights against"
    ) in capsys.readouterr().err
    (run / MODEL_FILES["action"]).write_bytes(b"not a zip")
    assert main([*args, "--out", str(tmp_path / "other"), "--models_from", str(run), *flags]) == 2
    assert f"{run / MODEL_FILES['action']}: not a .keras archive (9 bytes" in (
        capsys.readouterr().err
    )
    (run / MODEL_FILES["action"]).unlink()
    assert main([*args, "--out", str(tmp_path / "broken"), "--models_from", str(run), *flags]) == 2
    assert f"{run / MODEL_FILES['action']}: no trained model to start from" in (
        capsys.readouterr().err
    )
    one_batch = [*args, "--out", str(tmp_path / "one"), *flags, "--minimax_steps_per_epoch=1"]
    assert main(one_batch) == 2
    assert "--minimax_steps_per_epoch (1) gives an epoch of no step" in capsys.readouterr().err
