"""Clips/s of 16 x 112 x 112 augmented training clips, from the prepared cache and from files.

    python benchmarks/input_pipeline.py [--videos 48] [--clips 400] [--batch 8]

Writes `--videos` H.264 videos of 64 frames at 128 x 170 (moving noise, so JPEG and H.264 have
real work), prepares a cache (short side 128), then times the training pipeline (the default
supervised augmentation, `augment.SUPERVISED`, one draw per clip) from each source after one
warm-up batch. Peak memory is the process's maximum resident set. tf.data parallelises decoding
over every core (AUTOTUNE); the cache is also timed with its thread pool capped at one thread,
so the ratio of the two figures shows how throughput scales with cores on this machine, and
with tf.data's autotuner on (the pipelines turn it off: its thread held each epoch's iterator
deletion for seconds), the peer of the first figure.
The last line is one JSON object.
"""

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from keras_privacy.data import pipelines
from keras_privacy.data.cache import prepare_video_cache
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.video import write_video


def make_videos(folder: Path, count: int, frames: int = 64) -> Split:
    """`count` videos of smoothly moving noise at 128 x 170."""
    rng = np.random.default_rng(0)
    examples = []
    for index in range(count):
        texture = rng.integers(0, 256, (160, 220, 3), dtype=np.uint8)
        clip = (texture[t % 32 : t % 32 + 128, t % 50 : t % 50 + 170] for t in range(frames))
        path = folder / f"video_{index:03d}.mp4"
        write_video(path, clip, fps=25, codec="libx264", quality=20)
        examples.append(Example(str(path), label=index % 4))
    return Split(examples, class_names=[f"class{i}" for i in range(4)])


def clips_per_second(
    source, clips: int, batch: int, threads: int = 0, autotune: bool = False
) -> float:
    """Training clips per second after one warm-up batch; `threads` > 0 caps tf.data's
    thread pool (0: one thread per core); `autotune` turns tf.data's autotuner back on."""
    dataset = pipelines.action_train_dataset(
        source, batch, clip_length=16, stride=2, size=112, seed=0, epochs=None
    )
    options = tf.data.Options()
    options.threading.private_threadpool_size = threads
    options.autotune.enabled = autotune
    dataset = dataset.with_options(options)
    iterator = iter(dataset)
    next(iterator)
    start = time.perf_counter()
    for _ in range(clips // batch):
        next(iterator)
    return (clips // batch) * batch / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=48)
    parser.add_argument("--clips", type=int, default=400)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        split = make_videos(work, args.videos)
        start = time.perf_counter()
        prepare_video_cache(split, work / "cache", short_side=128)
        prepare_seconds = time.perf_counter() - start
        from_cache = clips_per_second(str(work / "cache"), args.clips, args.batch)
        autotuned = clips_per_second(str(work / "cache"), args.clips, args.batch, autotune=True)
        one_thread = clips_per_second(str(work / "cache"), args.clips // 2, args.batch, 1)
        from_files = clips_per_second(split, min(args.clips, 160), args.batch)
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "cores": os.cpu_count(),
                "clip": "16x112x112, stride 2, the default supervised augmentation",
                "cache_clips_per_s": round(from_cache, 1),
                "cache_clips_per_s_autotuned": round(autotuned, 1),
                "cache_clips_per_s_one_thread": round(one_thread, 1),
                "files_clips_per_s": round(from_files, 1),
                "cache_prepare_s": round(prepare_seconds, 1),
                "peak_memory_mib": round(peak_mib),
            }
        )
    )


if __name__ == "__main__":
    main()
