"""Video in, anonymized video out, from any source PyAV opens: a file, a webcam, a URL, a pipe.

`transcode(anonymize, source, output)` decodes the source's first video stream in a reader
thread, runs `anonymize` (uint8 frames (N, H, W, 3) -> uint8 frames of the same shape) on
batches in the calling thread, and encodes the result to a file or a stream (any output PyAV
opens: a path, a URL with `output_format`, e.g. ``mpegts`` or ``flv``, or ``pipe:1``).

What is carried through:

* Timestamps: every frame keeps its source time from the first frame on (its pts in seconds
  less the first frame's, re-expressed in the encoder's time base), so the output starts at 0,
  as FFmpeg's command line makes it, and plays at the source's frame rate, variable rates and
  gaps included (a camera stream stamped from hours ago starts at once). The stream's nominal
  rate is the source's average (or guessed) rate.
* Audio: the first audio stream's packets are copied unchanged (no re-encoding: the bytes are
  the source's), moved in time with the video, unless `keep_audio=False`. The output container
  must accept the codec (AAC in MP4, anything in Matroska); a container that does not is an
  error naming both. Audio before the first frame (AAC's priming packet) is kept where the
  container takes negative timestamps (MP4, MOV) and left out elsewhere (Matroska, MPEG-TS,
  AVI): their muxers would move every stream later, and with it the first frame.
* Rotation: the display matrix of the source's frames (a phone video's rotation) is written to
  the output stream, so players turn it the same way, where the container records one (MP4,
  MOV, Matroska); elsewhere (AVI, MPEG-TS) a warning says that players will not turn it.
* Damaged packets: a packet that does not decode is skipped, as FFmpeg's command line does (the
  first with a warning naming the source and its time), and counted (`StreamStats.packets_skipped`);
  `MAX_UNDECODABLE_IN_A_ROW` in a row end the run with an error naming the source.
* Size: the output keeps the size of the first frame; frames of another size (a camera that
  switches its resolution, pieces of two streams joined) are scaled to it, with a warning.

Memory is bounded by a queue of at most `queue_size` decoded frames between the reader and the
model. When it is full, the `policy` decides:

* ``"wait"`` (the default for a regular file): the reader waits, so every frame is anonymized
  and a slow model only makes the run longer.
* ``"drop"`` (the default for a live source: a device, a URL, a pipe or FIFO): the oldest
  waiting frame is dropped, so a slow model shows as a lower output frame rate (the kept frames
  keep their own timestamps) and the delay behind the camera stays at most `queue_size` frames.
  Audio packets are never dropped.

With ``"drop"`` the model takes the frames waiting (1 to `batch_size`) rather than waiting for
a full batch; a short batch is padded with copies of its last frame (one input shape, no
re-tracing) and the copies are discarded.

Ctrl-C (KeyboardInterrupt) stops reading, flushes the encoder and closes the output, so what
was written is a playable video; `StreamStats.interrupted` says so. A live source that sends
nothing for `stall_timeout` seconds (a camera unplugged, a stream that stopped without ending)
is closed the same way, with a warning; `StreamStats.stalled` says so. A file output is written
under a temporary name and renamed when closed (after an interrupt too: a recording stopped by
hand is kept); an error leaves no file behind.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import heapq
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.video import add_video_stream, open_container
from keras_privacy.files import remove_abandoned_temporaries, temporary_beside

WAIT, DROP = "wait", "drop"
POLICIES = (WAIT, DROP)
MAX_MPEG4_TIME_BASE_DENOMINATOR = 65535  # MPEG-4 Part 2 cannot express finer time bases
IMAGE_MUXERS = ("image2", "image2pipe")  # FFmpeg's still-image writers (.png, .jpg, .bmp, ...)
STANDARD_RATE_TOLERANCE = 0.001
"""How far (relative) a source's frame rate may be from the nearest of an MPEG-2 encoder's
standard rates, whose ticks then stamp the frames (29.97 is 30000/1001 within it)."""
REORDER_DEPTH = 4
"""Frames the writer holds so that their timestamps can be put in order: an AVI with B-frames
gives its frames in display order but their timestamps in decoding order (1, 2, 4, 3, ...)."""
MAX_UNDECODABLE_IN_A_ROW = 50
"""Video packets in a row that do not decode after which a source is given up: a damaged
packet is skipped, a stream that has stopped decoding for good is an error."""
ROTATION_MUXERS = ("mov", "mp4", "3gp", "3g2", "ipod", "ismv", "f4v", "psp", "matroska", "webm")
"""FFmpeg's muxers that record a video stream's display rotation."""
OPEN_TIMEOUT_SECONDS = 30.0
"""How long a network source may take to send what opening it needs (`open_source`): a silent
camera or a wrong address would otherwise block the open for ever."""

DEFAULT_CODECS = ("mpeg4", "libvpx-vp9", "libx264")
"""The video encoders tried, in order, when none is given: the first the output container
takes (MPEG-4 Part 2 in most; VP9 in WebM, which takes no MPEG-4)."""

STALL_TIMEOUT_SECONDS = 30.0
"""How long an open live source may send nothing before its output is closed (`transcode`): a
camera that stops sending would otherwise hold the output open, unfinished, for ever."""

FrameFunction = Callable[[np.ndarray], np.ndarray]
"""uint8 frames (N, H, W, 3) -> anonymized uint8 frames (N, H, W, 3)."""


@dataclasses.dataclass
class StreamStats:
    """What one `transcode` did: frames read, written, dropped and scaled to the first frame's
    size, video packets skipped as undecodable, audio packets copied, time."""

    frames_read: int = 0
    frames_written: int = 0
    frames_dropped: int = 0
    frames_scaled: int = 0
    packets_skipped: int = 0
    audio_packets: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    stalled: bool = False

    @property
    def frames_per_second(self) -> float:
        """Frames written per second of wall-clock time (decoding, model and encoding)."""
        return self.frames_written / self.seconds if self.seconds > 0 else 0.0


def is_live(source: str | os.PathLike) -> bool:
    """True for a source that is not a regular file: a device, a URL, a pipe or a FIFO."""
    return not os.path.isfile(source)


def _is_file_output(output: str | os.PathLike) -> bool:
    """True when `output` is a path to write atomically (not a URL, pipe, FIFO or device)."""
    text = os.fspath(output)
    if "://" in text or text.startswith("pipe:"):
        return False
    return not os.path.exists(text) or stat.S_ISREG(os.stat(text).st_mode)


def open_source(
    source: str | os.PathLike,
    input_format: str | None = None,
    options: dict[str, str] | None = None,
    open_timeout: float | None = OPEN_TIMEOUT_SECONDS,
) -> av.container.InputContainer:
    """Open `source` with PyAV (`input_format`, e.g. ``v4l2`` for a webcam, ``mpegts`` for a
    pipe, and demuxer `options`, as FFmpeg's ``-f`` and ``-option value``). A network source
    (a URL) that sends nothing to open within `open_timeout` seconds (None or 0: no limit) is
    given up. Ctrl-C interrupts the open (FFmpeg's blocking read does not see it).

    Raises VideoDecodeError naming the source when it cannot be opened or has no video stream.
    """
    text = os.fspath(source)
    if not is_live(text) and os.path.getsize(text) == 0:
        raise VideoDecodeError(f"{text}: empty file (0 bytes)")
    if is_live(text) and "://" not in text and ":" not in text and not os.path.exists(text):
        raise VideoDecodeError(f"{text}: no such file, device or pipe")
    network = "://" in text and not text.startswith("file:")
    timeout = open_timeout if network else None
    return _interruptible(lambda: open_container(text, input_format, options, timeout))


def _interruptible(call: Callable[[], object]):
    """`call()` run on a daemon thread while this one waits in short steps, so that Ctrl-C
    (seen by Python on its main thread only, between steps) ends the wait; its result, or
    its exception re-raised."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def describe_source(video: av.VideoStream, rate: Fraction) -> str:
    """A video stream as a log line shows it: codec, size and frame rate, e.g. ``h264 640x480
    at 25 frames/s``."""
    context = video.codec_context
    return f"{context.name} {context.width}x{context.height} at {float(rate):.4g} frames/s"


class SourceStalled(Exception):
    """Nothing arrived from the source within the wait `FrameQueue.get` was given."""


class FrameQueue:
    """Decoded video frames (at most `size`; `policy` when full) and audio packets (never
    dropped, not counted), handed from the reader thread to the model in arrival order."""

    def __init__(self, size: int, policy: str):
        if size < 1:
            raise ValueError(f"queue size must be at least 1, got {size}")
        if policy not in POLICIES:
            raise ValueError(f"queue policy must be one of {POLICIES}, got {policy!r}")
        self.size, self.policy = size, policy
        self.dropped = 0
        self.skipped_packets = 0
        self._items: collections.deque = collections.deque()
        self._frames = 0
        self._closed = False
        self._error: BaseException | None = None
        self._condition = threading.Condition()

    def put_frame(self, frame: av.VideoFrame, stop: threading.Event) -> None:
        """Add a frame; when full, wait (until there is room or `stop`: then the frame is not
        added, as reading has ended) or drop the oldest."""
        with self._condition:
            while self._frames >= self.size and self.policy == WAIT and not stop.is_set():
                self._condition.wait(0.1)
            if self._frames >= self.size and self.policy == WAIT:
                return
            if self._frames >= self.size:
                oldest = next(i for i, item in enumerate(self._items) if item[0] == "video")
                del self._items[oldest]
                self._frames -= 1
                self.dropped += 1
            self._items.append(("video", frame))
            self._frames += 1
            self._condition.notify_all()

    def put_audio(self, packet: av.Packet) -> None:
        """Add an audio packet (never dropped)."""
        with self._condition:
            self._items.append(("audio", packet))
            self._condition.notify_all()

    def close(self, error: BaseException | None = None) -> None:
        """No more items; `error`, if any, is raised by `get` once the items are taken."""
        with self._condition:
            self._closed, self._error = True, error
            self._condition.notify_all()

    @property
    def frames_waiting(self) -> int:
        """The number of decoded frames waiting for the model."""
        with self._condition:
            return self._frames

    def get(self, timeout: float | None = None) -> tuple[str, object] | None:
        """The next ("video", frame) or ("audio", packet), waiting for one (with `timeout`, at
        most that many seconds, then SourceStalled); None at the end. Raises the reader's
        error after its last item."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while not self._items and not self._closed:
                if deadline is not None and time.monotonic() >= deadline:
                    raise SourceStalled
                self._condition.wait(0.1)  # a timeout, so Ctrl-C is seen
            if self._items:
                item = self._items.popleft()
                if item[0] == "video":
                    self._frames -= 1
                    self._condition.notify_all()
                return item
            if self._closed and self._error is not None:
                raise self._error
            return None


def _read(
    container: av.container.InputContainer,
    audio: av.AudioStream | None,
    queue: FrameQueue,
    stop: threading.Event,
    name: str,
) -> None:
    """The reader thread: demux and decode into `queue` until the end or `stop`; closes the
    queue, passing on a reading error naming `name`. A video packet that does not decode is
    skipped, with a warning the first time, and counted; `MAX_UNDECODABLE_IN_A_ROW` in a row
    are an error. The container stays open: the writer copies the audio stream's parameters
    from it."""
    video = container.streams.video[0]
    error, in_a_row = None, 0
    try:
        for packet in container.demux([video] + ([audio] if audio else [])):
            if stop.is_set():
                break
            if audio is not None and packet.stream.index == audio.index:
                if packet.size:
                    queue.put_audio(packet)
                continue
            try:
                frames = packet.decode()
            except av.error.FFmpegError as failure:
                queue.skipped_packets += 1
                in_a_row += 1
                if in_a_row >= MAX_UNDECODABLE_IN_A_ROW:
                    raise
                if queue.skipped_packets == 1:
                    logging.warning(
                        "%s: a video packet at %s does not decode (%s): skipped, as every "
                        "such packet (counted in the summary)",
                        name,
                        _packet_time(packet),
                        failure,
                    )
                continue
            in_a_row = 0
            for frame in frames:
                queue.put_frame(frame, stop)
    except av.error.FFmpegError as failure:
        error = VideoDecodeError(f"{name}: decoding failed ({failure})")
    finally:
        queue.close(error)


def _default_codec(container: av.container.OutputContainer) -> str:
    """The first of `DEFAULT_CODECS` that `container` takes and FFmpeg can encode with (the
    first of them where it takes none: its error then names the container)."""
    for codec in DEFAULT_CODECS:
        if codec in container.supported_codecs and codec in av.codecs_available:
            return codec
    return DEFAULT_CODECS[0]


def _packet_time(packet: av.Packet) -> str:
    """A packet's time as a log line shows it ("12.34 s", or "an unknown time")."""
    if packet.pts is None or packet.time_base is None:
        return "an unknown time"
    return f"{float(packet.pts * packet.time_base):.2f} s"


class _Writer:
    """The output container, opened at the first frame (its size and rotation come from it).
    Audio packets that arrive before it opens are kept and written then. Errors name `name`,
    the file the user asked for (`output` may be its temporary twin)."""

    def __init__(
        self,
        output: str | os.PathLike,
        output_format: str | None,
        codec: str | None,
        quality: int,
        rate: Fraction,
        audio: av.AudioStream | None,
        name: str,
    ):
        self.output, self.output_format, self.name = os.fspath(output), output_format, name
        self.codec, self.quality, self.rate, self.audio_template = codec, quality, rate, audio
        self.container = self.video = self.audio = None
        self.pending_audio: list[av.Packet] = []
        self.audio_packets = 0  # copied into the output
        self.held: collections.deque = collections.deque()  # pixels waiting for a timestamp
        self.stamps: list[int] = []  # a heap of the held frames' timestamps
        self.last_pts = self.last_stamp = -1
        self.origin = Fraction(0)  # the first frame's source time, in seconds: the output's 0
        self.constant_rate = False  # a container without variable frame rates (AVI, MPEG-PS)
        self.negative_times = False  # a container that takes negative timestamps (MP4, MOV)

    def _open(self, frame: av.VideoFrame) -> None:
        """Open the container with a video stream of `frame`'s size (even) and rotation."""
        try:
            self.container = av.open(self.output, "w", format=self.output_format)
        except (av.error.FFmpegError, OSError, ValueError) as error:
            hint = "" if self.output_format else " (give its format: --output_format, e.g. mpegts)"
            raise ValueError(f"{self.name}: cannot be written ({error}){hint}") from error
        if self.container.format.name in IMAGE_MUXERS:
            self.release()
            raise ValueError(
                f"{self.name}: an image file, not a video; name a video file (.mp4, .mkv, .avi)"
            )
        self.codec = self.codec or _default_codec(self.container)
        try:
            self.video = add_video_stream(
                self.container, self.codec, self.quality, self.rate, frame.height, frame.width
            )
        except (av.error.FFmpegError, ValueError) as error:
            self.release()
            raise ValueError(
                f"{self.name}: cannot hold video {self.codec} ({error}); choose another codec "
                "(--codec) or container (.mkv takes any)"
            ) from error
        flags = av.format.Flags(self.container.format.flags)
        self.constant_rate = not flags & (
            av.format.Flags.variable_fps | av.format.Flags.no_timestamps
        )
        self.negative_times = bool(flags & av.format.Flags.ts_negative)
        if frame.pts is not None and frame.time_base is not None:
            self.origin = frame.pts * frame.time_base
        self.video.codec_context.time_base = self._time_base(frame)
        if frame.rotation:
            self.video.set_display_rotation(frame.rotation)
            if self.container.format.name not in ROTATION_MUXERS:
                logging.warning(
                    "%s: the source is rotated by %g degrees, which %s cannot record: players "
                    "will show it unturned (an .mp4 or .mkv output keeps the rotation)",
                    self.name,
                    frame.rotation,
                    self.container.format.long_name or self.container.format.name,
                )
        try:
            if self.audio_template is not None:
                self.audio = self.container.add_stream_from_template(self.audio_template)
            self.container.start_encoding()
        except (av.error.FFmpegError, ValueError) as error:
            audio_codec = self.audio_template and self.audio_template.codec_context.name
            self.release()
            if isinstance(error, OSError):  # the file itself (FFmpeg opens it here)
                raise ValueError(f"{self.name}: cannot be written ({error.strerror})") from error
            if audio_codec is None:
                raise ValueError(
                    f"{self.name}: cannot write video {self.codec} ({error}); choose another "
                    "codec or container (.mkv takes any)"
                ) from error
            raise ValueError(
                f"{self.name}: cannot write video {self.codec} with audio {audio_codec} "
                f"({error}); choose another container (.mkv takes any) or drop the audio"
            ) from error
        pending, self.pending_audio = self.pending_audio, []
        for packet in pending:
            self.write_audio(packet)

    def _time_base(self, frame: av.VideoFrame) -> Fraction:
        """The source's time base, so that every frame keeps its timestamp; a millisecond where
        MPEG-4 Part 2 cannot express it. One frame at the source's rate where the output has a
        constant rate: a container without variable rates (AVI, MPEG-PS: as FFmpeg's own
        command line does, else AVI counts every tick of a 1/15360 time base as a frame), or a
        codec of standard rates only (MPEG-2), which must hold the source's."""
        standard_rates = av.codec.Codec(self.codec, "w").frame_rates
        if standard_rates:
            nearest = min(standard_rates, key=lambda rate: abs(rate - self.rate))
            if abs(nearest / self.rate - 1) > STANDARD_RATE_TOLERANCE:
                self.release()
                raise ValueError(
                    f"{self.name}: {self.codec} takes standard frame rates only, the nearest "
                    f"{float(nearest):g} to the source's {float(self.rate):g}; choose another "
                    "codec (--codec)"
                )
            return 1 / Fraction(nearest)
        if self.constant_rate:
            return 1 / self.rate
        time_base = frame.time_base or 1 / self.rate
        if time_base.denominator > MAX_MPEG4_TIME_BASE_DENOMINATOR:
            time_base = Fraction(1, 1000)
        return time_base

    def write_frame(self, source: av.VideoFrame, pixels: np.ndarray) -> None:
        """Encode `pixels` (H, W, 3 uint8) with `source`'s timestamp, from the first frame's.
        The frames come in display order; their timestamps are sorted over a window of
        REORDER_DEPTH frames."""
        if self.container is None:
            self._open(source)
        time_base = self.video.codec_context.time_base
        if source.pts is None or source.time_base is None:
            # A raw elementary stream (H.264 on a pipe) stamps no frame: one frame at the
            # source's rate after the last (a tick of a millisecond base would be 1 ms).
            frame_ticks = max(1, round(1 / (self.rate * time_base)))
            stamp = 0 if self.last_stamp < 0 else self.last_stamp + frame_ticks
        else:
            stamp = round((source.pts * source.time_base - self.origin) / time_base)
        self.last_stamp = stamp
        heapq.heappush(self.stamps, stamp)
        self.held.append(pixels)
        if len(self.held) > REORDER_DEPTH:
            self._encode(self.held.popleft(), heapq.heappop(self.stamps))

    def _encode(self, pixels: np.ndarray, pts: int) -> None:
        """Encode one frame at `pts` (raised when needed: encoders take increasing pts only)."""
        pts = max(pts, self.last_pts + 1)
        self.last_pts = pts
        pad = ((0, self.video.height - pixels.shape[0]), (0, self.video.width - pixels.shape[1]))
        image = av.VideoFrame.from_ndarray(np.pad(pixels, pad + ((0, 0),), "edge"), "rgb24")
        image.pts, image.time_base = pts, self.video.codec_context.time_base
        for packet in self.video.encode(image):
            self._mux(packet)

    def _mux(self, packet: av.Packet) -> None:
        """Write `packet`; an error names the file asked for, not its temporary twin."""
        try:
            self.container.mux(packet)
        except av.error.FFmpegError as error:
            raise ValueError(f"{self.name}: cannot be written ({error.strerror})") from error

    def write_audio(self, packet: av.Packet) -> None:
        """Copy an audio packet (bytes unchanged) into the output, moved in time as the video
        (kept until the first frame opens the output), and count it; one before the first
        frame is left out where the container takes no negative timestamps."""
        if self.container is None:
            self.pending_audio.append(packet)
            return
        if packet.time_base is not None:
            shift = round(self.origin / packet.time_base)
            if packet.pts is not None:
                if packet.pts < shift and not self.negative_times:
                    return
                packet.pts -= shift
            if packet.dts is not None:
                packet.dts -= shift
        packet.stream = self.audio
        self._mux(packet)
        self.audio_packets += 1

    def close(self) -> None:
        """Flush the encoder and close the container (its trailer makes the file playable)."""
        if self.container is None:
            raise ValueError(f"{self.name}: no frames to write")
        try:
            while self.held:
                self._encode(self.held.popleft(), heapq.heappop(self.stamps))
            for packet in self.video.encode():
                self._mux(packet)
        finally:
            self.release()

    def release(self) -> None:
        """Close the container if it is open (after an error: what was written is discarded)."""
        if self.container is not None:
            container, self.container = self.container, None
            container.close()


def _anonymize_batch(
    anonymize: FrameFunction, frames: list[av.VideoFrame], size: int, frame_size: tuple[int, int]
):
    """`anonymize` on `frames` as RGB, each scaled to `frame_size` (width, height: the first
    frame's, which the output keeps), padded with copies of the last to `size` frames."""
    width, height = frame_size
    pixels = [frame.to_ndarray(format="rgb24", width=width, height=height) for frame in frames]
    pixels += [pixels[-1]] * (size - len(pixels))
    return anonymize(np.stack(pixels))[: len(frames)]


def transcode(
    anonymize: FrameFunction,
    source: str | os.PathLike,
    output: str | os.PathLike,
    batch_size: int = 8,
    codec: str | None = None,
    quality: int = 2,
    keep_audio: bool = True,
    queue_size: int = 32,
    policy: str | None = None,
    input_format: str | None = None,
    output_format: str | None = None,
    input_options: dict[str, str] | None = None,
    on_batch: Callable[[int], object] | None = None,
    on_open: Callable[[str], object] | None = None,
    open_timeout: float | None = OPEN_TIMEOUT_SECONDS,
    stall_timeout: float | None = STALL_TIMEOUT_SECONDS,
) -> StreamStats:
    """Anonymize `source` into `output` as the module's docstring says; returns the stats.

    `codec` is the video encoder (None: the first of `DEFAULT_CODECS` the output container
    takes). `policy` is ``"wait"`` or ``"drop"`` (default: wait for a regular file, drop for a
    live source). `on_batch(number of frames)` is called after each batch is encoded (a progress
    bar); `on_open(line)` once the source is open, with its name, codec, size and rate
    (`describe_source`), which input options may have set. A network source that sends
    nothing to open within `open_timeout` seconds is given up (`open_source`); an open live
    source that sends nothing for `stall_timeout` seconds (None or 0: no limit) is closed as
    Ctrl-C closes it, what was written kept. Raises VideoDecodeError naming the source when it
    cannot be read, or sends no frame before it stalls.
    """
    # "-" is the standard input or output, as on FFmpeg's command line (PyAV: a file "-").
    source_name = "pipe:0" if os.fspath(source) == "-" else os.fspath(source)
    output = "pipe:1" if os.fspath(output) == "-" else output
    policy = policy or (DROP if is_live(source_name) else WAIT)
    wait = (stall_timeout or None) if is_live(source_name) else None
    queue = FrameQueue(queue_size, policy)
    container = open_source(source_name, input_format, input_options, open_timeout)
    video = container.streams.video[0]
    video.thread_type = "AUTO"
    audio = container.streams.audio[0] if keep_audio and container.streams.audio else None
    rate = video.average_rate or video.guessed_rate or Fraction(25)
    if on_open is not None:
        on_open(f"{source_name}: {describe_source(video, rate)}")
    target = Path(output)
    atomic = _is_file_output(output)
    written = output
    if atomic:
        # A name of its own, so that two runs writing one output never write into one file.
        partial = f".partial{target.suffix}"
        remove_abandoned_temporaries(target, prefix=".", suffix=partial)  # a killed run's
        written = temporary_beside(target, prefix=".", suffix=partial)
    writer = _Writer(written, output_format, codec, quality, rate, audio, os.fspath(output))
    stats, stop = StreamStats(), threading.Event()
    reader = threading.Thread(
        target=_read, args=(container, audio, queue, stop, source_name), daemon=True
    )
    start = time.perf_counter()
    reader.start()
    batch: list[av.VideoFrame] = []
    frame_size = None

    def flush() -> None:
        anonymized = _anonymize_batch(anonymize, batch, batch_size, frame_size)
        for frame, pixels in zip(batch, anonymized):
            writer.write_frame(frame, pixels)
        stats.frames_written += len(batch)
        if on_batch is not None:
            on_batch(len(batch))
        batch.clear()

    try:
        try:
            while (item := queue.get(wait)) is not None:
                kind, payload = item
                if kind == "audio":
                    writer.write_audio(payload)
                    continue
                stats.frames_read += 1
                size = (payload.width, payload.height)
                frame_size = frame_size or size
                if size != frame_size:
                    if not stats.frames_scaled:
                        logging.warning(
                            "%s: frame %d is %dx%d, the first %dx%d: frames of another size "
                            "are scaled to the first's",
                            source_name,
                            stats.frames_read,
                            *size,
                            *frame_size,
                        )
                    stats.frames_scaled += 1
                batch.append(payload)
                if len(batch) == batch_size or (policy == DROP and not queue.frames_waiting):
                    flush()
            if batch:
                flush()
        except KeyboardInterrupt:
            stats.interrupted = True
        except SourceStalled:
            stats.stalled = True
            if batch:
                flush()
            logging.warning(
                "%s: nothing received for %g s: the output is closed with the %d frames "
                "received (--stall_timeout)",
                source_name,
                wait,
                stats.frames_read,
            )
        stop.set()
        reader.join(timeout=5)
        stats.frames_dropped = queue.dropped
        stats.packets_skipped = queue.skipped_packets
        stats.audio_packets = writer.audio_packets
        if stats.frames_read == 0 and stats.stalled:
            raise VideoDecodeError(
                f"{source_name}: sent no video frame within {wait:g} s of opening (--stall_timeout)"
            )
        if stats.frames_read == 0 and not stats.interrupted:
            raise VideoDecodeError(
                f"{source_name}: no video frame decoded (an empty video, one cut short before "
                "its first frame, or a stream that closed before sending one)"
            )
        if not (stats.interrupted and stats.frames_written == 0):  # else nothing to keep
            writer.close()
            if atomic:
                os.replace(written, target)
    finally:
        stop.set()
        writer.release()
        reader.join(timeout=5)
        if not reader.is_alive():  # else it is blocked on a live source: leave it to exit
            container.close()
        if atomic:
            with contextlib.suppress(OSError):  # a folder it could not be written in either
                Path(written).unlink(missing_ok=True)
    stats.seconds = time.perf_counter() - start
    return stats
