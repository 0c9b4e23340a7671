"""A Functional model cut into a chain of segments, for recomputation in a derivative pass.

A segment is a Functional sub-model over the model's own layers (shared weights) that maps the
tensors live at one cut (the outputs of earlier layers that later layers, or the model's
outputs, still read: a UNet's skip connections among them) to those live at the next. Chained,
the segments compute the model (`run_segments`); a derivative pass that keeps only the tensors
at the cuts and recomputes one segment at a time (`backend.checkpoint` around each) holds one
segment's activations instead of the model's: the meta-generalisation step's f_A.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import keras

from keras_privacy.types import Tensor


@dataclasses.dataclass(frozen=True)
class Segment:
    """One piece of a model: `model` (list of tensors -> list of tensors) and where its
    variables sit among the whole model's `trainable_variables` and `non_trainable_variables`."""

    model: keras.Model
    trainable_index: tuple[int, ...]
    non_trainable_index: tuple[int, ...]
    read: tuple[int, ...]
    """Which of the segment's inputs `model` reads."""
    layout: tuple[tuple[bool, int], ...]
    """Per output: (True, i) for `model`'s output i, (False, j) for input j passed through."""

    def __call__(
        self, trainable: list, non_trainable: list, inputs: list, training: bool
    ) -> tuple[list, list]:
        """The segment's outputs (a list) on `inputs` and its new non-trainable values,
        statelessly, from its own slices of the model's trainable and non-trainable values."""
        computed, new_non_trainable = self.model.stateless_call(
            list(trainable), list(non_trainable), [inputs[i] for i in self.read], training=training
        )
        computed = keras.tree.flatten(computed)
        outputs = [computed[i] if own else inputs[i] for own, i in self.layout]
        return outputs, list(new_non_trainable)


def run_segments(
    segments: list[Segment],
    trainable: list,
    non_trainable: list,
    inputs: Tensor,
    training: bool,
    wrap: Callable[[Callable], Callable] | None = None,
) -> tuple[Any, list]:
    """The whole model's (outputs, new non-trainable values) on `inputs`, computed segment by
    segment, each segment's call passed through `wrap` (a recomputation: `backend.checkpoint`)."""
    new_non_trainable = list(non_trainable)
    state = [inputs]
    for segment in segments:
        call = functools.partial(segment.__call__, training=training)
        state, values = (call if wrap is None else wrap(call))(
            [trainable[i] for i in segment.trainable_index],
            [non_trainable[i] for i in segment.non_trainable_index],
            state,
        )
        for i, value in zip(segment.non_trainable_index, values):
            new_non_trainable[i] = value
    (outputs,) = state
    return outputs, new_non_trainable


def block_ends(model: keras.Model) -> list[str]:
    """The cuts of a UNet-like model: after every second ReLU, the end of each block of two
    convolutions (each followed by BatchNorm and ReLU)."""
    relus = [layer.name for layer in model.layers if isinstance(layer, keras.layers.ReLU)]
    return relus[1::2]


def functional_segments(model: keras.Model, cut_after: list[str]) -> list[Segment]:
    """`model` cut after each layer named in `cut_after` (in the model's topological order).

    Raises ValueError for a model that is not a Functional model of one input and one output,
    a layer called more than once (its inputs would be ambiguous) or a name that is not a
    layer of the model.
    """
    if not isinstance(model, keras.Model) or not hasattr(model, "_operations"):
        raise ValueError(f"{model.name} is not a Functional model; it cannot be cut")
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise ValueError(f"{model.name} is not a model of one input and one output")
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    names = [layer.name for layer in layers]
    unknown = sorted(set(cut_after) - set(names))
    if unknown:
        raise ValueError(f"{model.name} has no layer named {unknown}")
    for layer in layers:
        if len(layer._inbound_nodes) != 1:
            raise ValueError(f"layer {layer.name} of {model.name} is called more than once")
    produced_at = {id(model.inputs[0]): -1}
    last_read_at = {id(t): len(layers) for t in model.outputs}
    for position, layer in enumerate(layers):
        produced_at[id(layer.output)] = position
        for tensor in keras.tree.flatten(layer.input):
            last_read_at[id(tensor)] = max(last_read_at.get(id(tensor), -1), position)
    tensors = {id(model.inputs[0]): model.inputs[0]}
    tensors.update({id(layer.output): layer.output for layer in layers})
    cuts = sorted(names.index(name) for name in set(cut_after))
    boundaries = [list(model.inputs)]
    for cut in cuts:
        boundaries.append(
            [
                tensors[key]
                for key, position in produced_at.items()
                if position <= cut < last_read_at.get(key, -1)
            ]
        )
    boundaries.append(list(model.outputs))
    trainable = {id(v): i for i, v in enumerate(model.trainable_variables)}
    non_trainable = {id(v): i for i, v in enumerate(model.non_trainable_variables)}
    segments = []
    firsts, lasts = [0] + [cut + 1 for cut in cuts], cuts + [len(layers) - 1]
    for index, (inputs, outputs) in enumerate(zip(boundaries[:-1], boundaries[1:])):
        inside = layers[firsts[index] : lasts[index] + 1]
        read_ids = {id(t) for layer in inside for t in keras.tree.flatten(layer.input)}
        read = tuple(i for i, t in enumerate(inputs) if id(t) in read_ids)
        input_ids = [id(t) for t in inputs]
        computed = [t for t in outputs if id(t) not in input_ids]
        computed_ids = [id(t) for t in computed]
        layout = tuple(
            (False, input_ids.index(id(t)))
            if id(t) in input_ids
            else (True, computed_ids.index(id(t)))
            for t in outputs
        )
        piece = keras.Model(
            [inputs[i] for i in read], computed, name=f"{model.name}_segment{index}"
        )
        segments.append(
            Segment(
                piece,
                tuple(trainable[id(v)] for v in piece.trainable_variables),
                tuple(non_trainable[id(v)] for v in piece.non_trainable_variables),
                read,
                layout,
            )
        )
    return segments
