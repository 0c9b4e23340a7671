"""A people baseline written onto the evaluation's files: every video and image of the four
splits blurred or blackened once, under the report folder, and read back like a dataset."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

from keras_privacy.data.errors import VideoDecodeError
from keras_privacy.data.examples import Split
from keras_privacy.data.video import probe_video, read_video, write_video
from keras_privacy.evaluation.anonymizations import Anonymization
from keras_privacy.evaluation.datasets import EvaluationData


def anonymize_videos(
    split: Split, method: Anonymization, out_dir: Path, desc: str, short_side: int | None
) -> Split:
    """Write the people baseline of every video of `split` under `out_dir` (kept if already
    there), at `short_side`, and return the split of the written files. Undecodable videos are
    skipped and named."""
    out_dir.mkdir(parents=True, exist_ok=True)
    examples, missing = [], list(split.missing)
    for index, example in enumerate(tqdm(split.examples, desc=desc, unit="video", leave=False)):
        target = out_dir / f"{index:06d}_{Path(example.path).stem}.mp4"
        if not target.exists():
            try:
                frames = read_video(example.path)
                fps = probe_video(example.path).fps
            except VideoDecodeError as error:
                logging.warning("skipping %s", error)
                missing.append(str(error))
                continue
            anonymized = method.clip_fn(Path(example.path).name, short_side, "video")(frames)
            partial = target.with_suffix(".partial.mp4")
            write_video(partial, anonymized, fps=fps, codec="libx264", quality=0)
            partial.rename(target)
        examples.append(dataclasses.replace(example, path=str(target)))
    return dataclasses.replace(split, examples=examples, missing=missing)


def anonymize_images(
    split: Split, method: Anonymization, out_dir: Path, desc: str, short_side: int | None
) -> Split:
    """Write the people baseline of every image of `split` (as a one-frame clip), at
    `short_side`, under `out_dir` as PNG."""
    out_dir.mkdir(parents=True, exist_ok=True)
    examples, missing = [], list(split.missing)
    for index, example in enumerate(tqdm(split.examples, desc=desc, unit="image", leave=False)):
        target = out_dir / f"{index:06d}_{Path(example.path).stem}.png"
        if not target.exists():
            image = cv2.imread(example.path, cv2.IMREAD_COLOR)
            if image is None:
                logging.warning("skipping %s: unreadable image", example.path)
                missing.append(f"{example.path}: unreadable image")
                continue
            clip_fn = method.clip_fn(Path(example.path).name, short_side, "image")
            anonymized = clip_fn(np.ascontiguousarray(image[None, ..., ::-1]))[0]
            cv2.imwrite(str(target), np.ascontiguousarray(anonymized[..., ::-1]))
        examples.append(dataclasses.replace(example, path=str(target)))
    return dataclasses.replace(split, examples=examples, missing=missing)


def anonymized_data(
    data: EvaluationData, method: Anonymization, work_dir: Path, short_side: int | None
) -> EvaluationData:
    """The splits of the people baseline `method` applied to the files of `data` at
    `short_side` (written once)."""
    root = work_dir / method.name
    name = method.name
    return EvaluationData(
        action_train=anonymize_videos(
            data.action_train, method, root / "action_train", f"{name}: train", short_side
        ),
        action_test=anonymize_videos(
            data.action_test, method, root / "action_test", f"{name}: test", short_side
        ),
        privacy_train=anonymize_images(
            data.privacy_train, method, root / "privacy_train", f"{name}: images", short_side
        ),
        privacy_test=anonymize_images(
            data.privacy_test, method, root / "privacy_test", f"{name}: images", short_side
        ),
    )
