"""Streaming anonymization: a live source (an MPEG-TS stream written into a FIFO), timestamps
carried through, audio copied bit for bit, rotation kept, the bounded queue's drop policy, a clean
Ctrl-C, --scale and --device, and the ONNX runtime."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from fractions import Fraction

import av
import keras
import numpy as np
import pytest
from test_files import killed_writers_temporary
from test_without_tensorflow import without_packages

from keras_privacy import streaming
from keras_privacy.anonymize import main
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.video import probe_video, read_video, write_video
from keras_privacy.export import export_onnx
from keras_privacy.models.registry import build_anonymizer
from keras_privacy.runtimes import keras_frames, onnx_frames, scaled
from keras_privacy.streaming import DROP, WAIT, FrameQueue, transcode

HEIGHT, WIDTH, FPS = 48, 64, 10


def _invert(frames: np.ndarray) -> np.ndarray:
    """A stand-in anonymizer whose output is easy to check."""
    return 255 - frames


def _pattern(index: int) -> np.ndarray:
    """A frame whose mean grows with its index (so dropped frames can be identified)."""
    frame = np.full((HEIGHT, WIDTH, 3), 8 + 6 * index, np.uint8)
    frame[:, : WIDTH // 2, 0] = 200
    return frame


def _write_source(
    target, frames: int, container_format=None, audio=False, rotation=0, start=0
) -> None:
    """Write `frames` pattern frames at FPS (mpeg4), the first stamped `start` seconds in, with
    a 16 kHz AAC tone when `audio`, and a display rotation; `target` is a path or a FIFO."""
    container = av.open(os.fspath(target), "w", format=container_format)
    video = container.add_stream("mpeg4", rate=FPS)
    video.height, video.width, video.pix_fmt = HEIGHT, WIDTH, "yuv420p"
    video.options = {"qmin": "2", "qmax": "2"}
    if rotation:
        video.set_display_rotation(rotation)
    sound = container.add_stream("aac", rate=16000, layout="mono") if audio else None
    for index in range(frames):
        image = av.VideoFrame.from_ndarray(_pattern(index), format="rgb24")
        image.pts, image.time_base = start * FPS + index, Fraction(1, FPS)
        for packet in video.encode(image):
            container.mux(packet)
    if sound is not None:
        seconds, first = frames / FPS, start * 16000
        samples = np.sin(np.arange(int(16000 * seconds)) * 2 * np.pi * 440 / 16000)
        for start in range(0, samples.size, 1024):
            chunk = samples[None, start : start + 1024].astype("float32")
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="mono")
            frame.sample_rate, frame.pts = 16000, first + start
            for packet in sound.encode(frame):
                container.mux(packet)
        for packet in sound.encode():
            container.mux(packet)
    for packet in video.encode():
        container.mux(packet)
    container.close()


def _copy_in_another_process(source, target) -> subprocess.Popen:
    """Copy the bytes of `source` into `target` (one of them a FIFO) from another process. The
    other end of a FIFO must not be opened by a thread of the test's process: PyAV can block
    opening a FIFO while it holds the GIL, and then no other thread of the process runs (seen:
    a thread's `av.open(fifo, "w")` stalled `transcode` in the main thread before it opened the
    reading end, and the test hung)."""
    copy = (
        "import shutil, sys; shutil.copyfileobj(open(sys.argv[1], 'rb'), open(sys.argv[2], 'wb'))"
    )
    return subprocess.Popen([sys.executable, "-c", copy, os.fspath(source), os.fspath(target)])


def _frame_times(path) -> list[float]:
    with av.open(os.fspath(path)) as container:
        return [float(frame.time) for frame in container.decode(video=0)]


def _audio_packets(path) -> list[bytes]:
    with av.open(os.fspath(path)) as container:
        if not container.streams.audio:
            return []
        return [bytes(p) for p in container.demux(container.streams.audio[0]) if p.size]


def _frames(path) -> np.ndarray:
    with av.open(os.fspath(path)) as container:
        return np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "unet_tiny.keras"
    keras.utils.set_random_seed(5)
    build_anonymizer("unet_tiny").save(path)
    return path


def _silent_udp_source() -> str:
    """The URL of a free UDP port on localhost, which nothing sends to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return f"udp://127.0.0.1:{probe.getsockname()[1]}"


def test_a_silent_network_source_is_given_up_after_the_open_timeout(model_path, tmp_path, capsys):
    url = _silent_udp_source()
    started = time.monotonic()
    args = [url, str(tmp_path / "out.mp4"), "--anonymizer", str(model_path)]
    args += ["--input_format", "mpegts", "--open_timeout", "1", "--no_progress"]
    assert main(args) == 1
    assert time.monotonic() - started < 30
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"error: {url}: sent nothing to open within 1 s (a silent source, or a wrong address "
        "or port)"
    )
    assert not any(tmp_path.iterdir())


_OPEN_UNTIL_INTERRUPTED = """
import signal
import sys
from keras_privacy.streaming import open_source
# A terminal's Ctrl-C: the test runner's worker may hand down SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
print("opening", flush=True)
try:
    open_source(sys.argv[1], "mpegts", open_timeout=None)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_ctrl_c_interrupts_a_source_that_never_opens():
    """FFmpeg's blocking read does not see Ctrl-C: the open waits on another thread."""
    opener = subprocess.Popen(
        [sys.executable, "-c", _OPEN_UNTIL_INTERRUPTED, _silent_udp_source()],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert opener.stdout.readline() == "opening\n"
        time.sleep(1.0)
        opener.send_signal(signal.SIGINT)
        assert opener.wait(timeout=20) == 130
    finally:
        opener.kill()


def test_live_fifo_source_keeps_every_frame_and_its_timestamp(tmp_path):
    """An MPEG-TS stream comes through a FIFO while it is being anonymized: 12 frames at 10
    frames/s in, 12 out, at the same times (relative to the first), and inverted."""
    recorded, fifo = tmp_path / "recorded.ts", tmp_path / "camera.ts"
    _write_source(recorded, 12, "mpegts")
    os.mkfifo(fifo)
    writer = _copy_in_another_process(recorded, fifo)
    out = tmp_path / "out.mp4"
    stats = transcode(_invert, fifo, out, batch_size=4, input_format="mpegts", queue_size=64)
    assert writer.wait(timeout=60) == 0
    assert (stats.frames_read, stats.frames_written, stats.frames_dropped) == (12, 12, 0)
    assert stats.frames_per_second > 0 and not stats.interrupted
    times = np.array(_frame_times(out))
    np.testing.assert_allclose(times - times[0], np.arange(12) / FPS, atol=1e-3)
    written = _frames(out).astype(int)
    expected = np.stack([255 - _pattern(i) for i in range(12)]).astype(int)
    assert np.abs(written - expected).mean() < 3  # MPEG-4 at quantiser 2


_SEND_THEN_STALL = """
import shutil, sys, time
with open(sys.argv[2], "wb") as fifo:
    shutil.copyfileobj(open(sys.argv[1], "rb"), fifo)
    fifo.flush()
    time.sleep(120)  # a camera that stops sending without closing its stream
"""


def _stalling_fifo(tmp_path, frames: int = 12):
    """A FIFO fed, from another process, an MPEG-TS stream of `frames` frames, then nothing
    while it stays open; (FIFO, feeding process)."""
    recorded, fifo = tmp_path / "recorded.ts", tmp_path / "camera.ts"
    _write_source(recorded, frames, "mpegts")
    os.mkfifo(fifo)
    feeder = subprocess.Popen([sys.executable, "-c", _SEND_THEN_STALL, recorded, fifo])
    return fifo, feeder


def test_a_stalled_live_source_closes_the_output_with_what_it_sent(tmp_path, caplog):
    fifo, feeder = _stalling_fifo(tmp_path)
    out = tmp_path / "out.mp4"
    try:
        started = time.monotonic()
        stats = transcode(_invert, fifo, out, batch_size=4, input_format="mpegts", stall_timeout=1)
        assert time.monotonic() - started < 60
    finally:
        feeder.kill()
    assert stats.stalled and not stats.interrupted
    # A threaded decoder holds back frames until more arrive: those are not written.
    assert 0 < stats.frames_written == stats.frames_read <= 12
    assert len(_frame_times(out)) == stats.frames_written
    assert f"{fifo}: nothing received for 1 s: the output is closed" in caplog.text
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "camera.ts",
        "out.mp4",
        "recorded.ts",
    ]


def test_sigterm_closes_a_live_recording_as_ctrl_c_does(model_path, tmp_path):
    """`timeout`, `docker stop` and systemd send SIGTERM: the recording is closed and kept."""
    fifo, feeder = _stalling_fifo(tmp_path)
    out = tmp_path / "out.mp4"
    args = [fifo, out, "--anonymizer", model_path, "--input_format", "mpegts"]
    args += ["--stall_timeout", "0", "--no_progress"]
    code = "import sys; from keras_privacy.anonymize import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", code, *map(str, args)]
    anonymizer = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        while not anonymizer.stderr.readline().startswith(f"{fifo}: "):  # until it is open
            assert anonymizer.poll() is None
        time.sleep(3)
        anonymizer.send_signal(signal.SIGTERM)
        assert anonymizer.wait(timeout=60) == 130
        last = anonymizer.stderr.read().splitlines()[-1]
    finally:
        anonymizer.kill()
        feeder.kill()
    assert last.startswith(f"{out}: ") and last.endswith("(interrupted: output closed)")
    assert len(_frame_times(out)) > 0
    assert not [path.name for path in tmp_path.iterdir() if "partial" in path.name]


def test_audio_is_copied_bit_identical_and_rotation_kept(model_path, tmp_path, capsys):
    source = tmp_path / "phone.mp4"
    _write_source(source, 20, audio=True, rotation=90)
    out = tmp_path / "out.mp4"
    args = [str(source), str(out), "--anonymizer", str(model_path), "--no_progress"]
    assert main(args + ["--batch_size", "3"]) == 0
    assert "20 frames anonymized, 0 dropped" in capsys.readouterr().err
    original = _audio_packets(source)
    assert len(original) > 10 and _audio_packets(out) == original
    with av.open(os.fspath(out)) as container:
        stream = container.streams.video[0]
        assert (stream.average_rate, stream.frames) == (FPS, 20)
        assert next(container.decode(video=0)).rotation == 90
    np.testing.assert_allclose(_frame_times(out), _frame_times(source), atol=1e-3)
    silent = tmp_path / "silent.mp4"
    assert main([str(source), str(silent), "--anonymizer", str(model_path), "--no_audio"]) == 0
    assert _audio_packets(silent) == []


def test_input_options_reach_the_demuxer_and_the_opened_source_is_described(tmp_path):
    """Raw frames have no header: their size, pixel format and rate come from the input
    options alone, and the line `on_open` gets says what was opened."""
    source = tmp_path / "frames.rgb"
    source.write_bytes(np.stack([_pattern(i) for i in range(5)]).tobytes())
    options = {"video_size": f"{WIDTH}x{HEIGHT}", "pixel_format": "rgb24", "framerate": "12"}
    opened = []
    out = tmp_path / "out.mp4"
    stats = transcode(
        _invert, source, out, input_format="rawvideo", input_options=options,
        on_open=opened.append,
    )  # fmt: skip
    assert opened == [f"{source}: rawvideo {WIDTH}x{HEIGHT} at 12 frames/s"]
    assert stats.frames_written == 5
    written = _frames(out).astype(int)
    expected = np.stack([255 - _pattern(i) for i in range(5)]).astype(int)
    assert np.abs(written - expected).mean() < 3


@pytest.mark.parametrize("out_name", ["out.mp4", "out.mkv", "out.avi"])
def test_a_raw_h264_stream_plays_at_its_rate(tmp_path, out_name):
    """A raw elementary stream stamps no frame: each goes one frame after the last at the
    source's rate (the demuxer's framerate option), also where the output's time base is a
    millisecond (MP4, MKV), not one tick of it."""
    source = tmp_path / "camera.h264"
    with av.open(os.fspath(source), "w", format="h264") as container:
        video = container.add_stream("libx264", rate=FPS)
        video.width, video.height, video.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for index in range(12):
            frame = av.VideoFrame.from_ndarray(_pattern(index), "rgb24")
            frame.pts = index
            container.mux(video.encode(frame))
        container.mux(video.encode())
    out = tmp_path / out_name
    options = {"framerate": str(FPS)}
    stats = transcode(_invert, source, out, input_format="h264", input_options=options)
    assert stats.frames_written == 12
    np.testing.assert_allclose(_frame_times(out), np.arange(12) / FPS, atol=1e-3)


def test_audio_the_container_cannot_take_is_named(tmp_path):
    """AAC does not go into MPEG-PS with mpeg4 here: the error names the output asked for (not
    its temporary twin) and the codecs."""
    source = tmp_path / "in.mkv"
    _write_source(source, 4, audio=True)
    out = tmp_path / "out.mpg"
    message = f"^{re.escape(str(out))}: cannot write video mpeg4 with audio aac .*drop the audio"
    with pytest.raises(ValueError, match=message):
        transcode(_invert, source, out, codec="mpeg4")
    assert os.listdir(tmp_path) == ["in.mkv"]  # no partial file left


@pytest.mark.parametrize("name, audio", [("out.png", True), ("out.jpg", False)])
def test_an_image_output_is_refused_by_its_name(tmp_path, name, audio):
    """FFmpeg writes .png or .jpg as still images: refused, naming the file asked for (its
    audio stream failed with no name, its frames with the temporary twin's)."""
    source = tmp_path / "in.mkv"
    _write_source(source, 4, audio=audio)
    out = tmp_path / name
    message = f"^{re.escape(str(out))}: an image file, not a video; name a video file"
    with pytest.raises(ValueError, match=message):
        transcode(_invert, source, out)
    assert os.listdir(tmp_path) == ["in.mkv"]


def test_a_write_error_names_the_output_asked_for(tmp_path):
    """An error writing a packet (a full disk) names the output, not its temporary twin."""

    class FullDisk:
        def mux(self, packet):
            raise av.error.OSError(
                28, "No space left on device", str(tmp_path / ".out.partial.mp4")
            )

        def close(self):
            pass

    writer = streaming._Writer(
        tmp_path / ".out.partial.mp4", None, "mpeg4", 2, Fraction(25), None, "out.mp4"
    )
    writer.container = FullDisk()
    with pytest.raises(
        ValueError, match=r"^out\.mp4: cannot be written \(No space left on device\)$"
    ):
        writer.write_audio(types.SimpleNamespace(time_base=None))  # a packet


def test_without_a_codec_the_output_container_gets_one_it_takes(tmp_path):
    """MPEG-4 Part 2 where the container takes it; WebM takes none, so VP9 there."""
    source = tmp_path / "in.mp4"
    _write_source(source, 4)
    for name, codec in (("out.mp4", "mpeg4"), ("out.webm", "vp9")):
        stats = transcode(_invert, source, tmp_path / name)
        assert stats.frames_written == 4
        with av.open(os.fspath(tmp_path / name)) as container:
            assert container.streams.video[0].codec_context.name == codec
        assert len(_frame_times(tmp_path / name)) == 4


def test_an_output_where_no_file_can_be_made_is_named_not_its_codec(tmp_path):
    """FFmpeg opens the file when encoding starts: its failure was blamed on the codec."""
    source = tmp_path / "in.mp4"
    _write_source(source, 3)
    out = "/proc/keras_privacy_out.mp4"  # /proc takes no new file
    with pytest.raises(
        ValueError, match=f"^{out}: cannot be written \\(No such file or directory\\)$"
    ):
        transcode(_invert, source, out)


@pytest.mark.parametrize(
    "codec, name", [("mpeg4", "out.avi"), ("mjpeg", "out.avi"), ("mpeg2video", "out.mpg")]
)
def test_constant_rate_outputs_keep_the_frames_and_the_sources_rate(
    fixtures_dir, tmp_path, codec, name
):
    """A 30 frames/s MP4 (time base 1/15360) into outputs of a constant rate: AVI (which used to
    count every tick as a frame: 600 frames/s), MJPEG (full-range pixels) and MPEG-2 (standard
    rates only) keep every frame, in order, at the source's rate."""
    source = fixtures_dir / "videos" / "part_0.mp4"
    out = tmp_path / name
    stats = transcode(_invert, source, out, codec=codec)
    assert stats.frames_written == 32
    info = probe_video(out)
    assert (info.num_frames, info.fps, info.height, info.width) == (32, 30.0, 256, 340)
    expected = 255 - read_video(source).astype(int)
    assert np.abs(read_video(out).astype(int) - expected).mean() < 4


def test_a_rate_the_codec_cannot_take_is_named(tmp_path):
    """MPEG-2 takes standard rates only: 12.5 frames/s is refused, naming the nearest (12)."""
    source = tmp_path / "in.avi"
    write_video(source, np.stack([_pattern(i) for i in range(3)]), fps=12.5)
    out = tmp_path / "out.mpg"
    message = f"^{re.escape(str(out))}: mpeg2video takes standard frame rates only, the nearest 12"
    with pytest.raises(ValueError, match=message):
        transcode(_invert, source, out, codec="mpeg2video")
    assert os.listdir(tmp_path) == ["in.avi"]


def test_frames_of_another_size_are_scaled_to_the_first_frames(tmp_path, caplog):
    """A camera that switches its resolution mid-stream (here two MPEG-TS pieces joined): every
    frame is anonymized at the first frame's size, which the output keeps."""
    _write_source(tmp_path / "a.ts", 4, container_format="mpegts")
    small = np.stack([_pattern(i)[::2, ::2] for i in range(3)])  # 24 x 32
    container = av.open(os.fspath(tmp_path / "b.ts"), "w", format="mpegts")
    video = container.add_stream("mpeg4", rate=FPS)
    video.height, video.width, video.pix_fmt = HEIGHT // 2, WIDTH // 2, "yuv420p"
    for frame in small:
        for packet in video.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
            container.mux(packet)
    for packet in video.encode():
        container.mux(packet)
    container.close()
    joined = tmp_path / "joined.ts"
    joined.write_bytes((tmp_path / "a.ts").read_bytes() + (tmp_path / "b.ts").read_bytes())
    sizes = []

    def recorded(frames: np.ndarray) -> np.ndarray:
        sizes.append(frames.shape[1:3])
        return _invert(frames)

    stats = transcode(recorded, joined, tmp_path / "out.mp4", batch_size=3)
    assert stats.frames_written == 7 and stats.frames_scaled == 3
    assert set(sizes) == {(HEIGHT, WIDTH)}
    assert _frames(tmp_path / "out.mp4").shape == (7, HEIGHT, WIDTH, 3)
    assert "joined.ts: frame 5 is 32x24, the first 64x48" in caplog.text


def test_queue_drops_the_oldest_frame_or_waits():
    queue = FrameQueue(3, DROP)
    stop = threading.Event()
    for index in range(5):
        queue.put_frame(index, stop)
        queue.put_audio(f"audio {index}")
    queue.close()
    items = []
    while (item := queue.get()) is not None:
        items.append(item)
    assert queue.dropped == 2
    assert [p for kind, p in items if kind == "video"] == [2, 3, 4]
    assert [p for kind, p in items if kind == "audio"] == [f"audio {i}" for i in range(5)]

    stopped = threading.Event()
    stopped.set()
    full = FrameQueue(1, WAIT)
    full.put_frame(0, stop)
    full.put_frame(1, stopped)  # Ctrl-C while the reader waits: reading ends, nothing dropped
    assert (full.frames_waiting, full.dropped) == (1, 0)

    waiting = FrameQueue(2, WAIT)
    waiting.put_frame(0, stop)
    waiting.put_frame(1, stop)
    third = threading.Thread(target=waiting.put_frame, args=(2, stop))
    third.start()
    time.sleep(0.3)
    assert third.is_alive() and waiting.frames_waiting == 2  # blocked, not grown
    assert waiting.get() == ("video", 0)
    third.join(timeout=5)
    assert not third.is_alive() and waiting.frames_waiting == 2 and waiting.dropped == 0


def test_slow_model_drops_frames_and_keeps_the_timestamps_of_the_others(tmp_path):
    source = tmp_path / "in.mp4"
    _write_source(source, 30)

    def slow(frames):
        time.sleep(0.05)
        return _invert(frames)

    out = tmp_path / "out.mp4"
    stats = transcode(slow, source, out, batch_size=1, queue_size=2, policy=DROP)
    assert stats.frames_dropped > 0
    assert stats.frames_written + stats.frames_dropped == 30
    times = np.array(_frame_times(out))
    assert len(times) == stats.frames_written
    # Every kept frame is at its own source time, shown by its content (the pattern's level).
    levels = _frames(out)[:, :, WIDTH // 2 :, 1].mean(axis=(1, 2))
    indices = np.round(((255 - levels) - 8) / 6).astype(int)
    np.testing.assert_allclose(times - times[0], (indices - indices[0]) / FPS, atol=1e-3)


def test_ctrl_c_closes_a_playable_output(tmp_path):
    source = tmp_path / "in.mp4"
    _write_source(source, 20)
    calls = 0

    def interrupted_on_third_batch(frames):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return _invert(frames)

    out = tmp_path / "out.mp4"
    stats = transcode(interrupted_on_third_batch, source, out, batch_size=2)
    assert stats.interrupted and stats.frames_written == 4
    assert len(_frame_times(out)) == 4
    assert sorted(os.listdir(tmp_path)) == ["in.mp4", "out.mp4"]

    def interrupted_at_once(frames):  # Ctrl-C during the model's first, slow call
        raise KeyboardInterrupt

    stats = transcode(interrupted_at_once, source, tmp_path / "none.mp4", batch_size=2)
    assert stats.interrupted and stats.frames_written == 0
    assert sorted(os.listdir(tmp_path)) == ["in.mp4", "out.mp4"]  # nothing written, no error


def test_scale_runs_the_model_smaller_and_restores_the_size():
    seen = []

    def record(frames):
        seen.append(frames.shape)
        return frames

    frames = np.random.default_rng(0).integers(0, 256, (2, 48, 64, 3), dtype=np.uint8)
    output = scaled(record, 0.5)(frames)
    assert seen == [(2, 24, 32, 3)] and output.shape == frames.shape
    smooth = np.repeat(np.repeat(frames[:, ::8, ::8], 8, axis=1), 8, axis=2)
    assert np.abs(scaled(record, 0.5)(smooth).astype(int) - smooth).mean() < 20
    with pytest.raises(ValueError, match="--scale"):
        scaled(record, 1.5)


def test_a_model_that_shrinks_the_frames_is_refused_not_padded():
    # A model built in Python (never checked by the loader) whose output is smaller than its
    # input: the frame function names both sizes rather than pad the output to the frame's.
    frames = keras.Input((None, None, 3))
    halving = keras.Model(frames, keras.layers.AveragePooling2D(2)(frames))
    anonymize = keras_frames(halving, factor=2)
    with pytest.raises(ValueError, match="gave 4 x 6 frames for 8 x 12 ones"):
        anonymize(np.zeros((1, 8, 12, 3), np.uint8))


def test_cli_scale_device_and_bad_device(model_path, tmp_path, capsys):
    source = tmp_path / "in.mp4"
    _write_source(source, 6)
    out = tmp_path / "out.mp4"
    base = [str(source), str(out), "--anonymizer", str(model_path), "--no_progress"]
    assert main(base + ["--scale", "0.5", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "6 frames anonymized" in err and "frames/s" in err
    assert len(_frame_times(out)) == 6 and _frames(out).shape[1:3] == (HEIGHT, WIDTH)
    with pytest.raises(SystemExit) as exit_info:  # a usage error, before the model loads
        main(base + ["--device", "tpu"])
    assert exit_info.value.code == 2
    assert "error: --device tpu: expected cpu, gpu or gpu:N" in capsys.readouterr().err
    assert main(base + ["--device", "cpu:3"]) == 1  # one CPU device here
    assert "--device cpu:3: the " in capsys.readouterr().err
    if not any(device.startswith("gpu") for device in keras.distribution.list_devices()):
        assert main(base + ["--device", "gpu"]) == 1
        backend = keras.backend.backend()
        assert capsys.readouterr().err == f"error: --device gpu: the {backend} backend has none\n"


def test_onnx_runtime_matches_keras_and_runs_the_cli(model_path, tmp_path, capsys):
    from keras_privacy.export import load_keras_anonymizer

    model = load_keras_anonymizer(model_path)
    onnx_path = export_onnx(model, tmp_path / "anonymizer.onnx")
    frames = np.random.default_rng(1).integers(0, 256, (3, 38, 50, 3), dtype=np.uint8)
    from_onnx = onnx_frames(onnx_path, device="cpu:0")(frames).astype(int)
    with pytest.raises(ValueError, match="device cpu:1: ONNX Runtime's CPU provider is cpu:0"):
        onnx_frames(onnx_path, device="cpu:1")
    from_keras = keras_frames(model, factor=4)(frames).astype(int)
    assert np.abs(from_onnx - from_keras).max() <= 1  # rounding of outputs within 1e-4
    source = tmp_path / "in.mp4"
    _write_source(source, 5)
    out = tmp_path / "out.mp4"
    args = [str(source), str(out), "--anonymizer", onnx_path, "--runtime", "onnx"]
    assert main(args + ["--no_progress"]) == 0
    assert "5 frames anonymized" in capsys.readouterr().err
    # A camera's install: the ONNX runtime path starts with Keras and its backends absent; an
    # .onnx file takes it without --runtime.
    env = without_packages(tmp_path, "keras", "tensorflow", "jax")
    command = [sys.executable, "-m", "keras_privacy.anonymize", *args[:-2], "--no_progress"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "5 frames anonymized" in done.stderr, done.stderr[-2000:]
    keras_args = [str(source), str(out), "--anonymizer", str(model_path)]
    done = subprocess.run(
        [sys.executable, "-m", "keras_privacy.anonymize", *keras_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # A .keras file there: one line naming the file, what is missing and what to do instead.
    assert done.returncode == 1, done.stderr[-2000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert line.startswith(f"error: {model_path}: the keras runtime needs Keras and a backend")
    assert "(blocked by the test)" in line and line.endswith("(--runtime onnx) instead")
    assert "Traceback" not in done.stderr
    import onnx

    proto = onnx.load(onnx_path)
    del proto.metadata_props[:]
    onnx.save(proto, tmp_path / "bare.onnx")
    with pytest.raises(ValueError, match="bare.onnx: no downsampling_factor"):
        onnx_frames(tmp_path / "bare.onnx")
    with pytest.raises(ValueError, match="plain.keras: not an ONNX file"):
        model.save(tmp_path / "plain.keras")
        onnx_frames(tmp_path / "plain.keras")
    with pytest.raises(IsADirectoryError, match=f"^{tmp_path}: a folder, not an .onnx file"):
        onnx_frames(tmp_path)
    # protobuf reads 0 bytes, or an ONNX file of no graph, as a model with no field set.
    (tmp_path / "empty.onnx").touch()
    with pytest.raises(ValueError, match="empty.onnx: empty file \\(0 bytes\\)"):
        onnx_frames(tmp_path / "empty.onnx")
    onnx.save(onnx.ModelProto(ir_version=8), tmp_path / "graphless.onnx")
    with pytest.raises(ValueError, match="graphless.onnx: not an ONNX anonymizer"):
        onnx_frames(tmp_path / "graphless.onnx")


def test_stream_output_into_a_fifo(tmp_path):
    """The output can be a stream: MPEG-TS written into a FIFO that another process reads."""
    source = tmp_path / "in.mp4"
    _write_source(source, 8)
    stream = tmp_path / "stream"
    stream.mkdir()
    fifo, received = stream / "out.ts", tmp_path / "received.ts"
    os.mkfifo(fifo)
    reader = _copy_in_another_process(fifo, received)
    stats = transcode(_invert, source, fifo, batch_size=3, output_format="mpegts")
    assert reader.wait(timeout=60) == 0
    assert stats.frames_written == 8
    with av.open(os.fspath(received), format="mpegts") as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    expected = np.stack([255 - _pattern(i) for i in range(8)]).astype(int)
    assert len(frames) == 8 and np.abs(np.stack(frames).astype(int) - expected).mean() < 3
    assert os.listdir(stream) == ["out.ts"]  # written in place, no partial file beside it


@pytest.mark.parametrize("name", ["out.avi", "out.mkv", "out.mp4"])
def test_the_output_starts_at_its_first_frame(tmp_path, name):
    """A camera stream (MPEG-TS) stamped from 100 s on: the output starts at 0, its frames FPS
    apart, and an AVI declares the frames it holds (it declared 1,012 for 12, the first frame
    shown for 100 s)."""
    source = tmp_path / "camera.ts"
    _write_source(source, 12, "mpegts", start=100)
    assert _frame_times(source)[0] >= 100
    out = tmp_path / name
    assert transcode(_invert, source, out).frames_written == 12
    np.testing.assert_allclose(_frame_times(out), np.arange(12) / FPS, atol=2e-3)
    if name.endswith(".avi"):
        assert probe_video(out).declared_frames == 12


@pytest.mark.parametrize("name", ["out.avi", "out.mkv", "out.ts"])
def test_audio_before_the_first_frame_leaves_it_at_0(tmp_path, name):
    """These muxers move every stream later to make the earliest timestamp 0: AAC's priming
    packet (before the first frame) moved the first frame later (AVI: to the second tick,
    declaring an empty frame); it is left out there, and the frames start at 0."""
    source = tmp_path / "phone.mp4"
    _write_source(source, 20, audio=True)
    out = tmp_path / name
    assert transcode(_invert, source, out).frames_written == 20
    np.testing.assert_allclose(_frame_times(out)[:3], np.arange(3) / FPS, atol=1e-3)
    assert len(_audio_packets(out)) > 10  # the rest of the audio (MPEG-TS adds ADTS headers)
    if name.endswith(".avi"):
        assert probe_video(out).declared_frames == 20


def test_a_real_avi_stamped_from_its_second_tick_starts_at_0(fixtures_dir, tmp_path):
    """The real test.avi's first frame is stamped 0.04 s: its AVI copy showed it twice."""
    out = tmp_path / "out.avi"
    assert transcode(_invert, fixtures_dir / "videos" / "test.avi", out).frames_written == 164
    np.testing.assert_allclose(_frame_times(out)[:3], np.arange(3) / 25, atol=1e-3)
    assert probe_video(out).declared_frames == 164


def _damaged_copy(fixtures_dir, tmp_path):
    """The real 32-frame H.264 clip with 20 kB of noise in its middle (a few packets)."""
    data = bytearray((fixtures_dir / "videos" / "part_0.mp4").read_bytes())
    middle = len(data) // 2
    noise = np.random.default_rng(0).integers(0, 256, 20000, dtype=np.uint8)
    data[middle : middle + noise.size] = noise.tobytes()
    source = tmp_path / "damaged.mp4"
    source.write_bytes(bytes(data))
    return source


def test_a_damaged_packet_is_skipped_not_the_whole_output(fixtures_dir, tmp_path, caplog):
    """20 kB of noise in the middle of a real H.264 clip: the packets that no longer decode
    are skipped, with one warning naming the source, and counted; the other frames are written
    (before, the decoding error discarded every frame already anonymized)."""
    source = _damaged_copy(fixtures_dir, tmp_path)
    out = tmp_path / "out.mp4"
    stats = transcode(_invert, source, out)
    assert stats.packets_skipped > 0 and stats.frames_written >= 20
    assert stats.frames_written + stats.packets_skipped == 32
    assert len(_frame_times(out)) == stats.frames_written
    assert caplog.text.count("does not decode") == 1
    assert f"{source}: a video packet at " in caplog.text


def test_a_source_that_stops_decoding_is_an_error_naming_it(fixtures_dir, tmp_path, monkeypatch):
    source = _damaged_copy(fixtures_dir, tmp_path)
    monkeypatch.setattr(streaming, "MAX_UNDECODABLE_IN_A_ROW", 2)
    with pytest.raises(VideoDecodeError, match=rf"^{re.escape(str(source))}: decoding failed"):
        transcode(_invert, source, tmp_path / "out.mp4")
    assert sorted(os.listdir(tmp_path)) == ["damaged.mp4"]


def test_a_rotation_the_container_cannot_record_is_warned_of(tmp_path, caplog):
    source = tmp_path / "phone.mp4"
    _write_source(source, 3, rotation=90)
    transcode(_invert, source, tmp_path / "out.mp4")
    assert "rotated" not in caplog.text
    transcode(_invert, source, tmp_path / "out.avi")
    assert f"{tmp_path / 'out.avi'}: the source is rotated by 90 degrees" in caplog.text


def test_each_run_writes_under_a_temporary_name_of_its_own(tmp_path):
    """Two runs writing one output never share a temporary file (a shared one was renamed
    under the other run, which then failed, leaving an unreadable output); a killed run's
    temporary is removed by the next run writing that output."""
    source = tmp_path / "in.mp4"
    _write_source(source, 2)
    killed_writers_temporary(tmp_path / "out.mp4", ".", ".partial.mp4").write_bytes(b"cut")
    names = []

    def listing(frames):  # the second frame's call: the output opened at the first
        names.extend(n for n in os.listdir(tmp_path) if n.endswith(".partial.mp4"))
        return _invert(frames)

    for _ in range(2):
        transcode(listing, source, tmp_path / "out.mp4", batch_size=1)
    assert len(names) == 2 and names[0] != names[1]
    assert all(name.startswith(".out.") for name in names)
    assert sorted(os.listdir(tmp_path)) == ["in.mp4", "out.mp4"]


def test_a_dash_output_is_the_standard_output(model_path, tmp_path, capfdbinary, monkeypatch):
    source = tmp_path / "in.mp4"
    _write_source(source, 4)
    monkeypatch.chdir(tmp_path)
    args = [str(source), "-", "--output_format", "mpegts", "--anonymizer", str(model_path)]
    assert main(args + ["--no_progress"]) == 0
    written = capfdbinary.readouterr().out
    assert written[:1] == b"\x47" and len(written) > 1000  # MPEG-TS packets (sync byte 0x47)
    assert sorted(os.listdir(tmp_path)) == ["in.mp4"]  # no file named "-"


def test_a_stream_source_into_a_folder_asks_for_a_file_name(model_path, tmp_path, capsys):
    args = ["-", str(tmp_path), "--input_format", "mpegts", "--anonymizer", str(model_path)]
    assert main(args) == 1
    assert capsys.readouterr().err == (
        f"error: {tmp_path}: a folder, and the source - (not a file) has no name to write under "
        "in it: name the output file\n"
    )
    assert os.listdir(tmp_path) == []
