"""tf.data pipelines of training clips, privacy views and evaluation clips (any Keras backend).

A source is a prepared cache folder (`keras_privacy.data.cache`) or a `Split` of files. From a
cache, a clip's frame indices are picked on the still-encoded JPEG strings and only those
frames are decoded; from files, videos are decoded with PyAV (`read_video`) and images with
OpenCV (`read_image`). Every random choice (order, clip start, augmentation, frame pair) comes
from stateless seeds derived from (seed, epoch, example index), so the same seed gives the same
batches, and one video gets the same clip from a cache as from its file. A file that fails to
decode is skipped with a warning naming it. Decoded videos are kept in a bounded in-memory
cache (`DecodedVideos`, 1 GiB by default), so later epochs over a small split of files skip
decoding; large datasets should use a prepared cache.

In a job of several processes (`process`), every process reads the same items in the same
order and decodes and augments only its own rows of each global batch (`_process_rows`), the
rows that data-parallel training places on its devices.

A video shorter than a clip's span, (clip_length - 1) * stride + 1 frames, gives a clip from its
first frame that goes on as `short_videos` says (`SHORT_VIDEOS`): "loop" back to the first
frame; "mirror", back through the clip's frames in reverse and forward again (SPAct's loader
pads a short clip with itself reversed, dl_ft_nov.py:151-154); "halve_stride", half the stride
(at least 1) where that fits, looping where even that does not (the penalty authors' loaders,
aux_code/ucf101_dl.py:74-81, 263-266). No blank or frozen padding frames either way.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from keras_privacy.data import augment
from keras_privacy.data.cache import (
    DECODE_ERRORS,
    MANIFEST,
    damaged_shard,
    parse_image_record,
    parse_video_record,
    read_manifest,
)
from keras_privacy.data.cache import shard_paths as cache_shards
from keras_privacy.data.errors import DatasetFormatError
from keras_privacy.data.examples import Split
from keras_privacy.data.images import read_image
from keras_privacy.data.tensorflow_runtime import tf
from keras_privacy.data.video import read_video, warn_if_cut_short
from keras_privacy.files import write_text_atomically
from keras_privacy.types import Tensor

PAIR_SAMPLERS = ("random", "near", "far")
SHORT_VIDEOS = ("loop", "mirror", "halve_stride")
NEAR_FRAMES = 8  # "near": fewer than 8 frames apart in the original video
FAR_FRAMES = 64  # "far": more than 64 frames apart in the video, or as far as the video allows
HELD_OUT_FOLDER = "held_out"  # a video cache's held-out records, in a file each (`_Cache.every`)
VIDEO_SHUFFLE_WINDOW = 256  # cached videos shuffled within windows of this many records
IMAGE_SHUFFLE_WINDOW = 4096

Source = Split | str | os.PathLike
AUTOTUNE = tf.data.AUTOTUNE


# ---------------------------------------------------------------------------- frame choice


def _require_short_videos(short_videos: str) -> None:
    if short_videos not in SHORT_VIDEOS:
        raise ValueError(f"short_videos={short_videos!r} is not one of {SHORT_VIDEOS}")


def clip_stride(
    num_frames: Tensor, clip_length: int, stride: int, short_videos: str = "loop"
) -> Tensor:
    """The stride of a clip of a video of `num_frames`: `stride`, or with "halve_stride" half
    of it (at least 1) where the clip's span does not fit in the video."""
    _require_short_videos(short_videos)
    if short_videos != "halve_stride":
        return tf.constant(stride)
    fits = num_frames >= (clip_length - 1) * stride + 1
    return tf.where(fits, stride, max(stride // 2, 1))


def clip_indices(
    num_frames: Tensor, clip_length: int, stride: Tensor, start: Tensor, short_videos: str = "loop"
) -> Tensor:
    """Indices of `clip_length` frames every `stride`-th frame from `start`; where the video
    ends first, the clip loops back to its first frame, or with "mirror" turns back through
    its own frames (positions 0, 1, .., m - 1, m - 2, .., 0, 1, .. of the m that fit)."""
    positions = tf.range(clip_length)
    start, stride = tf.cast(start, tf.int32), tf.cast(stride, tf.int32)
    if short_videos == "mirror":
        fit = tf.maximum((num_frames - 1 - start) // stride + 1, 1)
        period = tf.maximum(2 * (fit - 1), 1)
        folded = positions % period
        positions = tf.where(folded < fit, folded, period - folded)
    return (start + positions * stride) % tf.maximum(num_frames, 1)


def random_start(seed: Tensor, num_frames: Tensor, clip_length: int, stride: Tensor) -> Tensor:
    """A uniformly random start so that the clip fits when the video is long enough (else 0)."""
    last = tf.maximum(num_frames - (clip_length - 1) * stride, 1)
    return tf.random.stateless_uniform([], seed, 0, last, dtype=tf.int32)


def equidistant_starts(
    num_frames: Tensor, num_clips: int, clip_length: int, stride: Tensor
) -> Tensor:
    """`num_clips` starts spread evenly (linspace) from the first to the last that fits."""
    last = tf.maximum(num_frames - (clip_length - 1) * stride - 1, 0)
    spaced = tf.linspace(0.0, tf.cast(last, tf.float32), num_clips)
    return tf.cast(tf.round(spaced), tf.int32)


def frame_pair(seed: Tensor, clip_length: int, stride: int, sampler: str = "random") -> Tensor:
    """Positions (int32 (2,)) of two distinct frames of a clip, the NT-Xent positive pair.

    random: any two frames; near: fewer than NEAR_FRAMES original frames apart (counted in the
    original video: clip positions times `stride`). The "far" pair lies outside the clip:
    `far_frame_pair` draws it from the video.
    """
    if sampler == "far":
        raise ValueError("the far pair sampler draws frames of the video: use far_frame_pair")
    if sampler not in PAIR_SAMPLERS:
        raise ValueError(f"pair sampler {sampler!r} is not one of {PAIR_SAMPLERS}")
    if clip_length < 2:
        return tf.zeros([2], tf.int32)
    seed = tf.cast(seed, tf.int64)
    seeds = [tf.random.experimental.stateless_fold_in(seed, k) for k in range(3)]
    if sampler == "random":
        first = tf.random.stateless_uniform([], seeds[0], 0, clip_length, dtype=tf.int32)
        other = tf.random.stateless_uniform([], seeds[1], 0, clip_length - 1, dtype=tf.int32)
        return tf.stack([first, other + tf.cast(other >= first, tf.int32)])
    high = max(1, min(clip_length - 1, (NEAR_FRAMES - 1) // stride))
    return _gap_pair(seeds, 1, high, clip_length)


def far_frame_pair(seed: Tensor, num_frames: Tensor) -> Tensor:
    """Indices (int32 (2,)) of two frames of a video more than FAR_FRAMES apart, in random
    order: SPAct Table 4's "> 64 frames" positive pair. A video of FAR_FRAMES + 1 frames or
    fewer has no such pair and gives its first and last frames, the farthest it has."""
    seed = tf.cast(seed, tf.int64)
    seeds = [tf.random.experimental.stateless_fold_in(seed, k) for k in range(3)]
    last = tf.maximum(tf.cast(num_frames, tf.int32) - 1, 0)
    return _gap_pair(seeds, tf.minimum(FAR_FRAMES + 1, last), last, last + 1)


def _gap_pair(seeds, low, high, length):
    """Two of `length` positions whose gap is drawn uniformly in [low, high], the first then
    uniformly where the pair fits, in random order."""
    gap = tf.random.stateless_uniform([], seeds[0], low, high + 1, dtype=tf.int32)
    first = tf.random.stateless_uniform([], seeds[1], 0, length - gap, dtype=tf.int32)
    pair = tf.stack([first, first + gap])
    swap = tf.random.stateless_uniform([], seeds[2]) < 0.5
    return tf.where(swap, pair[::-1], pair)


def take_frames(frames: Tensor, indices: Tensor) -> Tensor:
    """Frames `indices` of a video as uint8 (T, H, W, 3). `frames` is either (N,) JPEG strings,
    of which only the distinct indexed ones are decoded, or decoded (N, H, W, 3) pixels."""
    if frames.dtype != tf.string:
        return tf.gather(frames, indices)
    unique, position = tf.unique(indices)
    decoded = tf.map_fn(
        lambda data: tf.io.decode_jpeg(data, channels=3),
        tf.gather(frames, unique),
        fn_output_signature=tf.uint8,
    )
    return tf.gather(decoded, position)


# ---------------------------------------------------------------------------- sources


def _element_seed(seed: int, epoch, index):
    """The stateless seed of one example in one epoch."""
    base = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
    return tf.random.experimental.stateless_fold_in(base, tf.cast(index, tf.int64))


def _permutation(count, seed):
    return tf.argsort(tf.random.stateless_uniform([count], seed))


def _window_shuffle(dataset: tf.data.Dataset, window: int, seed) -> tf.data.Dataset:
    """Shuffle within consecutive windows of `window` elements, statelessly from `seed`."""

    def permute(position, batch):
        window_seed = tf.random.experimental.stateless_fold_in(seed, position)
        order = _permutation(tf.shape(batch)[0], window_seed)
        return tf.data.Dataset.from_tensor_slices(tf.gather(batch, order))

    return dataset.batch(window).enumerate().flat_map(permute)


class _Cache:
    """A prepared cache: shards of serialized records."""

    def __init__(self, directory: str | os.PathLike, kind: str):
        self.manifest = read_manifest(directory)
        if self.manifest["kind"] != kind:
            raise ValueError(f"{directory}: a {self.manifest['kind']} cache, not a {kind} cache")
        self.files = cache_shards(directory, self.manifest)
        missing = [path for path in self.files if not os.path.isfile(path)]
        if missing:
            raise FileNotFoundError(
                f"{directory}: {len(missing)} of the manifest's {len(self.files)} shards are not "
                f"there (e.g. {os.path.basename(missing[0])}): copy them, or run `python -m "
                "keras_privacy.data prepare` as before, which writes the missing shards again"
            )
        self.directory = directory
        self.held_out_every = 0  # `every`'s N: only the records whose index is a multiple
        self.kind = kind
        self.num_attributes = len(self.manifest["attribute_names"])
        self.num_actions = self.manifest.get("num_actions", 0)

    def items(self, epoch, seed: int | None) -> tf.data.Dataset:
        """Serialized records of one epoch: in stored order, or (with a seed) shards in a
        random order, interleaved, then shuffled within windows; with `held_out_every` N, the
        records whose index is a multiple of N, in stored order, then shuffled within
        windows (the same order whether they come from their own file or from the shards)."""
        files = tf.constant(self.files)
        epoch_seed = None
        if seed is not None:
            epoch_seed = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
        if self.held_out_every:
            records = tf.data.TFRecordDataset(files).filter(self._index_is_held_out)
        elif epoch_seed is None:
            records = tf.data.TFRecordDataset(files)
        else:
            files = tf.gather(files, _permutation(len(self.files), epoch_seed))
            records = tf.data.Dataset.from_tensor_slices(files).interleave(
                tf.data.TFRecordDataset, cycle_length=min(4, len(self.files))
            )
        if epoch_seed is not None:
            window = VIDEO_SHUFFLE_WINDOW if self.kind == "video" else IMAGE_SHUFFLE_WINDOW
            records = _window_shuffle(records, window, epoch_seed)
        return records.map(lambda record: {"serialized": record, "epoch": epoch})

    def every(self, nth: int) -> _Cache:
        """This cache's records whose index is a multiple of `nth` (VITA's held-out
        validation videos), read from a file of their own that the first run writes into
        the cache's `held_out/` folder, named by `nth` and the manifest's digest, with its size
        beside it (a file of another size, cut short by a copy, is written again; those of an
        earlier manifest are removed). Read out of the whole cache, a VITA step's validation
        clips (240 with the paper's settings) took ten times as many records (3.4 GB on
        UCF101 at a short side of 128), read and parsed to be dropped. Where that folder
        cannot be written, the whole cache is read and filtered, with a warning (a damaged
        shard is then named as it is read); the records come in the same order either way."""
        held_out = copy.copy(self)
        held_out.held_out_every = nth
        digest = hashlib.sha256(Path(self.directory, MANIFEST).read_bytes()).hexdigest()[:16]
        path = Path(self.directory, HELD_OUT_FOLDER, f"every-{nth}-{digest}.tfrecord")
        if not _written_whole(path):
            try:
                self._write_every(held_out, path)
            except (OSError, tf.errors.OpError) as error:
                logging.warning(
                    "%s: cannot write the held-out videos' file (%s): reading the whole cache "
                    "for them",
                    path,
                    error,
                )
                return held_out
        held_out.files = [str(path)]
        return held_out

    @staticmethod
    def _write_every(held_out: _Cache, path: Path) -> None:
        """Write the records of `held_out` to `path` and its size to `path`'s `.json`, whole
        or not at all (the processes of a job may write them at once: each writes a file of
        its own, then renames it); then remove the files of other manifests."""
        path.parent.mkdir(exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")
        os.close(handle)
        try:
            with tf.io.TFRecordWriter(partial) as writer:
                for serialized in tf.data.TFRecordDataset(held_out.files).filter(
                    held_out._index_is_held_out
                ):
                    writer.write(serialized.numpy())
            size = os.path.getsize(partial)
            os.replace(partial, path)
        finally:
            Path(partial).unlink(missing_ok=True)
        write_text_atomically(path.with_suffix(".json"), json.dumps({"bytes": size}))
        stem = path.name.rsplit("-", 1)[0]
        for old in path.parent.glob(f"{stem}-*"):
            if old.stem != path.stem and old.suffix in (".tfrecord", ".json"):
                old.unlink(missing_ok=True)

    def _index_is_held_out(self, serialized: Tensor) -> Tensor:
        spec = {"index": tf.io.FixedLenFeature([], tf.int64)}
        context, _ = tf.io.parse_single_sequence_example(serialized, context_features=spec)
        return context["index"] % self.held_out_every == 0

    def parse(self, item) -> dict:
        """A parsed record, its frames or image still JPEG strings."""
        if self.kind == "video":
            return parse_video_record(item["serialized"], self.num_attributes, self.num_actions)
        return parse_image_record(item["serialized"], self.num_attributes)

    def decode(self, record: dict) -> dict:
        """A parsed record with its image decoded; video frames stay JPEG strings, of which a
        clip decodes only its own (`take_frames`)."""
        if self.kind == "video":
            return record
        return record | {"image": tf.io.decode_jpeg(record["image"], channels=3)}


def _written_whole(path: Path) -> bool:
    """Whether `path` is there with the size its `.json` records (`_Cache.every`'s files)."""
    try:
        recorded = json.loads(path.with_suffix(".json").read_text())["bytes"]
        return os.path.getsize(path) == recorded
    except (OSError, ValueError, KeyError, TypeError):
        return False


class _Files:
    """A `Split` of video or image files."""

    def __init__(self, split: Split, kind: str):
        if not split.examples:
            raise ValueError("the split has no examples")
        self.kind = kind
        self.paths = tf.constant([e.path for e in split.examples])
        self.labels = tf.constant([e.label for e in split.examples], tf.int32)
        width = len(split.attribute_names)
        wrong = [e for e in split.examples if len(e.privacy) != width]
        if wrong:
            raise ValueError(
                f"{len(wrong)} of {len(split.examples)} examples do not have one privacy label "
                f"per attribute of the split ({width}), e.g. {wrong[0].path}: "
                f"{len(wrong[0].privacy)} labels (is its annotation missing?)"
            )
        privacy = [e.privacy for e in split.examples]
        self.privacy = tf.constant(np.array(privacy, np.float32).reshape(len(privacy), width))
        actions = [e.actions for e in split.examples]
        self.actions = tf.constant(np.array(actions, np.float32)) if any(actions) else None

    def items(self, epoch, seed: int | None) -> tf.data.Dataset:
        count = self.paths.shape[0]
        if seed is None:
            order = tf.range(count)
        else:
            epoch_seed = tf.stack([tf.constant(seed, tf.int64), tf.cast(epoch, tf.int64)])
            order = tf.cast(_permutation(count, epoch_seed), tf.int32)
        return tf.data.Dataset.from_tensor_slices(order).map(
            lambda index: {"index": index, "epoch": epoch}
        )

    def load(self, item) -> dict:
        """The decoded file of an item, with its labels."""
        index = item["index"]
        record = {
            "index": index,
            "label": self.labels[index],
            "privacy": self.privacy[index],
            "path": self.paths[index],
        }
        if self.actions is not None:
            record["actions"] = self.actions[index]
        if self.kind == "image":
            image = tf.numpy_function(_read_image, [self.paths[index]], tf.uint8, stateful=False)
            record["image"] = tf.ensure_shape(image, [None, None, 3])
            return record
        frames = tf.numpy_function(_read_video, [self.paths[index]], tf.uint8, stateful=False)
        record["frames"] = tf.ensure_shape(frames, [None, None, None, 3])
        record["num_frames"] = tf.shape(frames)[0]
        return record


class DecodedVideos:
    """A thread-safe LRU cache of decoded videos holding at most `capacity_bytes` of frames.
    A file that seems cut short (a partial download) gives the frames that decode, and one
    warning naming it and both counts, as `prepare` gives; each file's header is read once."""

    def __init__(self, capacity_bytes: int):
        self.capacity_bytes = capacity_bytes
        self._frames: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
        self._bytes = 0
        self._checked: set[bytes] = set()
        self._lock = threading.Lock()

    def __call__(self, path: bytes) -> np.ndarray:
        with self._lock:
            if path in self._frames:
                self._frames.move_to_end(path)
                return self._frames[path]
        frames = read_video(path.decode())
        self._warn_once_if_cut_short(path, len(frames))
        with self._lock:
            if path not in self._frames and frames.nbytes <= self.capacity_bytes:
                self._frames[path] = frames
                self._bytes += frames.nbytes
                while self._bytes > self.capacity_bytes:
                    self._bytes -= self._frames.popitem(last=False)[1].nbytes
        return frames

    def _warn_once_if_cut_short(self, path: bytes, decoded: int) -> None:
        """`warn_if_cut_short` the first time `path` is decoded, not each time the LRU lets
        it go and it is decoded again."""
        with self._lock:
            if path in self._checked:
                return
            self._checked.add(path)
        warn_if_cut_short(path.decode(), decoded, "read with the frames that decode")


class _Skipping:
    """A file reader whose decoding failures are logged once per file, through Python's
    logging, and read as an empty array (`rank` dimensions of size 0 but the channels), which
    `_loaded` leaves out; a file that failed once is not read again. The error is not raised
    into TensorFlow, whose own warning would be a traceback each time the file is drawn."""

    def __init__(self, read, rank: int):
        self.read = read
        self.empty = np.zeros((0,) * (rank - 1) + (3,), np.uint8)
        self.skipped: set[bytes] = set()
        self._lock = threading.Lock()

    def __call__(self, path: bytes) -> np.ndarray:
        if path in self.skipped:
            return self.empty
        try:
            return self.read(path)
        except DECODE_ERRORS as error:
            with self._lock:
                first = path not in self.skipped
                self.skipped.add(path)
                count = len(self.skipped)
            if first:
                logging.warning(
                    "skipping %s (it is left out of every epoch; %d undecodable files so far)",
                    error if path.decode() in str(error) else f"{path.decode()}: {error}",
                    count,
                )
            return self.empty


_read_video = _Skipping(DecodedVideos(capacity_bytes=1 << 30), rank=4)
_read_image = _Skipping(lambda path: read_image(path.decode()), rank=3)
"""The decoders of the pipelines over files: videos in a shared cache of decoded frames,
images by the library `prepare` decodes with."""


@contextlib.contextmanager
def damaged_shards_named(
    *sources: Source, rerun: str = "run `python -m keras_privacy.data prepare` as before"
) -> Iterator[None]:
    """Name the damaged shard where reading `sources` fails mid-epoch: TensorFlow's
    DataLossError names no file (and a deleted shard raises its NotFoundError), so the caches
    among `sources` are read once more to find the shard (`cache.damaged_shard`), and a
    DatasetFormatError names it and how to mend it: remove it, then `rerun` the command that
    wrote the cache."""
    try:
        yield
    except (tf.errors.DataLossError, tf.errors.NotFoundError) as error:
        for source in sources:
            if isinstance(source, Split):
                continue
            found = damaged_shard(source)
            if found is not None:
                shard, reason = found
                raise DatasetFormatError(
                    f"{shard}: the cache's shard does not read back ({reason}); remove it and "
                    f"its .json beside it, then {rerun}: it writes that shard again and keeps "
                    "the others"
                ) from error
        raise


def count_examples(source: Source) -> int:
    """Examples in a split or in a prepared cache."""
    if isinstance(source, Split):
        return len(source.examples)
    return int(read_manifest(source)["num_records"])


def examples_identity(source: Source) -> str:
    """What tells a split's or a cache's examples apart wherever their folder lies (the
    processes of a job may each read a copy of their own): a split's count and a digest of
    each example's class folder, file name and labels in order; a cache's counts of records
    and examples (its own fingerprint holds each file's path and modification time, which
    differ between copies prepared apart)."""
    if isinstance(source, Split):
        digest = hashlib.sha256()
        for example in source.examples:
            folder, name = os.path.split(example.path)
            record = [os.path.basename(folder), name, example.label, example.privacy]
            digest.update(repr(record + [example.actions]).encode())
        return f"{len(source.examples)} examples (digest {digest.hexdigest()[:12]})"
    manifest = read_manifest(source)
    return f"{manifest['num_records']} records of {manifest['num_examples']} examples"


def label_names(source: Source, key: str) -> list[str]:
    """The `class_names` or `attribute_names` of a split or of a prepared cache."""
    if isinstance(source, Split):
        return list(getattr(source, key))
    return list(read_manifest(source)[key])


def _source(source: Source, kind: str) -> _Cache | _Files:
    return _Files(source, kind) if isinstance(source, Split) else _Cache(source, kind)


def _items(source: _Cache | _Files, seed: int | None, epochs: int | None) -> tf.data.Dataset:
    """The items of `epochs` epochs (None: endless), each epoch in its own seeded order."""
    counter = tf.data.Dataset.range(epochs) if epochs else tf.data.Dataset.counter()
    return counter.flat_map(lambda epoch: source.items(epoch, seed))


def _prefetched(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` prefetched, with tf.data's autotuner off (AUTOTUNE keeps tf.data's starting
    values). With it on, deleting an iterator, which each epoch's `fit` does at its end,
    waited for the autotuner's thread: 6 to 18 s after most of the quick start's minimax
    epochs (TensorFlow 2.21), for no more clips/s (`benchmarks/input_pipeline.py` times
    both)."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(AUTOTUNE).with_options(options)


def _loaded(
    items: tf.data.Dataset,
    source: _Cache | _Files,
    kept: Callable[[Tensor], Tensor] | None = None,
    rows: Callable[[tf.data.Dataset], tf.data.Dataset] | None = None,
) -> tf.data.Dataset:
    """The records of `items` with their epoch, decoded in parallel and in order: those whose
    index passes `kept` (when given), then of those the ones `rows` keeps (a function of the
    dataset, when given: this process's rows), decoded last. A file that fails to decode is
    left out (`_Skipping` reads it as empty and warns once)."""
    if isinstance(source, _Files):
        if kept is not None:  # decide before decoding the file
            items = items.filter(lambda item: kept(item["index"]))
        if rows is not None:
            items = rows(items)
        records = _map(items, lambda item: {**source.load(item), "epoch": item["epoch"]})
        content = "frames" if source.kind == "video" else "image"
        return records.filter(lambda record: tf.size(record[content]) > 0)
    records = _map(items, lambda item: {**source.parse(item), "epoch": item["epoch"]})
    if kept is not None:
        records = records.filter(lambda record: kept(record["index"]))
    if rows is not None:
        records = rows(records)
    return _map(records, source.decode)


def _process_rows(
    global_parts: tuple[int, ...], process: tuple[int, int], epochs: int | None
) -> tuple[int, Callable[[tf.data.Dataset], tf.data.Dataset] | None]:
    """This process's batch size and its filter of the examples (None: every example) in a
    job of `count` processes, `process` = (index, count). The global batch is made of
    `global_parts`, consecutive runs of examples (a step's clips, then VITA's extra action
    batches), and process `index` keeps the index-th of `count` equal slices of each run: the
    slices that data-parallel training puts on its devices, so that the processes' batches,
    each run put together in process order, are the global batch one process would read.

    Only an endless dataset (`epochs` None, which training cuts to its steps) is split: the
    last, partial global batch of a finite one would leave its processes with different
    numbers of batches, and a step that some of them never reach."""
    index, count = process
    if count == 1:
        return sum(global_parts), None
    if epochs is not None:
        raise ValueError(
            f"a dataset of {epochs} epochs cannot be split over {count} processes: each "
            "process reads an endless one (epochs=None), cut to the same number of steps"
        )
    for size in global_parts:
        if size % count:
            raise ValueError(
                f"a global batch of {size} cannot be split over {count} processes: make the "
                f"batch sizes multiples of {count}"
            )
    mask = np.zeros(sum(global_parts), bool)
    start = 0
    for size in global_parts:
        share = size // count
        mask[start + index * share : start + (index + 1) * share] = True
        start += size
    mine = tf.constant(mask)

    def rows(dataset: tf.data.Dataset) -> tf.data.Dataset:
        return (
            dataset.enumerate()
            .filter(lambda position, _: mine[position % len(mask)])
            .map(lambda _, element: element)
        )

    return int(mask.sum()), rows


def _map(dataset: tf.data.Dataset, function) -> tf.data.Dataset:
    """Parallel, order-keeping map."""
    return dataset.map(function, num_parallel_calls=AUTOTUNE, deterministic=True)


# ---------------------------------------------------------------------------- pipelines


def action_train_dataset(
    source: Source,
    batch_size: int,
    clip_length: int = 16,
    stride: int = 2,
    size: int = 112,
    seed: int = 0,
    pair_sampler: str = "random",
    config: augment.AugmentConfig | None = augment.SUPERVISED,
    epochs: int | None = 1,
    second_clip: bool = False,
    positive_clip: bool = False,
    hold_out: int = 0,
    held_out: bool = False,
    process: tuple[int, int] = (0, 1),
    batch_parts: tuple[int, ...] = (),
    short_videos: str = "loop",
    pairs_only: bool = False,
) -> tf.data.Dataset:
    """Shuffled, augmented training clips of `epochs` passes (None: endless), last partial
    batch dropped: {"clips" float32 (B, T, size, size, 3) in [0, 1], "labels" int32 (B,),
    "frame_pairs" int32 (B, 2) positions in the clip of the NT-Xent pair}, and "actions" float32
    (B, C) multi-hot labels for a multi-label split (P-HVU).

    With `pair_sampler="far"` the pair comes from the whole video (`far_frame_pair`), not from
    the clip: "pair_frames" float32 (B, 2, size, size, 3), the two frames with the clip's
    augmentation parameters (the colour contrast is taken about the two frames' own mean
    luminance), replaces "frame_pairs".

    With `second_clip`, also "second_clips" (B, T, size, size, 3): another clip of the same
    video with its own random start and augmentation (SimCLR's second view, the positive of
    SPAct's spatio-temporal privacy branch); the first clip is the same as without it.

    With `positive_clip`, also "positive_clips" (B, T, size, size, 3): the first clip's frames
    with an augmentation of their own (TeD-SPAD's positive: aux_code/ucf101_dl.py augments the
    same frames twice), decoded once; the first clip is the same as without it.

    With `pairs_only`, each clip's NT-Xent pair alone: "pair_frames" (B, 2, size, size, 3),
    the two frames of the pair augmented with the clip's draws (the same pixels as the clip's
    frames at "frame_pairs" where the contrast is per frame; else it is taken about the two
    frames' mean luminance), and "labels": for a phase that reads no other frame of the clip
    (f_A's identity initialisation), which augmented eight times the frames it used, and
    from a cache decoded them too (from files, the whole video is decoded either way).

    With `hold_out` = N > 0, only the videos whose index is not a multiple of N (with
    `held_out`: only those whose index is), VITA's validation clips kept out of training.

    With `config=None` the clips are not augmented: each is the evaluation view, the centred
    square of the short side resized (VITA's validation clips, centre-cropped and undistorted:
    PA-HMDB51-VISPR-exp/input_data.py:12-13, utils.py:153-160).

    `batch_size` is the global batch. In a job of several processes, `process` = (index,
    count), each batch is this process's rows of it (`_process_rows`, over `batch_parts`, runs
    of the batch such as a step's clips and the action batches after them; default one run),
    and only those clips are decoded. A video shorter than a clip's span gives clips as
    `short_videos` says (`SHORT_VIDEOS`, see the module docstring)."""
    _require_short_videos(short_videos)
    videos = _source(source, "video")

    def view(frames, augment_seed):
        if config is None:
            return augment.evaluation_clip(frames, size)
        return augment.augment_clip(frames, augment_seed, size, config)

    def kept(index):
        return tf.equal(tf.cast(index, tf.int64) % hold_out == 0, held_out)

    def clip_frame_indices(record, start_seed):
        num_frames = record["num_frames"]
        taken = clip_stride(num_frames, clip_length, stride, short_videos)
        start = random_start(start_seed, num_frames, clip_length, taken)
        return clip_indices(num_frames, clip_length, taken, start, short_videos)

    def clip_frames(record, start_seed):
        return take_frames(record["frames"], clip_frame_indices(record, start_seed))

    def augmented(frames, augment_seed):
        return tf.ensure_shape(view(frames, augment_seed), [clip_length, size, size, 3])

    def frame_pair_of(record, indices, augment_seed):
        """The video's frames `indices`, two, with the clip's augmentation."""
        pair = view(take_frames(record["frames"], indices), augment_seed)
        return tf.ensure_shape(pair, [2, size, size, 3])

    def clip_element(record, seeds):
        start_seed, augment_seed, pair_seed, second_start_seed, second_augment_seed = seeds[:5]
        frames = clip_frames(record, start_seed)
        element = {"clips": augmented(frames, augment_seed), "labels": record["label"]}
        if positive_clip:
            element["positive_clips"] = augmented(frames, seeds[5])
        if pair_sampler == "far":
            indices = far_frame_pair(pair_seed, record["num_frames"])
            element["pair_frames"] = frame_pair_of(record, indices, augment_seed)
        else:
            element["frame_pairs"] = frame_pair(pair_seed, clip_length, stride, pair_sampler)
        if second_clip:
            second = clip_frames(record, second_start_seed)
            element["second_clips"] = augmented(second, second_augment_seed)
        return element

    def pair_element(record, seeds):
        start_seed, augment_seed, pair_seed = seeds[:3]
        if pair_sampler == "far":
            indices = far_frame_pair(pair_seed, record["num_frames"])
        else:
            positions = frame_pair(pair_seed, clip_length, stride, pair_sampler)
            indices = tf.gather(clip_frame_indices(record, start_seed), positions)
        return {
            "pair_frames": frame_pair_of(record, indices, augment_seed),
            "labels": record["label"],
        }

    def make(record):
        element_seed = _element_seed(seed, record["epoch"], record["index"])
        seeds = [tf.random.experimental.stateless_fold_in(element_seed, k) for k in range(6)]
        element = pair_element(record, seeds) if pairs_only else clip_element(record, seeds)
        if "actions" in record:
            element["actions"] = record["actions"]
        return element

    if batch_parts and sum(batch_parts) != batch_size:
        raise ValueError(f"batch_parts {batch_parts} do not add up to the batch of {batch_size}")
    local_size, rows = _process_rows(batch_parts or (batch_size,), process, epochs)
    if hold_out and held_out and isinstance(videos, _Cache):
        videos = videos.every(hold_out)
    records = _loaded(_items(videos, seed, epochs), videos, kept if hold_out else None, rows)
    dataset = _map(records, make)
    return _prefetched(dataset.batch(local_size, drop_remainder=True))


def action_eval_dataset(
    source: Source,
    num_clips: int = 10,
    clip_length: int = 16,
    stride: int = 2,
    size: int = 112,
    fraction: float = 1.0,
    keeps_aspect: bool = False,
    short_videos: str = "loop",
) -> tf.data.Dataset:
    """Per video in source order, `num_clips` equidistant centre-cropped clips (the centred
    square of `fraction` of the short side; with `keeps_aspect`, `fraction` of the height and
    of the width): {"clips" float32 (K, T, size, size, 3), "label" int32, "video_index" int32},
    and "actions" float32 (C,) multi-hot labels for a multi-label split (P-HVU). A video
    shorter than a clip's span gives clips as `short_videos` says (`SHORT_VIDEOS`)."""
    _require_short_videos(short_videos)
    videos = _source(source, "video")

    def make(record):
        num_frames = record["num_frames"]
        taken = clip_stride(num_frames, clip_length, stride, short_videos)
        starts = equidistant_starts(num_frames, num_clips, clip_length, taken)
        indices = clip_indices(num_frames, clip_length, taken, starts[:, None], short_videos)
        indices = tf.reshape(indices, [-1])
        clips = augment.evaluation_clip(
            take_frames(record["frames"], indices), size, fraction, keeps_aspect
        )
        element = {
            "clips": tf.reshape(clips, [num_clips, clip_length, size, size, 3]),
            "label": record["label"],
            "video_index": record["index"],
        }
        if "actions" in record:
            element["actions"] = record["actions"]
        return element

    return _prefetched(_map(_loaded(_items(videos, None, 1), videos), make))


def privacy_pair_dataset(
    source: Source,
    batch_size: int,
    size: int,
    seed: int = 0,
    config: augment.AugmentConfig = augment.CONTRASTIVE,
    epochs: int | None = None,
    process: tuple[int, int] = (0, 1),
) -> tf.data.Dataset:
    """Batches of two independently augmented views of each image: {"views" float32
    (B, 2, size, size, 3)}; endless by default (each pass in a new seeded order). With
    `config.views_share_corner`, the second view's crop starts at the first's corner. In a
    job of several processes (`process`, as `action_train_dataset`'s), this process's rows of
    each global batch of `batch_size`."""
    images = _source(source, "image")

    def make(record):
        element_seed = _element_seed(seed, record["epoch"], record["index"])
        image = record["image"][None]
        seeds = [tf.random.experimental.stateless_fold_in(element_seed, k) for k in range(2)]
        corner = None
        if config.views_share_corner:
            height, width = tf.shape(image)[1], tf.shape(image)[2]
            corner = augment.crop_box(seeds[0], height, width, config)[:2]
        views = [augment.augment_clip(image, s, size, config, corner)[0] for s in seeds]
        return {"views": tf.ensure_shape(tf.stack(views), [2, size, size, 3])}

    local_size, rows = _process_rows((batch_size,), process, epochs)
    dataset = _map(_loaded(_items(images, seed, epochs), images, rows=rows), make)
    return _prefetched(dataset.batch(local_size, drop_remainder=True))


def privacy_labelled_dataset(
    source: Source,
    batch_size: int,
    size: int,
    training: bool,
    seed: int = 0,
    config: augment.AugmentConfig = augment.SUPERVISED,
    epochs: int | None = 1,
    process: tuple[int, int] = (0, 1),
) -> tf.data.Dataset:
    """Batches of {"images" float32 (B, size, size, 3), "privacy" float32 (B, A)}: shuffled,
    augmented and without the last partial batch for training; else centre-cropped, in order,
    every image once, with each image's source file ("path", a string). In a job of several
    processes (`process`, as `action_train_dataset`'s; training only), this process's rows of
    each global batch of `batch_size`."""
    images = _source(source, "image")
    if process[1] > 1 and not training:
        raise ValueError("evaluation batches are read whole, in one process")

    def make(record):
        image = record["image"][None]
        if training:
            element_seed = _element_seed(seed, record["epoch"], record["index"])
            image = augment.augment_clip(image, element_seed, size, config)
        else:
            image = augment.evaluation_clip(image, size)
        element = {
            "images": tf.ensure_shape(image[0], [size, size, 3]),
            "privacy": record["privacy"],
        }
        return element if training else element | {"path": record["path"]}

    items = _items(images, seed, epochs) if training else _items(images, None, 1)
    local_size, rows = _process_rows((batch_size,), process, epochs)
    dataset = _map(_loaded(items, images, rows=rows), make)
    return _prefetched(dataset.batch(local_size, drop_remainder=training))


def minimax_dataset(action: tf.data.Dataset, privacy: tf.data.Dataset) -> tf.data.Dataset:
    """One element dict per step for the minimax trainers: an action batch merged with a
    privacy batch; it ends with the shorter of the two (the privacy one is usually endless)."""
    return _merged(action, privacy)


def with_step_inputs(dataset: tf.data.Dataset, inputs: dict[str, np.ndarray]) -> tf.data.Dataset:
    """`dataset`'s batches, the k-th with the k-th entry of each of `inputs` (arrays stacked on
    a leading step axis) added: the meta trainer's virtual splits of each step."""
    return _merged(dataset, tf.data.Dataset.from_tensor_slices(inputs))


def _merged(first: tf.data.Dataset, second: tf.data.Dataset) -> tf.data.Dataset:
    """The element dicts of two datasets merged pairwise, up to the shorter one's end."""
    return tf.data.Dataset.zip(first, second).map(lambda a, b: {**a, **b})
