"""Anonymisation baselines and offline person detection, on the real UCF101 clip test.avi."""

import json
import re

import cv2
import numpy as np
import pytest

from keras_privacy.data.video import read_video
from keras_privacy.evaluation.baselines import (
    BASELINES,
    blacken_people,
    blur_people,
    box_mask,
    build_baseline,
    downsample,
)
from keras_privacy.evaluation.detection import (
    BoxesFromFile,
    FrameDetector,
    HogPeopleDetector,
    PersonOrFaceDetector,
    keyframe_indices,
    non_max_suppression,
)

# test.avi (ApplyEyeMakeup): the woman's head fills the right half of the 320 x 240 frame.
_HEAD_REGION = (180, 0, 320, 200)


class _FixedDetector:
    """A stand-in detector giving one box on every frame."""

    def __init__(self, box):
        self.box = np.asarray([box], np.int32)

    def detect_clip(self, clip):
        return [self.box] * len(clip)


@pytest.fixture(scope="module")
def clip(fixtures_dir):
    """The first 16 frames of test.avi as float32 in [0, 1], (16, 240, 320, 3)."""
    frames = read_video(fixtures_dir / "videos" / "test.avi", max_frames=16)
    return frames.astype(np.float32) / 255.0


@pytest.fixture(scope="module")
def boxes(clip):
    """Person-or-face boxes of the clip, detected once on two keyframes."""
    return PersonOrFaceDetector(keyframes=2).detect_clip(clip)


def _in_head_region(box):
    x1, y1, x2, y2 = _HEAD_REGION
    centre_x, centre_y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return x1 <= centre_x <= x2 and y1 <= centre_y <= y2


def test_detector_finds_the_head_on_test_avi(clip, boxes):
    assert len(boxes) == len(clip)
    union = boxes[0]
    assert union.dtype == np.int32 and union.shape[1] == 4
    assert any(_in_head_region(box) and (box[2] - box[0]) >= 48 for box in union)
    for frame_boxes in boxes:
        np.testing.assert_array_equal(frame_boxes, union)


@pytest.mark.parametrize("anonymize", [blacken_people, blur_people])
def test_people_baselines_change_the_person_and_nothing_else(clip, boxes, anonymize):
    result = anonymize(clip, boxes)
    assert result.shape == clip.shape and result.dtype == clip.dtype
    mask = box_mask(240, 320, boxes[0])
    assert 0.02 < mask.mean() < 0.9
    np.testing.assert_array_equal(result[:, ~mask], clip[:, ~mask])
    changed = np.abs(result[:, mask] - clip[:, mask]).mean()
    assert changed > 0.02
    if anonymize is blacken_people:
        assert np.all(result[:, mask] == 0)


def test_strong_blur_blurs_more_than_weak(clip):
    whole_frame = _FixedDetector([0, 0, 320, 240])
    strong = build_baseline("blur_strong", whole_frame)(clip[:4])
    weak = build_baseline("blur_weak", whole_frame)(clip[:4])
    assert _detail(strong) < _detail(weak) < 0.5 * _detail(clip[:4])


def _detail(frames):
    """Mean absolute Laplacian: the energy of fine detail."""
    grey = frames.mean(axis=-1).astype(np.float32)
    return np.mean([np.abs(cv2.Laplacian(frame, cv2.CV_32F)).mean() for frame in grey])


def test_downsample_removes_fine_detail_and_keeps_shape(clip):
    half, quarter = downsample(clip, 2), downsample(clip, 4)
    for result in (half, quarter):
        assert result.shape == clip.shape and result.dtype == clip.dtype
        assert 0.0 <= result.min() and result.max() <= 1.0
        assert abs(result.mean() - clip.mean()) < 0.01
    assert _detail(quarter) < _detail(half) < 0.8 * _detail(clip)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_every_baseline_keeps_shape_and_dtype_and_gives_uint8_the_float_values(clip, name):
    baseline = build_baseline(name, detector=_FixedDetector([100, 50, 220, 200]))
    frames = np.rint(clip[:3] * 255).astype(np.uint8)
    as_float, as_uint8 = baseline(frames.astype(np.float32) / 255), baseline(frames)
    for result, dtype in ((as_float, np.float32), (as_uint8, np.uint8)):
        assert result.shape == frames.shape and result.dtype == dtype
    # Within rounding: uint8 rounds once per resize (down-sampling resizes twice).
    difference = np.abs(as_uint8.astype(np.float32) - as_float * 255)
    assert difference.max() <= 1.5


def test_default_detector_runs_inside_build_baseline(clip):
    result = build_baseline("blacken")(clip[:2])
    assert result.shape == (2, 240, 320, 3)
    assert (result == 0).all(axis=-1).mean() > 0.02


def test_single_frame_and_per_frame_boxes():
    frame = np.full((40, 60, 3), 200, np.uint8)
    blackened = blacken_people(frame, [[10, 5, 20, 15]])
    assert (blackened == 0).all(axis=-1).sum() == 100
    clip = np.stack([frame, frame])
    per_frame = [np.array([[0, 0, 10, 10]]), np.zeros((0, 4))]
    result = blacken_people(clip, per_frame)
    assert (result[0] == 0).all(axis=-1).sum() == 100 and (result[1] == frame).all()
    with pytest.raises(ValueError, match="per-frame"):
        blacken_people(clip, per_frame[:1])


def test_unknown_baseline_is_rejected():
    with pytest.raises(ValueError, match="unknown baseline"):
        build_baseline("pixelate")


class _FakeHog:
    """Stands in for cv2.HOGDescriptor: records the image size, returns two windows."""

    def detectMultiScale(self, image, **kwargs):  # noqa: N802 (OpenCV's name)
        self.shape = image.shape
        return np.array([[100, 50, 64, 128], [300, 300, 64, 128]]), np.array([1.2, 0.1])


def test_hog_upscales_small_frames_and_maps_boxes_back():
    detector = HogPeopleDetector()
    detector._hog = _FakeHog()
    boxes = detector.detect(np.zeros((240, 320, 3), np.uint8))
    assert detector._hog.shape == (480, 640, 3)
    np.testing.assert_array_equal(boxes, [[50, 25, 82, 89]])


def test_hog_on_the_real_frame_returns_an_empty_int_array_of_boxes(clip):
    # A head filling the frame is no whole-body pedestrian for OpenCV's HOG: no box, in the
    # (0, 4) int32 shape the blackening reads (the face detector covers this clip).
    boxes = HogPeopleDetector().detect(clip[0])
    assert boxes.dtype == np.int32 and boxes.shape == (0, 4)


def test_non_max_suppression():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]])
    np.testing.assert_array_equal(non_max_suppression(boxes, [0.5, 0.9, 0.1]), [1, 2])


class _BoxPerFrame(FrameDetector):
    """Detects a 1-pixel box at x = the frame's value."""

    def detect(self, frame):
        x = int(frame[0, 0, 0])
        return np.array([[x, 0, x + 1, 1]], np.int32)


def test_keyframe_union_and_per_frame_detection():
    clip = np.arange(10, dtype=np.uint8)[:, None, None, None] * np.ones((1, 4, 20, 3), np.uint8)
    np.testing.assert_array_equal(keyframe_indices(10, 3), [0, 4, 9])
    union = _BoxPerFrame(keyframes=3).detect_clip(clip)
    assert len(union) == 10
    for frame_boxes in union:
        np.testing.assert_array_equal(frame_boxes[:, 0], [0, 4, 9])
    per_frame = _BoxPerFrame(keyframes=None).detect_clip(clip)
    assert [int(b[0, 0]) for b in per_frame] == list(range(10))


class _CentreBox(FrameDetector):
    """Records the size of the frames it is given; detects a box over their middle half."""

    def detect(self, frame):
        self.shape = frame.shape
        height, width = frame.shape[:2]
        return np.array([[width // 4, height // 4, 3 * width // 4, 3 * height // 4]], np.int32)


@pytest.mark.backend_independent  # NumPy and OpenCV
def test_frames_larger_than_max_side_are_detected_reduced_and_boxed_in_their_pixels():
    clip = np.zeros((2, 1000, 2000, 3), np.uint8)
    detector = _CentreBox(keyframes=1, max_side=640)
    boxes = detector.detect_clip(clip)
    assert detector.shape == (320, 640, 3)
    for frame_boxes in boxes:
        np.testing.assert_array_equal(frame_boxes, [[500, 250, 1500, 750]])
    small = np.zeros((1, 240, 320, 3), np.uint8)
    np.testing.assert_array_equal(detector.detect_clip(small)[0], [[80, 60, 240, 180]])
    assert detector.shape == (240, 320, 3)
    unbounded = _CentreBox(keyframes=1)
    unbounded.detect_clip(clip)
    assert unbounded.shape == (1000, 2000, 3)


@pytest.mark.backend_independent  # NumPy and OpenCV
def test_a_large_photograph_is_boxed_where_its_reduced_copy_is(clip):
    # test.avi's frame blown up 8x (2560 x 1920, as a camera photograph of VISPR): detected
    # reduced to 640 pixels, the face lands in the head region at 8x its coordinates.
    frame = (clip[0] * 255).round().astype(np.uint8)
    large = cv2.resize(frame, (2560, 1920), interpolation=cv2.INTER_LINEAR)
    boxes = PersonOrFaceDetector(keyframes=1).detect_clip(large[None])[0]
    assert boxes.dtype == np.int32 and len(boxes)
    assert boxes.min() >= 0 and boxes[:, 2].max() <= 2560 and boxes[:, 3].max() <= 1920
    assert any(_in_head_region(box / 8) and (box[2] - box[0]) >= 8 * 48 for box in boxes)


def test_boxes_from_file(tmp_path):
    path = tmp_path / "boxes.json"
    boxes = {
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi": [
            [0, 1, 2, 5, 6],
            [0, 10, 10, 12, 12],
            [2, 0, 0, 4, 4],
        ],
        "2017_10001018.jpg": [[12, 40, 200, 380]],
    }
    path.write_text(json.dumps(boxes))
    source = BoxesFromFile(path)
    video = "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi"
    assert set(source.names) == set(boxes) and video in source
    np.testing.assert_array_equal(source.frame_boxes(video, 0), [[1, 2, 5, 6], [10, 10, 12, 12]])
    assert source.frame_boxes(video, 1).shape == (0, 4)
    np.testing.assert_array_equal(source.frame_boxes("2017_10001018.jpg", 7), [[12, 40, 200, 380]])
    with pytest.raises(ValueError, match=re.escape(f"{path} (--eval_boxes): no boxes for 'x.avi'")):
        source.frame_boxes("x.avi")
    source.require([video, "2017_10001018.jpg"])
    with pytest.raises(
        ValueError, match=re.escape(f"{path} (--eval_boxes): no boxes for 2 of the evaluation's 3")
    ):
        source.require(["x.avi", video, "y.jpg"])

    clip = np.ones((2, 16, 16, 3), np.float32)
    blackened = build_baseline("blacken", source.detector(video, frame_indices=[1, 2]))(clip)
    assert blackened[0].min() == 1.0
    assert (blackened[1, :4, :4] == 0).all() and blackened[1].sum() == 3 * (256 - 16)


def test_float_boxes_from_file_are_rounded_outwards(tmp_path):
    # Detectors write float corners: a box keeps every pixel it touches.
    path = tmp_path / "boxes.json"
    path.write_text(
        json.dumps({"a.jpg": [[10.6, 20.4, 50.4, 60.6]], "b.avi": [[0, 0.5, 1, 2, 3.2]]})
    )
    source = BoxesFromFile(path)
    np.testing.assert_array_equal(source.frame_boxes("a.jpg"), [[10, 20, 51, 61]])
    np.testing.assert_array_equal(source.frame_boxes("b.avi", 0), [[0, 1, 2, 4]])


def test_a_box_beyond_its_frame_is_refused_naming_the_file_and_the_frame(tmp_path):
    # Boxes in the pixels of a rotated or resized frame would mask the wrong pixels; a box a
    # little past the edge (an unclipped detector) is taken.
    path = tmp_path / "boxes.json"
    path.write_text(json.dumps({"a.jpg": [[-1, 0, 33, 24]], "b.jpg": [[0, 8, 20, 30]]}))
    source = BoxesFromFile(path)
    image = np.ones((1, 24, 32, 3), np.uint8)
    assert build_baseline("blacken", source.detector("a.jpg"))(image).max() == 0
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"{path} (--eval_boxes): 'b.jpg', frame 0: box [0, 8, 20, 30] reaches beyond its "
            "32 x 24 frame"
        ),
    ):
        build_baseline("blacken", source.detector("b.jpg"))(image)


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"a.avi": [[0, 1, 2, 3, 4], [1, 2, 3, 4]]}', ": 'a.avi': expected a list of"),
        ('{"a.avi": [[0, 1, 2]]}', ": 'a.avi': expected a list of"),
        ('{"a.avi": [[1, 2, 3, 4]', ":1: invalid JSON"),
        ("[[1, 2, 3, 4]]", ": expected a JSON object"),
        # [x, y, w, h] boxes would mask nothing: inverted corners are refused.
        ('{"a.avi": [[30, 13, 16, 35]]}', ": 'a.avi': box [30.0, 13.0, 16.0, 35.0] has x2 < x1"),
        ('{"a.avi": [[0, 30, 13, 36, 8]]}', ": 'a.avi': box [30.0, 13.0, 36.0, 8.0] has x2 < x1"),
        ('{"a.avi": [[0, 1, NaN, 3, 4]]}', ": 'a.avi': [0.0, 1.0, nan, 3.0, 4.0] holds a value"),
        ('{"a.avi": [[-1, 1, 2, 3, 4]]}', ": 'a.avi': [-1.0, 1.0, 2.0, 3.0, 4.0]: the frame -1"),
        ('{"a.avi": [[1.5, 1, 2, 3, 4]]}', ": 'a.avi': [1.5, 1.0, 2.0, 3.0, 4.0]: the frame 1.5"),
    ],
)
def test_boxes_from_file_names_the_file_and_the_entry_it_cannot_read(tmp_path, content, message):
    path = tmp_path / "boxes.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(f"{path}{message}")):
        BoxesFromFile(path)


def test_boxes_from_a_missing_file_name_the_flag(tmp_path):
    path = tmp_path / "boxes.json"
    with pytest.raises(FileNotFoundError, match=re.escape(f"{path} (--eval_boxes): no such box")):
        BoxesFromFile(path)


def test_downsample_4x_reaches_the_target_model_at_its_input_scale(tmp_path):
    """A 1000 x 800 image goes through the evaluation's cache (short side 128) and view (112 x
    112): the target model behind `downsample_4x` sees exactly that view area-resized to 28 x 28
    and bilinearly back to 112 x 112."""
    import keras

    from keras_privacy.data import pipelines
    from keras_privacy.data.cache import prepare_cache
    from keras_privacy.data.examples import Example, Split
    from keras_privacy.evaluation import anonymizations, protocol

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (800, 1000, 3), dtype=np.uint8)
    cv2.imwrite(str(tmp_path / "image.png"), image)
    split = Split([Example(str(tmp_path / "image.png"), privacy=(1,))], attribute_names=["a"])
    cache = prepare_cache(split, "image", tmp_path / "cache", 128)
    dataset = pipelines.privacy_labelled_dataset(cache, 1, 112, training=False)
    view = next(dataset.as_numpy_iterator())["images"]
    target = keras.Sequential([keras.Input((112, 112, 3)), keras.layers.Activation("linear")])
    method = anonymizations.baseline_anonymization("downsample_4x")
    seen = protocol.with_anonymizer(target, method.model, clips=False).predict_on_batch(view)
    small = cv2.resize(view[0], (28, 28), interpolation=cv2.INTER_AREA)
    expected = cv2.resize(small, (112, 112), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(np.asarray(seen)[0], expected, atol=1e-5)
    assert method.baseline not in protocol.FILE_BASELINES  # no file is rewritten for it


def test_input_downsample_matches_opencv_on_clips_of_any_size():
    import keras

    from keras_privacy.evaluation.baselines import InputDownsample

    clips = np.random.default_rng(1).random((2, 3, 30, 45, 3)).astype(np.float32)
    result = keras.ops.convert_to_numpy(InputDownsample(4)(clips))
    expected = np.stack([downsample(clip, 4) for clip in clips])
    np.testing.assert_allclose(result, expected, atol=1e-5)


def test_a_model_behind_input_downsample_reloads_to_the_same_outputs(tmp_path):
    import keras

    from keras_privacy.evaluation.baselines import InputDownsample

    inputs = keras.Input((3, 16, 16, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(InputDownsample(2)(inputs)))
    model.save(tmp_path / "downsampled.keras")
    reloaded = keras.saving.load_model(tmp_path / "downsampled.keras")
    clips = np.random.default_rng(2).random((1, 3, 16, 16, 3)).astype(np.float32)
    np.testing.assert_allclose(reloaded(clips), model(clips), atol=1e-6)
    assert reloaded.layers[1].get_config()["factor"] == 2
    assert not reloaded.layers[1].trainable


def test_people_baselines_act_at_the_model_scale_with_scaled_boxes():
    image = np.full((1, 800, 1000, 3), 200, np.uint8)
    detector = _FixedDetector([100, 200, 300, 600])
    blackened = build_baseline("blacken", detector, short_side=128, kind="image")(image)
    assert blackened.shape == (1, 128, 160, 3)
    expected = box_mask(128, 160, [[16, 32, 48, 96]])  # the box times 128 / 800
    np.testing.assert_array_equal((blackened[0] == 0).all(axis=-1), expected)


@pytest.mark.parametrize("kind, reference", [("video", (300, 240)), ("image", (640, 512))])
def test_the_blurs_apply_the_supplements_kernels_at_its_scale_then_resize(kind, reference):
    # SPAct supp. C.6: kernel 21 / sigma 10 (weak 13 / 10) on a 240-pixel video frame and on
    # a VISPR image resized to a short side of 512; the cache then resizes to 128.
    frame = np.random.default_rng(2).random((1, 600, 750, 3)).astype(np.float32)
    whole = _FixedDetector([0, 0, 750, 600])
    large = cv2.resize(frame[0], reference, interpolation=cv2.INTER_AREA)
    outputs = {}
    for name, kernel in (("blur_strong", 21), ("blur_weak", 13)):
        outputs[name] = build_baseline(name, whole, short_side=128, kind=kind)(frame)[0]
        expected = cv2.resize(
            cv2.GaussianBlur(large, (kernel, kernel), 10.0),
            (160, 128),
            interpolation=cv2.INTER_AREA,
        )
        np.testing.assert_allclose(outputs[name], expected, atol=1e-6)
    # The two blurs stay two at 128 (scaled kernels rounded both to 5 on images).
    assert np.abs(outputs["blur_strong"] - outputs["blur_weak"]).max() > 1e-3
