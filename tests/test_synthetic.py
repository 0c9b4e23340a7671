"""Behaviour tests of the built-in synthetic benchmark (keras_privacy.data.synthetic).

A small benchmark is written once in tmp_path and read back with the real dataset readers.
"""

import hashlib
import json
import re
from pathlib import Path

import cv2
import numpy as np
import pytest

from keras_privacy.data import synthetic
from keras_privacy.data.synthetic import (
    ATTRIBUTE_IDS,
    CLASSES,
    STYLES,
    write_synthetic_benchmark,
)
from keras_privacy.data.ucf101 import read_ucf101
from keras_privacy.data.video import probe_video, read_video
from keras_privacy.data.vispr import read_vispr
from keras_privacy.data.vp_labels import read_vp_labels

pytestmark = pytest.mark.backend_independent

SIZE, FRAMES = 40, 32
PER_CLASS = (4, 2)
IMAGES = (40, 4, 4)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    return write_synthetic_benchmark(
        out, seed=0, size=SIZE, num_frames=FRAMES, videos_per_class=PER_CLASS, num_images=IMAGES
    )


@pytest.fixture(scope="module")
def videos(bench):
    """Every video as (example, split name, decoded frames)."""
    splits = read_ucf101(bench.ucf_splits, root=bench.videos)
    return [
        (example, subset, read_video(example.path))
        for subset in ("train", "test")
        for example in splits[subset].examples
    ]


def _digests(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _f_statistic(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """One-way ANOVA F of each column of `values` between the `groups`."""
    labels = np.unique(groups)
    parts = [values[groups == g] for g in labels]
    grand = values.mean(axis=0)
    between = sum(len(p) * (p.mean(axis=0) - grand) ** 2 for p in parts) / (len(labels) - 1)
    within = sum(((p - p.mean(axis=0)) ** 2).sum(axis=0) for p in parts)
    return between / (within / (len(values) - len(labels)))


# ---------------------------------------------------------------------------- formats


def test_ucf101_format_and_videos(bench, videos):
    assert len(CLASSES) >= 6
    class_index = (bench.ucf_splits / "classInd.txt").read_bytes()
    assert class_index.count(b"\r\n") == len(CLASSES)  # UCF101's CRLF lines
    train_lines = (bench.ucf_splits / "trainlist01.txt").read_bytes().decode().split("\r\n")
    assert re.fullmatch(r"MoveRight/v_MoveRight_g01_c01\.avi 1", train_lines[0])
    test_line = (bench.ucf_splits / "testlist01.txt").read_text().splitlines()[0]
    assert re.fullmatch(r"MoveRight/v_MoveRight_g0\d_c0\d\.avi", test_line)  # no label

    splits = read_ucf101(bench.ucf_splits, root=bench.videos)
    for subset, count in zip(("train", "test"), PER_CLASS):
        split = splits[subset]
        assert split.class_names == list(CLASSES)
        assert split.missing == []
        assert len(split) == count * len(CLASSES)
        assert sorted({e.label for e in split.examples}) == list(range(len(CLASSES)))
        for example in split.examples:
            relative = Path(example.path).relative_to(bench.videos)
            assert relative.parts[0] == CLASSES[example.label]
            assert re.fullmatch(rf"v_{relative.parts[0]}_g\d\d_c0[1-4]\.avi", relative.name)
    names = [Path(e.path).name for subset in splits.values() for e in subset.examples]
    assert len(set(names)) == len(names)  # train and test never share a video

    for _, _, frames in videos:
        assert frames.shape == (FRAMES, SIZE, SIZE, 3) and frames.dtype == np.uint8
    info = probe_video(videos[0][0].path)
    assert (info.num_frames, info.fps, info.height, info.width) == (FRAMES, 25.0, SIZE, SIZE)


def test_vispr_format_and_images(bench):
    assert len(ATTRIBUTE_IDS) >= 5
    splits = read_vispr(bench.vispr, root=bench.vispr, attributes="all")
    for subset, count in zip(("train", "val", "test"), IMAGES):
        split = splits[subset]
        assert split.attribute_names == list(ATTRIBUTE_IDS)  # a0_safe is never a column
        assert split.missing == [] and len(split) == count
        privacy = np.array([e.privacy for e in split.examples])
        assert privacy.shape == (count, len(ATTRIBUTE_IDS))
        # each attribute present in exactly half of the split
        np.testing.assert_array_equal(privacy.sum(axis=0), count // 2)
    lines = (bench.vispr / "train2017.txt").read_text().splitlines()
    assert len(lines) == IMAGES[0]
    for line, example in zip(lines, splits["train"].examples):
        record = json.loads((bench.vispr / line).read_text())
        assert (bench.vispr / record["image_path"]).resolve() == Path(example.path).resolve()
        present = [a for a, v in zip(ATTRIBUTE_IDS, example.privacy) if v]
        assert record["labels"] == (present or ["a0_safe"])
        image = cv2.imread(example.path)
        assert image.shape == (SIZE, SIZE, 3)


def test_video_privacy_labels(bench):
    labels = read_vp_labels(bench.vp_labels, ATTRIBUTE_IDS)
    splits = read_ucf101(bench.ucf_splits, root=bench.videos)
    for subset, count in zip(("train", "test"), PER_CLASS):
        for label in range(len(CLASSES)):
            rows = [
                labels[str(Path(e.path).relative_to(bench.videos))]
                for e in splits[subset].examples
                if e.label == label
            ]
            # every attribute in exactly half of every class: independent of the action
            np.testing.assert_array_equal(np.sum(rows, axis=0), count // 2)
    assert len(labels) == sum(PER_CLASS) * len(CLASSES)


def test_seeded(tmp_path):
    options = dict(size=32, num_frames=6, videos_per_class=(2, 1), num_images=(4, 2, 2))
    write_synthetic_benchmark(tmp_path / "a", seed=3, **options)
    write_synthetic_benchmark(tmp_path / "b", seed=4, **options)
    first = _digests(tmp_path / "a")
    other = _digests(tmp_path / "b")
    assert set(first) == set(other) and len(first) > 30
    # same seed, also when overwriting another seed's files: the same bytes
    write_synthetic_benchmark(tmp_path / "b", seed=3, **options)
    assert _digests(tmp_path / "b") == first
    # another seed: other pictures and other labels
    for name in first:
        if name.endswith((".avi", ".jpg", "vp_labels.csv", "person_boxes.json")):
            assert first[name] != other[name], name


# ---------------------------------------------------------------------------- action


def test_action_is_carried_by_motion(bench, videos):
    """The background is static, the actor moves as its class says; person_boxes.json holds
    where it is in every frame."""
    boxes = json.loads(bench.person_boxes.read_text())
    for example, _, frames in videos:
        frames = frames.astype(np.float32)
        entries = boxes[Path(example.path).name]
        actor = np.zeros(frames.shape[:3], bool)
        corner = {}
        for t, x1, y1, x2, y2 in entries:
            actor[t, y1:y2, x1:x2] = True
            corner.setdefault(t, (x1, y1))  # the first box starts at the actor's corner
        assert sorted(corner) == list(range(FRAMES))
        # outside the actor (now and in the next frame) nothing moves; inside it does
        change = np.abs(np.diff(frames, axis=0)).mean(axis=-1)
        near_actor = actor[1:] | actor[:-1]
        assert change[~near_actor].mean() < 1.0
        assert change[near_actor].mean() > 5.0
        # the class from the motion of the actor's corner (unwrapped)
        corners = np.array([corner[t] for t in range(FRAMES)], np.float64)
        steps = (np.diff(corners, axis=0) + SIZE / 2) % SIZE - SIZE / 2
        path = np.concatenate([corners[:1], corners[0] + np.cumsum(steps, axis=0)])
        centred = path - path.mean(axis=0)
        x, y = centred[:, 0], centred[:, 1]
        area = 0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y)  # > 0: clockwise on screen
        dx, dy = steps.sum(axis=0)
        name = CLASSES[example.label]
        expected = {
            "MoveRight": dx > 0 and dy == 0,
            "MoveLeft": dx < 0 and dy == 0,
            "MoveDown": dy > 0 and dx == 0,
            "MoveUp": dy < 0 and dx == 0,
            "CircleClockwise": area > 20,
            "CircleAnticlockwise": area < -20,
        }
        assert expected[name], (example.path, dx, dy, area)


def test_single_frame_position_does_not_tell_the_class():
    # A uniformly random start and wrapping: in any one frame the actor is anywhere, whatever
    # the class (Kolmogorov-Smirnov distance of its position to the uniform distribution).
    count = 1000
    grid = np.linspace(0, SIZE, 65)
    for label in range(len(CLASSES)):
        rng = np.random.default_rng([7, label])
        positions = np.array(
            [synthetic.trajectory(rng, label, FRAMES, SIZE) for _ in range(count)]
        )  # (count, 2 (y, x), FRAMES)
        for t in (0, FRAMES // 2, FRAMES - 1):
            for axis in (0, 1):
                wrapped = np.sort(positions[:, axis, t] % SIZE)
                empirical = np.searchsorted(wrapped, grid, side="right") / count
                assert np.abs(empirical - grid / SIZE).max() < 0.07, (label, t, axis)


def test_static_appearance_is_independent_of_the_action(bench, videos):
    # The mean colour of a single frame does not separate the classes (one-way ANOVA F, chance
    # level ~1) while it does separate a coarse privacy attribute (the outdoor scene).
    labels = read_vp_labels(bench.vp_labels, ATTRIBUTE_IDS)
    colours = np.array([frames[0].mean(axis=(0, 1)) for _, _, frames in videos])
    actions = np.array([example.label for example, _, _ in videos])
    outdoor = np.array(
        [
            labels[str(Path(e.path).relative_to(bench.videos))][
                ATTRIBUTE_IDS.index("s4_outdoor_scene")
            ]
            for e, _, _ in videos
        ]
    )
    assert np.all(_f_statistic(colours, actions) < 3.0)
    assert np.all(_f_statistic(colours, outdoor) > 20.0)


# ---------------------------------------------------------------------------- attributes


def test_attributes_are_independent():
    rows = synthetic.balanced_attributes(np.random.default_rng(0), 2000)
    assert rows.shape == (2000, len(ATTRIBUTE_IDS)) and set(np.unique(rows)) == {0, 1}
    np.testing.assert_array_equal(rows.sum(axis=0), 1000)
    correlation = np.corrcoef(rows.T)
    off_diagonal = correlation[~np.eye(len(ATTRIBUTE_IDS), dtype=bool)]
    assert np.abs(off_diagonal).max() < 0.07  # ~3 standard errors at n = 2000
    combinations = {tuple(row) for row in rows}
    assert len(combinations) == 2 ** len(ATTRIBUTE_IDS)  # every combination occurs
    odd = synthetic.balanced_attributes(np.random.default_rng(1), 7)
    np.testing.assert_array_equal(odd.sum(axis=0), 3)  # half, rounded down


def test_written_attributes_are_independent(bench):
    privacy = np.array(
        [e.privacy for e in read_vispr(bench.vispr, bench.vispr, "all")["train"].examples]
    )
    correlation = np.corrcoef(privacy.T)
    off_diagonal = correlation[~np.eye(len(ATTRIBUTE_IDS), dtype=bool)]
    assert np.abs(off_diagonal).max() < 0.5  # ~3 standard errors at n = 40
    assert len({tuple(row) for row in privacy}) > 15


def kept_after_resize(side: int) -> dict[str, float]:
    """Per attribute: how much of the difference between the same scene with and without the
    cue survives resizing the frame to `side` pixels by area averaging (1 = all of it)."""

    def rendered(attribute, seed, y, x):
        attributes = dict.fromkeys(ATTRIBUTE_IDS, 0)
        if attribute:
            attributes[attribute] = 1
        scene = synthetic.Scene.sample(np.random.default_rng(seed), attributes, SIZE)
        return scene.render(y, x).astype(np.float32) / 255

    def resized(image):
        return cv2.resize(image, (side, side), interpolation=cv2.INTER_AREA)

    kept = {}
    for attribute in ATTRIBUTE_IDS:
        ratios = []
        for seed in range(12):
            y, x = np.random.default_rng([seed, 99]).uniform(0, SIZE, 2)
            plain, cued = rendered(None, seed, y, x), rendered(attribute, seed, y, x)
            full = np.abs(cued - plain).sum()
            assert full > 0  # the cue is visible at full resolution
            scale = (SIZE / side) ** 2
            ratios.append(scale * np.abs(resized(cued) - resized(plain)).sum() / full)
        kept[attribute] = np.mean(ratios)
    return kept


def test_fine_cues_survive_the_training_input_size():
    # Frames of 40 px reach the models at 32 px: every cue must still be there to be learned
    # (and removed by a learned anonymizer).
    kept = kept_after_resize(32)
    assert min(kept.values()) > 0.5, kept


def test_fine_cues_vanish_at_quarter_resolution_coarse_ones_stay():
    kept = kept_after_resize(SIZE // 4)
    # Not all of it: the cues are mean-preserving, but the actor is not aligned with the
    # 4 x 4 grid, so a block can straddle a stripe or a mark square. For the 4 x 4 checker at a
    # uniformly random offset a quarter of the difference survives on average (0.5 per axis);
    # the stripes span the body, so only their ends survive.
    assert kept["s2_striped_actor"] < 0.25, kept
    assert kept["s3_face_mark"] < 0.4, kept
    for coarse in ("s1_warm_actor", "s4_outdoor_scene", "s5_object"):
        assert kept[coarse] > 0.8, kept


# ---------------------------------------------------------------------------- version 5

V5 = dict(size=SIZE, num_frames=12, videos_per_class=(2, 1), num_images=(6, 2, 2), version=5)


@pytest.fixture(scope="module")
def styled(tmp_path_factory):
    """A tiny version-5 benchmark in every style."""
    return {
        style: write_synthetic_benchmark(tmp_path_factory.mktemp(style), style=style, **V5)
        for style in synthetic.STYLES
    }


def _styled_clip(seed: int, label: int, style: str, num_frames: int = 8):
    """(frames (T, H, W, 3) float, boxes per frame) of one version-5 example."""
    rng = np.random.default_rng(seed)
    attrs = dict(zip(ATTRIBUTE_IDS, (int(v) for v in rng.integers(0, 2, len(ATTRIBUTE_IDS)))))
    frames, boxes = synthetic.styled_example(
        rng, attrs, label, SIZE, num_frames, synthetic.STYLES[style]
    )
    return np.stack(frames).astype(np.float32), boxes


def _blackened(frames: np.ndarray, boxes: list) -> np.ndarray:
    frames = frames.copy()
    for frame, found in zip(frames, boxes):
        for x1, y1, x2, y2 in found:
            frame[y1:y2, x1:x2] = 0
    return frames


def test_v5_formats_read_back(styled):
    for style, paths in styled.items():
        assert (paths.root / "VERSION").read_text() == f"5 {style}\n"
        splits = read_ucf101(paths.ucf_splits, root=paths.videos)
        for subset, count in zip(("train", "test"), V5["videos_per_class"]):
            split = splits[subset]
            assert split.class_names == list(synthetic.CLASSES_V5) and split.missing == []
            assert len(split) == count * len(synthetic.CLASSES_V5)
            assert probe_video(split.examples[0].path).num_frames == V5["num_frames"]
        images = read_vispr(paths.vispr, root=paths.vispr, attributes="all")
        for subset, count in zip(("train", "val", "test"), V5["num_images"]):
            assert len(images[subset]) == count and images[subset].missing == []
        assert len(read_vp_labels(paths.vp_labels, ATTRIBUTE_IDS)) == 3 * len(CLASSES)
        # a box in every frame of every video and on every image, of one size per style
        boxes = json.loads(paths.person_boxes.read_text())
        assert len(boxes) == 3 * len(CLASSES) + sum(V5["num_images"])
        videos = {name: found for name, found in boxes.items() if name.endswith(".avi")}
        assert all({entry[0] for entry in found} == set(range(12)) for found in videos.values())


def test_v5_styles_differ():
    """Each style's mean colour histogram (60 pictures) is far from the other
    styles' and close to that of 60 other examples of the same style."""

    def histogram(style: str, seeds: range) -> np.ndarray:
        frames = []
        for seed in seeds:  # indoor and outdoor alternately, for a steadier histogram
            attrs = dict.fromkeys(ATTRIBUTE_IDS, seed % 2)
            rng = np.random.default_rng(seed)
            found, _ = synthetic.styled_example(rng, attrs, seed % 6, SIZE, 1, STYLES[style])
            frames.append(found[0])
        frames = np.stack(frames)
        counts = [np.histogram(frames[..., c], bins=8, range=(0, 256))[0] for c in range(3)]
        return np.concatenate(counts) / frames[..., 0].size

    histograms = {style: histogram(style, range(60)) for style in synthetic.STYLES}
    for style, first in histograms.items():
        same_style = np.abs(histogram(style, range(60, 120)) - first).sum()
        for other, second in histograms.items():
            if other != style:
                distance = np.abs(first - second).sum()
                assert distance > max(0.5, 3 * same_style), (style, other, distance, same_style)


def test_v5_byte_identical_per_style(styled, tmp_path):
    for style, paths in styled.items():
        # written again, over another style's files: the same bytes
        write_synthetic_benchmark(tmp_path, style="street" if style != "street" else "dusk", **V5)
        write_synthetic_benchmark(tmp_path, style=style, **V5)
        assert _digests(tmp_path) == _digests(paths.root), style
    studio, dusk = _digests(styled["studio"].root), _digests(styled["dusk"].root)
    assert all(studio[n] != dusk[n] for n in studio if n.endswith((".avi", ".jpg"))), "same bytes"


def test_v5_versions_and_styles_are_checked(tmp_path):
    with pytest.raises(ValueError, match="unknown synthetic style 'night'"):
        write_synthetic_benchmark(tmp_path, version=5, style="night")
    with pytest.raises(ValueError, match="styles are version 5's"):
        write_synthetic_benchmark(tmp_path, style="dusk")
    with pytest.raises(ValueError, match="version 3"):
        write_synthetic_benchmark(tmp_path, version=3)


def test_v5_blackened_actor_tells_nothing_of_the_action():
    """The class changes only the pixels inside the actor's box: with the same random draws,
    two classes' frames differ, and with the boxes blackened they are identical. In version 4
    the blackened box still moves as the class says."""
    for style in synthetic.STYLES:
        for seed in range(3):
            clips = [_styled_clip(seed, label, style) for label in range(len(CLASSES))]
            for frames, boxes in clips[1:]:
                assert boxes == clips[0][1]
                assert np.abs(frames - clips[0][0]).mean() > 0.5
                np.testing.assert_array_equal(
                    _blackened(frames, boxes), _blackened(*clips[0]), err_msg=style
                )

    def version_4(label: int):
        rng = np.random.default_rng(0)
        scene = synthetic.Scene.sample(rng, dict.fromkeys(ATTRIBUTE_IDS, 0), SIZE)
        ys, xs = synthetic.trajectory(rng, label, 8, SIZE)
        frames = np.stack([scene.render(y, x) for y, x in zip(ys, xs)]).astype(np.float32)
        return frames, [
            synthetic.actor_boxes(y, x, *scene.mask.shape, SIZE) for y, x in zip(ys, xs)
        ]

    first = _blackened(*version_4(0))
    for label in range(1, len(CLASSES)):
        assert np.abs(_blackened(*version_4(label)) - first).mean() > 1.0, CLASSES[label]


def test_v5_objects_vanish_at_quarter_resolution_movements_stay():
    """What the hand holds (stripes across or along the object) averages out under 4 x 4 area
    down-sampling; how the hand moves does not. Measured as the mean absolute difference
    between two classes' frames (same random draws) after down-sampling over before."""

    def quarter(frames: np.ndarray) -> np.ndarray:
        size = SIZE // 4
        return np.stack([cv2.resize(f, (size, size), interpolation=cv2.INTER_AREA) for f in frames])

    def kept(first: int, second: int) -> float:
        ratios = []
        for seed in range(12):
            a, _ = _styled_clip(seed, first, "dusk")
            b, _ = _styled_clip(seed, second, "dusk")
            ratios.append(np.abs(quarter(a) - quarter(b)).mean() / np.abs(a - b).mean())
        return float(np.mean(ratios))

    lift_striped, lift_barred, wave_striped = (
        synthetic.CLASSES_V5.index(n) for n in ("LiftStriped", "LiftBarred", "WaveStriped")
    )
    assert kept(lift_striped, lift_barred) < 0.5
    assert kept(lift_striped, wave_striped) > 0.65


def test_a_benchmark_of_another_style_is_rewritten_without_its_caches(tmp_path, monkeypatch):
    from keras_privacy.data import sources

    written = []

    def write(directory, seed, version, style):  # records the call; makes the folders, marker
        written.append((version, style))
        for name in synthetic.FOLDERS:
            (Path(directory) / name).mkdir(exist_ok=True)
        (Path(directory) / "VERSION").write_text(f"{synthetic.version_tag(version, style)}\n")

    monkeypatch.setattr(synthetic, "write_synthetic_benchmark", write)
    sources.synthetic_benchmark(tmp_path, version=5, style="dusk")
    (tmp_path / "cache" / "video_train_40").mkdir(parents=True)
    sources.synthetic_benchmark(tmp_path, version=5, style="dusk")  # complete: kept
    assert written == [(5, "dusk")] and (tmp_path / "cache").is_dir()
    sources.synthetic_benchmark(tmp_path, version=5, style="studio")
    assert written == [(5, "dusk"), (5, "studio")] and not (tmp_path / "cache").exists()
    sources.synthetic_benchmark(tmp_path)
    assert written[-1] == (4, "") and (tmp_path / "VERSION").read_text() == "4\n"


def test_the_benchmark_is_written_only_into_a_folder_of_its_own(bench, tmp_path, monkeypatch):
    from keras_privacy.data import sources
    from keras_privacy.spelling import SettingError

    assert {path.name for path in bench.root.iterdir()} == synthetic.ENTRIES
    written = []

    def write(directory, seed, version, style):  # records the call; writes the marker only
        written.append(directory)
        Path(directory).mkdir(exist_ok=True)
        (Path(directory) / "VERSION").write_text(f"{synthetic.version_tag(version, style)}\n")

    monkeypatch.setattr(synthetic, "write_synthetic_benchmark", write)
    # A folder of one's own (here a prepared cache, without a VERSION file) is left alone.
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "shard.tfrecord").write_text("hours of work")
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(SettingError, match=f"^--synthetic_dir={tmp_path} holds cache, notes.txt,"):
        sources.synthetic_benchmark(tmp_path)
    (tmp_path / "VERSION").write_text("1.2.3\n")  # another program's VERSION file
    with pytest.raises(SettingError, match="holds VERSION, cache, notes.txt, which the built-in"):
        sources.synthetic_benchmark(tmp_path)
    (tmp_path / "notes.txt").unlink()  # its VERSION beside its cache alone: still not ours
    with pytest.raises(SettingError, match="holds VERSION, cache, which the built-in benchmark"):
        sources.synthetic_benchmark(tmp_path)
    assert synthetic.is_version_tag("4") and synthetic.is_version_tag("5 dusk\n")
    assert not synthetic.is_version_tag("5 night") and not synthetic.is_version_tag("v2")
    # A dataset's folder of a name the generator also writes, without the folders it makes first.
    (tmp_path / "datasets" / "vispr").mkdir(parents=True)
    with pytest.raises(SettingError, match="datasets holds vispr, which the built-in benchmark"):
        sources.synthetic_benchmark(tmp_path / "datasets")
    assert written == [] and (tmp_path / "cache" / "shard.tfrecord").is_file()
    # An empty or new folder, and one of a stopped write (the generator's files alone).
    sources.synthetic_benchmark(tmp_path / "new")
    for name in synthetic.FOLDERS:
        (tmp_path / "stopped" / name).mkdir(parents=True)
    sources.synthetic_benchmark(tmp_path / "stopped")
    assert written == [tmp_path / "new", tmp_path / "stopped"]


def test_the_readmes_styles_picture_is_what_its_script_draws():
    import importlib.util

    import cv2

    repo = Path(__file__).resolve().parents[1]
    script = repo / "scripts" / "synthetic_styles_figure.py"
    spec = importlib.util.spec_from_file_location("synthetic_styles_figure", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    picture = module.styles_figure()
    assert picture.shape == (3 * 80 + 2 * 4, 6 * 80 + 5 * 4, 3)
    committed = cv2.imread(str(repo / "docs" / "images" / "synthetic_v5_styles.png"))[..., ::-1]
    np.testing.assert_array_equal(committed, picture)
