"""The evaluation protocol end to end on a tiny synthetic benchmark with tiny models."""

import dataclasses
import json
import re
import shutil
from pathlib import Path

import cv2
import keras
import matplotlib.image
import numpy as np
import pytest
import tiny_models
from tiny_models import tiny_config

from keras_privacy.config import SettingError
from keras_privacy.data import phvu, pipelines
from keras_privacy.data.augment import evaluation_clip
from keras_privacy.data.cache import encode_jpeg, prepare_cache, read_manifest, read_video_cache
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.tensorflow_runtime import tf
from keras_privacy.data.video import read_video, write_video
from keras_privacy.evaluation import (
    anonymizations,
    datasets,
    detection,
    metrics,
    protocol,
    targets,
)
from keras_privacy.evaluation.report import Report
from keras_privacy.models import registry
from keras_privacy.models.unet import apply_per_frame


def saved_anonymizer(tmp_path) -> str:
    path = tmp_path / "anonymizer.keras"
    registry.build_anonymizer("unet_tiny").save(path)
    return str(path)


# Backend-independent: the protocol's bookkeeping (test_target_schedule trains on JAX).
@pytest.mark.backend_independent
def test_evaluate_learned_and_baselines_then_resume(benchmark, tmp_path, monkeypatch):
    config = tiny_config(
        benchmark,
        tmp_path,
        eval_methods="learned,raw,downsample_4x",
        anonymizer_path=saved_anonymizer(tmp_path),
    )
    data = protocol.evaluation_data(config)
    out = tmp_path / "evaluation"
    report = protocol.evaluate(config, data, protocol.methods_of(config), out)

    results = json.loads((out / "report.json").read_text())["methods"]
    # The learned anonymizer is reported under the name of the method that trained it.
    assert list(results) == ["spact", "raw", "downsample_4x"]
    for result in results.values():
        assert 0.0 <= result["action_top1"] <= 1.0
        assert 0.0 <= result["privacy_cmap"] <= 1.0
        assert 0.0 <= result["extra"]["raw_attacker_cmap"] <= 1.0
        assert result["extra"]["action_test_videos"] == len(data.action_test)
        assert result["extra"]["privacy_test_units"] == len(data.privacy_test)
        # Each headline metric has its 95 % bootstrap interval (the raw attacker's in extra).
        assert set(result["intervals"]) == {"action_top1", "privacy_cmap", "privacy_f1"}
        for low, high in [
            *result["intervals"].values(),
            result["extra"]["raw_attacker_cmap_interval"],
        ]:
            assert 0.0 <= low <= high <= 1.0
    # On raw data the fresh privacy model is the raw-trained attacker itself; the others test
    # it on their own anonymized images, which changes its score.
    assert results["raw"]["privacy_cmap"] == results["raw"]["extra"]["raw_attacker_cmap"]
    attacker = {name: result["extra"]["raw_attacker_cmap"] for name, result in results.items()}
    assert len(set(attacker.values())) == len(attacker), attacker
    for name in ("report.md", "tradeoff.png", "frames.png", "raw_attacker_resnet_tiny.keras"):
        assert (out / name).is_file(), name
    assert "downsample_4x" in report.markdown()
    # How many examples each split used, and where it ran, are kept with the results.
    evaluation = json.loads((out / "report.json").read_text())["evaluation"]
    assert evaluation["examples"]["action_test"] == {
        "used": len(data.action_test),
        "missing": 0,
        "failed": 0,
        "cut_short": 0,
    }
    assert evaluation["environment"]["backend"] == keras.backend.backend()
    assert f"Last run on: Keras backend {keras.backend.backend()};" in report.markdown()

    # Down-sampling acts on the model's input: no file is rewritten for it.
    assert not (out / "anonymized" / "downsample_4x").exists()

    # A rerun resumes: every method is in the report, so no target model is trained again.
    def no_training(*args, **kwargs):
        raise AssertionError("a finished method was trained again")

    monkeypatch.setattr(protocol, "train_action_target", no_training)
    monkeypatch.setattr(protocol, "train_privacy_target", no_training)
    again = protocol.evaluate(config, data, protocol.methods_of(config), out)
    assert again.methods == report.methods
    # The same anonymizer saved again (a resumed run with nothing left to train saves it
    # again; Keras writes the date into the file) is the same row: not evaluated again.
    path = Path(config.anonymizer_path)
    before = path.read_bytes()
    keras.saving.load_model(path).save(path)
    assert path.read_bytes() != before
    protocol.evaluate(config, data, protocol.methods_of(config), out)

    # A retrained anonymizer (another file under the same name) is evaluated again.
    monkeypatch.undo()
    keras.utils.set_random_seed(1)
    saved_anonymizer(tmp_path)
    retrained = protocol.evaluate(config, data, protocol.methods_of(config), out)
    first, second = (r.get("spact").extra["anonymizer_sha256"] for r in (report, retrained))
    assert first != second
    assert retrained.get("raw") == report.get("raw")

    # An evaluation of one method into the same report keeps every method's row of frames.png
    # (one 200-pixel row per method of the report, raw first).
    only_raw = tiny_config(benchmark, tmp_path, eval_methods="raw")
    protocol.evaluate(only_raw, data, protocol.methods_of(only_raw), out)
    assert sorted(path.stem for path in (out / "frames").glob("*.npy")) == sorted(results)
    height = matplotlib.image.imread(out / "frames.png").shape[0]
    assert height == 200 * len(results)

    # The raw-trained attacker is kept with its settings: one trained otherwise is refused.
    attacker_json = out / "raw_attacker_resnet_tiny.json"
    assert json.loads(attacker_json.read_text())["settings"]["epochs"] == config.eval_privacy_epochs
    longer = tiny_config(
        benchmark, tmp_path, eval_methods="raw", eval_privacy_epochs=config.eval_privacy_epochs + 1
    )
    # Rows measured with other target-model settings do not share the report.
    with pytest.raises(
        ValueError,
        match=r"another evaluation \(its target_models\.privacy\.epochs differ\): choose another",
    ):
        protocol.evaluate(longer, data, protocol.methods_of(longer), out)
    # Nor the attacker, even where the report holds no row yet.
    kept_report = (out / "report.json").read_bytes()
    (out / "report.json").unlink()
    with pytest.raises(ValueError, match=r"trained with other settings \(its epochs differ\)"):
        protocol.evaluate(longer, data, protocol.methods_of(longer), out)
    (out / "report.json").write_bytes(kept_report)
    # One kept before settings were recorded is reused as it is.
    attacker_json.unlink()
    monkeypatch.setattr(protocol, "train_privacy_target", no_training)
    protocol.evaluate(only_raw, data, protocol.methods_of(only_raw), out)


def test_a_box_file_lacking_a_file_of_the_evaluation_is_refused_before_any_work(
    benchmark, tmp_path
):
    boxes = json.loads((benchmark / "person_boxes.json").read_text())
    lacking = sorted(boxes)[0]
    del boxes[lacking]
    path = tmp_path / "boxes.json"
    path.write_text(json.dumps(boxes))
    config = tiny_config(benchmark, tmp_path, eval_methods="raw,blacken", eval_boxes=str(path))
    data, out = protocol.evaluation_data(config), tmp_path / "evaluation"
    with pytest.raises(ValueError, match=re.escape(f"{path} (--eval_boxes): no boxes for 1 of")):
        protocol.evaluate(config, data, protocol.methods_of(config), out)
    assert not out.exists()


@pytest.mark.backend_independent  # the protocol's bookkeeping
def test_interrupted_evaluation_keeps_finished_methods(benchmark, tmp_path, monkeypatch):
    boxes = str(benchmark / "person_boxes.json")
    config = tiny_config(
        benchmark, tmp_path, eval_methods="raw,blacken", eval_boxes=boxes, privacy_image_side=44
    )
    data = protocol.evaluation_data(config)
    out = tmp_path / "evaluation"
    real_cached_data = protocol.cached_data

    def interrupt_on_baseline(data, directory, video_side, image_side, baseline=None, **kwargs):
        if baseline is not None:
            raise KeyboardInterrupt
        return real_cached_data(data, directory, video_side, image_side, baseline, **kwargs)

    monkeypatch.setattr(protocol, "cached_data", interrupt_on_baseline)
    with pytest.raises(KeyboardInterrupt):
        protocol.evaluate(config, data, protocol.methods_of(config), out)
    assert list(json.loads((out / "report.json").read_text())["methods"]) == ["raw"]
    assert (out / "tradeoff.png").is_file()  # drawn with the finished row

    caches = []

    def recorded_cached_data(*args, **kwargs):
        caches.append(real_cached_data(*args, **kwargs))
        return caches[-1]

    monkeypatch.setattr(protocol, "cached_data", recorded_cached_data)
    trained = []
    real_train = protocol.train_action_target

    def counting_train(config, train, *args):
        trained.append(str(train))
        return real_train(config, train, *args)

    monkeypatch.setattr(protocol, "train_action_target", counting_train)
    report = protocol.evaluate(config, data, protocol.methods_of(config), out)
    assert report.methods == ["raw", "blacken"]
    assert len(trained) == 1 and "blacken" in trained[0]
    # The people baseline is cached straight from the source files, at the short side the
    # target models read, with the true boxes blackened; no anonymized video is written.
    manifest = read_manifest(out / "cache" / "blacken" / "action_test")
    assert manifest["num_records"] == len(data.action_test)
    assert manifest["transform"].startswith(f"blacken at {config.frame_size}, boxes ")
    assert not (out / "anonymized").exists()
    record = next(iter(read_video_cache(out / "cache" / "blacken" / "action_test")))
    first = data.action_test.examples[int(record["index"])]
    frames = np.stack([decoded_jpeg(jpeg) for jpeg in record["frames"].numpy()])
    assert min(frames.shape[1:3]) == config.frame_size
    method = protocol.methods_of(config)[1]
    expected = method.clip_fn(Path(first.path).name, config.frame_size, "video")(
        read_video(first.path)
    )
    stored = np.stack([decoded_jpeg(encode_jpeg(frame, 90)) for frame in expected])
    np.testing.assert_array_equal(frames, stored)
    assert (frames == 0).all(axis=-1).mean() > 0.01  # the boxes are blackened
    # The images are cached at --privacy_image_side, the raw ones and the baseline's alike.
    images = read_manifest(out / "cache" / "blacken" / "privacy_test")
    assert images["short_side"] == 44 and images["transform"].startswith("blacken at 44, boxes ")
    assert read_manifest(caches[0].privacy_train)["short_side"] == 44

    # Another seed's report reads the same cache (nothing in it depends on the seed): its shards
    # are written once.
    shards = [path for path in (out / "cache").rglob("*") if path.name != "manifest.json"]
    kept = {path: path.stat().st_mtime_ns for path in shards if path.is_file()}
    other_seed = tmp_path / "seed_2"
    protocol.evaluate(config, data, protocol.methods_of(config), other_seed, out / "cache")
    assert Report(other_seed).methods == ["raw", "blacken"]
    assert not (other_seed / "cache").exists()
    assert kept == {path: path.stat().st_mtime_ns for path in kept}


def test_files_lost_by_the_evaluation_are_named_counted_and_reported(
    benchmark, fixtures_dir, tmp_path, caplog
):
    """A test video missing, another that does not decode and a third cut short: the
    evaluation goes on with the others (the third with the frames that decode), warns naming
    each split's first loss and manifest, and report.json / report.md say how many examples
    each split used, lost and used cut short."""
    copy = tmp_path / "benchmark"
    shutil.copytree(benchmark, copy)
    config = tiny_config(copy, tmp_path)
    tested = [Path(e.path) for e in protocol.evaluation_data(config).action_test.examples]
    tested[0].unlink()
    tested[1].write_bytes(b"not a video")
    whole = (fixtures_dir / "videos" / "test.avi").read_bytes()
    tested[2].write_bytes(whole[: len(whole) // 2])
    data = protocol.evaluation_data(config)
    source = datasets.cached_data(data, tmp_path / "cache" / "source", 32, 16)
    with caplog.at_level("WARNING"):
        counts = datasets.examples_used(source)
    expected = {"used": len(tested) - 2, "missing": 1, "failed": 1, "cut_short": 1}
    assert counts["action_test"] == expected
    assert counts["action_train"]["missing"] == counts["action_train"]["failed"] == 0
    assert counts["action_train"]["cut_short"] == 0
    assert counts["privacy_test"]["used"] == len(data.privacy_test)
    warning = next(r.getMessage() for r in caplog.records if "action_test" in r.getMessage())
    assert "2 listed files are not evaluated (1 missing, 1 failed to decode)" in warning
    assert f"e.g. {tested[0]}: file not found" in warning
    assert str(tmp_path / "cache" / "source" / "action_test" / "manifest.json") in warning
    cut = next(r.getMessage() for r in caplog.records if "seem cut short" in r.getMessage())
    assert "action_test: 1 files seem cut short and are evaluated with the frames that " in cut
    assert f"e.g. {tested[2]}: the container declares 164 frames" in cut

    report = Report(tmp_path / "evaluation")
    report.set_evaluation({**datasets.evaluation_record(config, data), "examples": counts})
    note = (tmp_path / "evaluation" / "report.md").read_text()
    used = len(tested) - 2
    assert f"Listed files not evaluated: action_test {used} used, 1 missing, 1 failed" in note
    assert "Files that seem cut short, evaluated with the frames that decode: action_test 1" in (
        note
    )
    saved = json.loads((tmp_path / "evaluation" / "report.json").read_text())
    assert saved["evaluation"]["examples"] == counts
    # The strip of frames shows the first test video that decodes, not the first listed.
    assert data.action_test.examples[0].path == str(tested[1])
    clip = protocol._example_frames(config, data, [])["raw"]
    first_good = next(e.path for e in data.action_test.examples if Path(e.path) != tested[1])
    decoded = read_video(first_good, max_frames=len(clip))
    np.testing.assert_array_equal(clip, evaluation_clip(decoded, config.image_size).numpy())
    # Every row in the one view the target models see: a model's and a file baseline's too.
    methods = [anonymizations.baseline_anonymization(n) for n in ("downsample_2x", "blur_strong")]
    shown = protocol._example_frames(config, data, methods)
    assert {name: rows.shape for name, rows in shown.items()} == dict.fromkeys(
        ("raw", "downsample_2x", "blur_strong"),
        (len(clip), config.image_size, config.image_size, 3),
    )
    # A file baseline's row is its anonymization of the whole video, as cached, cut to the
    # strip: its boxes may come from any frame (here, the left half only in a longer clip).
    assert len(read_video(first_good)) > len(clip)

    class LeftHalfOfLongClips:
        description = "the left half of clips longer than the strip"

        def detect_clip(self, frames):
            half = frames.shape[2] // 2
            box = [0, 0, half, frames.shape[1]] if len(frames) > len(clip) else [half, 0, 999, 999]
            return [np.array([box], np.int32)] * len(frames)

    blacken = anonymizations.Anonymization(
        "blacken", baseline="blacken", detector=LeftHalfOfLongClips()
    )
    row = protocol._example_frames(config, data, [blacken])["blacken"]
    middle = config.image_size // 2
    assert row[:, :, : middle - 1].max() == 0 and row[:, :, middle + 1 :].min() > 0
    # A split left with no example is refused before any training, naming its manifest.
    for example in data.privacy_test.examples:
        Path(example.path).unlink()
    emptied = datasets.cached_data(data, tmp_path / "cache" / "emptied", 32, 16)
    manifest = tmp_path / "cache" / "emptied" / "privacy_test" / "manifest.json"
    # (Removed after the lists were read, the files fail to be read as they are cached.)
    lost = len(data.privacy_test)
    message = f"privacy_test: no example to evaluate (0 listed files missing, {lost} failed"
    with pytest.raises(ValueError, match=re.escape(message) + f".*{re.escape(str(manifest))}"):
        datasets.examples_used(emptied)


def test_the_frame_strips_view_is_the_action_test_crop(benchmark, tmp_path):
    """The strip's rows are cut as the action test clips are: the config's crop fraction, and
    the frame's aspect kept under the penalty configs' augmentation."""
    config = tiny_config(
        benchmark, tmp_path, eval_action_crop=0.5, supervised_augmentation="penalty"
    )
    assert config.action_augmentation().crop_keeps_aspect
    data = protocol.evaluation_data(config)
    frames = protocol._example_frames(config, data, [])
    decoded = read_video(data.action_test.examples[0].path, max_frames=len(frames["raw"]))
    expected = evaluation_clip(decoded, config.image_size, 0.5, keeps_aspect=True).numpy()
    np.testing.assert_array_equal(frames["raw"], expected)


def decoded_jpeg(jpeg: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)[..., ::-1]


def test_with_anonymizer_applies_the_frozen_anonymizer_frame_by_frame():
    anonymizer = tiny_models.anonymizer()
    target = registry.build_action_model(
        "factorized_tiny", 3, input_shape=(3, 8, 8, 3), widths=(4,)
    )
    clips = np.random.default_rng(0).random((2, 3, 8, 8, 3), dtype="float32")
    expected = target(apply_per_frame(anonymizer, clips))
    chained = protocol.with_anonymizer(target, anonymizer, clips=True)
    np.testing.assert_allclose(chained(clips), expected, atol=1e-5)
    assert not anonymizer.trainable
    assert len(chained.trainable_variables) == len(target.trainable_variables)


def test_methods_are_checked(benchmark, tmp_path):
    with pytest.raises(ValueError, match="unknown method 'sharpen'"):
        protocol.methods_of(tiny_config(benchmark, tmp_path, eval_methods="raw,sharpen"))
    missing = tiny_config(
        benchmark,
        tmp_path,
        eval_methods="learned",
        anonymizer_path=str(tmp_path / "none.keras"),
    )
    with pytest.raises(FileNotFoundError, match="none.keras"):
        protocol.methods_of(missing)
    loaded = anonymizations.load_anonymizer(saved_anonymizer(tmp_path))
    assert isinstance(loaded.model, keras.Model) and not loaded.model.trainable
    with pytest.raises(ValueError, match="names a method twice"):
        protocol.methods_of(tiny_config(benchmark, tmp_path, eval_methods="raw,raw"))
    with pytest.raises(ValueError, match="neither learned nor a baseline"):
        protocol.methods_of(tiny_config(benchmark, tmp_path, eval_methods="raw=x.keras"))


def test_saved_anonymizers_of_several_methods_share_one_report(benchmark, tmp_path):
    path = saved_anonymizer(tmp_path)
    config = tiny_config(
        benchmark,
        tmp_path,
        method="vita",
        eval_methods=f"learned,meta={path},raw",
        anonymizer_path=path,
    )
    methods = protocol.methods_of(config)
    assert [m.name for m in methods] == ["vita", "meta", "raw"]
    frames = np.random.default_rng(0).random((1, 16, 16, 3), dtype="float32")
    saved = keras.saving.load_model(path, compile=False)
    for method in methods[:2]:
        np.testing.assert_allclose(
            np.asarray(method.model(frames)), np.asarray(saved(frames)), atol=1e-6
        )
    assert methods[2].model is None
    cropped = tiny_config(
        benchmark, tmp_path, eval_methods="learned", anonymizer_path=path, adversary_crop=0.25
    )
    assert [m.name for m in protocol.methods_of(cropped)] == ["spact (crop 0.25)"]


@pytest.mark.parametrize(
    "settings, view",
    [
        ({}, (1.0, False)),  # SPAct's: the centred square of the short side
        ({"eval_action_crop": 0.8, "supervised_augmentation": "penalty"}, (0.8, True)),
    ],
)
def test_test_clips_are_cut_as_the_crop_setting_says(
    benchmark, tmp_path, monkeypatch, settings, view
):
    config = tiny_config(benchmark, tmp_path, **settings)
    views, real_dataset = [], pipelines.action_eval_dataset

    def recording_dataset(*args, **kwargs):
        dataset = real_dataset(*args, **kwargs)
        views.append((args[5], kwargs["keeps_aspect"]))
        return dataset

    monkeypatch.setattr(pipelines, "action_eval_dataset", recording_dataset)
    shape = (config.clip_length, config.image_size, config.image_size, 3)
    model = registry.build_action_model(config.action_model, 6, input_shape=shape)
    test = protocol.evaluation_data(config).action_test
    result = protocol.test_action_target(config, model, test)
    assert views == [view] and result["action_test_videos"] == len(test)


def _colour_model(
    input_shape, outputs: int, seed: int, weights: np.ndarray | None = None
) -> tuple[keras.Model, np.ndarray]:
    """A model whose logits are a fixed linear function of its input's mean colour, and that
    function's (4, outputs) kernel-over-bias matrix (`weights`, else drawn from `seed`)."""
    inputs = keras.Input(input_shape)
    pooled = keras.layers.Lambda(
        lambda x: keras.ops.mean(x, axis=tuple(range(1, len(input_shape))))
    )
    dense = keras.layers.Dense(outputs)
    model = keras.Model(inputs, dense(pooled(inputs)))
    if weights is None:
        weights = np.random.default_rng(seed).normal(0, 20, (4, outputs))
    weights = weights.astype("float32")
    dense.set_weights([weights[:3], weights[3]])
    return model, weights


def _softmax(logits: np.ndarray) -> np.ndarray:
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    return probs / probs.sum(axis=1, keepdims=True)


def _colour_top1(videos: list[dict], weights: np.ndarray) -> tuple[float, float]:
    """The colour model's video-level top-1 (the arg-max of each video's mean softmax over its
    clips) and clip-level top-1 on the evaluation's test videos."""
    video_correct, clip_correct = [], []
    for video in videos:
        colours = video["clips"].mean(axis=(1, 2, 3)).astype("float64")
        probs = _softmax(colours @ weights[:3] + weights[3])
        video_correct.append(probs.mean(axis=0).argmax() == video["label"])
        clip_correct.extend(probs.argmax(axis=1) == video["label"])
    return float(np.mean(video_correct)), float(np.mean(clip_correct))


def _video_and_clip_weights(videos: list[dict], classes: int) -> np.ndarray:
    """Colour-model weights (standardised over the clips' mean colours) under which the
    video-level and the clip-level top-1 differ, so that a test tells one from the other."""
    colours = np.concatenate([video["clips"].mean(axis=(1, 2, 3)) for video in videos])
    mean, std = colours.mean(axis=0).astype("float64"), colours.std(axis=0).astype("float64")
    for seed in range(1000):
        kernel = np.random.default_rng(seed).normal(0, 3, (3, classes)) / std[:, None]
        weights = np.vstack([kernel, -mean @ kernel])
        by_video, by_clip = _colour_top1(videos, weights)
        if by_video != by_clip:
            return weights
    raise AssertionError("no weights tell video-level from clip-level top-1")


def test_the_targets_scores_are_the_papers_metrics_of_their_outputs(benchmark, tmp_path):
    from sklearn.metrics import average_precision_score, f1_score

    config = tiny_config(benchmark, tmp_path)
    data = protocol.evaluation_data(config)
    affine = lambda x, w: x @ w[:3] + w[3]  # noqa: E731

    # Action: each video's clips through the model, softmax, their mean, its arg-max; the
    # clip-level top-1 apart, under weights where the two differ.
    shape = (config.clip_length, config.image_size, config.image_size, 3)
    videos = list(
        pipelines.action_eval_dataset(
            data.action_test, config.eval_clips, config.clip_length, config.clip_stride,
            config.image_size, config.eval_action_crop,
        ).as_numpy_iterator()
    )  # fmt: skip
    model, weights = _colour_model(shape, 6, 0, _video_and_clip_weights(videos, 6))
    result = protocol.test_action_target(config, model, data.action_test, intervals=False)
    by_video, by_clip = _colour_top1(videos, weights)
    assert result["action_test_videos"] == len(videos) == len(data.action_test)
    assert result["action_top1"] == pytest.approx(by_video)
    assert result["action_clip_top1"] == pytest.approx(by_clip)
    assert by_video != by_clip

    # Privacy: cMAP and F1 at probability 0.5 over the attributes with a positive test image.
    names = data.attribute_names
    model, weights = _colour_model((config.image_size, config.image_size, 3), len(names), 2)
    result = protocol.test_privacy_target(config, model, data.privacy_test, names, intervals=False)
    images = pipelines.privacy_labelled_dataset(
        data.privacy_test, 4, config.image_size, training=False
    ).as_numpy_iterator()
    images = list(images)
    colours = np.concatenate([b["images"].mean(axis=(1, 2)) for b in images]).astype("float64")
    labels = np.concatenate([b["privacy"] for b in images])
    probs = 1 / (1 + np.exp(-affine(colours, weights)))
    kept = [a for a in range(len(names)) if labels[:, a].any()]
    assert result["privacy_skipped"] == [names[a] for a in range(len(names)) if a not in kept]
    assert result["privacy_cmap"] == pytest.approx(
        np.mean([average_precision_score(labels[:, a], probs[:, a]) for a in kept])
    )
    assert result["privacy_f1"] == pytest.approx(
        np.mean([f1_score(labels[:, a], probs[:, a] >= 0.5, zero_division=0.0) for a in kept])
    )
    # The authors' F1 (0.5 on the logits), with intervals: the threshold reaches both.
    authors = dataclasses.replace(config, eval_f1_threshold=0.6225, eval_bootstrap=50)
    result = protocol.test_privacy_target(authors, model, data.privacy_test, names)
    f1 = np.mean([f1_score(labels[:, a], probs[:, a] >= 0.6225, zero_division=0.0) for a in kept])
    assert result["privacy_f1"] == pytest.approx(f1)
    expected = metrics.privacy_f1_interval(labels, probs, 0.6225, 50, config.seed)
    assert result["privacy_f1_interval"] == pytest.approx(list(expected))
    assert targets.target_settings(authors)["privacy"]["f1_threshold"] == 0.6225

    # An overconfident attacker (every logit near 1000, where a float64 sigmoid is 1.0 for
    # all): cMAP still ranks its logits, as the authors' average_precision_score does.
    dense = model.layers[-1]
    dense.set_weights([weights[:3] * 10, weights[3] * 10 + 1000])
    result = protocol.test_privacy_target(config, model, data.privacy_test, names, intervals=False)
    logits = np.concatenate([model.predict_on_batch(b["images"]) for b in images]).astype("f8")
    assert (1 / (1 + np.exp(-logits)) == 1.0).all()
    ranked = np.mean([average_precision_score(labels[:, a], logits[:, a]) for a in kept])
    tied = np.mean([labels[:, a].mean() for a in kept])  # AP when every score ties
    assert result["privacy_cmap"] == pytest.approx(ranked) and ranked != pytest.approx(tied)
    assert "f1_threshold" not in targets.target_settings(config)["privacy"]


def test_a_blur_is_cached_at_the_scale_of_each_splits_source(benchmark, tmp_path, monkeypatch):
    # SPAct supp. C.6 sizes its blurs on 240-pixel video frames and 512-pixel VISPR images:
    # PA-HMDB51's test images and both of VP's privacy splits are video frames, blurred at a
    # video's scale.
    boxes = str(benchmark / "person_boxes.json")
    config = tiny_config(benchmark, tmp_path, eval_methods="blur_weak", eval_boxes=boxes)
    (method,) = protocol.methods_of(config)
    keys, sides = {}, {}

    def record(split, kind, directory, short_side, transform, prepared=()):
        keys[directory.name] = (kind, transform.key)
        sides[directory.name] = short_side
        return split

    monkeypatch.setattr(datasets, "prepare_cache", record)
    splits = datasets.EvaluationData(Split([]), Split([]), Split([]), Split([]))
    for frame_splits, train_scale, test_scale in (
        ((), 512, 512),
        (("privacy_test",), 512, 240),
        (("privacy_train", "privacy_test"), 240, 240),
    ):
        datasets.cached_data(splits, tmp_path, 128, 192, method, frame_splits)
        assert sides == {
            "action_train": 128,
            "action_test": 128,
            "privacy_train": 192,
            "privacy_test": 192,
        }
        assert keys["action_train"] == ("video", keys["action_train"][1])
        assert "blur_weak at 128, blurred at 240" in keys["action_test"][1]
        assert f"blurred at {train_scale}," in keys["privacy_train"][1]
        kind, key = keys["privacy_test"]
        assert kind == "image" and f"blurred at {test_scale}," in key


class _BoxPerFrameIndex:
    """A detector giving frame t of a clip the box of column t, whatever its pixels: a frame's
    boxes then tell which clip it was detected in. Counts the clips it is given."""

    description = "column per frame"

    def __init__(self):
        self.clips = 0

    def detect_clip(self, clip):
        self.clips += 1
        return [np.array([[t, 0, t + 1, clip.shape[1]]], np.int32) for t in range(len(clip))]


def test_frames_of_videos_take_the_boxes_of_their_frame_in_the_whole_video(tmp_path, monkeypatch):
    # The action cache detects people on whole videos (the union of 4 keyframes by default):
    # the privacy test frames of the same videos (PA-HMDB51, VP) take those boxes, so that
    # f'_B is scored on the pixels f'_T sees, not on a detection of the frame alone.
    video = tmp_path / "v_0.avi"
    write_video(
        video,
        np.arange(200, 209, dtype=np.uint8)[:, None, None, None] + np.zeros((16, 24, 3), np.uint8),
    )
    frames = phvu.frame_images(Split([Example(str(video), 0, (1,))]), tmp_path / "frames", 2)
    assert [index for _, index in frames.frame_sources.values()] == [2, 6]
    detector = _BoxPerFrameIndex()
    method = anonymizations.Anonymization("blacken", baseline="blacken", detector=detector)
    by_video = method.frame_transform(None, "video", frames.frame_sources)
    alone = method.frame_transform(None, "video")
    assert by_video.key.endswith("those of the frame in its video") and by_video.key != alone.key
    for example, (_, index) in zip(frames.examples, frames.frame_sources.values()):
        image = cv2.imread(example.path)[None, ..., ::-1]
        dark = by_video(example.path, image)[0].max(axis=(0, 2)) == 0
        assert np.flatnonzero(dark).tolist() == [index]
        assert np.flatnonzero(alone(example.path, image)[0].max(axis=(0, 2)) == 0).tolist() == [0]
    assert detector.clips == 1 + 2  # the video once for its two frames; each frame alone
    reads = []
    monkeypatch.setattr(anonymizations, "read_video", lambda path: reads.append(path))
    sharing = anonymizations.Anonymization("blur_strong", baseline="blur_strong")
    sharing.detector = method.detector  # as the baselines of one evaluation share it
    for example in frames.examples:
        image = cv2.imread(example.path)[None, ..., ::-1]
        sharing.frame_transform(None, "video", frames.frame_sources)(example.path, image)
    assert detector.clips == 3 and not reads  # the video neither read nor detected again

    # The evaluation's cache gives the frame splits their videos, and no other split.
    keys = {}

    def record(split, kind, directory, short_side, transform, prepared=()):
        keys[directory.name] = transform.key
        return split

    data = datasets.EvaluationData(Split([]), Split([]), Split([]), frames)
    monkeypatch.setattr(datasets, "prepare_cache", record)
    datasets.cached_data(data, tmp_path, 16, 16, method, ("privacy_test",))
    assert [name for name, key in keys.items() if "in its video" in key] == ["privacy_test"]


def test_the_people_baselines_of_an_evaluation_detect_each_file_once(
    benchmark, tmp_path, monkeypatch
):
    """blur_weak, blur_strong and blacken share one detector, which remembers the boxes of each
    clip it saw: a file is detected once for the three, not once each, and each baseline
    fills the boxes a detector of its own finds. The face baselines share another."""
    made = []

    def counting_detector():
        made.append(_BoxPerFrameIndex())
        return made[-1]

    monkeypatch.setattr(anonymizations, "PersonOrFaceDetector", counting_detector)
    names = "raw,blur_weak,blur_strong,blacken,face_blur,face_blacken"
    methods = anonymizations.methods_of(tiny_config(benchmark, tmp_path, eval_methods=names))
    people, faces = methods[1:4], methods[4:]
    assert len({id(method.detector) for method in people}) == 1
    assert len({id(method.detector) for method in faces}) == 1
    assert people[0].detector is not faces[0].detector
    rng = np.random.default_rng(0)
    clips = [rng.integers(1, 255, (5, 8, 12, 3), np.uint8) for _ in range(2)]
    for method in people:
        alone = anonymizations.Anonymization(method.name, baseline=method.name)
        alone.detector = _BoxPerFrameIndex()
        for clip in clips:
            shared = method.frame_transform(None, "video")("v.avi", clip)
            np.testing.assert_array_equal(
                shared, alone.frame_transform(None, "video")("v.avi", clip)
            )
    assert len(made) == 1 and made[0].clips == len(clips)


def test_a_shared_detector_keeps_each_clips_boxes_as_found():
    """The boxes a shared detector remembers come back as the detector gave them, read-only:
    per frame, one union for every frame, or none for a clip of no frame; face baselines of
    two thresholds share no detector."""
    per_frame = [np.array([[1, 2, 3, 4]], np.int32), np.zeros((0, 4), np.int32)]
    union = np.array([[0, 0, 5, 5], [1, 1, 2, 2]], np.int32)
    for found in (per_frame, [union] * 3, []):
        boxes = anonymizations._unpacked(*anonymizations._packed(found))
        assert len(boxes) == len(found)
        for got, expected in zip(boxes, found):
            np.testing.assert_array_equal(got, expected)
            assert got.dtype == np.int32
            with pytest.raises(ValueError, match="read-only"):
                got[:] = 0  # shared by every baseline: a change would reach the others
    detectors = {}
    low = anonymizations.baseline_anonymization("face_blur", None, 0.3, detectors)
    high = anonymizations.baseline_anonymization("face_blacken", None, 0.9, detectors)
    assert low.detector is not high.detector


def test_a_kept_attacker_of_other_attributes_or_of_damaged_files_is_refused(benchmark, tmp_path):
    """The raw-trained attacker kept in the report folder predicts the attributes it was
    trained on: resumed with others, it would be scored against labels it never learned.
    A damaged record or model is named with what to do, not read as another error."""
    config = tiny_config(benchmark, tmp_path)
    out = tmp_path / "evaluation"
    out.mkdir()
    path, record = out / "raw_attacker_resnet_tiny.keras", out / "raw_attacker_resnet_tiny.json"
    settings = {
        "privacy_dataset": {"name": "synthetic"},
        "attribute_names": ["s1_warm_actor", "s2_striped_actor"],
        **targets.privacy_target_settings(config),
    }
    record.write_text(json.dumps({"settings": settings}))
    tiny_models.budget_model(num_attributes=2).save(path)

    def kept_attacker(names):
        return protocol._raw_attacker(
            config, None, names, out, "resnet_tiny", {"name": "synthetic", "root": "moved"}
        )

    model, kept = kept_attacker(["s1_warm_actor", "s2_striped_actor"])
    assert model.output_shape == (None, 2) and kept == {}
    with pytest.raises(ValueError, match=r"other settings \(its attribute_names differ\)"):
        kept_attacker(["s4_outdoor_scene", "s5_object"])
    saved = path.read_bytes()
    for cut in (100, 0):  # a save cut short, an empty file
        path.write_bytes(saved[:cut])
        message = f"^{re.escape(str(path))}: not a .keras archive \\({cut} bytes: empty, cut short"
        with pytest.raises(ValueError, match=message):
            kept_attacker(["s1_warm_actor", "s2_striped_actor"])
    record.write_text('{"settings": {')
    with pytest.raises(ValueError, match=f"^{re.escape(str(record))}: not the record of ") as error:
        kept_attacker(["s1_warm_actor", "s2_striped_actor"])
    # Both files go: the model alone, without its record, would be reused unchecked.
    remedy = f"remove {path.name} and {record.name} to train it again"
    assert str(error.value).endswith(remedy)


def test_a_kept_attacker_is_checked_against_its_own_weight_file(benchmark, tmp_path):
    """With a list of target weight files, each raw-trained attacker records the file its own
    model starts from: reordering the list refuses it, changing another model's entry does
    not."""
    first, second = tmp_path / "a.keras", tmp_path / "b.keras"
    tiny_models.budget_model(num_attributes=2).save(first)
    tiny_models.budget_model(num_attributes=2).save(second)
    names = ["s1_warm_actor", "s2_striped_actor"]
    out = tmp_path / "evaluation"
    out.mkdir()

    def config(models, weights):
        return tiny_config(
            benchmark, tmp_path, eval_privacy_model=models, eval_privacy_weights=weights
        )

    def kept_attacker(run):
        return protocol._raw_attacker(run, None, names, out, "resnet_tiny", {"name": "s"})

    trained = config("resnet_tiny,resnet_tiny_small_images", f"{first},{second}")
    settings = {
        "privacy_dataset": {"name": "s"},
        "attribute_names": names,
        **targets.privacy_target_settings(trained),
        "weights": str(first),
    }
    (out / "raw_attacker_resnet_tiny.json").write_text(json.dumps({"settings": settings}))
    tiny_models.budget_model(num_attributes=2).save(out / "raw_attacker_resnet_tiny.keras")
    kept_attacker(trained)
    kept_attacker(config("resnet_tiny,resnet_tiny_small_images", f"{first},"))
    with pytest.raises(ValueError, match=r"other settings \(its weights differ\)"):
        kept_attacker(config("resnet_tiny_small_images,resnet_tiny", f"{first},{second}"))


def test_a_damaged_shard_of_the_evaluations_cache_is_named_with_what_to_do(benchmark, tmp_path):
    """TensorFlow's DataLossError names no file: the shard is found and named, with the
    remedy of a cache evaluate.py writes itself."""
    config = tiny_config(benchmark, tmp_path, eval_methods="raw")
    data = protocol.evaluation_data(config)
    out = tmp_path / "evaluation"
    cache = out / "cache" / "source"
    datasets.cached_data(data, cache, config.frame_size, config.image_side())
    (shard,) = (cache / "action_train").glob("*.tfrecord")
    damaged = bytearray(shard.read_bytes())
    damaged[len(damaged) // 2 : len(damaged) // 2 + 64] = bytes(64)  # a bad disk
    shard.write_bytes(bytes(damaged))
    with pytest.raises(DatasetFormatError) as raised:
        protocol.evaluate(config, data, protocol.methods_of(config), out)
    assert re.fullmatch(
        rf"{re.escape(str(shard))}: the cache's shard does not read back \(corrupted record at "
        r"\d+\); remove it and its .json beside it, then run evaluate.py again: it writes that "
        "shard again and keeps the others",
        str(raised.value),
    )


@pytest.mark.backend_independent  # the protocol's bookkeeping
def test_the_evaluation_reads_a_training_cache_of_the_same_files_instead_of_a_copy(
    benchmark, tmp_path
):
    """The built-in benchmark's training cache of the action videos (`--action_cache`'s and
    the folders beside it alike) holds the evaluation's action_train split at its settings:
    read there, not copied; a damaged shard of it is named with the command that wrote it:
    train.py for the benchmark's, `prepare` for one the flags give."""
    copy = tmp_path / "benchmark"
    shutil.copytree(benchmark, copy, ignore=shutil.ignore_patterns("cache"))
    config = tiny_config(copy, tmp_path, eval_methods="raw")
    data = protocol.evaluation_data(config)
    trained = copy / "cache" / f"video_train_{config.frame_size}"
    prepare_cache(data.action_train, "video", trained, config.frame_size)
    prepared = datasets.training_caches(config)
    assert prepared == [trained]
    own = tmp_path / "evaluation" / "cache"
    source = datasets.cached_data(
        data, own / "source", config.frame_size, config.image_side(), prepared=prepared
    )
    assert source.action_train == trained
    assert sorted(path.name for path in (own / "source").iterdir()) == [
        "action_test",
        "privacy_test",
        "privacy_train",
    ]
    (shard,) = trained.glob("*.tfrecord")
    shard.write_bytes(shard.read_bytes()[:-64])  # a partial copy
    given = dataclasses.replace(config, synthetic_dir=str(tmp_path / "elsewhere"))
    for settings, remedy in ((config, "run train.py again"), (given, "run `python -m")):
        with pytest.raises(DatasetFormatError, match=rf"then {re.escape(remedy)}"):
            with protocol._damaged_shards_named(source, own, settings):
                raise tf.errors.DataLossError(None, None, "truncated record")


def test_a_baseline_row_of_other_boxes_is_stale(benchmark, tmp_path):
    """A resumed report keeps a people baseline's row only where its boxes come from the same
    box file (by digest) or the same detector."""
    from_file = anonymizations.baseline_anonymization(
        "blacken", detection.BoxesFromFile(benchmark / "person_boxes.json")
    )
    detected = anonymizations.baseline_anonymization("blacken")
    row = {"detector": from_file.detector_description(), "boxes": from_file.boxes_key()}
    assert protocol._stale_row(row, from_file) is None
    assert protocol._stale_row(row, detected) == f"of other boxes ({row['detector']})"
    assert protocol._stale_row({}, detected) == "of other boxes (unrecorded)"
    assert protocol._stale_row({"boxes": detected.boxes_key()}, detected) is None
    learned = anonymizations.Anonymization("spact", model_sha256="abc")
    assert protocol._stale_row({"anonymizer_sha256": "abd"}, learned) == (
        "of another anonymizer file"
    )


def test_a_damaged_strip_of_frames_is_named_and_left_out(benchmark, tmp_path, caplog):
    config = tiny_config(benchmark, tmp_path)
    data = protocol.evaluation_data(config)
    report = Report(tmp_path / "evaluation")
    report.add("spact", 0.5, 0.5, 0.5)
    damaged = tmp_path / "evaluation" / "frames" / "spact.npy"
    damaged.parent.mkdir(parents=True)
    np.save(damaged, np.zeros((4, 8, 8, 3), np.uint8))
    damaged.write_bytes(damaged.read_bytes()[:-20])
    empty = damaged.with_name("vita.npy")  # np.load raises EOFError on an empty file
    empty.write_bytes(b"")
    report.add("vita", 0.5, 0.5, 0.5)
    with caplog.at_level("WARNING"):
        frames = protocol._frames_of_report(config, data, [], report)
    assert list(frames) == ["raw"]
    for path in (damaged, empty):
        assert f"{path}: unreadable (" in caplog.text, path
    assert "left out of frames.png" in caplog.text
    assert sorted(p.name for p in damaged.parent.iterdir()) == ["raw.npy", "spact.npy", "vita.npy"]


def test_privacy_test_labels_without_a_positive_or_a_negative_are_named_before_training(caplog):
    def data(labels):
        examples = [Example(f"{i}.jpg", privacy=tuple(row)) for i, row in enumerate(labels)]
        split = Split(examples, attribute_names=["face", "gender"])
        return datasets.EvaluationData(split, split, split, split)

    with caplog.at_level("WARNING"):
        datasets.require_test_positives(data([[0, 1], [0, 0]]))
    assert "privacy_test: no example is positive for face; cMAP and F1 leave it out" in caplog.text
    assert "every example is positive" not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        datasets.require_test_positives(data([[0, 1], [1, 1]]))
    assert caplog.messages == [
        "privacy_test: every example is positive for gender: its AP is 1 whatever the "
        "anonymizer, in every method's cMAP alike (choose other attributes to leave it out)"
    ]
    message = "privacy_test: none of its 2 examples is positive for face, gender: cMAP and F1"
    with pytest.raises(ValueError, match=re.escape(message)):
        datasets.require_test_positives(data([[0, 0], [0, 0]]))


def test_test_classes_without_a_training_video_are_named_before_any_training(caplog):
    classes = ["dive", "golf", "run"]
    train = Split([Example("a.avi", 0), Example("b.avi", 2)], class_names=classes)
    test = Split(
        [Example("c.avi", 1), Example("d.avi", 1), Example("e.avi", 0)], class_names=classes
    )
    images = Split([Example("0.jpg", privacy=(1,))], attribute_names=["face"])
    with caplog.at_level("WARNING"):
        datasets.warn_of_classes_never_trained(
            datasets.EvaluationData(train, train, images, images)
        )
        assert not caplog.messages
        datasets.warn_of_classes_never_trained(datasets.EvaluationData(train, test, images, images))
    assert caplog.messages == [
        "action_test: 2 test videos of 1 class without a training video (golf): every method's "
        "action model counts them as wrong"
    ]


def test_a_learned_anonymizer_is_evaluated_with_the_settings_it_was_trained_with(
    benchmark, tmp_path
):
    """The run's config.json beside the anonymizer: a setting that would give its row another
    method's name, its frames another size, or that trained it on other datasets (any saved
    anonymizer's) is refused naming both values; settings that name nothing for the method
    (SPAct's views, for VITA) and a moved dataset folder may differ."""
    config = tiny_config(benchmark, tmp_path, anonymizer_path=saved_anonymizer(tmp_path))
    recorded = tmp_path / "config.json"
    anonymizations.require_the_training_settings(config, config.anonymizer_path)  # none kept
    trained = dataclasses.asdict(config) | {"method": "vita", "image_size": 32}
    recorded.write_text(json.dumps(trained))
    with pytest.raises(SettingError) as raised:
        protocol.methods_of(config)
    assert str(raised.value) == (
        f"{config.anonymizer_path} was trained with --method=vita (now spact), "
        f"--image_size=32 (now {config.image_size}) ({recorded}): evaluate it with the "
        "settings it was trained with"
    )
    vita = dataclasses.replace(config, method="vita")
    recorded.write_text(json.dumps(dataclasses.asdict(vita) | {"contrastive_views": "both"}))
    anonymizations.require_the_training_settings(vita, config.anonymizer_path)
    with pytest.raises(SettingError, match="--contrastive_views=both \\(now images\\)"):
        anonymizations.require_the_training_settings(config, config.anonymizer_path)
    # Trained on other datasets (learned or NAME=PATH): the evaluation's "same" would not be
    # theirs; a moved folder is the same dataset.
    recorded.write_text(json.dumps(dataclasses.asdict(config) | {"action_dataset": "hmdb51"}))
    other = dataclasses.replace(config, eval_methods=f"other={config.anonymizer_path}")
    for evaluation in (config, other):
        with pytest.raises(SettingError) as raised:
            protocol.methods_of(evaluation)
        assert str(raised.value) == (
            f"{config.anonymizer_path} was trained with --action_dataset=hmdb51 (now "
            f"synthetic) ({recorded}): evaluate it with the datasets it was trained on, apart "
            "from anonymizers trained on others"
        )
    moved = dataclasses.asdict(config) | {"action_root": str(tmp_path / "moved")}
    recorded.write_text(json.dumps(moved))
    anonymizations.require_the_training_datasets(config, config.anonymizer_path)
    recorded.write_text("{")
    with pytest.raises(SettingError, match=f"^{re.escape(str(recorded))} is not valid JSON"):
        anonymizations.require_the_training_settings(config, config.anonymizer_path)


def test_the_run_settings_the_evaluation_ignores_are_named(benchmark, tmp_path):
    config = tiny_config(benchmark, tmp_path)
    assert protocol.ignored_run_settings(config) is None
    mixed = dataclasses.replace(
        config, distribution="data_parallel", mixed_precision="mixed_bfloat16"
    )
    assert protocol.ignored_run_settings(mixed) == (
        "--distribution=data_parallel, --mixed_precision=mixed_bfloat16 ignored: evaluate.py "
        "trains its target models in float32 on one device, in this process alone (start it "
        "once, not once per process)"
    )


def test_evaluation_settings_the_rest_leaves_unread_are_named(benchmark, tmp_path):
    config = tiny_config(benchmark, tmp_path)
    assert protocol.settings_without_effect(config) is None
    unread = dataclasses.replace(
        config, face_threshold=0.5, eval_lr_patience=2, eval_privacy_frames=3
    )
    assert protocol.settings_without_effect(unread) == (
        "evaluation settings without effect here: --face_threshold=0.5: --eval_methods has no "
        "face baseline (face_blacken, face_blur, face_pixelate); --eval_lr_patience=2: no "
        "target model's learning rate drops on a plateau (every drop is 1); "
        "--eval_privacy_frames=3: f'_B is tested on synthetic's images, not on frames of videos"
    )
    # Where the rest reads them, they are not named.
    read = dataclasses.replace(
        unread, eval_methods="learned,face_blur", eval_privacy_lr_drop=5, eval_privacy_frames=5
    )
    assert protocol.settings_without_effect(read) is None
    cosine = dataclasses.replace(config, eval_action_schedule="cosine", eval_action_lr_drop=5)
    assert protocol.settings_without_effect(cosine) == (
        "evaluation settings without effect here: --eval_action_lr_drop=5: "
        "--eval_action_schedule=cosine has no plateau"
    )
    baselines = dataclasses.replace(config, eval_methods="raw", anonymizer_path="a.keras")
    assert protocol.settings_without_effect(baselines) == (
        "evaluation settings without effect here: --anonymizer_path=a.keras: --eval_methods "
        "has no learned, the method it names the file of"
    )
    learned = dataclasses.replace(baselines, eval_methods="raw, learned")
    assert protocol.settings_without_effect(learned) is None


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parents[1] / "configs").glob("*.cfg")), ids=lambda p: p.stem
)
def test_the_shipped_configs_set_no_evaluation_setting_without_effect(path):
    from keras_privacy.flags import parse_config

    assert protocol.settings_without_effect(parse_config([f"--flagfile={path}"])) is None


def test_seed_runs_trained_with_another_privacy_weight_are_not_summarised(benchmark, tmp_path):
    runs = tiny_config(benchmark, tmp_path, seeds=3).seed_runs()
    for run, weight in zip(runs, (1.0, 1.0, 0.5)):
        Path(run.run_dir).mkdir(parents=True)
        recorded = dataclasses.asdict(run) | {"privacy_weight": weight}
        (Path(run.run_dir) / "config.json").write_text(json.dumps(recorded))
    anonymizations.require_one_training_setting(runs[:2])
    with pytest.raises(SettingError) as raised:
        anonymizations.require_one_training_setting(runs)
    folders = [run.run_dir for run in runs]
    assert str(raised.value) == (
        f"the seed runs were trained with different --privacy_weight ({folders[0]}: 1.0, "
        f"{folders[1]}: 1.0, {folders[2]}: 0.5): their summary would average both as one; "
        "train every seed with one value, or evaluate them apart"
    )
    (Path(runs[2].run_dir) / "config.json").write_text('{"privacy_weight": ')
    with pytest.raises(SettingError) as raised:
        anonymizations.require_one_training_setting(runs)
    assert str(raised.value).startswith(f"{folders[2]}/config.json is not valid JSON (")
    assert str(raised.value).endswith(
        "the settings this seed was trained with are unknown; restore it, or remove it to leave "
        "the seed out of the comparison"
    )


def test_frames_of_one_video_are_one_bootstrap_unit(benchmark, tmp_path):
    """PA-HMDB51's and VP's test frames (`frame_images` names) are resampled by video: the
    intervals are the bootstrap over whole videos, not over frames."""
    from keras_privacy.data.phvu import FRAME_MARK

    config = dataclasses.replace(tiny_config(benchmark, tmp_path), eval_bootstrap=200)
    rng = np.random.default_rng(0)
    examples = []
    for video in range(4):
        colour = rng.integers(0, 256, 3)
        for t in range(3):
            image = np.clip(colour + rng.integers(-40, 41, (16, 16, 3)), 0, 255).astype(np.uint8)
            path = tmp_path / f"{video:06d}_clip{video}{FRAME_MARK}{t}.png"
            assert cv2.imwrite(str(path), image[..., ::-1])
            examples.append(Example(str(path), privacy=(t % 2, (video + t) % 2)))
    names = ["a", "b"]
    test = Split(examples, attribute_names=names)
    model, weights = _colour_model((config.image_size, config.image_size, 3), 2, 3)
    result = protocol.test_privacy_target(config, model, test, names)
    assert result["privacy_test_units"] == 4
    batches = list(
        pipelines.privacy_labelled_dataset(
            test, 4, config.image_size, training=False
        ).as_numpy_iterator()
    )
    colours = np.concatenate([b["images"].mean(axis=(1, 2)) for b in batches]).astype("float64")
    labels = np.concatenate([b["privacy"] for b in batches])
    logits = colours @ weights[:3] + weights[3]
    groups = np.repeat(np.arange(4), 3)
    by_video = metrics.cmap_interval(labels, logits, 200, config.seed, groups)
    assert result["privacy_cmap_interval"] == pytest.approx(list(by_video))
    assert list(by_video) != list(metrics.cmap_interval(labels, logits, 200, config.seed))
