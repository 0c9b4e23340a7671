"""P-HVU label files (CSV and JSON) and the multi-label action metric."""

import dataclasses
import json

import cv2
import keras
import numpy as np
import pytest
import tiny_models
from sklearn.metrics import average_precision_score

from keras_privacy.config import ExperimentConfig
from keras_privacy.data import phvu, pipelines
from keras_privacy.data.cache import prepare_cache, read_video_cache
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.phvu import frame_images, frame_source, read_phvu
from keras_privacy.data.video import write_video
from keras_privacy.evaluation import metrics, protocol
from keras_privacy.evaluation.report import Report

ROWS = [
    ("a/v1.mp4", "train", ["ski", "jump"], ["ski_pole", "snow"], ["ski_slope"]),
    ("a/v2.mp4", "train", ["run"], [], ["track"]),
    ("b/v3.mp4", "test", ["jump"], ["snow"], []),
]


def write_csv(path, rows, header="video,split,actions,objects,scenes"):
    lines = [header] + [
        ",".join([v, s, "|".join(a), "|".join(o), "|".join(c)]) for v, s, a, o, c in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_json(path, rows):
    keys = ("video", "split", "actions", "objects", "scenes")
    path.write_text(json.dumps([dict(zip(keys, row)) for row in rows], indent=1))
    return path


@pytest.mark.parametrize("writer", [write_csv, write_json])
def test_multi_hot_labels(tmp_path, writer):
    path = writer(tmp_path / ("labels.csv" if writer is write_csv else "labels.json"), ROWS)
    splits = read_phvu(path)
    assert sorted(splits) == ["test", "train"]
    train, test = splits["train"], splits["test"]
    assert train.class_names == ["jump", "run", "ski"]
    assert train.attribute_names == [
        "object:ski_pole",
        "object:snow",
        "scene:ski_slope",
        "scene:track",
    ]
    assert [e.path for e in train.examples] == ["a/v1.mp4", "a/v2.mp4"]
    assert [e.actions for e in train.examples] == [(1, 0, 1), (0, 1, 0)]
    assert [e.privacy for e in train.examples] == [(1, 1, 1, 0), (0, 0, 0, 1)]
    assert all(e.label == -1 for e in train.examples)
    assert test.examples[0].actions == (1, 0, 0) and test.examples[0].privacy == (0, 1, 0, 0)

    scenes = read_phvu(path, privacy="scenes")["train"]
    assert scenes.attribute_names == ["ski_slope", "track"]
    assert [e.privacy for e in scenes.examples] == [(1, 0), (0, 1)]
    objects = read_phvu(path, privacy="objects", object_names=["snow", "ski_pole", "tree"])
    assert objects["test"].attribute_names == ["snow", "ski_pole", "tree"]
    assert objects["test"].examples[0].privacy == (1, 0, 0)


def test_root_lists_missing_files(tmp_path):
    (tmp_path / "videos" / "a").mkdir(parents=True)
    (tmp_path / "videos" / "a" / "v1.mp4").write_bytes(b"")
    splits = read_phvu(write_csv(tmp_path / "l.csv", ROWS), root=tmp_path / "videos")
    assert [e.path for e in splits["train"].examples] == [str(tmp_path / "videos/a/v1.mp4")]
    assert splits["train"].missing == [f"{tmp_path / 'videos/a/v2.mp4'}: file not found"]
    assert splits["test"].examples == [] and len(splits["test"].missing) == 1


@pytest.mark.parametrize(
    "rows, message",
    [
        ([ROWS[0], ("c.mp4", "holdout", ["run"], [], [])], r"l\.csv:3: unknown split 'holdout'"),
        ([ROWS[0], ("c.mp4", "train", [], ["snow"], [])], r"l\.csv:3: .*'c\.mp4' has no action"),
        ([ROWS[0], ROWS[0]], r"l\.csv:3: video 'a/v1\.mp4' listed twice \(first at .*l\.csv:2\)"),
        ([ROWS[1]], r"l\.csv: no video has any objects tag"),
    ],
)
def test_csv_errors_name_file_and_line(tmp_path, rows, message):
    with pytest.raises(DatasetFormatError, match=message):
        read_phvu(write_csv(tmp_path / "l.csv", rows), privacy="objects")


def test_malformed_files(tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("video,split,actions,objects,scenes\nv.mp4,train,run\n")
    with pytest.raises(DatasetFormatError, match=r"short\.csv:2: expected 5 fields, got 3"):
        read_phvu(short)
    header = tmp_path / "header.csv"
    header.write_text("video,split,actions\nv.mp4,train,run\n")
    with pytest.raises(DatasetFormatError, match=r"header\.csv:1: .*missing \['objects', 'sc"):
        read_phvu(header)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"video": "v.mp4", "split": "train", "actions": "run",\n')
    with pytest.raises(DatasetFormatError, match=r"bad\.json:2: invalid JSON"):
        read_phvu(bad_json)
    string_tags = write_json(tmp_path / "s.json", [("v.mp4", "train", "run", [], [])])
    with pytest.raises(DatasetFormatError, match=r"s\.json: record 0: actions must be a list"):
        read_phvu(string_tags)
    with pytest.raises(DatasetFormatError, match=r"l\.csv:2: objects tag\(s\) \['ski_pole'\]"):
        read_phvu(write_csv(tmp_path / "l.csv", ROWS), object_names=["snow"])
    with pytest.raises(ValueError, match="privacy must be one of"):
        read_phvu(write_csv(tmp_path / "l.csv", ROWS), privacy="people")


def test_video_action_cmap_matches_scikit_learn():
    rng = np.random.default_rng(0)
    videos, clips, classes = 12, 3, 5
    video_labels = (rng.random((videos, classes)) < 0.4).astype(int)
    video_labels[0, :] = 1  # every kept class has a positive ...
    video_labels[:, 3] = 0  # ... and class 3 has none: skipped and named
    probs = rng.random((videos, clips, classes))
    order = rng.permutation(videos * clips)  # clips of a video need not be adjacent
    video_index = np.repeat(np.arange(videos) * 7 + 2, clips)[order]
    clip_labels = np.repeat(video_labels, clips, axis=0)[order]
    clip_probs = probs.reshape(-1, classes)[order]
    names = ["run", "jump", "ski", "swim", "walk"]

    result = metrics.video_action_cmap(clip_probs, video_index, clip_labels, names)

    mean = probs.mean(axis=1)
    expected = {
        names[c]: average_precision_score(video_labels[:, c], mean[:, c])
        for c in range(classes)
        if c != 3
    }
    assert result.skipped == ("swim",)
    assert result.per_attribute == pytest.approx(expected, abs=1e-12)
    assert result.value == pytest.approx(np.mean(list(expected.values())), abs=1e-12)


def test_video_action_cmap_rejects_bad_input():
    labels = np.array([[1, 0], [1, 0], [0, 1]])
    with pytest.raises(ValueError, match="logits"):
        metrics.video_action_cmap(np.array([[2.0, -1.0]] * 3), [0, 0, 1], labels)
    with pytest.raises(ValueError, match=r"clips of videos \[0\] carry different labels"):
        metrics.video_action_cmap(np.full((3, 2), 0.5), [0, 0, 1], labels[[0, 2, 2]])
    with pytest.raises(ValueError, match="no attribute has a positive"):
        metrics.video_action_cmap(np.full((3, 2), 0.5), [0, 0, 1], np.zeros((3, 2)))


def write_videos(root, rows=ROWS):
    for video, *_ in rows:
        (root / video).parent.mkdir(exist_ok=True)
        frames = np.full((8, 16, 16, 3), 40, np.uint8)
        write_video(root / video, frames, fps=25, codec="ffv1")


def test_multi_hot_actions_reach_the_pipelines(tmp_path):
    write_videos(tmp_path)
    train = read_phvu(write_csv(tmp_path / "l.csv", ROWS), root=tmp_path)["train"]
    cache = prepare_cache(train, "video", tmp_path / "cache", 16)
    for source in (train, cache):
        batch = next(
            pipelines.action_train_dataset(source, 2, 2, 1, 8, epochs=1).as_numpy_iterator()
        )
        assert sorted(map(tuple, batch["actions"].tolist())) == [(0, 1, 0), (1, 0, 1)]
        videos = list(pipelines.action_eval_dataset(source, 2, 2, 1, 8).as_numpy_iterator())
        assert [v["actions"].tolist() for v in videos] == [[1, 0, 1], [0, 1, 0]]
    stored = [record["actions"].numpy().tolist() for record in read_video_cache(cache)]
    assert stored == [[1, 0, 1], [0, 1, 0]]


def test_multilabel_target_action_model_reports_cmap(tmp_path):
    rows = [
        (f"v{i}.mp4", "train", [["ski"], ["run", "jump"]][i % 2], [], ["slope"]) for i in range(4)
    ]
    rows += [("t0.mp4", "test", ["ski"], [], []), ("t1.mp4", "test", ["ski", "jump"], [], [])]
    write_videos(tmp_path, rows)
    splits = read_phvu(write_csv(tmp_path / "l.csv", rows), root=tmp_path, privacy="scenes")
    config = ExperimentConfig(
        **tiny_models.TINY_RUN, action_multilabel=True, eval_action_epochs=1, eval_clips=2
    )
    model = protocol.train_action_target(config, splits["train"], 3, None)
    assert isinstance(model.loss, keras.losses.BinaryCrossentropy)
    result = protocol.test_action_target(config, model, splits["test"])
    assert result["action_metric"] == "cmap" and result["action_test_videos"] == 2
    assert result["action_skipped"] == ["run"]  # no test video runs
    assert sorted(result["action_ap"]) == ["jump", "ski"]
    assert result["action_ap"]["ski"] == 1.0  # every test video skis: AP 1 whatever the scores
    assert result["action_cmap"] == pytest.approx(np.mean(list(result["action_ap"].values())))
    low, high = result["action_cmap_interval"]  # bootstrap over the test videos
    assert 0.0 <= low <= high <= 1.0

    single = Split([Example(str(tmp_path / f"v{i}.mp4"), label=0) for i in range(4)], ["a"])
    with pytest.raises(ValueError, match="--action_multilabel needs multi-hot action labels"):
        protocol.train_action_target(config, single, 1, None)


def test_report_names_the_action_metric(tmp_path):
    report = Report(tmp_path)
    report.add("raw", 0.5, 0.4, 0.3)
    assert "Action top-1 (%)" in report.markdown()
    report.add("blur", 0.25, 0.2, 0.1, extra={"action_metric": "cmap"})
    assert "Action cMAP (%)" in report.markdown() and "top-1" not in report.markdown()


def test_frame_images_carry_the_privacy_labels(tmp_path):
    rows = ROWS[:2]
    for number, (video, *_) in enumerate(rows):
        (tmp_path / video).parent.mkdir(exist_ok=True)
        frames = [np.full((16, 16, 3), 10 * t + 100 * number, np.uint8) for t in range(8)]
        write_video(tmp_path / video, frames, fps=25, codec="ffv1")
    rows = rows + [("a/v3.mp4", "train", ["run"], [], ["track"])]
    (tmp_path / "a" / "v3.mp4").write_bytes(b"not a video")
    train = read_phvu(write_csv(tmp_path / "l.csv", rows), root=tmp_path, privacy="scenes")["train"]
    images = frame_images(train, tmp_path / "frames", frames_per_video=2)
    assert images.attribute_names == ["ski_slope", "track"] and images.class_names == []
    assert [e.privacy for e in images.examples] == [(1, 0), (1, 0), (0, 1), (0, 1)]
    assert len(images.missing) == 1 and "v3.mp4" in images.missing[0]
    means = [cv2.imread(e.path)[..., 0].mean() for e in images.examples]
    assert means == pytest.approx([20, 60, 120, 160], abs=2)  # frames 2 and 6 of 8
    sources = [frame_source(e.path) for e in images.examples]
    assert sources[0] == sources[1] != sources[2] == sources[3]
    assert frame_source(str(tmp_path / "a" / "image_1.png")) == str(tmp_path / "a" / "image_1.png")
    # Another frame count into the same folder writes frames of its own, at its positions.
    four = frame_images(train, tmp_path / "frames", frames_per_video=4)
    means = [cv2.imread(e.path)[..., 0].mean() for e in four.examples[:4]]
    assert means == pytest.approx([10, 30, 50, 70], abs=2)  # frames 1, 3, 5 and 7 of 8
    # 0: every frame of each video (VITA's PA-HMDB51 test), labelled frame by frame.
    every = frame_images(train, tmp_path / "frames", 0, lambda path, frame: (frame, 0))
    assert [e.privacy for e in every.examples] == [(t, 0) for t in range(8)] * 2
    means = [cv2.imread(e.path)[..., 0].mean() for e in every.examples[:8]]
    assert means == pytest.approx([10 * t for t in range(8)], abs=2)
    # Only the frames `frames_of` gives (PA-HMDB51's labelled ones); a video with none is missing.
    first = train.examples[0].path
    labelled = frame_images(
        train,
        tmp_path / "frames",
        2,
        lambda path, frame: (frame, 0),
        lambda path, num_frames: [3, 4, 5, 6] if path == first else [],
    )
    assert [e.privacy for e in labelled.examples] == [(4, 0), (6, 0)]
    # Fewer labelled frames than asked for: each of them once, not one twice.
    few = frame_images(train, tmp_path / "frames", 3, None, lambda path, n: [5, 6])
    assert [e.path.rsplit(".frame", 1)[1] for e in few.examples] == ["5.png", "6.png"] * 2
    means = [cv2.imread(e.path)[..., 0].mean() for e in labelled.examples]
    assert means == pytest.approx([40, 60], abs=2)
    assert any(m.endswith("v2.mp4: none of its 8 frames is labelled") for m in labelled.missing)
    with pytest.raises(ValueError, match="0 .every frame. or more, got -1"):
        frame_images(train, tmp_path / "frames", -1)


def test_frame_labels_of_a_video_decoding_fewer_frames_than_counted_are_warned_of(
    tmp_path, monkeypatch, caplog
):
    # A damaged packet mid-file: the frames after it decode one index early, so frame-level
    # labels may fall a frame off; the video's own labels (no frame_labels) cannot.
    (tmp_path / "a").mkdir()
    write_video(tmp_path / "a" / "v1.mp4", [np.zeros((16, 16, 3), np.uint8)] * 8, 25, "ffv1")
    split = Split([Example(str(tmp_path / "a" / "v1.mp4"), privacy=(1,))], attribute_names=["x"])
    counted = phvu.probe_video

    def one_more(path):
        info = counted(path)
        return dataclasses.replace(info, num_frames=info.num_frames + 1)

    monkeypatch.setattr(phvu, "probe_video", one_more)
    with caplog.at_level("WARNING"):
        frame_images(split, tmp_path / "video_labels", 2)
        assert not caplog.messages
        frame_images(split, tmp_path / "frame_labels", 2, lambda path, frame: (frame % 2,))
    assert caplog.messages == [
        f"{tmp_path / 'a' / 'v1.mp4'}: 8 frames decoded where 9 were counted (a damaged file?): "
        "its frame labels may fall on frames up to 1 away"
    ]
