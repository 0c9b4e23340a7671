"""Decode-once caches: videos and images as JPEG frames in sharded TFRecords.

`prepare_video_cache` decodes every video of a split once and stores it as a
`tf.train.SequenceExample` (context: label, privacy, num_frames, path, height, width, index;
feature list `frames`: one JPEG string per frame, resized so the short side is `short_side`).
`prepare_image_cache` stores images as `tf.train.Example`s the same way. Pipelines then pick a
clip's frames on the still-encoded strings and decode only those (TF Model Garden / TFDS style).
A `FrameTransform` (an evaluation's people baseline) changes each decoded video or image before
it is resized and stored, so that anonymized data is cached straight from the source files.

Preparation is resumable: each shard is written under a temporary name and renamed when it is
complete, with a small JSON sidecar (its count, failures and a fingerprint of the settings and
of its own files); a restart skips every complete shard whose fingerprint is unchanged, so a
source file rewritten in place (a re-download) rewrites its shard only, removing the temporary
file a killed preparation left of it. Once a new manifest is written, the shards of another
shard count (a split that gained files) are removed. A file that fails to
decode, or an example without one privacy label per attribute of its split (a record that
would not parse back), is skipped and named (file and reason) in the manifest, never fatal.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import os
import re
import reprlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import cv2
import numpy as np
from tqdm import tqdm

from keras_privacy.data.annotations import read_json
from keras_privacy.data.errors import DatasetFormatError, TransformError, VideoDecodeError
from keras_privacy.data.examples import Example, Split
from keras_privacy.data.images import JPEG_CUT_SHORT, read_image_and_cut
from keras_privacy.data.tensorflow_runtime import tf
from keras_privacy.data.video import iter_video_frames, warn_if_cut_short
from keras_privacy.files import (
    remove_abandoned_temporaries,
    temporary_beside,
    write_text_atomically,
)
from keras_privacy.types import Tensor

MANIFEST = "manifest.json"
FORMAT_VERSION = 2
EXAMPLES_PER_SHARD = 100
JPEG_QUALITY = 90
SHARD_ORDER_SEED = 0
DECODE_ERRORS = (VideoDecodeError, ValueError, cv2.error)
"""What makes a file be skipped (and named in the manifest) instead of stopping the cache."""


@dataclasses.dataclass(frozen=True)
class FrameTransform:
    """A change applied to every decoded video or image of a cache before it is resized:
    `apply(path, clip)` maps the file's uint8 RGB (T, H, W, 3) clip (an image is one frame) to
    a clip of as many frames, of any size. `key` names the change and its inputs (a baseline and
    its boxes) in the cache's fingerprint, so a cache written with another change is rewritten."""

    apply: Callable[[str, np.ndarray], np.ndarray]
    key: str

    def __call__(self, path: str, clip: np.ndarray) -> np.ndarray:
        """`apply(path, clip)`; its failure raises `TransformError` naming the file and the
        change, which stops the cache (a skipped file would differ between methods)."""
        try:
            return self.apply(path, clip)
        except (ValueError, cv2.error) as error:
            raise TransformError(f"{path}: {self.key} failed: {error}") from error


def resize_short_side(frame: np.ndarray, short_side: int | None) -> np.ndarray:
    """Resize so the short side is `short_side` (area filter down, bilinear up); None keeps it."""
    height, width = frame.shape[:2]
    if short_side is None or min(height, width) == short_side:
        return frame
    scale = short_side / min(height, width)
    size = (max(short_side, round(width * scale)), max(short_side, round(height * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR
    return cv2.resize(frame, size, interpolation=interpolation)


def encode_jpeg(rgb: np.ndarray, quality: int) -> bytes:
    """JPEG bytes of an RGB uint8 image."""
    ok, data = cv2.imencode(".jpg", rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("JPEG encoding failed")
    return data.tobytes()


def _int64(values) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


def _bytes(values) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _context(example: Example, index: int, height: int, width: int) -> dict:
    context = {
        "label": _int64([example.label]),
        "privacy": _int64(example.privacy),
        "index": _int64([index]),
        "height": _int64([height]),
        "width": _int64([width]),
        "path": _bytes([example.path.encode()]),
    }
    if example.actions:
        context["actions"] = _int64(example.actions)
    return context


class Encoded(NamedTuple):
    """One file's serialized record, and why it seems cut short ("" where it does not): its
    record then holds what decodes, and `prepare`'s summary names it."""

    record: bytes
    cut_short: str = ""


def video_record(
    example: Example,
    index: int,
    short_side: int | None,
    quality: int,
    transform: FrameTransform | None = None,
) -> Encoded:
    """The serialized SequenceExample of one video (changed by `transform` first, if given);
    raises VideoDecodeError when it fails. A file that seems cut short (a partial download) is
    cached with the frames that decode, and a warning naming it and both counts."""
    decoded = iter_video_frames(example.path)
    if transform is not None:
        clip = list(decoded)
        decoded = transform(example.path, np.stack(clip)) if clip else []
    frames, height, width = [], 0, 0
    for frame in decoded:
        frame = resize_short_side(frame, short_side)
        height, width = frame.shape[:2]
        frames.append(encode_jpeg(frame, quality))
    if not frames:
        raise VideoDecodeError(f"{example.path}: contains no decodable frame")
    cut_short = warn_if_cut_short(example.path, len(frames), "cached with the frames that decode")
    context = _context(example, index, height, width)
    context["num_frames"] = _int64([len(frames)])
    record = tf.train.SequenceExample(
        context=tf.train.Features(feature=context),
        feature_lists=tf.train.FeatureLists(
            feature_list={"frames": tf.train.FeatureList(feature=[_bytes([f]) for f in frames])}
        ),
    )
    return Encoded(record.SerializeToString(), cut_short)


def image_record(
    example: Example,
    index: int,
    short_side: int | None,
    quality: int,
    transform: FrameTransform | None = None,
) -> Encoded:
    """The serialized Example of one image (changed by `transform` first, if given); raises
    ValueError when it is unreadable. A JPEG cut short is cached as it decodes (its missing
    part grey), with a warning naming it."""
    rgb, cut = read_image_and_cut(example.path)
    cut_short = JPEG_CUT_SHORT if cut else ""
    if transform is not None:
        rgb = transform(example.path, rgb[None])[0]
    image = resize_short_side(rgb, short_side)
    height, width = image.shape[:2]
    features = _context(example, index, height, width)
    features["image"] = _bytes([encode_jpeg(image, quality)])
    record = tf.train.Example(features=tf.train.Features(feature=features))
    return Encoded(record.SerializeToString(), cut_short)


def _file_version(path: str) -> list[int]:
    """Size and modification time of a file ([-1, -1] when it is missing), so that a cache of
    files rewritten in place (a regenerated benchmark) is not taken for finished."""
    try:
        status = os.stat(path)
    except OSError:
        return [-1, -1]
    return [status.st_size, status.st_mtime_ns]


IMAGES_AS_STORED = "EXIF orientation not applied"
"""How an image cache's images are decoded (`read_image`), in its fingerprint: caches written
before 2026-12-06 applied it, and are written again."""


def _settings(kind: str, short_side: int | None, quality: int, shards: int, transform_key: str):
    settings = [FORMAT_VERSION, kind, short_side, quality, shards, transform_key]
    return settings + [IMAGES_AS_STORED] if kind == "image" else settings


def _example_record(example: Example) -> list:
    record = [example.path, example.label, list(example.privacy), _file_version(example.path)]
    if example.actions:
        record.append(list(example.actions))
    return record


def _fingerprint(settings: list, split: Split) -> str:
    """The cache's digest: its settings and each file's path, labels, size and modification
    time, in split order (the manifest's: a prepare of anything else replaces the manifest)."""
    digest = hashlib.sha256(json.dumps(settings).encode())
    for example in split.examples:
        digest.update(json.dumps(_example_record(example)).encode())
    return digest.hexdigest()[:16]


def _shard_fingerprint(settings: list, items: list[tuple[int, Example]]) -> str:
    """One shard's digest, of the settings and of its own files and their indices only, so
    that a source file rewritten in place (a re-download) rewrites its shard and no other."""
    digest = hashlib.sha256(json.dumps(["shard", *settings]).encode())
    for index, example in items:
        digest.update(json.dumps([index, *_example_record(example)]).encode())
    return digest.hexdigest()[:16]


def _shard_count(num_shards: int | None, num_examples: int) -> int:
    """The shards of a cache of `num_examples`: `num_shards`, or one per `EXAMPLES_PER_SHARD`
    by default, and never more than the examples."""
    num_shards = num_shards or max(1, -(-num_examples // EXAMPLES_PER_SHARD))
    return max(1, min(num_shards, num_examples))


def _shard_name(shard: int, num_shards: int) -> str:
    return f"shard-{shard:05d}-of-{num_shards:05d}.tfrecord"


SHARD_FILE = re.compile(r"shard-\d{5,}-of-\d{5,}\.(tfrecord|json)")
"""The names of the shards (`_shard_name`) and of their sidecars (`_sidecar`) that `prepare`
writes: no other file of a cache's folder is ever removed as an old shard."""


def _sidecar(path: Path) -> Path:
    return path.with_suffix(".json")


def _complete(path: Path, fingerprints: set[str]) -> dict | None:
    """The sidecar of a finished shard written with one of `fingerprints` (its own, or the
    whole cache's, which sidecars carried before they had their own), else None (a damaged
    sidecar too: the shard is written again)."""
    if not path.exists() or not _sidecar(path).exists():
        return None
    try:
        info = json.loads(_sidecar(path).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) and info.get("fingerprint") in fingerprints else None


def _drop_other_manifest(out: Path, fingerprint: str, source: dict | None) -> None:
    """Remove a manifest of other settings (or an unreadable one) before any shard is
    rewritten: a prepare stopped part way then leaves a folder that reads as unprepared, not
    as the old cache with some shards of the new one (labels of other attributes, videos of
    another split). A cache of another dataset is refused by name instead: it is not this
    cache's to replace (a wrong --out would lose it)."""
    path = out / MANIFEST
    if not path.exists():
        return
    try:
        kept = json.loads(path.read_text())
        kept_fingerprint = kept.get("fingerprint")
    except (OSError, ValueError, AttributeError):
        kept, kept_fingerprint = {}, None
    kept_source = kept.get("source")
    kept_dataset = kept_source.get("dataset") if isinstance(kept_source, dict) else None
    dataset = (source or {}).get("dataset")
    if kept_dataset and dataset and kept_dataset != dataset:
        raise DatasetFormatError(
            f"{out} holds a cache of {kept_dataset} (its {MANIFEST}), not of {dataset}: give "
            "another --out, or remove it to cache there"
        )
    if kept_fingerprint != fingerprint:
        path.unlink()


def _read_text(path: Path) -> str | None:
    """The text of `path`; None where it cannot be read."""
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _write_shard(path: Path, records: Iterator[tuple[Example, Encoded | str]], fingerprint: str):
    """Write `records` ((example, encoded record or failure reason)) to `path` atomically:
    a temporary file, then (after removing any older shard, so a crash in between never pairs an
    old shard with a new sidecar) its sidecar, then the rename that marks the shard complete.
    The sidecar names the files that failed and those cached cut short."""
    for leftover in (path, _sidecar(path)):
        remove_abandoned_temporaries(leftover)  # a preparation killed while writing this shard
    temporary = temporary_beside(path)
    count, failures, cut_short = 0, [], []
    with tf.io.TFRecordWriter(str(temporary)) as writer:
        for example, encoded in records:
            if isinstance(encoded, str):
                failures.append({"path": example.path, "reason": encoded})
                continue
            writer.write(encoded.record)
            count += 1
            if encoded.cut_short:
                cut_short.append({"path": example.path, "reason": encoded.cut_short})
    info = {
        "fingerprint": fingerprint,
        "count": count,
        "failures": failures,
        "cut_short": cut_short,
    }
    sidecar_tmp = temporary_beside(_sidecar(path))
    sidecar_tmp.write_text(json.dumps(info))
    path.unlink(missing_ok=True)
    os.replace(sidecar_tmp, _sidecar(path))
    os.replace(temporary, path)
    return info


def _encode_all(
    encode: Callable[[Example, int], Encoded], examples: list[tuple[int, Example]], workers: int
) -> Iterator[tuple[Example, Encoded | str]]:
    """Encode examples in order on `workers` threads (decoders release the GIL); a decoding
    failure becomes its reason string."""

    def one(item: tuple[int, Example]) -> tuple[Example, Encoded | str]:
        index, example = item
        try:
            return example, encode(example, index)
        except DECODE_ERRORS as error:
            return example, str(error)

    with concurrent.futures.ThreadPoolExecutor(max(1, workers)) as pool:
        yield from pool.map(one, examples)


def _prepare(
    kind: str,
    encode: Callable[[Example, int], Encoded],
    split: Split,
    out_dir: str | os.PathLike,
    short_side: int | None,
    num_shards: int | None,
    jpeg_quality: int,
    workers: int | None,
    transform: FrameTransform | None,
    source: dict | None,
) -> dict:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    encode = _with_label_check(encode, len(split.attribute_names))
    num_shards = _shard_count(num_shards, len(split))
    transform_key = "" if transform is None else transform.key
    settings = _settings(kind, short_side, jpeg_quality, num_shards, transform_key)
    fingerprint = _fingerprint(settings, split)
    _drop_other_manifest(out, fingerprint, source)
    # Split lists are sorted by class: shards of a fixed random order, so that a shuffle
    # window over a few interleaved shards still sees every class (records keep their index).
    # The order depends on the split's length only: a file rewritten in place stays in its shard.
    order = np.random.default_rng(SHARD_ORDER_SEED).permutation(len(split))
    chunks = np.array_split(order, num_shards)
    shards = []
    with tqdm(total=len(split), desc=f"caching {kind}s", unit=kind) as bar:
        for shard, chunk in enumerate(chunks):
            path = out / _shard_name(shard, num_shards)
            items = [(int(i), split.examples[i]) for i in chunk]
            shard_fingerprint = _shard_fingerprint(settings, items)
            info = _complete(path, {shard_fingerprint, fingerprint})
            if info is None:
                records = _encode_all(encode, items, workers or os.cpu_count() or 1)
                info = _write_shard(path, _progress(records, bar), shard_fingerprint)
            else:
                bar.update(len(chunk))
            shards.append({"file": path.name, **info})
    manifest = {
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "fingerprint": fingerprint,
        "num_examples": len(split),
        "num_records": sum(s["count"] for s in shards),
        "short_side": short_side,
        "jpeg_quality": jpeg_quality,
        "transform": transform_key,
        "class_names": list(split.class_names),
        "attribute_names": list(split.attribute_names),
        "num_actions": len(split.class_names) if any(e.actions for e in split.examples) else 0,
        "shards": [{"file": s["file"], "count": s["count"]} for s in shards],
        "failures": [f for s in shards for f in s["failures"]],
        "cut_short": [f for s in shards for f in s.get("cut_short", [])],
        # Shards kept from before their sidecars listed the files cached cut short: unknown.
        "cut_short_unrecorded": [s["file"] for s in shards if "cut_short" not in s],
        "missing": list(split.missing),
        **({"source": source} if source is not None else {}),
    }
    text = json.dumps(manifest, indent=1)
    if _read_text(out / MANIFEST) != text:  # a finished cache's is left as it is, unwritten
        write_text_atomically(out / MANIFEST, text)
    _remove_unlisted_shards(out, manifest["shards"])
    return manifest


def _remove_unlisted_shards(out: Path, shards: list[dict]) -> None:
    """Remove the shards (and sidecars) in `out` that the manifest's `shards` do not list:
    those of a prepare with another shard count (a split that gained files), up to a whole
    copy of the dataset. Called once the new manifest is written, so that a prepare stopped
    before it keeps every shard a resume (of either count) reuses."""
    listed = {
        name for shard in shards for name in (shard["file"], _sidecar(Path(shard["file"])).name)
    }
    unlisted = [
        path
        for path in out.iterdir()
        if SHARD_FILE.fullmatch(path.name) and path.name not in listed
    ]
    for path in unlisted:
        path.unlink(missing_ok=True)
    if unlisted:
        count = len({path.stem for path in unlisted})
        logging.info("%s: removed %d old shards that its %s does not list", out, count, MANIFEST)


def _with_label_check(
    encode: Callable[[Example, int], Encoded], num_attributes: int
) -> Callable[[Example, int], Encoded]:
    """`encode`, refusing (as a decoding failure) an example whose privacy labels do not match
    the split's attributes: its record would not parse with the manifest's attribute count."""

    def checked(example: Example, index: int) -> Encoded:
        if len(example.privacy) != num_attributes:
            raise ValueError(
                f"{example.path}: {len(example.privacy)} privacy labels for the split's "
                f"{num_attributes} attributes (is its annotation missing?)"
            )
        return encode(example, index)

    return checked


def _progress(records, bar):
    for item in records:
        bar.update(1)
        yield item


def prepare_video_cache(
    split: Split,
    out_dir: str | os.PathLike,
    short_side: int | None = 128,
    num_shards: int | None = None,
    jpeg_quality: int = JPEG_QUALITY,
    workers: int | None = None,
    transform: FrameTransform | None = None,
    source: dict | None = None,
) -> dict:
    """Decode every video of `split` once into `out_dir` (sharded TFRecords + manifest.json).

    Args:
        split: The videos (with labels and privacy labels) to cache.
        out_dir: The cache folder; complete shards already there are kept (resumable).
        short_side: Frames are resized so their short side is this (None: keep the size).
        num_shards: Number of shards (default: about 100 videos per shard).
        jpeg_quality: JPEG quality of the stored frames.
        workers: Decoding threads (default: the number of CPU cores).
        transform: A change of every decoded video before it is resized (default: none).
        source: What the split was read from (`prepare` records the dataset, split, subset and
            attributes), kept in the manifest for training to check (default: not recorded).

    Returns:
        The manifest: counts, shards, `failures` (path and reason of skipped videos),
        `cut_short` (path and reason of videos cached with the frames that decode) and
        `cut_short_unrecorded` (shards kept from a prepare before sidecars listed them).
    """

    def encode(example: Example, index: int) -> Encoded:
        return video_record(example, index, short_side, jpeg_quality, transform)

    return _prepare(
        "video",
        encode,
        split,
        out_dir,
        short_side,
        num_shards,
        jpeg_quality,
        workers,
        transform,
        source,
    )


def prepare_image_cache(
    split: Split,
    out_dir: str | os.PathLike,
    short_side: int | None = 128,
    num_shards: int | None = None,
    jpeg_quality: int = JPEG_QUALITY,
    workers: int | None = None,
    transform: FrameTransform | None = None,
    source: dict | None = None,
) -> dict:
    """Store every image of `split` once into `out_dir`, like `prepare_video_cache`."""

    def encode(example: Example, index: int) -> Encoded:
        return image_record(example, index, short_side, jpeg_quality, transform)

    return _prepare(
        "image",
        encode,
        split,
        out_dir,
        short_side,
        num_shards,
        jpeg_quality,
        workers,
        transform,
        source,
    )


def prepare_cache(
    split: Split,
    kind: str,
    out_dir: str | os.PathLike,
    short_side: int | None,
    transform: FrameTransform | None = None,
    prepared: Sequence[str | os.PathLike] = (),
) -> Path:
    """`split` as a prepared "video" or "image" cache in `out_dir` (written once, resumable),
    each file changed by `transform` first, if given. Without a `transform`, a finished cache
    of the same files at the same settings in one of the `prepared` folders is returned
    instead of a copy written (`find_prepared`)."""
    if transform is None:
        found = find_prepared(split, kind, short_side, [out_dir, *prepared])
        if found is not None:
            if found != Path(out_dir):
                logging.info("%s: reading %s, the same files prepared alike", out_dir, found)
            return found
    prepare = prepare_video_cache if kind == "video" else prepare_image_cache
    prepare(split, out_dir, short_side=short_side, transform=transform)
    return Path(out_dir)


def find_prepared(
    split: Split, kind: str, short_side: int | None, folders: Sequence[str | os.PathLike]
) -> Path | None:
    """The first of `folders` holding a finished cache of `split` as `prepare_cache` writes it
    without a transform (the same files, labels, sizes and modification times, the default
    shards and JPEG quality, `short_side`), every shard it lists there; else None. So a cache
    that `python -m keras_privacy.data prepare` wrote for training serves an evaluation."""
    settings = _settings(kind, short_side, JPEG_QUALITY, _shard_count(None, len(split)), "")
    fingerprint = _fingerprint(settings, split)
    for folder in map(Path, folders):
        try:
            manifest = read_manifest(folder)
        except (OSError, DatasetFormatError):
            continue
        if manifest["fingerprint"] == fingerprint and all(
            (folder / shard["file"]).is_file() for shard in manifest["shards"]
        ):
            return folder
    return None


def failure_line(failure: dict) -> str:
    """One manifest failure as "path: reason" (the path once, when the reason has it)."""
    path, reason = failure["path"], failure["reason"]
    return reason if reason.startswith(path) else f"{path}: {reason}"


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_names(value) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _is_shards(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(shard, dict)
        and isinstance(shard.get("file"), str)
        and _is_count(shard.get("count"))
        for shard in value
    )


MANIFEST_FIELDS = {
    "format_version": (_is_count, "a whole number"),
    "kind": (lambda value: value in ("video", "image"), "video or image"),
    "fingerprint": (lambda value: isinstance(value, str), "a string"),
    "num_examples": (_is_count, "a whole number"),
    "num_records": (_is_count, "a whole number"),
    "class_names": (_is_names, "a list of names"),
    "attribute_names": (_is_names, "a list of names"),
    "shards": (_is_shards, 'a list of {"file": name, "count": whole number}'),
    "failures": (lambda value: isinstance(value, list), "a list"),
    "missing": (lambda value: isinstance(value, list), "a list"),
}
"""The keys every manifest `prepare` writes holds, each with its check and what it must be
(`read_manifest` checks them all: the readers index them without a second look)."""


def read_manifest(cache_dir: str | os.PathLike) -> dict:
    """The manifest of a prepared cache. Raises FileNotFoundError when it is not complete (or
    `cache_dir` is `prepare`'s --out, naming its subsets' caches), DatasetFormatError naming the
    file when it is not a manifest (cut short, edited)."""
    path = Path(cache_dir) / MANIFEST
    if not path.is_file():
        subsets = sorted(found.parent.name for found in Path(cache_dir).glob(f"*/{MANIFEST}"))
        if subsets:
            example = Path(cache_dir) / ("train" if "train" in subsets else subsets[0])
            raise FileNotFoundError(
                f"{cache_dir}: no {MANIFEST}, but its folders {', '.join(subsets)} each hold a "
                f"prepared subset (`prepare --out` writes one per subset): give the subset's "
                f"folder, e.g. {example}"
            )
        raise FileNotFoundError(f"{cache_dir}: no {MANIFEST}; run `prepare` first")
    manifest = read_json(path)
    held = manifest if isinstance(manifest, dict) else {}
    lacking = [key for key in MANIFEST_FIELDS if key not in held]
    wrong = [
        f"{key} is {reprlib.repr(held[key])}, not {what}"
        for key, (is_valid, what) in MANIFEST_FIELDS.items()
        if key in held and not is_valid(held[key])
    ]
    if lacking or wrong:
        problems = ([f"no {', '.join(lacking)}"] if lacking else []) + wrong
        raise DatasetFormatError(
            f"{path}: not a manifest of `prepare` ({'; '.join(problems)}); prepare the cache again"
        )
    return manifest


def shard_paths(cache_dir: str | os.PathLike, manifest: dict | None = None) -> list[str]:
    """The shard files of a cache, in split order."""
    manifest = manifest or read_manifest(cache_dir)
    return [str(Path(cache_dir) / shard["file"]) for shard in manifest["shards"]]


def damaged_shard(cache_dir: str | os.PathLike) -> tuple[str, str] | None:
    """The first shard of a cache whose records do not read back (a partial copy, a bad disk:
    TensorFlow checks each record's checksum), with TensorFlow's reason; None where all read.
    Reads every shard once, so it is called where a read has already failed."""
    for path in shard_paths(cache_dir):
        try:
            tf.data.TFRecordDataset(path).reduce(0, lambda count, _: count + 1)
        except tf.errors.OpError as error:
            return path, _reason(error)
    return None


def _reason(error: tf.errors.OpError) -> str:
    """TensorFlow's reason for a failed read, without its op and device names."""
    reason = error.message.strip().splitlines()[-1]
    return re.sub(r"\{\{.*?\}\}|\[Op:.*$", "", reason).strip()


def _context_spec(num_attributes: int, num_actions: int = 0) -> dict:
    spec = {
        "label": tf.io.FixedLenFeature([], tf.int64),
        "privacy": tf.io.FixedLenFeature([num_attributes], tf.int64),
        "index": tf.io.FixedLenFeature([], tf.int64),
        "height": tf.io.FixedLenFeature([], tf.int64),
        "width": tf.io.FixedLenFeature([], tf.int64),
        "path": tf.io.FixedLenFeature([], tf.string),
    }
    if num_actions:
        spec["actions"] = tf.io.FixedLenFeature([num_actions], tf.int64)
    return spec


def _typed(features: dict) -> dict:
    """int64 scalars as int32, privacy and multi-hot action labels as float32 (ready for BCE)."""
    out = {}
    for key, value in features.items():
        if key in ("privacy", "actions"):
            out[key] = tf.cast(value, tf.float32)
        elif value.dtype == tf.int64:
            out[key] = tf.cast(value, tf.int32)
        else:
            out[key] = value
    return out


def parse_video_record(serialized: Tensor, num_attributes: int, num_actions: int = 0) -> dict:
    """A video record as {"frames": (T,) JPEG strings, "num_frames", "label", "privacy",
    "index", "height", "width", "path"}, and the multi-hot "actions" when `num_actions` > 0."""
    context_spec = _context_spec(num_attributes, num_actions)
    context_spec["num_frames"] = tf.io.FixedLenFeature([], tf.int64)
    context, sequence = tf.io.parse_single_sequence_example(
        serialized,
        context_features=context_spec,
        sequence_features={"frames": tf.io.FixedLenSequenceFeature([], tf.string)},
    )
    return _typed({**context, "frames": sequence["frames"]})


def parse_image_record(serialized: Tensor, num_attributes: int) -> dict:
    """An image record as {"image": JPEG string, "label", "privacy", "index", "height",
    "width", "path"}."""
    spec = _context_spec(num_attributes)
    spec["image"] = tf.io.FixedLenFeature([], tf.string)
    return _typed(tf.io.parse_single_example(serialized, spec))


def _read(cache_dir: str | os.PathLike, kind: str) -> tf.data.Dataset:
    """The parsed records of a cache of `kind`, with the attribute and action counts of its
    manifest."""
    manifest = read_manifest(cache_dir)
    if manifest["kind"] != kind:
        raise ValueError(f"{cache_dir}: a {manifest['kind']} cache, not a {kind} cache")
    attributes, actions = len(manifest["attribute_names"]), manifest.get("num_actions", 0)

    def parse(record: tf.Tensor) -> dict:
        if kind == "video":
            return parse_video_record(record, attributes, actions)
        return parse_image_record(record, attributes)

    dataset = tf.data.TFRecordDataset(shard_paths(cache_dir, manifest))
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE)


def read_video_cache(cache_dir: str | os.PathLike) -> tf.data.Dataset:
    """The parsed records of a video cache in split order (frames still JPEG-encoded; the
    multi-hot "actions" too where the cache has them), to inspect a cache."""
    return _read(cache_dir, "video")


def read_image_cache(cache_dir: str | os.PathLike) -> tf.data.Dataset:
    """The parsed records of an image cache in split order (images still JPEG-encoded), to
    inspect a cache."""
    return _read(cache_dir, "image")


def verify_cache(cache_dir: str | os.PathLike) -> dict:
    """Check that every shard of a cache parses, that each record's frame count and JPEG size
    match its context, and that the counts match the manifest.

    Returns {"ok", "kind", "records", "expected", "errors": [...], "failures": manifest's}.
    """
    manifest = read_manifest(cache_dir)
    kind, num_attributes = manifest["kind"], len(manifest["attribute_names"])
    parse = parse_video_record if kind == "video" else parse_image_record
    errors, total = [], 0
    for shard, path in zip(manifest["shards"], shard_paths(cache_dir, manifest)):
        count = 0
        try:
            for serialized in tf.data.TFRecordDataset(path):
                record = parse(serialized, num_attributes)
                problem = _check_record(record, kind)
                if problem:
                    errors.append(f"{shard['file']} record {count}: {problem}")
                count += 1
        except tf.errors.OpError as error:
            errors.append(f"{shard['file']}: unreadable after {count} records ({_reason(error)})")
        except OSError as error:
            errors.append(f"{shard['file']}: unreadable after {count} records ({error})")
        if count != shard["count"]:
            errors.append(f"{shard['file']}: {count} records, the manifest says {shard['count']}")
        total += count
    if total != manifest["num_records"]:
        errors.append(f"{total} records in all, the manifest says {manifest['num_records']}")
    return {
        "ok": not errors,
        "kind": kind,
        "records": total,
        "expected": manifest["num_records"],
        "errors": errors,
        "failures": manifest["failures"],
    }


def _check_record(record: dict, kind: str) -> str:
    """What is wrong with one parsed record, or ''."""
    first = record["frames"][0] if kind == "video" else record["image"]
    if kind == "video" and int(tf.size(record["frames"])) != int(record["num_frames"]):
        return f"{int(tf.size(record['frames']))} frames, num_frames says {record['num_frames']}"
    shape = tf.io.extract_jpeg_shape(first).numpy()
    if (shape[0], shape[1]) != (int(record["height"]), int(record["width"])):
        return (
            f"JPEG is {shape[0]}x{shape[1]}, the record says {record['height']}x{record['width']}"
        )
    return ""
