"""Behaviour tests of the tf.data pipelines (keras_privacy.data.pipelines).

Tiny videos are written in tmp_path (FFV1, near lossless) with frames that name themselves:
frame t of video v is green 10 + 20 t and blue 40 + 45 v everywhere (red is a horizontal ramp,
so crops and flips show), so a clip read back without colour augmentation tells which frames it
holds. Building a pipeline traces its functions (about a second), so tests share pipelines.
"""

import collections
import dataclasses
import logging
import re
import shutil
import threading
from unittest import mock

import cv2
import numpy as np
import pytest
import tensorflow as tf

from keras_privacy.data import augment, pipelines
from keras_privacy.data.augment import AugmentConfig, evaluation_clip
from keras_privacy.data.cache import prepare_cache, read_image_cache, read_video_cache
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.video import write_video

pytestmark = pytest.mark.backend_independent

LENGTHS = (10, 6, 12, 3, 8)  # frames per video; video 3 is shorter than a clip's span
LABELS = (0, 1, 2, 0, 1)
HEIGHT, WIDTH = 24, 32
CLIP, STRIDE, SIZE = 4, 2, 16  # a clip spans (4 - 1) * 2 + 1 = 7 frames
IMAGE_PRIVACY = ((1, 0, 1), (0, 1, 1), (1, 1, 0), (0, 0, 0), (1, 0, 0))
EPOCHS = 4  # of the shared training records

# Crop and flip only: the colours of a clip still name its frames.
NO_COLOUR = AugmentConfig(jitter=0.0, grayscale=0.0, erase=0.0)


def _frame(video: int, t: int) -> np.ndarray:
    frame = np.empty((HEIGHT, WIDTH, 3), np.uint8)
    frame[..., 0] = np.linspace(30, 220, WIDTH).astype(np.uint8)
    frame[..., 1] = 10 + 20 * t
    frame[..., 2] = 40 + 45 * video
    return frame


def _names(clip) -> list[tuple[int, int]]:
    """(video, frame) of each frame of a clip (T, H, W, 3) in [0, 1] with its colours kept."""
    green, blue = (clip[..., c].mean(axis=(1, 2)) * 255 for c in (1, 2))
    return [(round((b - 40) / 45), round((g - 10) / 20)) for g, b in zip(green, blue)]


def _video_of(record) -> int:
    return _names(record["clips"][0])[0][0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A video split, an image split and their prepared caches (full size, JPEG)."""
    root = tmp_path_factory.mktemp("pipelines")
    (root / "videos").mkdir()
    videos = []
    for v, (length, label) in enumerate(zip(LENGTHS, LABELS)):
        path = root / "videos" / f"v{v}.avi"
        write_video(path, [_frame(v, t) for t in range(length)], fps=25, codec="ffv1")
        videos.append(Example(str(path), label, (v % 2,)))
    video_split = Split(videos, class_names=["a", "b", "c"], attribute_names=["x"])

    (root / "images").mkdir()
    images = []
    rng = np.random.default_rng(0)
    for i, privacy in enumerate(IMAGE_PRIVACY):
        coarse = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
        image = cv2.resize(coarse, (28, 20), interpolation=cv2.INTER_NEAREST)
        path = root / "images" / f"im{i}.png"
        assert cv2.imwrite(str(path), image[..., ::-1])
        images.append(Example(str(path), privacy=privacy))
    image_split = Split(images, attribute_names=["p", "q", "r"])

    return {
        "videos": video_split,
        "video_cache": prepare_cache(video_split, "video", root / "video_cache", None),
        "images": image_split,
        "image_cache": prepare_cache(image_split, "image", root / "image_cache", None),
        "root": root,
    }


def _numpy(dataset) -> list[dict]:
    return [{key: value.numpy() for key, value in element.items()} for element in dataset]


def _both(kind):
    """Run a test on the split of files and on its prepared cache."""
    return pytest.mark.parametrize("source", [f"{kind}s", f"{kind}_cache"], ids=["files", "cache"])


def _check_clip_frames(names, video, start=None):
    """The clip's frames are one video's frames every STRIDE-th from `start`, looping."""
    assert {v for v, _ in names} == {video}
    frames = [t for _, t in names]
    start = frames[0] if start is None else start
    assert frames == [(start + i * STRIDE) % LENGTHS[video] for i in range(CLIP)]
    return start


def _train_records(source, **options) -> list[dict]:
    """Four epochs of single-clip batches of `source` (seed 3, no colour augmentation), with
    `action_train_dataset`'s `options`."""
    return _numpy(
        pipelines.action_train_dataset(
            source, 1, CLIP, STRIDE, SIZE, seed=3, config=NO_COLOUR, epochs=EPOCHS, **options
        )
    )


@pytest.fixture(scope="module")
def train_records(data):
    """`_train_records` of each video source."""
    return {source: _train_records(data[source]) for source in ("videos", "video_cache")}


# ---------------------------------------------------------------------------- frame choice


def test_clip_indices():
    np.testing.assert_array_equal(pipelines.clip_indices(10, 4, 2, 3), [3, 5, 7, 9])
    # shorter than the span: loops back to the first frame, every index valid
    np.testing.assert_array_equal(pipelines.clip_indices(3, 4, 2, 0), [0, 2, 1, 0])
    np.testing.assert_array_equal(pipelines.clip_indices(1, 3, 2, 0), [0, 0, 0])
    np.testing.assert_array_equal(pipelines.clip_indices(0, 3, 2, 0), [0, 0, 0])
    for length in (2, 3, 5):
        indices = pipelines.clip_indices(length, 8, 3, 0).numpy()
        assert indices.min() >= 0 and indices.max() < length
    # several starts at once (as the evaluation clips)
    starts = tf.constant([[0], [2]])
    np.testing.assert_array_equal(pipelines.clip_indices(5, 3, 2, starts), [[0, 2, 4], [2, 4, 1]])


def test_clip_indices_of_short_videos_mirror_or_halve_the_stride():
    # mirror: positions 0 .. m - 1 of the m that fit, then back and forth (SPAct's reversed pad)
    np.testing.assert_array_equal(
        pipelines.clip_indices(7, 8, 2, 0, "mirror"), [0, 2, 4, 6, 4, 2, 0, 2]
    )
    np.testing.assert_array_equal(pipelines.clip_indices(10, 4, 2, 3, "mirror"), [3, 5, 7, 9])
    np.testing.assert_array_equal(pipelines.clip_indices(1, 3, 2, 0, "mirror"), [0, 0, 0])
    starts = tf.constant([[0], [2]])
    mirrored = pipelines.clip_indices(5, 3, 2, starts, "mirror")
    np.testing.assert_array_equal(mirrored, [[0, 2, 4], [2, 4, 2]])
    # halve_stride: half the stride (at least 1) only where the span does not fit
    assert [int(pipelines.clip_stride(n, 16, 4, "halve_stride")) for n in (61, 60, 31)] == [4, 2, 2]
    assert int(pipelines.clip_stride(3, 4, 1, "halve_stride")) == 1
    assert int(pipelines.clip_stride(5, 16, 4, "mirror")) == 4
    with pytest.raises(ValueError, match="short_videos='pad' is not one of"):
        pipelines.clip_stride(5, 16, 4, "pad")


@_both("video")
def test_short_videos_give_the_clips_their_choice_says(data, source):
    # Video 1 has 6 frames, video 3 has 3, both fewer than a clip's span of 7.
    expected = {
        "loop": {1: [0, 2, 4, 0], 3: [0, 2, 1, 0]},
        "mirror": {1: [0, 2, 4, 2], 3: [0, 2, 0, 2]},
        "halve_stride": {1: [0, 1, 2, 3], 3: [0, 1, 2, 0]},
    }
    for choice, frames in expected.items():
        dataset = pipelines.action_eval_dataset(
            data[source], 1, CLIP, STRIDE, SIZE, short_videos=choice
        )
        for element in _numpy(dataset):
            video = int(element["video_index"])
            if video in frames:
                assert [t for _, t in _names(element["clips"][0])] == frames[video], choice
    train = pipelines.action_train_dataset(
        data[source], 1, CLIP, STRIDE, SIZE, config=NO_COLOUR, short_videos="mirror"
    )
    clips = [batch["clips"][0] for batch in _numpy(train)]
    shortest = [clip for clip in clips if _names(clip)[0][0] == 3]
    assert len(shortest) == 1 and [t for _, t in _names(shortest[0])] == [0, 2, 0, 2]
    with pytest.raises(ValueError, match="short_videos='pad'"):
        pipelines.action_eval_dataset(data[source], 1, CLIP, STRIDE, SIZE, short_videos="pad")


def test_random_start_fits_the_clip():
    starts = {int(pipelines.random_start(tf.constant([s, 0]), 10, 4, 2)) for s in range(60)}
    assert starts == {0, 1, 2, 3}  # 10 - (4 - 1) * 2 = 4 starts fit
    short = {int(pipelines.random_start(tf.constant([s, 0]), 5, 4, 2)) for s in range(20)}
    assert short == {0}


def test_equidistant_starts():
    starts = pipelines.equidistant_starts(20, 3, 4, 2).numpy()
    assert starts.dtype == np.int32
    np.testing.assert_array_equal(starts, [0, 6, 13])  # last that fits: 20 - 7 = 13
    starts = pipelines.equidistant_starts(100, 10, 16, 2).numpy()
    assert starts[0] == 0 and starts[-1] == 100 - 31
    assert np.all(np.abs(np.diff(starts) - 69 / 9) <= 1)
    np.testing.assert_array_equal(pipelines.equidistant_starts(5, 4, 4, 2), [0, 0, 0, 0])
    np.testing.assert_array_equal(pipelines.equidistant_starts(7, 2, 4, 2), [0, 0])
    np.testing.assert_array_equal(pipelines.equidistant_starts(30, 1, 4, 2), [0])


def _pairs(clip_length, stride, sampler, count=200):
    """frame_pair for seeds (0, 1) ... (count - 1, 1), traced once."""
    seeds = tf.stack([tf.range(count, dtype=tf.int64), tf.ones([count], tf.int64)], axis=1)

    def pair(seed):
        return pipelines.frame_pair(seed, clip_length, stride, sampler)

    return tf.function(lambda s: tf.map_fn(pair, s, fn_output_signature=tf.int32))(seeds).numpy()


@pytest.mark.parametrize("clip_length, stride", [(16, 2), (40, 2), (8, 1)])
def test_frame_pair_samplers(clip_length, stride):
    gaps = {}
    for sampler in ("random", "near"):
        pairs = _pairs(clip_length, stride, sampler)
        assert pairs.dtype == np.int32 and pairs.shape == (200, 2)
        assert pairs.min() >= 0 and pairs.max() < clip_length
        assert np.all(pairs[:, 0] != pairs[:, 1])
        gaps[sampler] = np.abs(pairs[:, 0] - pairs[:, 1]) * stride  # in original frames
        if sampler != "random":
            assert 0 < np.mean(pairs[:, 0] < pairs[:, 1]) < 1  # both orders
    span = (clip_length - 1) * stride
    assert gaps["random"].min() == stride and gaps["random"].max() >= 0.8 * span
    assert gaps["near"].max() < pipelines.NEAR_FRAMES


def test_frame_pair_edge_cases():
    np.testing.assert_array_equal(pipelines.frame_pair(tf.constant([0, 0]), 1, 2), [0, 0])
    pairs = _pairs(2, 2, "near", count=20)
    assert {tuple(sorted(p)) for p in pairs} == {(0, 1)}
    with pytest.raises(ValueError, match="pair sampler"):
        pipelines.frame_pair(tf.constant([0, 0]), 16, 2, "middle")
    with pytest.raises(ValueError, match="far_frame_pair"):
        pipelines.frame_pair(tf.constant([0, 0]), 16, 2, "far")


def test_far_pairs_come_from_the_video_more_than_64_frames_apart(tmp_path):
    # SPAct Table 4's "> 64 frames": frame t of these videos is red 10 + 20 (t // 10), green
    # 10 + 20 (t % 10), so a pair read back tells which frames of the video it holds; blue names
    # the video. A 16 x 2 clip spans only 31 frames.
    def frame(video, t):
        return np.full((16, 16, 3), (10 + 20 * (t // 10), 10 + 20 * (t % 10), 50 + 100 * video))

    videos = []
    for v, length in enumerate((100, 20)):
        path = tmp_path / f"v{v}.avi"
        frames = [frame(v, t).astype(np.uint8) for t in range(length)]
        write_video(path, frames, fps=25, codec="ffv1")
        videos.append(Example(str(path), 0, (0,)))
    split = Split(videos, class_names=["a"], attribute_names=["x"])
    dataset = pipelines.action_train_dataset(
        split, 1, 16, 2, 8, pair_sampler="far", config=NO_COLOUR, epochs=12
    )
    pairs = collections.defaultdict(list)
    for batch in dataset.as_numpy_iterator():
        assert set(batch) == {"clips", "labels", "pair_frames"}
        assert batch["pair_frames"].shape == (1, 2, 8, 8, 3)
        red, green, blue = (
            batch["pair_frames"][0, ..., c].mean(axis=(1, 2)) * 255 for c in range(3)
        )
        indices = tuple(
            10 * round((r - 10) / 20) + round((g - 10) / 20) for r, g in zip(red, green)
        )
        pairs[100 if blue.mean() < 100 else 20].append(indices)
    gaps = np.array([abs(a - b) for a, b in pairs[100]])
    assert len(gaps) > 3 and gaps.min() > pipelines.FAR_FRAMES and gaps.max() < 100
    assert 0 < np.mean([a < b for a, b in pairs[100]]) < 1  # both orders
    # A video of 65 frames or fewer has no such pair: its first and last frames.
    assert {tuple(sorted(p)) for p in pairs[20]} == {(0, 19)}


def test_frame_pair_is_seeded():
    first = pipelines.frame_pair(tf.constant([3, 4]), 16, 2, "random").numpy()
    np.testing.assert_array_equal(
        first, pipelines.frame_pair(tf.constant([3, 4]), 16, 2, "random").numpy()
    )
    assert len({tuple(p) for p in _pairs(16, 2, "random", count=30)}) > 10


def test_take_frames_from_jpeg_strings_and_pixels():
    frames = np.stack([_frame(0, t) for t in range(5)])
    encoded = tf.stack([tf.io.encode_jpeg(f, quality=100) for f in frames])
    indices = tf.constant([3, 1, 3, 0])
    from_pixels = pipelines.take_frames(tf.constant(frames), indices).numpy()
    from_jpeg = pipelines.take_frames(encoded, indices).numpy()
    np.testing.assert_array_equal(from_pixels, frames[[3, 1, 3, 0]])
    decoded = np.stack([tf.io.decode_jpeg(data).numpy() for data in encoded])
    np.testing.assert_array_equal(from_jpeg, decoded[[3, 1, 3, 0]])
    assert np.abs(from_jpeg.astype(int) - from_pixels).max() <= 8  # JPEG loss only


# ---------------------------------------------------------------------------- action training


@_both("video")
def test_action_train_every_video_once_per_epoch(train_records, source):
    records = train_records[source]
    assert len(records) == EPOCHS * len(LENGTHS)
    orders = []
    for epoch in range(EPOCHS):
        part = records[epoch * 5 : (epoch + 1) * 5]
        videos = [_video_of(r) for r in part]
        assert sorted(videos) == list(range(len(LENGTHS)))
        labels = [int(r["labels"][0]) for r in part]
        assert collections.Counter(labels) == collections.Counter(LABELS)
        assert labels == [LABELS[v] for v in videos]
        orders.append(tuple(videos))
    assert len(set(orders)) > 1  # each epoch in its own order
    # and each epoch draws a new clip of every video (start, crop, flip)
    clips = collections.defaultdict(set)
    for record in records:
        clips[_video_of(record)].add(record["clips"].tobytes())
    assert all(len(distinct) > 1 for distinct in clips.values())


@_both("video")
def test_action_train_holds_out_every_nth_video(data, source):
    def videos(held_out):
        dataset = pipelines.action_train_dataset(
            data[source], 1, CLIP, STRIDE, SIZE, config=NO_COLOUR, hold_out=2, held_out=held_out
        )
        return sorted(_video_of(record) for record in _numpy(dataset))

    # Videos 0, 2, 4 (indices multiple of 2) are VITA's validation clips, 1 and 3 train.
    assert videos(held_out=True) == [0, 2, 4]
    assert videos(held_out=False) == [1, 3]


@_both("video")
@pytest.mark.parametrize("sampler", ["random", "near", "far"])
def test_pairs_only_gives_each_clips_pair_of_frames_alone(data, source, sampler):
    """f_A's identity initialisation reads each clip's NT-Xent pair only: decoded and
    augmented alone, the two frames are the clip's frames at its `frame_pairs` (or the far
    pair), with the clip's crop, flip, colour, gamma and erase (contrast per frame)."""
    config = augment.SUPERVISED_SPACT_CODE

    def batches(pairs_only):
        dataset = pipelines.action_train_dataset(
            data[source],
            2,
            CLIP,
            STRIDE,
            SIZE,
            seed=5,
            pair_sampler=sampler,
            config=config,
            epochs=2,
            pairs_only=pairs_only,
        )
        return _numpy(dataset)

    alone, whole = batches(True), batches(False)
    assert len(alone) == len(whole) == 5  # 5 videos, 2 epochs, batches of 2
    for pairs, clips in zip(alone, whole):
        assert set(pairs) == {"pair_frames", "labels"}
        np.testing.assert_array_equal(pairs["labels"], clips["labels"])
        if sampler == "far":
            expected = clips["pair_frames"]
        else:
            rows = np.arange(len(clips["clips"]))[:, None]
            expected = clips["clips"][rows, clips["frame_pairs"]]
        np.testing.assert_allclose(pairs["pair_frames"], expected, atol=1e-6)


def test_held_out_videos_are_read_from_a_file_of_their_own_beside_the_cache(data, tmp_path, caplog):
    """VITA's validation clips come from the held-out records alone, which the first read
    writes to the cache's `held_out/` folder (not from every record of the cache, filtered);
    later reads take that file; a cache whose folder cannot be written is read whole."""
    cache = tmp_path / "cache"
    shutil.copytree(data["video_cache"], cache, ignore=shutil.ignore_patterns("held_out"))

    def held_out_videos(source):
        dataset = pipelines.action_train_dataset(
            source, 1, CLIP, STRIDE, SIZE, config=None, hold_out=2, held_out=True, epochs=2
        )
        return [(_video_of(record), record["clips"].tobytes()) for record in _numpy(dataset)]

    (cache / "held_out").write_text("")  # a file where the folder goes: it cannot be made
    with caplog.at_level(logging.WARNING):
        read_whole = held_out_videos(cache)
    assert "cannot write the held-out videos' file" in caplog.text
    assert sorted({video for video, _ in read_whole}) == [0, 2, 4]

    (cache / "held_out").unlink()
    assert held_out_videos(cache) == read_whole  # the same clips, in the same order
    written = next((cache / "held_out").glob("*.tfrecord"))
    assert written.name.startswith("every-2-")
    assert pipelines._Cache(cache, "video").every(2).files == [str(written)]  # read from it
    indices = [
        tf.io.parse_single_sequence_example(
            record, context_features={"index": tf.io.FixedLenFeature([], tf.int64)}
        )[0]["index"].numpy()
        for record in tf.data.TFRecordDataset(str(written))
    ]
    assert sorted(indices) == [0, 2, 4]
    stamp = written.stat().st_mtime_ns
    assert held_out_videos(cache) == read_whole
    assert written.stat().st_mtime_ns == stamp  # read again, not written again

    whole = written.read_bytes()
    written.write_bytes(whole[: len(whole) // 2])  # cut short by a copy: written again
    stale = cache / "held_out" / "every-2-0123456789abcdef.tfrecord"  # an earlier manifest's
    stale.write_bytes(b"old")
    assert held_out_videos(cache) == read_whole
    assert written.read_bytes() == whole and not stale.exists()

    for path in (cache / "held_out").iterdir():
        path.unlink()  # TensorFlow's writer refuses the folder (a read-only mount)
    denied = tf.errors.PermissionDeniedError(None, None, "read-only file system")
    caplog.clear()
    with mock.patch.object(pipelines._Cache, "_write_every", side_effect=denied):
        with caplog.at_level(logging.WARNING):
            assert held_out_videos(cache) == read_whole
    assert "read-only file system" in caplog.text and not written.exists()


@_both("video")
def test_action_train_without_augmentation_gives_each_clip_its_centred_view(data, source):
    # VITA's validation clips: a random clip, as the evaluation sees it (centred, unflipped).
    dataset = pipelines.action_train_dataset(
        data[source], 1, CLIP, STRIDE, SIZE, seed=3, config=None, epochs=3
    )
    for record in _numpy(dataset):
        clip = record["clips"][0]
        names = _names(clip)
        _check_clip_frames(names, names[0][0])
        frames = np.stack([_frame(video, t) for video, t in names])
        expected = evaluation_clip(frames, SIZE).numpy()
        np.testing.assert_allclose(clip, expected, atol=10 / 255)  # the codecs' loss
        # nearer the centred view than a flipped one or a crop one pixel to either side
        error = np.abs(clip - expected).mean()
        for other in (
            expected[:, :, ::-1],
            evaluation_clip(np.roll(frames, 1, axis=2), SIZE),
            evaluation_clip(np.roll(frames, -1, axis=2), SIZE),
        ):
            assert error < np.abs(clip - other).mean()


@_both("video")
def test_action_train_clips_are_strided_frames_of_one_video(train_records, source):
    span = (CLIP - 1) * STRIDE + 1
    starts = collections.defaultdict(set)
    for record in train_records[source]:
        video = _video_of(record)
        start = _check_clip_frames(_names(record["clips"][0]), video)
        assert 0 <= start <= max(LENGTHS[video] - span, 0)
        starts[video].add(start)
    # the short video loops from its first frame: frames 0, 2, 4 % 3 = 1, 6 % 3 = 0
    assert starts[3] == {0}
    assert len(starts[2]) > 1  # the 12-frame video: random starts


@_both("video")
def test_second_clip_is_another_clip_of_the_same_video(data, train_records, source):
    records = _train_records(data[source], second_clip=True)
    other_start = other_view = 0
    for record, without in zip(records, train_records[source]):
        assert record["second_clips"].shape == record["clips"].shape == (1, CLIP, SIZE, SIZE, 3)
        # the first clip is the one drawn without the flag
        np.testing.assert_array_equal(record["clips"], without["clips"])
        video = _video_of(record)
        start = _check_clip_frames(_names(record["clips"][0]), video)
        second_start = _check_clip_frames(_names(record["second_clips"][0]), video)
        other_start += start != second_start
        other_view += not np.allclose(record["clips"], record["second_clips"])
    # independent starts (the videos long enough for a choice) and augmentation
    assert other_start > len(records) // 4
    assert other_view > len(records) // 2


@_both("video")
def test_positive_clip_is_the_clips_frames_augmented_again(data, train_records, source):
    """TeD-SPAD's positive: the same frames of the video as the clip, with an augmentation of
    their own (the crop and flip: the colours are kept so that frames can be named)."""
    records = _train_records(data[source], second_clip=True, positive_clip=True)
    other_view = 0
    for record, without in zip(records, train_records[source]):
        assert record["positive_clips"].shape == record["clips"].shape
        np.testing.assert_array_equal(record["clips"], without["clips"])
        assert _names(record["positive_clips"][0]) == _names(record["clips"][0])
        other_view += not np.allclose(record["clips"], record["positive_clips"])
    assert other_view > len(records) // 2


def test_cache_and_files_give_the_same_clip(train_records):
    # Same seed: each video gets the same frames, crop and flip from its cache as from its file.
    by_video = collections.defaultdict(list)
    for source in ("videos", "video_cache"):
        for record in train_records[source][:5]:
            by_video[_video_of(record)].append(record)
    flips = 0
    for from_file, from_cache in by_video.values():
        assert _names(from_file["clips"][0]) == _names(from_cache["clips"][0])
        np.testing.assert_array_equal(from_file["frame_pairs"], from_cache["frame_pairs"])
        assert np.abs(from_file["clips"] - from_cache["clips"]).mean() < 0.02  # JPEG loss
        red = from_file["clips"][0, 0, :, :, 0].mean(axis=0)
        flips += red[0] > red[-1]  # the red ramp runs right to left
    assert 0 < flips < 5


@_both("video")
def test_action_train_batches_and_seed(data, source):
    def build(seed, epochs=2):
        return pipelines.action_train_dataset(
            data[source], 5, CLIP, STRIDE, SIZE, seed=seed, epochs=epochs
        )

    dataset = build(7)
    first, again = _numpy(dataset), _numpy(dataset)
    assert len(first) == 2  # one batch of 5 per epoch
    for batch in first:
        assert set(batch) == {"clips", "labels", "frame_pairs"}
        assert batch["clips"].shape == (5, CLIP, SIZE, SIZE, 3)
        assert batch["clips"].dtype == np.float32
        assert batch["clips"].min() >= 0.0 and batch["clips"].max() <= 1.0
        assert batch["labels"].dtype == np.int32 and sorted(batch["labels"]) == sorted(LABELS)
        pairs = batch["frame_pairs"]
        assert pairs.dtype == np.int32 and pairs.shape == (5, 2)
        assert pairs.min() >= 0 and pairs.max() < CLIP and np.all(pairs[:, 0] != pairs[:, 1])
    # the same seed gives the same batches; the second epoch draws new clips
    for a, b in zip(first, again):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert not np.allclose(first[0]["clips"], first[1]["clips"])
    # another seed, endless: other clips, and more than one epoch's worth
    other = _numpy(build(8, epochs=None).take(3))
    assert len(other) == 3
    assert not np.allclose(first[0]["clips"], other[0]["clips"])


def _put_together(per_process: list[list[dict]], parts: tuple[int, ...]) -> list[dict]:
    """The global batches of the processes' batches: each run of `parts` (global sizes)
    put together from the processes' slices of it, in process order."""
    count = len(per_process)
    assert len({len(batches) for batches in per_process}) == 1  # as many steps each
    together = []
    for batches in zip(*per_process):
        batch = {}
        for key in batches[0]:
            runs, start = [], 0
            for size in parts:
                share = size // count
                runs += [b[key][start : start + share] for b in batches]
                start += share
            batch[key] = np.concatenate(runs)
        together.append(batch)
    return together


def _assert_same_batches(first: list[dict], second: list[dict]):
    assert len(first) == len(second) > 0
    for a, b in zip(first, second):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


STEPS = 7  # more than an epoch of any split below: the rows run across epochs


@_both("video")
@pytest.mark.parametrize("hold_out", [0, 3])
def test_each_process_reads_its_rows_of_every_global_batch(data, source, hold_out):
    # Two processes' batches of 2, put together, are the global batches of 4 one process
    # reads, each half (the step's clips, then the action batch after them) split between them.
    def batches(process):
        dataset = pipelines.action_train_dataset(
            data[source],
            4,
            CLIP,
            STRIDE,
            SIZE,
            seed=5,
            epochs=None,
            hold_out=hold_out,
            process=process,
            batch_parts=(2, 2),
        )
        return _numpy(dataset.take(STEPS))

    alone = batches((0, 1))
    halves = [batches((index, 2)) for index in range(2)]
    _assert_same_batches(_put_together(halves, (2, 2)), alone)
    assert [len(h[0]["labels"]) for h in halves] == [2, 2]
    with pytest.raises(ValueError, match="a global batch of 3 cannot be split over 2 processes"):
        pipelines.action_train_dataset(
            data[source], 3, CLIP, STRIDE, SIZE, epochs=None, process=(0, 2)
        )
    with pytest.raises(ValueError, match=r"batch_parts \(2, 1\) do not add up to the batch of 4"):
        pipelines.action_train_dataset(data[source], 4, CLIP, STRIDE, SIZE, batch_parts=(2, 1))
    # A finite dataset's last, partial global batch would end the processes at different steps.
    with pytest.raises(ValueError, match="a dataset of 1 epochs cannot be split over 2 proc"):
        pipelines.action_train_dataset(data[source], 4, CLIP, STRIDE, SIZE, process=(1, 2))


def test_each_process_decodes_only_the_videos_of_its_rows(data, monkeypatch):
    # Over four epochs of 5 videos in global batches of 4, each of two processes decodes its
    # 10 rows (an endless dataset reads ahead, so the rows of a finite one are counted).
    decoded, lock = [], threading.Lock()
    read = pipelines._read_video

    def counting(path):
        with lock:
            decoded.append(path)
        return read(path)

    monkeypatch.setattr(pipelines, "_read_video", counting)
    videos = pipelines._source(data["videos"], "video")
    per_process = []
    for index in range(2):
        decoded.clear()
        _, rows = pipelines._process_rows((4,), (index, 2), None)
        records = _numpy(pipelines._loaded(pipelines._items(videos, 5, EPOCHS), videos, rows=rows))
        assert len(decoded) == len(records) == EPOCHS * 5 // 2
        per_process.append([int(r["index"]) for r in records])
    alone = [
        int(r["index"])
        for r in _numpy(pipelines._loaded(pipelines._items(videos, 5, EPOCHS), videos))
    ]
    positions = np.arange(len(alone)) % 4
    assert per_process == [
        [video for video, at in zip(alone, positions) if at // 2 == index] for index in range(2)
    ]


@_both("image")
def test_each_process_reads_its_rows_of_every_privacy_batch(data, source):
    def pairs(process):
        dataset = pipelines.privacy_pair_dataset(data[source], 2, SIZE, seed=1, process=process)
        return _numpy(dataset.take(STEPS))

    def labelled(process):
        dataset = pipelines.privacy_labelled_dataset(
            data[source], 2, SIZE, training=True, seed=1, epochs=None, process=process
        )
        return _numpy(dataset.take(STEPS))

    for read in (pairs, labelled):
        alone = read((0, 1))
        _assert_same_batches(_put_together([read((0, 2)), read((1, 2))], (2,)), alone)
    with pytest.raises(ValueError, match="evaluation batches are read whole, in one process"):
        pipelines.privacy_labelled_dataset(data[source], 2, SIZE, training=False, process=(1, 2))


@_both("video")
def test_action_eval_clips(data, source):
    dataset = pipelines.action_eval_dataset(data[source], 3, CLIP, STRIDE, SIZE)
    elements = _numpy(dataset)
    indices = [int(e["video_index"]) for e in elements]
    assert sorted(indices) == list(range(5))
    if source == "videos":
        assert indices == [0, 1, 2, 3, 4]  # the split's order
    else:  # the cache's stored order
        assert indices == [int(r["index"]) for r in read_video_cache(data[source])]
    for element, video in zip(elements, indices):
        assert element["clips"].shape == (3, CLIP, SIZE, SIZE, 3)
        assert element["clips"].dtype == np.float32
        assert element["label"].dtype == np.int32 and element["label"] == LABELS[video]
        starts = pipelines.equidistant_starts(LENGTHS[video], 3, CLIP, STRIDE).numpy()
        for clip, start in zip(element["clips"], starts):
            _check_clip_frames(_names(clip), video, start)
        # centre crop, never flipped: the red ramp rises left to right
        assert np.all(np.diff(element["clips"][..., 0].mean(axis=(0, 1, 2))) > 0)
    for a, b in zip(elements, _numpy(dataset)):
        np.testing.assert_array_equal(a["clips"], b["clips"])


# ---------------------------------------------------------------------------- privacy


def test_privacy_pair_views(data):
    dataset = pipelines.privacy_pair_dataset(data["images"], batch_size=2, size=SIZE, seed=0)
    batches = _numpy(dataset.take(4))  # endless by default: 8 pairs from 5 images
    cached = _numpy(pipelines.privacy_pair_dataset(data["image_cache"], 2, SIZE, epochs=2))
    assert len(batches) == 4 and len(cached) == 5  # 2 epochs of 5 images: 5 pairs of views
    for batch in batches + cached:
        assert set(batch) == {"views"}
        views = batch["views"]
        assert views.shape == (2, 2, SIZE, SIZE, 3) and views.dtype == np.float32
        assert views.min() >= 0.0 and views.max() <= 1.0
        for pair in views:
            assert np.abs(pair[0] - pair[1]).mean() > 0.01  # two different views
    for a, b in zip(batches, _numpy(dataset.take(4))):
        np.testing.assert_array_equal(a["views"], b["views"])


def test_views_that_share_a_corner_start_their_crops_there(tmp_path):
    # SPAct's and the penalty code's minimax loaders draw one corner for both crops, inside the
    # frame for the first; the second, of its own size, may overrun it (torchvision pads it
    # black). An image whose red and green are its row and column shows where a crop starts.
    height, width = 40, 60
    image = np.zeros((height, width, 3), np.uint8)
    image[..., 0] = np.linspace(0, 255, height).round()[:, None]
    image[..., 1] = np.linspace(0, 255, width).round()[None, :]
    image[..., 2] = 128
    path = tmp_path / "ramp.png"
    assert cv2.imwrite(str(path), image[..., ::-1])
    split = Split([Example(str(path), privacy=(1,))], attribute_names=["p"])
    plain = AugmentConfig(
        crop_side=(0.5, 1.0), crop_keeps_aspect=True, flip=0.0, jitter=0.0, grayscale=0.0, erase=0.0
    )

    def pairs(config):
        dataset = pipelines.privacy_pair_dataset(split, 1, 16, seed=3, config=config)
        return np.concatenate([batch["views"] for batch in _numpy(dataset.take(24))])

    shared = pairs(dataclasses.replace(plain, views_share_corner=True))
    # The first output pixel averages the rows of its footprint, 1.25-2.5 of them here as a
    # crop is 20-40 rows high, so it stands up to 0.6 row (4 / 255 of red) past the corner.
    np.testing.assert_allclose(shared[:, 0, 0, 0], shared[:, 1, 0, 0], atol=5 / 255)
    assert np.abs(shared[:, 0] - shared[:, 1]).max() > 0.1  # crops of their own sizes
    black = np.all(shared == 0.0, axis=-1).any(axis=(2, 3))
    assert not black[:, 0].any() and black[:, 1].any()
    drawn_apart = pairs(plain)
    assert np.abs(drawn_apart[:, 0, 0, 0] - drawn_apart[:, 1, 0, 0]).max() > 0.1
    assert not np.all(drawn_apart == 0.0, axis=-1).any()
    for preset in (augment.SPACT_CODE_IMAGES, augment.PENALTY_CODE_IMAGES):
        assert preset.views_share_corner
    assert not augment.CONTRASTIVE.views_share_corner


@_both("image")
def test_privacy_labelled_training(data, source):
    dataset = pipelines.privacy_labelled_dataset(
        data[source], 3, SIZE, training=True, seed=0, epochs=2
    )
    batches, again = _numpy(dataset), _numpy(dataset)
    assert len(batches) == 3  # 2 epochs of 5 images: the last, partial batch is dropped
    for batch in batches:
        assert set(batch) == {"images", "privacy"}
        assert batch["images"].shape == (3, SIZE, SIZE, 3)
        assert batch["images"].dtype == np.float32
        assert batch["privacy"].shape == (3, 3) and batch["privacy"].dtype == np.float32
    # every image once per epoch, shuffled and augmented anew in the second
    rows = [tuple(row.astype(int)) for batch in batches for row in batch["privacy"]]
    assert sorted(rows[:5]) == sorted(IMAGE_PRIVACY)
    assert set(rows[5:]) <= set(IMAGE_PRIVACY) and len(set(rows[5:])) == 4
    images = np.concatenate([b["images"] for b in batches])
    assert not np.allclose(images[:4], images[5:])
    for a, b in zip(batches, again):
        np.testing.assert_array_equal(a["images"], b["images"])


def test_privacy_labelled_evaluation(data):
    def run(source):
        return _numpy(pipelines.privacy_labelled_dataset(data[source], 2, SIZE, training=False))

    from_files, from_cache = run("images"), run("image_cache")
    for batches in (from_files, from_cache):
        assert [len(b["privacy"]) for b in batches] == [2, 2, 1]  # every image, last batch kept
    # files: in split order, the centred crop of each image
    privacy = np.concatenate([b["privacy"] for b in from_files])
    np.testing.assert_array_equal(privacy, IMAGE_PRIVACY)
    images = np.concatenate([b["images"] for b in from_files])
    for image, example in zip(images, data["images"].examples):
        rgb = cv2.imread(example.path)[..., ::-1]
        np.testing.assert_allclose(image, evaluation_clip(rgb[None], SIZE)[0], atol=1e-6)
    # cache: in stored order, the same images up to JPEG loss
    stored = [int(r["index"]) for r in read_image_cache(data["image_cache"])]
    privacy = np.concatenate([b["privacy"] for b in from_cache])
    np.testing.assert_array_equal(privacy, np.array(IMAGE_PRIVACY)[stored])
    cached = np.concatenate([b["images"] for b in from_cache])
    for image, index in zip(cached, stored):
        distances = np.abs(images - image).mean(axis=(1, 2, 3))
        assert distances.argmin() == index and distances[index] < 0.05


# ---------------------------------------------------------------------------- glue


def test_minimax_dataset_merges_keys(data):
    action = pipelines.action_train_dataset(data["video_cache"], 2, CLIP, STRIDE, SIZE)
    privacy = pipelines.privacy_labelled_dataset(data["images"], 1, SIZE, training=False)
    elements = _numpy(pipelines.minimax_dataset(action, privacy))
    # 5 videos in batches of 2 (the partial one dropped) against 5 images: the action data ends
    assert len(elements) == 2
    for element, row in zip(elements, IMAGE_PRIVACY):
        # (a test pass's images carry their file's path: PA-HMDB51's frames group by video)
        assert set(element) == {"clips", "labels", "frame_pairs", "images", "privacy", "path"}
        assert element["clips"].shape == (2, CLIP, SIZE, SIZE, 3)
        assert element["images"].shape == (1, SIZE, SIZE, 3)
        np.testing.assert_array_equal(element["privacy"], [row])


def test_every_pipeline_runs_without_the_autotuner(data):
    # The autotuner's thread held each epoch's iterator deletion for seconds; the pipelines turn
    # it off, and what is built from them (zips, maps, pairs) keeps the setting.
    action = pipelines.action_train_dataset(data["video_cache"], 2, CLIP, STRIDE, SIZE)
    privacy = pipelines.privacy_labelled_dataset(data["images"], 1, SIZE, training=True)
    built = [
        action,
        pipelines.action_eval_dataset(data["video_cache"], 2, CLIP, STRIDE, SIZE),
        pipelines.privacy_pair_dataset(data["image_cache"], 2, SIZE),
        privacy,
        pipelines.minimax_dataset(action, privacy).map(lambda element: element),
    ]
    for dataset in built:
        assert dataset.options().autotune.enabled is False


def test_count_examples(data, tmp_path):
    assert pipelines.count_examples(data["videos"]) == 5
    assert pipelines.count_examples(data["video_cache"]) == 5
    assert pipelines.count_examples(str(data["image_cache"])) == 5
    corrupt = tmp_path / "corrupt.avi"
    corrupt.write_bytes(b"\x00garbage" * 100)
    videos = data["videos"]
    examples = [*videos.examples, Example(str(corrupt), 0, (0,))]
    split = Split(examples, videos.class_names, videos.attribute_names)
    assert pipelines.count_examples(split) == 6
    prepare_cache(split, "video", tmp_path / "cache", 16)
    assert pipelines.count_examples(tmp_path / "cache") == 5  # the failure is not a record


def test_wrong_sources_raise(data):
    with pytest.raises(ValueError, match="image cache"):
        pipelines.privacy_pair_dataset(data["video_cache"], 2, SIZE)
    with pytest.raises(ValueError, match="video cache"):
        pipelines.action_train_dataset(data["image_cache"], 2)
    with pytest.raises(ValueError, match="no examples"):
        pipelines.action_eval_dataset(Split([]))
    with pytest.raises(FileNotFoundError):
        pipelines.action_eval_dataset(data["root"] / "nothing")


def test_examples_without_a_label_per_attribute_raise(data):
    # A file-based split whose example lacks its privacy labels is refused, naming the file,
    # rather than trained on as negative for every attribute.
    images = data["images"]
    unlabelled = dataclasses.replace(images.examples[1], privacy=())
    split = dataclasses.replace(images, examples=[images.examples[0], unlabelled])
    message = rf"1 of 2 examples .*\(3\).*{re.escape(unlabelled.path)}: 0 labels"
    with pytest.raises(ValueError, match=message):
        pipelines.privacy_labelled_dataset(split, 2, SIZE, training=False)


# ---------------------------------------------------------------------------- broken files


def test_broken_videos_are_skipped(data, tmp_path, caplog, monkeypatch):
    # Files that fail to decode are dropped, each named once by a Python warning however
    # often it is drawn, and decoded once: the error never reaches TensorFlow, whose C++ log
    # would be a traceback per draw.
    corrupt = tmp_path / "corrupt.avi"
    corrupt.write_bytes(b"\x00garbage" * 100)
    empty = tmp_path / "empty.avi"
    empty.write_bytes(b"")
    examples = list(data["videos"].examples)
    examples.insert(1, Example(str(corrupt), 2, (0,)))
    examples.append(Example(str(empty), 2, (0,)))
    split = dataclasses.replace(data["videos"], examples=examples)

    reads = []
    real_read = pipelines._read_video.read

    def counting_read(path):
        reads.append(path.decode())
        return real_read(path)

    with caplog.at_level("WARNING"), monkeypatch.context() as patch:
        patch.setattr(pipelines._read_video, "read", counting_read)
        dataset = pipelines.action_train_dataset(
            split, 1, CLIP, STRIDE, SIZE, config=NO_COLOUR, epochs=2
        )
        records = _numpy(dataset)
        elements = _numpy(pipelines.action_eval_dataset(split, 2, CLIP, STRIDE, SIZE))
    assert reads.count(str(corrupt)) == 1 and reads.count(str(empty)) == 1
    assert pipelines._read_video(str(corrupt).encode()).shape == (0, 0, 0, 3)
    assert len(records) == 10  # two epochs; the two broken files are left out, nothing else
    assert sorted(_video_of(r) for r in records) == sorted(list(range(5)) * 2)
    assert [int(r["labels"][0]) for r in records] == [LABELS[_video_of(r)] for r in records]
    assert [int(e["video_index"]) for e in elements] == [0, 2, 3, 4, 5]
    assert [int(e["label"]) for e in elements] == list(LABELS)
    skipped = [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipping")]
    for path in (corrupt, empty):
        assert sum(message.startswith(f"skipping {path}") for message in skipped) == 1
    assert "left out of every epoch" in skipped[0]


def test_a_cut_short_video_is_read_with_one_warning_naming_it(tmp_path, fixtures_dir, caplog):
    # As `prepare` warns of it: a partial download gives its frames that decode, and the
    # warning comes once however often the file is decoded again (here, never kept).
    data = (fixtures_dir / "videos" / "test.avi").read_bytes()
    cut = tmp_path / "half.avi"
    cut.write_bytes(data[: len(data) // 2])
    whole = str(fixtures_dir / "videos" / "test.avi").encode()
    decoded_videos = pipelines.DecodedVideos(capacity_bytes=0)
    with caplog.at_level("WARNING"):
        frames = [decoded_videos(str(cut).encode()) for _ in range(3)]
        assert len(decoded_videos(whole)) == 164
    assert 0 < len(frames[0]) < 164
    warnings = [r.getMessage() for r in caplog.records if "cut short" in r.getMessage()]
    assert warnings == [
        f"{cut}: the container declares 164 frames, {len(frames[0])} decoded (the file seems "
        "cut short); read with the frames that decode"
    ]


def test_broken_image_is_skipped(data, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    examples = list(data["images"].examples)
    examples.insert(2, Example(str(broken), privacy=(1, 1, 1)))
    split = dataclasses.replace(data["images"], examples=examples)
    batches = _numpy(pipelines.privacy_labelled_dataset(split, 10, SIZE, training=False))
    np.testing.assert_array_equal(batches[0]["privacy"], IMAGE_PRIVACY)


def _batching(**options):
    """The minimax batching of two clips and two images a step (seed 0, no colour
    augmentation), with `sources.Batching`'s `options`."""
    from keras_privacy.data.sources import Batching

    return Batching(
        seed=0,
        batch_size=2,
        privacy_batch_size=2,
        clip_length=CLIP,
        clip_stride=STRIDE,
        image_size=SIZE,
        short_videos="loop",
        pair_sampler="random",
        augmentation=NO_COLOUR,
        **options,
    )


@_both("video")
def test_vitas_step_batches_train_on_some_videos_and_validate_on_the_held_out_others(data, source):
    """VITA's minimax batches (`TrainingData.dataset`): the step's clips and the fresh f_T
    batches come from the training videos alone, the validation clips from the held-out ones
    (every 2nd video by index: 0, 2 and 4)."""
    from keras_privacy.data.sources import TrainingData

    batching = _batching(hold_out=2)
    images = "image_cache" if source.endswith("cache") else "images"
    training = TrainingData(data[source], data[images], ["a", "b", "c"], ["p", "q", "r"], batching)
    dataset = training.dataset(epoch=0, steps=3, labelled=True, validation=True, action_batches=2)
    trained, validated = set(), set()
    for batch in _numpy(dataset):
        for key in ("clips", "action_clips"):
            trained.update(_names(clip)[0][0] for clip in batch[key])
        validated.update(_names(clip)[0][0] for clip in batch["validation_clips"])
    assert trained == {1, 3} and validated == {0, 2, 4}


def test_the_triplet_clips_come_in_the_minimax_batches_only(data):
    """`triplet_clips` batching: a minimax phase's batches hold TeD-SPAD's positive and
    negative clips; the initialisations', which never read them, decode none."""
    from keras_privacy.data.sources import TrainingData

    batching = _batching(triplet_clips=True)
    training = TrainingData(data["video_cache"], data["image_cache"], ["a"], ["p"], batching)
    minimax = next(iter(_numpy(training.dataset(epoch=0, steps=1, minimax=True))))
    init = next(iter(_numpy(training.dataset(epoch=0, steps=1))))
    assert {"positive_clips", "second_clips"} <= set(minimax)
    assert not {"positive_clips", "second_clips"} & set(init)
    np.testing.assert_array_equal(minimax["clips"], init["clips"])


def test_training_from_many_video_files_warns_to_prepare_a_cache(caplog):
    from keras_privacy.data import sources

    few = Split([Example(f"v{i}.avi", 0) for i in range(sources.MANY_VIDEO_FILES)])
    many = Split([Example(f"v{i}.avi", 0) for i in range(sources.MANY_VIDEO_FILES + 1)])
    with caplog.at_level(logging.WARNING):
        sources.warn_of_many_video_files(few)
        assert not caplog.records
        sources.warn_of_many_video_files(many)
    assert f"training reads {sources.MANY_VIDEO_FILES + 1} videos from their files" in caplog.text
    assert "keras_privacy.data prepare" in caplog.text
