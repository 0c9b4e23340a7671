"""Forward multiply-add counts of convolution and dense layers, for benchmark efficiency figures."""

from __future__ import annotations

import math

import keras


def forward_flops(model: keras.Model, input_shape: tuple[int, ...]) -> int:
    """FLOPs (2 x multiply-adds) of one forward pass of `model` on one input of `input_shape`
    (without the batch axis), counting Conv1D/2D/3D and Dense layers, nested models included.

    Normalisation, activation and pooling layers are ignored: they are memory-bound and small
    next to the convolutions.
    """
    total = 0
    batch_shape = (1, *input_shape)
    shapes = _output_shapes(model, batch_shape)
    for layer, (in_shape, out_shape) in shapes.items():
        if isinstance(layer, keras.layers.Dense):
            total += 2 * math.prod(in_shape[1:]) * layer.units
        elif isinstance(layer, (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)):
            kernel = layer.kernel.shape
            per_output = math.prod(kernel[:-1])
            total += 2 * per_output * math.prod(out_shape[1:])
    return total


def _output_shapes(model: keras.Model, batch_shape: tuple[int, ...]) -> dict:
    """Input and output shapes of every layer of `model` (recursing into nested models) for an
    input of `batch_shape`, found by symbolic tracing."""
    shapes: dict = {}
    _trace(model, keras.KerasTensor(batch_shape), shapes)
    return shapes


def _trace(model, inputs, shapes):
    values = {id(model.inputs[0]): inputs}
    for node_layer in model.layers:
        if isinstance(node_layer, keras.layers.InputLayer):
            continue
        for node in node_layer._inbound_nodes:
            args = [values.get(id(t)) for t in node.input_tensors]
            if any(a is None for a in args):
                continue
            call_inputs = args[0] if len(args) == 1 else args
            if isinstance(node_layer, keras.Model):
                outputs = _trace(node_layer, call_inputs, shapes)
            else:
                outputs = node_layer.compute_output_spec(call_inputs, **node.arguments.kwargs)
                in_shape = args[0].shape
                out = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
                shapes[node_layer] = (in_shape, out.shape)
            out_list = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            for tensor, value in zip(node.output_tensors, out_list):
                values[id(tensor)] = value
    return values[id(model.outputs[0])]
