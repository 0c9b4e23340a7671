"""Video decoding and encoding with PyAV, which bundles FFmpeg (tensorflow-io no longer loads).

Every failure to read a video (missing, empty, corrupt, no decodable frame) raises
`VideoDecodeError` naming the file, so callers can skip and report it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Iterator
from fractions import Fraction

import av
import numpy as np

from keras_privacy.data.errors import VideoDecodeError

QUANTISER_CODECS = ("mpeg4", "mjpeg", "mpeg2video")
"""Codecs whose quality is a quantiser scale, 1 (best) to 31, rather than libx264's CRF."""


@dataclasses.dataclass(frozen=True)
class VideoInfo:
    """Frame count, frame rate and frame size of a video's first video stream, and the frame
    count its container declares (0 where it declares none, as Matroska)."""

    num_frames: int
    fps: float
    height: int
    width: int
    declared_frames: int = 0


def seems_cut_short(decoded: int, declared: int) -> bool:
    """Whether `decoded` frames are clearly fewer than the `declared` ones: a file cut short
    (a partial download or copy), whose missing end the reader skips without a word."""
    # A whole file can decode a frame or two fewer than its header counts (an MP4 edit list,
    # packed B-frames in an AVI, frames a decoder holds back at the end), and some muxers
    # write an estimate; a cut file falls short by far more. So only a shortfall of more than
    # 2 frames and 5 % of the declared count is called one.
    return declared - decoded > max(2, 0.05 * declared)


def _open(
    path: str | os.PathLike, input_format: str | None = None, options: dict[str, str] | None = None
) -> av.container.InputContainer:
    """Open `path` for reading (`open_container`), checking it is a non-empty file with a video
    stream."""
    if not os.path.isfile(path):
        raise VideoDecodeError(f"{path}: no such file")
    if os.path.getsize(path) == 0:
        raise VideoDecodeError(f"{path}: empty file (0 bytes)")
    return open_container(os.fspath(path), input_format, options)


def open_container(
    name: str,
    input_format: str | None = None,
    options: dict[str, str] | None = None,
    open_timeout: float | None = None,
) -> av.container.InputContainer:
    """Open the file, device, URL or pipe `name` with PyAV (FFmpeg's ``-f`` `input_format` and
    demuxer `options`); raises VideoDecodeError naming it when it cannot be opened, has no
    video stream, or (with `open_timeout`, in seconds) sends nothing to open in that time."""
    timeout = (open_timeout, None) if open_timeout else None
    try:
        container = av.open(name, format=input_format, options=options or {}, timeout=timeout)
    except (av.error.FFmpegError, OSError, ValueError) as error:
        if open_timeout and isinstance(error, av.error.ExitError):  # PyAV's timeout fired
            raise VideoDecodeError(
                f"{name}: sent nothing to open within {open_timeout:g} s (a silent source, or "
                "a wrong address or port)"
            ) from error
        raise VideoDecodeError(f"{name}: cannot be opened as a video ({error})") from error
    if not container.streams.video:
        container.close()
        raise VideoDecodeError(f"{name}: has no video stream")
    return container


def _decoded_frames(path: str | os.PathLike) -> Iterator[av.VideoFrame]:
    """The decoded frames of the first video stream, decoding errors as VideoDecodeError."""
    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        yield from container.decode(stream)
    except av.error.FFmpegError as error:
        raise VideoDecodeError(f"{path}: decoding failed ({error})") from error
    finally:
        container.close()


def iter_video_frames(path: str | os.PathLike) -> Iterator[np.ndarray]:
    """Yield the frames of `path` one at a time as RGB uint8 (H, W, 3) arrays.

    Streams long videos without holding them in memory. A file that yields no frame at all
    raises `VideoDecodeError` (after the last frame), like a missing or corrupt one, and so
    does a frame of another size than the first (pieces of two streams joined): a clip holds
    frames of one size.
    """
    count, size = 0, None
    for frame in _decoded_frames(path):
        count += 1
        rgb = frame.to_ndarray(format="rgb24")
        size = size or rgb.shape[:2]
        if rgb.shape[:2] != size:
            raise VideoDecodeError(
                f"{path}: frame {count} is {rgb.shape[1]}x{rgb.shape[0]}, the earlier frames "
                f"{size[1]}x{size[0]} (the frame size changes within the video)"
            )
        yield rgb
    if count == 0:
        raise VideoDecodeError(f"{path}: contains no decodable frame (empty video)")


def read_video(path: str | os.PathLike, max_frames: int | None = None) -> np.ndarray:
    """All frames (or the first `max_frames`) of `path` as an RGB uint8 (T, H, W, 3) array.

    Any container and codec FFmpeg reads is accepted. Frames decode in RGB order (not OpenCV's
    BGR). A truncated file gives the frames that still decode.
    """
    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be at least 1, got {max_frames}")
    frames = []
    for frame in iter_video_frames(path):
        frames.append(frame)
        if max_frames is not None and len(frames) >= max_frames:
            break
    return np.stack(frames)


def declared_frame_count(path: str | os.PathLike) -> int:
    """The frame count the container of `path` declares (0 where it declares none), read from
    its header alone."""
    container = _open(path)
    try:
        return int(container.streams.video[0].frames)
    except av.error.FFmpegError as error:
        raise VideoDecodeError(f"{path}: reading the container failed ({error})") from error
    finally:
        container.close()


def stored_frame_span(
    path: str | os.PathLike, input_format: str | None = None, options: dict[str, str] | None = None
) -> int:
    """The frames the video packets of `path` span, first timestamp to last (a demux, no
    decoding): a writer that drops frames (an AVI of a still scene) leaves gaps in the
    timestamps, and its header counts the span; a file cut short holds a shorter span."""
    container = _open(path, input_format, options)
    try:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate or 0
        time_base = stream.time_base
        stamps = [
            packet.pts if packet.pts is not None else packet.dts
            for packet in container.demux(stream)
            if packet.size
        ]
    except av.error.FFmpegError as error:
        raise VideoDecodeError(f"{path}: reading the container failed ({error})") from error
    finally:
        container.close()
    stamps = [stamp for stamp in stamps if stamp is not None]
    if not stamps or not rate:
        return 0
    return round(float((max(stamps) - min(stamps)) * time_base * rate)) + 1


def file_seems_cut_short(
    path: str | os.PathLike,
    decoded: int,
    declared: int,
    input_format: str | None = None,
    options: dict[str, str] | None = None,
) -> bool:
    """Whether the file `path`, of which `decoded` of the `declared` frames decoded, seems cut
    short: clearly fewer frames decoded (`seems_cut_short`), and its packets span clearly fewer
    too (not frames its writer dropped, `stored_frame_span`, read only where the counts
    differ). `input_format` and `options` open it as `open_container` does."""
    if not seems_cut_short(decoded, declared):
        return False
    return seems_cut_short(stored_frame_span(path, input_format, options), declared)


def warn_if_cut_short(path: str | os.PathLike, decoded: int, outcome: str) -> str:
    """Log a warning naming `path` and both counts where it seems cut short
    (`file_seems_cut_short`); `outcome` says what is done with the frames that decode. Returns
    why the file seems cut short ("" where it does not). Reads the container's header, and its
    packets only where the counts differ."""
    declared = declared_frame_count(path)
    if not file_seems_cut_short(path, decoded, declared):
        return ""
    reason = f"the container declares {declared} frames, {decoded} decoded"
    logging.warning("%s: %s (the file seems cut short); %s", os.fspath(path), reason, outcome)
    return reason


def count_packets(
    path: str | os.PathLike, input_format: str | None = None, options: dict[str, str] | None = None
) -> tuple[int, int]:
    """The frames the container of `path` declares (0 where it declares none, as Matroska)
    and the video packets it holds, about one a frame: a demux, no decoding. `input_format`
    and `options` open it as `open_container` does (a raw stream names its format and size)."""
    container = _open(path, input_format, options)
    try:
        stream = container.streams.video[0]
        declared = stream.frames
        packets = sum(1 for packet in container.demux(stream) if packet.size)
    except av.error.FFmpegError as error:
        raise VideoDecodeError(f"{path}: reading the container failed ({error})") from error
    finally:
        container.close()
    return int(declared), packets


def probe_video(path: str | os.PathLike) -> VideoInfo:
    """Frame count, frame rate and size of `path`.

    The container's frame count is trusted only when the stream has as many packets as it
    declares (a cheap demux, no decoding); otherwise (no count, as in Matroska, or a truncated
    file whose header promises more) the frames are counted by decoding them.
    """
    container = _open(path)
    try:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate or 0
        height, width = stream.codec_context.height, stream.codec_context.width
        declared = stream.frames
        packets = sum(1 for packet in container.demux(stream) if packet.size) if declared else 0
    except av.error.FFmpegError as error:
        raise VideoDecodeError(f"{path}: reading the container failed ({error})") from error
    finally:
        container.close()
    count = declared if declared and packets == declared else sum(1 for _ in _decoded_frames(path))
    if count == 0:
        raise VideoDecodeError(f"{path}: contains no decodable frame (empty video)")
    return VideoInfo(
        num_frames=int(count),
        fps=float(rate),
        height=height,
        width=width,
        declared_frames=int(declared),
    )


def add_video_stream(
    container: av.container.OutputContainer,
    codec: str,
    quality: int,
    rate: Fraction,
    height: int,
    width: int,
) -> av.VideoStream:
    """A 4:2:0 video stream of `codec` in `container` for frames of (height, width), both
    rounded up to even (4:2:0 needs even sizes): yuv420p, or the full-range yuvj420p of
    codecs that list it first (mjpeg). `quality` is the quantiser scale of the codecs that
    have one (`QUANTISER_CODECS`: 1 = best, every frame at exactly that scale); for the
    others (libx264) it is passed as CRF = 5 * quality."""
    stream = container.add_stream(codec, rate=rate)
    stream.height, stream.width = height + height % 2, width + width % 2
    stream.pix_fmt = _pixel_format(codec)
    quantiser = {"qmin": str(quality), "qmax": str(quality)}
    stream.options = quantiser if codec in QUANTISER_CODECS else {"crf": str(quality * 5)}
    return stream


def _pixel_format(codec: str) -> str:
    """The first 4:2:0 format `codec` lists (yuv420p if it lists none)."""
    listed = [pixel.name for pixel in av.codec.Codec(codec, "w").video_formats or ()]
    return next((name for name in listed if name in ("yuv420p", "yuvj420p")), "yuv420p")


def write_video(
    path: str | os.PathLike,
    frames: Iterable[np.ndarray],
    fps: float = 25.0,
    codec: str = "mpeg4",
    quality: int = 2,
) -> None:
    """Write RGB uint8 frames (an array or an iterable of (H, W, 3)) as a playable video.

    Used to write test and benchmark videos in the real datasets' formats. Odd sizes are padded
    by one edge pixel; `codec` and `quality` as `add_video_stream` takes them.
    """
    container = av.open(os.fspath(path), "w")
    try:
        stream = None
        for frame in frames:
            frame = np.asarray(frame, dtype=np.uint8)
            if stream is None:
                rate = Fraction(fps).limit_denominator(1001)
                stream = add_video_stream(container, codec, quality, rate, *frame.shape[:2])
            pad = ((0, stream.height - frame.shape[0]), (0, stream.width - frame.shape[1]), (0, 0))
            image = av.VideoFrame.from_ndarray(np.pad(frame, pad, mode="edge"), format="rgb24")
            for packet in stream.encode(image):
                container.mux(packet)
        if stream is None:
            raise ValueError(f"{path}: no frames to write")
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
