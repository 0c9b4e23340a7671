"""Batches as the trainers take them: a fixed list of ready batches for `fit` without
TensorFlow (`BatchList`), and the check of a batch's frames against the models
(`check_frames`), made when a step is traced, so that a mistake is named by its key rather
than by the backend's error deep in a model.

Meta generalisation's batches carry per-batch masks, and an exported minimax comes as batches,
so `fit(x=arrays, batch_size=B)` (which slices examples) does not fit them: `fit(BatchList(...))`
takes each batch dict as it is, on either backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import keras

CLIP_KEYS = ("clips", "second_clips", "positive_clips", "action_clips", "validation_clips")
"""Batch keys holding clips, (batch, time, height, width, channels)."""
LAYOUTS = {
    **dict.fromkeys(CLIP_KEYS, ("batch", "time", "height", "width", "channels")),
    "views": ("batch", "2", "height", "width", "channels"),
    "pair_frames": ("batch", "2", "height", "width", "channels"),
    "images": ("batch", "height", "width", "channels"),
}
"""The axes of every batch key holding frames."""
FRAME_KEYS = tuple(LAYOUTS)
"""Batch keys holding frames, which the trainers take as floats in [0, 1]."""


class BatchList(keras.utils.PyDataset):
    """`batches` (dicts of arrays, one per training step) in order."""

    def __init__(self, batches: list[dict]):
        super().__init__()
        self.batches = list(batches)

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> dict:
        return self.batches[index]


def check_frames(
    trainer: str,
    data: Mapping[str, Any],
    models: Mapping[str, keras.Model],
    paired: bool,
    classifiers: Mapping[str, keras.Model] | None = None,
) -> None:
    """Refuse, naming the key, frames that the models cannot take, from their static shapes
    and dtypes: integer frames (0-255, as a video decodes; the trainers take floats in
    [0, 1]); privacy labels of another width than `classifiers` (the privacy classifiers by
    group) predict; a key of another rank than its layout (`LAYOUTS`; with `paired`, an axis
    of two batches after the batch axis, as `keras_privacy.data.pairs` lays out SPAct's
    pairs); frames of several sizes in one batch (f_A anonymizes them together); frames
    (height, width, channels) other than an image model of `models` was built for, or clips
    (time, height, width, channels) other than a video model was built for: the model would
    fail deep in a layer, or train on what it was not built for. Unknown dims pass."""
    check_privacy_width(data.get("privacy"), classifiers or {})
    sizes: dict[str, tuple] = {}
    for key, layout in LAYOUTS.items():
        dtype = _dtype(data.get(key))
        if dtype is not None and (dtype.startswith(("int", "uint")) or dtype == "bool"):
            raise ValueError(
                f"batch[{key!r}] holds {dtype} frames; the trainers take float frames in [0, "
                "1]: divide by 255 (keras_privacy.data.frames.frames_as_floats)"
            )
        shape = _static_shape(data.get(key))
        if shape is None:
            continue
        layout = ("batch", "2", *layout[1:]) if paired else layout
        if len(shape) != len(layout) or (paired and shape[1] not in (2, None)):
            pairs = " (pairs of batches: keras_privacy.data.pairs.pair_batches)" if paired else ""
            raise ValueError(
                f"batch[{key!r}] has shape {shape}, but {trainer} takes it as "
                f"({', '.join(layout)}){pairs}"
            )
        if paired:
            shape = (shape[0], *shape[2:])
        sizes[key] = shape[-3:-1]
        as_taken = [(4, shape[-3:], "frames")]  # by image models, (rank, shape, what)
        if key in CLIP_KEYS:
            as_taken.append((5, shape[1:], "clips"))  # by video models
        for group, model in models.items():
            for rank, taken, what in as_taken:
                built = _input_shape(model, rank)
                if built is not None and any(
                    a is not None and b is not None and a != b
                    for a, b in zip(taken, built, strict=True)
                ):
                    axes = ", ".join(LAYOUTS[key][-len(taken) :])
                    raise ValueError(
                        f"batch[{key!r}] holds {what} of {_dims(taken)} ({axes}), but the "
                        f"{group} model {model.name!r} was built for {_dims(built)} "
                        "(clip_length, image_size)"
                    )
    known = {key: size for key, size in sizes.items() if None not in size}
    if len(set(known.values())) > 1:
        raise ValueError(
            "the frames of a batch are all of one size, as f_A anonymizes them together, but "
            + ", ".join(f"batch[{key!r}] holds {_dims(size)}" for key, size in known.items())
        )


def check_privacy_width(
    labels: Any, classifiers: Mapping[str, keras.Model], name: str = "batch['privacy']"
) -> None:
    """Refuse privacy labels (`name` in the message) whose static width differs from the output
    of a classifier of `classifiers` (the privacy classifiers by group)."""
    shape = _static_shape(labels)
    if not shape or shape[-1] is None:
        return
    for group, model in classifiers.items():
        width = model.output_shape[-1]
        if isinstance(width, int) and width != shape[-1]:
            raise ValueError(
                f"{name} holds labels of {shape[-1]} attributes, but {group} predicts {width}"
            )


def _dtype(value: Any) -> str | None:
    """The dtype of a batch value (an array, tensor or tensor spec) as Keras names it."""
    dtype = getattr(value, "dtype", None)
    return None if dtype is None else keras.backend.standardize_dtype(dtype)


def _static_shape(value: Any) -> tuple | None:
    """The static shape of a batch value (None dims where unknown), or None without one."""
    shape = getattr(value, "shape", None)
    if shape is None or getattr(shape, "rank", 0) is None:
        return None
    return tuple(None if dim is None else int(dim) for dim in shape)


def _input_shape(model: keras.Model, rank: int) -> tuple | None:
    """The shape of one example of a model built on one input of `rank` (batch included),
    else None: image models have rank 4, video models rank 5."""
    inputs = getattr(model, "inputs", None)
    if not isinstance(inputs, list) or len(inputs) != 1 or len(inputs[0].shape) != rank:
        return None
    return tuple(inputs[0].shape)[1:]


def _dims(dims: tuple) -> str:
    return " x ".join("?" if dim is None else str(dim) for dim in dims)
