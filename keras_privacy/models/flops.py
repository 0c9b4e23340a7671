"""Forward multiply-add counts of convolution and dense layers, for benchmark efficiency figures."""

from __future__ import annotations

import math

import keras

from keras_privacy.models.layers import SpatialSubsample


def forward_flops(model: keras.Model, input_shape: tuple[int, ...]) -> int:
    """FLOPs (2 x multiply-adds) of one forward pass of `model` on one input of `input_shape`
    (without the batch axis), counting Dense layers and convolutions (plain, transposed,
    depthwise, separable; inside `TimeDistributed` too), nested models included.

    Normalisation, activation and pooling layers are ignored: they are memory-bound and small
    next to the convolutions. A convolution strided in space and dilated in time counts as the
    strided one, not as the stride-1 one Keras runs for it (`SpatialSubsample`).
    """
    calls = _layer_calls(model, (1, *input_shape))
    return sum(_layer_flops(layer, in_shape, out_shape) for layer, in_shape, out_shape in calls)


_CONVOLUTIONS = (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.Conv3D)
_TRANSPOSED = (
    keras.layers.Conv1DTranspose,
    keras.layers.Conv2DTranspose,
    keras.layers.Conv3DTranspose,
)
_DEPTHWISE = (keras.layers.DepthwiseConv1D, keras.layers.DepthwiseConv2D)
_SEPARABLE = (keras.layers.SeparableConv1D, keras.layers.SeparableConv2D)


def _layer_flops(layer: keras.layers.Layer, in_shape: tuple, out_shape: tuple) -> int:
    """FLOPs of one call of `layer` from `in_shape` to `out_shape` (channels last)."""
    if isinstance(layer, keras.layers.TimeDistributed):  # the wrapped layer, once a step
        inner, steps = layer.layer, in_shape[1]
        if isinstance(inner, keras.Model):
            return steps * forward_flops(inner, tuple(in_shape[2:]))
        return steps * _layer_flops(inner, (1, *in_shape[2:]), (1, *out_shape[2:]))
    if isinstance(layer, keras.layers.Dense):
        return 2 * math.prod(in_shape[1:]) * layer.units
    if isinstance(layer, _CONVOLUTIONS):
        # Each output element: the kernel's window over its group's input channels.
        return 2 * math.prod(layer.kernel.shape[:-1]) * math.prod(out_shape[1:])
    if isinstance(layer, _TRANSPOSED):
        # Each input element scatters into the window of every output channel.
        return 2 * math.prod(in_shape[1:-1]) * math.prod(layer.kernel.shape)
    if isinstance(layer, _DEPTHWISE):
        # Each output element: the window over one input channel.
        return 2 * math.prod(layer.kernel.shape[:-2]) * math.prod(out_shape[1:])
    if isinstance(layer, _SEPARABLE):
        # Each position: the depthwise windows, then the pointwise mix of their channels.
        kernels = math.prod(layer.depthwise_kernel.shape) + math.prod(layer.pointwise_kernel.shape)
        return 2 * math.prod(out_shape[1:-1]) * kernels
    return 0


def _layer_calls(model: keras.Model, batch_shape: tuple[int, ...]) -> list[list]:
    """[layer, input shape, output shape] of every call of a layer of `model` (recursing into
    nested models; a layer or a model called twice is there twice) for an input of
    `batch_shape`, found by symbolic tracing."""
    calls: list[list] = []
    _trace(model, keras.KerasTensor(batch_shape), calls)
    return calls


def _trace(model, inputs, calls):
    values = {id(model.inputs[0]): inputs}
    made_by = {}  # id of a layer's output tensor -> its call in `calls`
    for node_layer in model.layers:
        if isinstance(node_layer, keras.layers.InputLayer):
            continue
        for node in node_layer._inbound_nodes:
            args = [values.get(id(t)) for t in node.input_tensors]
            if any(a is None for a in args):
                continue
            call_inputs = args[0] if len(args) == 1 else args
            if isinstance(node_layer, keras.Model):
                outputs = _trace(node_layer, call_inputs, calls)
            else:
                outputs = node_layer.compute_output_spec(call_inputs, **node.arguments.kwargs)
                out = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
                calls.append([node_layer, args[0].shape, out.shape])
                made_by[id(node.output_tensors[0])] = calls[-1]
                if isinstance(node_layer, SpatialSubsample):
                    _count_as_strided(made_by.get(id(node.input_tensors[0])), out.shape)
            out_list = outputs if isinstance(outputs, (list, tuple)) else [outputs]
            for tensor, value in zip(node.output_tensors, out_list):
                values[id(tensor)] = value
    return values[id(model.outputs[0])]


def _count_as_strided(producer: list | None, subsampled_shape: tuple) -> None:
    """Count a convolution that a `SpatialSubsample` follows (a convolution strided in space and
    dilated in time, which Keras builds as a stride-1 one, then subsampled: SPAct's R3D-18
    layer4) at the subsampled outputs: the strided convolution's math, which the model is, not
    the skipped positions its stride-1 stand-in also computes."""
    if producer is not None and isinstance(producer[0], _CONVOLUTIONS):
        producer[2] = subsampled_shape
