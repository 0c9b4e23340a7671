"""Anonymizing real videos: frame count, size, timestamps and audio kept; failures named."""

import os
import re
from pathlib import Path

import av
import keras
import numpy as np
import pytest
from test_data import write_video_dropping_frames

from keras_privacy import anonymize
from keras_privacy.anonymize import anonymize_video, main
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.video import probe_video, read_video, write_video
from keras_privacy.export import load_keras_anonymizer
from keras_privacy.models.registry import build_anonymizer
from keras_privacy.runtimes import keras_frames
from keras_privacy.streaming import StreamStats


def _frame_times(path) -> list[float]:
    with av.open(str(path)) as container:
        return [float(frame.time) for frame in container.decode(video=0)]


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "unet_tiny.keras"
    keras.utils.set_random_seed(3)
    build_anonymizer("unet_tiny").save(path)
    return path


@pytest.fixture(scope="module")
def inverting_model_path(tmp_path_factory):
    """An anonymizer whose output is 1 - frame: unlike a random UNet's near-uniform grey, its
    frames tell a wrong or missing model output from the right one."""
    path = tmp_path_factory.mktemp("model") / "invert.keras"
    inputs = keras.Input((None, None, 3))
    convolution = keras.layers.Conv2D(3, 1)
    model = keras.Model(inputs, convolution(inputs))
    convolution.set_weights([-np.eye(3, dtype="float32")[None, None], np.ones(3, "float32")])
    model.save(path)
    return path


def test_video_keeps_frame_count_size_and_fps(fixtures_dir, inverting_model_path, tmp_path):
    source = fixtures_dir / "videos" / "test.avi"
    out = tmp_path / "anonymized.mp4"
    args = [str(source), str(out), "--anonymizer", str(inverting_model_path), "--no_progress"]
    assert main(args) == 0
    assert os.listdir(tmp_path) == ["anonymized.mp4"]  # no partial file left behind
    info = probe_video(out)
    assert (info.num_frames, info.height, info.width, info.fps) == (164, 240, 320, 25.0)
    # Every frame is the model's output (the inverted frame), up to MPEG-4 compression.
    source_frames, written = read_video(source).astype(int), read_video(out).astype(int)
    expected = keras_frames(load_keras_anonymizer(inverting_model_path), factor=1)(
        source_frames[:1].astype(np.uint8)
    )[0]
    np.testing.assert_array_equal(expected, 255 - source_frames[0])
    errors = np.abs(written - (255 - source_frames)).mean(axis=(1, 2, 3))
    assert errors.max() < 3, errors.argmax()
    assert np.abs(written - written.mean()).mean() > 20  # not a flat frame


def test_folder_names_the_corrupt_video_and_writes_the_others(
    fixtures_dir, model_path, tmp_path, capsys
):
    videos = tmp_path / "in"
    videos.mkdir()
    (videos / "broken.avi").write_bytes(b"\x00not a video" * 100)
    os.symlink(fixtures_dir / "videos" / "part_0.mp4", videos / "pool.mp4")
    (videos / "notes.txt").write_text("not a video: ignored")
    out = tmp_path / "out"
    args = [str(videos), str(out), "--anonymizer", str(model_path), "--no_progress"]
    assert main(args) == 1
    stderr = capsys.readouterr().err
    assert "1 video(s) failed" in stderr and str(videos / "broken.avi") in stderr
    assert f"{out / 'pool.mp4'}: 32 frames anonymized, 0 dropped" in stderr
    assert f"{videos / 'pool.mp4'}: h264 340x256 at 30 frames/s" in stderr
    assert sorted(os.listdir(out)) == [anonymize.DONE_LIST, "pool.mp4"]
    assert anonymize.read_done_list(out) == {"pool.mp4"}
    info = probe_video(out / "pool.mp4")
    assert (info.num_frames, info.height, info.width) == (32, 256, 340)
    # The source's timestamps, carried through (it has a gap: one frame slot is missing).
    np.testing.assert_allclose(
        _frame_times(out / "pool.mp4"), _frame_times(videos / "pool.mp4"), atol=1e-3
    )


def test_ctrl_c_in_a_folder_stops_after_closing_that_video(model_path, tmp_path, monkeypatch):
    videos = tmp_path / "in"
    videos.mkdir()
    for name in ("a.mp4", "b.mp4"):
        (videos / name).write_bytes(b"")
    started = []

    def interrupted_video(anonymizer, source, output, **kwargs):
        started.append(Path(source).name)
        return StreamStats(frames_written=3, interrupted=True)

    monkeypatch.setattr(anonymize, "anonymize_video", interrupted_video)
    args = [str(videos), str(tmp_path / "out"), "--anonymizer", str(model_path), "--no_progress"]
    assert main(args) == 130
    assert started == ["a.mp4"]


def test_resume_redoes_only_the_videos_not_written_whole(model_path, tmp_path, monkeypatch, capsys):
    """A folder run lists each video written whole; --resume skips those (the one Ctrl-C cut
    off, a failed one and a listed one whose output is gone are done again)."""
    videos = tmp_path / "in"
    for name in ("a.mp4", "b.mp4", "c/d.mp4", "e.mp4"):
        (videos / name).parent.mkdir(parents=True, exist_ok=True)
        (videos / name).write_bytes(b"")
    out = tmp_path / "out"
    started = []
    cut_off = {"e.mp4"}  # by Ctrl-C, in the first run only

    def fake_video(anonymizer, source, output, **kwargs):
        name = Path(source).relative_to(videos).as_posix()
        started.append(name)
        if name == "b.mp4":
            raise VideoDecodeError(f"{source}: not a video")
        Path(output).write_bytes(b"written")
        return StreamStats(frames_written=2, interrupted=name in cut_off)

    monkeypatch.setattr(anonymize, "anonymize_video", fake_video)
    args = [str(videos), str(out), "--anonymizer", str(model_path), "--no_progress"]
    assert main(args) == 130
    assert started == ["a.mp4", "b.mp4", "c/d.mp4", "e.mp4"]
    assert anonymize.read_done_list(out) == {"a.mp4", "c/d.mp4"}
    (out / "a.mp4").unlink()
    started.clear()
    cut_off.clear()
    capsys.readouterr()
    assert main([*args, "--resume"]) == 1  # b.mp4 fails again
    assert started == ["a.mp4", "b.mp4", "e.mp4"]
    assert f"1 video(s) skipped: listed as done in {out / anonymize.DONE_LIST}" in (
        capsys.readouterr().err
    )
    assert anonymize.read_done_list(out) == {"a.mp4", "c/d.mp4", "e.mp4"}
    started.clear()
    assert main(args) == 1  # without --resume every video is done again, the list afresh
    assert started == ["a.mp4", "b.mp4", "c/d.mp4", "e.mp4"]
    assert anonymize.read_done_list(out) == {"a.mp4", "c/d.mp4", "e.mp4"}
    source = videos / "a.mp4"
    assert (
        main([str(source), str(tmp_path / "a.mp4"), "--anonymizer", str(model_path), "--resume"])
        == 1
    )
    assert f"error: --resume: {source} is not a folder" in capsys.readouterr().err


def test_a_folder_of_class_folders_keeps_its_tree_and_skips_the_output_inside_it(
    model_path, tmp_path, monkeypatch, capsys
):
    """A dataset keeps a folder per class: every video below the input is written under the
    same relative path; an output folder inside the input (a rerun) is not read as input."""
    videos = tmp_path / "in"
    for name in ("Archery/v_Archery_g01_c01.avi", "Biking/v_Biking_g01_c01.avi", "top.mp4"):
        (videos / name).parent.mkdir(parents=True, exist_ok=True)
        (videos / name).write_bytes(b"")
    (videos / "Biking" / "notes.txt").write_text("not a video: ignored")
    out = videos / "anonymized"
    (out / "Archery").mkdir(parents=True)
    (out / "Archery" / "v_Archery_g01_c01.avi").write_bytes(b"")  # an earlier run's output
    written = []

    def fake_video(anonymizer, source, output, **kwargs):
        written.append((Path(source).relative_to(videos), Path(output).relative_to(out)))
        assert Path(output).parent.is_dir()
        return StreamStats(frames_written=1)

    monkeypatch.setattr(anonymize, "anonymize_video", fake_video)
    assert main([str(videos), str(out), "--anonymizer", str(model_path), "--no_progress"]) == 0
    expected = [Path("Archery/v_Archery_g01_c01.avi"), Path("Biking/v_Biking_g01_c01.avi")]
    assert written == [(path, path) for path in [*expected, Path("top.mp4")]]
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    assert main([str(empty), str(tmp_path / "o"), "--anonymizer", str(model_path)]) == 1
    assert f"{empty}: no video file (" in capsys.readouterr().err


def test_single_corrupt_video_fails_with_its_name(model_path, tmp_path, capsys):
    source = tmp_path / "broken.mp4"
    source.write_bytes(b"")
    out = tmp_path / "out.mp4"
    assert main([str(source), str(out), "--anonymizer", str(model_path)]) == 1
    assert str(source) in capsys.readouterr().err
    assert not out.exists()


def test_a_video_cut_short_is_anonymized_with_a_warning_naming_both_counts(
    model_path, tmp_path, capsys
):
    rng = np.random.default_rng(0)
    whole = tmp_path / "whole.avi"
    write_video(whole, rng.integers(0, 256, (60, 32, 32, 3), dtype=np.uint8))
    cut = tmp_path / "cut.avi"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    dropped = tmp_path / "dropped.avi"  # frames its writer dropped: declares 11, holds 8
    write_video_dropping_frames(dropped, [0, 1, 2, 5, 6, 7, 9, 10])
    for source in (whole, cut, dropped):
        out = tmp_path / f"out_{source.name}"
        assert main([str(source), str(out), "--anonymizer", str(model_path), "--no_progress"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {cut}: the container declares 60 frames, 29 decoded (the file seems cut short)"
    ]
    assert probe_video(tmp_path / "out_cut.avi").num_frames == 29


def test_a_video_cut_before_its_first_frame_is_named_as_the_input(
    fixtures_dir, model_path, tmp_path
):
    data = (fixtures_dir / "videos" / "test.avi").read_bytes()
    source = tmp_path / "headers_only.avi"
    source.write_bytes(data[: data.index(b"movi") + 4])
    out = tmp_path / "out.avi"
    model = load_keras_anonymizer(model_path)
    with pytest.raises(
        VideoDecodeError, match=f"^{re.escape(str(source))}: no video frame decoded"
    ):
        anonymize_video(model, source, out, show_progress=False)
    assert sorted(os.listdir(tmp_path)) == ["headers_only.avi"]  # no output, no partial file


def test_a_raw_stream_file_is_read_with_its_format_and_options(model_path, tmp_path):
    # A raw stream has no header: its size and pixel format come as demuxer options, which
    # the progress bar's packet count needs as much as the decoding.
    frames = np.random.default_rng(2).integers(0, 256, (10, 32 * 32 * 3 // 2), dtype=np.uint8)
    source = tmp_path / "camera.yuv"
    source.write_bytes(frames.tobytes())
    options = {"video_size": "32x32", "pixel_format": "yuv420p", "framerate": "10"}
    model = load_keras_anonymizer(model_path)
    stats = anonymize_video(
        model, source, tmp_path / "out.mp4", show_progress=False, input_format="rawvideo",
        input_options=options,
    )  # fmt: skip
    assert stats.frames_read == stats.frames_written == 10
    assert probe_video(tmp_path / "out.mp4").num_frames == 10


def test_a_matroska_file_is_decoded_once(model_path, tmp_path, monkeypatch):
    # Matroska declares no frame count: the progress bar counts packets (a demux) where it
    # decoded the whole file first to count its frames.
    rng = np.random.default_rng(1)
    source = tmp_path / "camera.mkv"
    write_video(source, rng.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8))
    assert probe_video(source).declared_frames == 0
    from keras_privacy.data import video

    def counted_by_decoding(path):
        raise AssertionError(f"{path} decoded to count its frames")

    monkeypatch.setattr(video, "_decoded_frames", counted_by_decoding)
    out = tmp_path / "out.mkv"
    model = load_keras_anonymizer(model_path)
    stats = anonymize_video(model, source, out, show_progress=False)
    assert stats.frames_read == stats.frames_written == 12
    monkeypatch.undo()
    assert probe_video(out).num_frames == 12


def test_an_output_that_is_the_input_is_refused_and_the_raw_video_kept(
    fixtures_dir, model_path, tmp_path, capsys
):
    folder = tmp_path / "videos"
    folder.mkdir()
    video = folder / "test.avi"
    video.write_bytes((fixtures_dir / "videos" / "test.avi").read_bytes())
    raw = video.read_bytes()
    same = [str(video), str(folder / ".." / "videos" / "test.avi")]
    assert main([*same, "--anonymizer", str(model_path)]) == 1
    assert f"{same[1]}: the output is the input video" in capsys.readouterr().err
    assert main([str(folder), str(tmp_path / "videos/"), "--anonymizer", str(model_path)]) == 1
    assert "the output folder is the input folder" in capsys.readouterr().err
    assert video.read_bytes() == raw


def test_an_output_whose_folder_is_missing_or_a_file_is_named_so(
    fixtures_dir, model_path, tmp_path, capsys
):
    source = str(fixtures_dir / "videos" / "test.avi")
    (tmp_path / "a_file").write_text("not a folder")
    for folder, problem in (("missing", "the output folder does not exist"),
                            ("a_file", "a file, not the output's folder")):  # fmt: skip
        output = tmp_path / folder / "out.mp4"
        assert main([source, str(output), "--anonymizer", str(model_path)]) == 1
        assert f"error: {tmp_path / folder}: {problem}" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["a_file"]


def test_an_anonymizer_with_non_finite_weights_is_refused_by_name(
    fixtures_dir, model_path, tmp_path, capsys
):
    """A diverged anonymizer would write NaN frames, cast to black: refused before any
    frame, by anonymize and by evaluate.py's loader alike."""
    from keras_privacy.evaluation.anonymizations import load_anonymizer

    model = load_keras_anonymizer(model_path)
    model.weights[0].assign(np.full(model.weights[0].shape, np.nan, "float32"))
    diverged = tmp_path / "diverged.keras"
    model.save(diverged)
    out = tmp_path / "out.avi"
    video = str(fixtures_dir / "videos" / "test.avi")
    assert main([video, str(out), "--anonymizer", str(diverged)]) == 1
    assert f"{diverged}: the anonymizer holds non-finite weights (e.g. " in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match="holds non-finite weights"):
        load_anonymizer(diverged)


def test_sizes_not_divisible_by_the_factor_are_padded_and_cropped(model_path, tmp_path):
    """38 x 50 frames for a UNet that needs multiples of 4; 10 frames in batches of 4 (the last
    batch is short)."""
    model = load_keras_anonymizer(model_path)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (10, 38, 50, 3), dtype=np.uint8)
    write_video(tmp_path / "odd.avi", frames, fps=12)
    stats = anonymize_video(
        model, tmp_path / "odd.avi", tmp_path / "out.avi", batch_size=4, show_progress=False
    )
    info = probe_video(tmp_path / "out.avi")
    assert stats.frames_written == 10
    assert (info.num_frames, info.height, info.width, info.fps) == (10, 38, 50, 12.0)
    padded = np.pad(frames[:2] / 255.0, ((0, 0), (0, 2), (0, 2), (0, 0)), mode="edge")
    reference = np.asarray(model.predict_on_batch(padded.astype("float32")))[:, :38, :50]
    output = keras_frames(model, factor=4)(frames[:2])
    assert output.shape == (2, 38, 50, 3) and output.dtype == np.uint8
    np.testing.assert_allclose(output / 255.0, reference, atol=0.5 / 255 + 1e-6)


def test_the_command_line_hands_its_streaming_options_to_the_video_anonymizer(
    model_path, tmp_path, monkeypatch
):
    handed = {}

    def record(anonymizer, source, output, **options):
        handed.update(options, source=source, output=output)
        return StreamStats(seconds=1.0)

    monkeypatch.setattr(anonymize, "anonymize_video", record)
    argv = ["in.mp4", str(tmp_path / "out.ts"), "--anonymizer", str(model_path), "--no_audio"]
    argv += ["--codec", "libx264", "--quality", "4", "--batch_size", "3", "--when_full", "drop"]
    argv += ["--queue_size", "5", "--input_format", "v4l2", "--output_format", "mpegts"]
    argv += ["--input_option", "video_size=640x480", "--input_option", "framerate=30"]
    argv += ["--open_timeout", "7.5", "--stall_timeout", "12"]
    assert main(argv) == 0
    assert callable(handed.pop("on_open"))  # prints the opened source's line
    assert handed == {
        "source": "in.mp4",
        "output": str(tmp_path / "out.ts"),  # as given: a URL must keep its "//"
        "batch_size": 3,
        "codec": "libx264",
        "quality": 4,
        "show_progress": True,
        "keep_audio": False,
        "policy": "drop",
        "queue_size": 5,
        "input_format": "v4l2",
        "input_options": {"video_size": "640x480", "framerate": "30"},
        "output_format": "mpegts",
        "open_timeout": 7.5,
        "stall_timeout": 12.0,
    }


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--queue_size", "0"], "argument --queue_size: must be at least 1, got 0"),
        (["--batch_size", "x"], "argument --batch_size: not a whole number: 'x'"),
        (["--input_option", "video_size"], "--input_option must be KEY=VALUE"),
        (["--scale", "1.5"], "--scale must be in (0, 1]"),
        (["--open_timeout", "-1"], "--open_timeout must be a number of seconds, 0 for no limit"),
        (["--open_timeout", "inf"], "--open_timeout must be a number of seconds, 0 for no limit"),
        (["--stall_timeout", "-1"], "--stall_timeout must be a number of seconds, 0 for no"),
        (["--codec", "h264x"], "--codec 'h264x': FFmpeg has no such encoder"),
        (["--codec", "aac"], "--codec 'aac' encodes audio, not video"),
        (
            ["--quality", "0"],
            "--quality must be in 1-31 for mpeg4, mjpeg, mpeg2video, 1-10 otherwise (CRF 5 x "
            "this); got 0",
        ),
        (["--quality", "32"], "--quality must be in 1-31 for mpeg4"),
        (["--codec", "mjpeg", "--quality", "32"], "--quality must be in 1-31 for mpeg4, mjpeg"),
        (["--codec", "libx264", "--quality", "0"], "1-10 otherwise (CRF 5 x this); got 0"),
        (["--codec", "libx264", "--quality", "11"], "1-10 otherwise (CRF 5 x this); got 11"),
    ],
)
def test_nonsense_options_are_usage_errors_naming_the_option(model_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["in.mp4", "out.mp4", "--anonymizer", str(model_path), *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_an_output_the_container_or_address_cannot_take_is_named(
    fixtures_dir, model_path, tmp_path, capsys
):
    """The output is named with what to change (the error used to name the input alone), and
    a URL reaches FFmpeg as given (a Path folded udp://host into udp:/host)."""
    video = str(fixtures_dir / "videos" / "test.avi")
    clip = tmp_path / "clip.avi"
    write_video(clip, read_video(video, max_frames=4), fps=25)
    webm = [str(clip), str(tmp_path / "out.webm"), "--anonymizer", str(model_path)]
    assert main([*webm, "--codec", "mpeg4"]) == 1
    assert (
        f"{tmp_path / 'out.webm'}: cannot hold video mpeg4 ('webm' format does not support "
        "'mpeg4' codec); choose another codec (--codec)" in capsys.readouterr().err
    )
    url = "udp://127.0.0.1:9"  # the discard port: nothing need listen
    assert main([str(clip), url, "--anonymizer", str(model_path)]) == 1
    err = capsys.readouterr().err
    assert f"{url}: cannot be written (" in err and "--output_format, e.g. mpegts" in err
    assert main([str(clip), url, "--output_format", "mpegts", "--anonymizer", str(model_path)]) == 0
    assert f"{url}: 4 frames anonymized" in capsys.readouterr().err


@pytest.mark.parametrize("threshold", ["1", "0", "nan"])
def test_a_face_threshold_outside_0_1_is_a_usage_error(capsys, threshold):
    """CenterFace's scores are in (0, 1): at 1 or above no face would be found and every face
    left in the video, at 0 or below every cell would be a face."""
    with pytest.raises(SystemExit) as exit_info:
        main(["in.mp4", "out.mp4", "--method", "face_blur", "--face_threshold", threshold])
    assert exit_info.value.code == 2
    assert f"--face_threshold must be in (0, 1); got {float(threshold)}" in capsys.readouterr().err


def test_a_face_threshold_is_refused_with_the_learned_anonymizer(model_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["in.mp4", "out.mp4", "--anonymizer", str(model_path), "--face_threshold", "0.5"])
    assert exit_info.value.code == 2
    assert "--face_threshold: an option of the face_* methods, not of --method=learned" in (
        capsys.readouterr().err
    )


def test_the_model_options_are_refused_with_a_face_method(capsys):
    """`--scale`, `--device` and `--runtime` run the learned anonymizer's model: the face
    methods would ignore them (detection at full size where half was asked)."""
    with pytest.raises(SystemExit) as exit_info:
        main(["in.mp4", "out.mp4", "--method", "face_blur", "--scale", "0.5", "--device", "cpu"])
    assert exit_info.value.code == 2
    assert (
        "--scale, --device: options of the learned anonymizer's model, not of --method=face_blur"
        in capsys.readouterr().err
    )
