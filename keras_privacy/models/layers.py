"""Small custom layers shared by the model builders (registered for `.keras` saving), the
convolution padded as PyTorch pads, and PyTorch's initialisations of the torchvision-layout
models."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import keras
from keras import layers, ops

from keras_privacy import backend


def kaiming_fan_out() -> keras.initializers.Initializer:
    """torchvision's ResNet convolutions' start (image and video ResNets, and TeD-SPAD's
    I3Res50): `kaiming_normal_(mode="fan_out", nonlinearity="relu")`, N(0, 2 / fan_out) with
    fan_out = output channels x kernel size, untruncated. Keras' default, Glorot uniform,
    draws half that variance where input and output widths are equal."""
    return keras.initializers.VarianceScaling(
        2.0, mode="fan_out", distribution="untruncated_normal"
    )


def torch_default_weights() -> keras.initializers.Initializer:
    """PyTorch's default start of `nn.Linear` and `nn.Conv*d` weights, `kaiming_uniform_(a=
    sqrt(5))`: uniform in +-1 / sqrt(fan_in), fan_in = input channels x kernel size."""
    return keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform")


def smp_decoder_start() -> keras.initializers.Initializer:
    """segmentation_models_pytorch's decoder start (`initialize_decoder`), TeD-SPAD's and the
    penalty code's UNet++ decoder convolutions: `kaiming_uniform_(mode="fan_in",
    nonlinearity="relu")`, uniform in +-sqrt(6 / fan_in)."""
    return keras.initializers.VarianceScaling(2.0, mode="fan_in", distribution="uniform")


def slim_variance_scaling() -> keras.initializers.Initializer:
    """TF-slim's ResNets' start (`resnet_arg_scope`: `variance_scaling_initializer()`), VITA's
    budget ResNets' convolutions and logits: He normal on fan_in, truncated at two standard
    deviations. Slim draws std sqrt(1.3 * 2 / fan_in) before truncating (a variance of 2.01 /
    fan_in after it); Keras rescales to a variance of exactly 2 / fan_in."""
    return keras.initializers.VarianceScaling(2.0, mode="fan_in", distribution="truncated_normal")


def slim_mobilenet_start() -> keras.initializers.Initializer:
    """TF-slim's MobileNet-V1 start (`mobilenet_v1_arg_scope`), VITA's budget MobileNets'
    convolutions (depthwise ones too) and logits: a normal of std 0.09 truncated at two
    standard deviations, whatever the layer's width."""
    return keras.initializers.TruncatedNormal(stddev=0.09)


def redraw_kernels(
    model: keras.Model,
    new_initializer: Callable[[], keras.initializers.Initializer],
    names: Sequence[str] | None = None,
) -> None:
    """Draw every convolution kernel of `model` (2-D, 3-D and depthwise), or of its layers
    `names` (others among them are passed over), again, each from its own `new_initializer()`,
    and set their biases to 0: a start of another framework or layer for a model built with
    another one (`keras.applications`, a layer an author's code rebuilds). Dense layers are
    left alone. An initializer is made per layer because a Keras initializer fixes its seed
    when it is made, so one shared by every layer would give layers of one shape the same
    kernel."""
    chosen = model.layers if names is None else [model.get_layer(name) for name in names]
    for layer in chosen:
        if not isinstance(layer, (layers.Conv2D, layers.Conv3D, layers.DepthwiseConv2D)):
            continue
        initializer = new_initializer()
        layer.kernel.assign(initializer(layer.kernel.shape, dtype=layer.kernel.dtype))
        if layer.use_bias:
            layer.bias.assign(ops.zeros(layer.bias.shape, dtype=layer.bias.dtype))


def torch_linear(x: keras.KerasTensor, units: int, name: str, **kwargs) -> keras.KerasTensor:
    """A Dense layer on `x` started as PyTorch's `nn.Linear`, the heads SPAct, TeD-SPAD and the
    penalty code put on their ResNets: weights and bias uniform in +-1 / sqrt(fan_in)
    (`kaiming_uniform_(a=sqrt(5))`). Keras' default is Glorot-uniform weights and a zero bias.
    `kwargs` go to the Dense layer (activation, dtype)."""
    bound = 1.0 / math.sqrt(x.shape[-1])
    return layers.Dense(
        units,
        kernel_initializer=torch_default_weights(),
        bias_initializer=keras.initializers.RandomUniform(-bound, bound),
        name=name,
        **kwargs,
    )(x)


def max_pooling_2d(*args, **kwargs) -> layers.MaxPooling2D:
    """`layers.MaxPooling2D(*args, **kwargs)` computing in `backend.max_pool_dtype()`: float32 on
    TensorFlow, whose XLA bridge has a max pool's second derivative (MaxPoolGradGrad: meta's
    Hessian-vector pass, which `--jit_compile=auto` compiles on a TensorFlow GPU) in float32
    only; the policy's dtype on JAX, where a float32 pool among bf16 layers would only add
    memory traffic. A max and the routing of its gradient are exact in any float, so the
    outputs and gradients are the same; the layer after a float32 pool casts them back."""
    return layers.MaxPooling2D(*args, dtype=backend.max_pool_dtype(), **kwargs)


def max_pooling_3d(*args, **kwargs) -> layers.MaxPooling3D:
    """`layers.MaxPooling3D(*args, **kwargs)` computing in `backend.max_pool_dtype()`, as
    `max_pooling_2d` (TensorFlow's XLA bridge has MaxPool3DGradGrad in float32 only too)."""
    return layers.MaxPooling3D(*args, dtype=backend.max_pool_dtype(), **kwargs)


def torch_padded_conv(
    x: keras.KerasTensor,
    filters: int,
    kernel: Sequence[int],
    strides: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    name: str = "",
) -> keras.KerasTensor:
    """A 2-D or 3-D convolution `{name}_conv` (by the length of `kernel`), without bias, with
    PyTorch's symmetric zero `padding` on each axis, so that every output position matches a
    PyTorch convolution's, started as torchvision's ResNets start theirs (`kaiming_fan_out`).

    Undilated at stride 1, a padding of (kernel - 1) / 2 on every axis is Keras' "same"
    padding, which the convolution applies itself. Any other padding is a `{name}_pad` layer
    before a "valid" convolution: TensorFlow's "same" puts the odd zero of a strided
    convolution only at the end, and its dilated "same" convolutions took more memory on a CPU
    (docs/memory.md). XLA folds a pad layer into its convolution; TensorFlow's graph mode keeps
    a padded copy of the activations for the backward pass, which "same" saves (the penalty
    step at batch 4 / 8 on a CPU: 6.2 GiB at its peak, against 6.7-6.9 with pad layers).
    """
    rank = len(kernel)

    def per_axis(value):
        return (value,) * rank if isinstance(value, int) else tuple(value)

    strides, padding, dilation = per_axis(strides), per_axis(padding), per_axis(dilation)
    conv = layers.Conv3D if rank == 3 else layers.Conv2D
    same = all(s == 1 and d == 1 for s, d in zip(strides, dilation)) and all(
        2 * p == k - 1 for p, k in zip(padding, kernel)
    )
    if not same and any(padding):
        pad = layers.ZeroPadding3D if rank == 3 else layers.ZeroPadding2D
        x = pad(padding, name=f"{name}_pad")(x)
    return conv(
        filters,
        tuple(kernel),
        strides=strides,
        padding="same" if same else "valid",
        dilation_rate=dilation,
        use_bias=False,
        kernel_initializer=kaiming_fan_out(),
        name=f"{name}_conv",
    )(x)


@keras.saving.register_keras_serializable(package="keras_privacy")
class SpatialSubsample(keras.layers.Layer):
    """Keep every `factor`-th row and column of (B, T, H, W, C) or (B, H, W, C) inputs.

    A stride-1 convolution followed by this equals the strided convolution, which lets a
    convolution be strided in space and dilated in time (Keras' Conv3D refuses both at once).
    """

    def __init__(self, factor: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def call(self, inputs):
        if len(inputs.shape) == 5:
            return inputs[:, :, :: self.factor, :: self.factor, :]
        return inputs[:, :: self.factor, :: self.factor, :]

    def compute_output_shape(self, input_shape):
        shape = list(input_shape)
        for axis in (-3, -2):
            if shape[axis] is not None:
                shape[axis] = (shape[axis] + self.factor - 1) // self.factor
        return tuple(shape)

    def get_config(self) -> dict:
        return {**super().get_config(), "factor": self.factor}


class _UpSampling2D(keras.layers.Layer):
    """An up-sampling of (B, H, W, C) by an integer `size` on both axes: the output shape and
    config of the two below."""

    def __init__(self, size: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    def compute_output_shape(self, input_shape):
        batch, height, width, channels = input_shape
        return (
            batch,
            None if height is None else height * self.size,
            None if width is None else width * self.size,
            channels,
        )

    def get_config(self) -> dict:
        return {**super().get_config(), "size": self.size}


@keras.saving.register_keras_serializable(package="keras_privacy")
class BilinearUpSampling2D(_UpSampling2D):
    """Bilinear up-sampling of (B, H, W, C) by `size` with aligned corners.

    This is PyTorch's `nn.Upsample(scale_factor=size, mode="bilinear", align_corners=True)`,
    the up-sampling of SPAct's UNet: output pixel i samples input position
    i * (n - 1) / (size * n - 1), so the corner pixels map onto each other. Keras'
    `UpSampling2D(interpolation="bilinear")` uses half-pixel centres instead, which shifts the
    image and would break weights imported from PyTorch.
    """

    def call(self, inputs):
        x = inputs
        for axis in (1, 2):
            n = ops.shape(x)[axis]
            out = n * self.size
            scale = ops.cast(n - 1, "float32") / ops.cast(ops.maximum(out - 1, 1), "float32")
            position = ops.arange(out, dtype="float32") * scale
            low = ops.cast(ops.floor(position), "int32")
            high = ops.minimum(low + 1, n - 1)
            weight = ops.cast(position - ops.cast(low, "float32"), x.dtype)
            weight = ops.reshape(weight, (-1, 1, 1) if axis == 1 else (-1, 1))
            low_rows, high_rows = ops.take(x, low, axis=axis), ops.take(x, high, axis=axis)
            x = low_rows + (high_rows - low_rows) * weight
        return x


@keras.saving.register_keras_serializable(package="keras_privacy")
class NearestUpSampling2D(_UpSampling2D):
    """Nearest up-sampling of (B, H, W, C) by `size`, as Keras' `UpSampling2D` (each pixel
    repeated `size` x `size` times), written as stacks and reshapes to a static channel count.

    Keras repeats the tensor (`ops.repeat`), and TFLite's converter loses the channel count
    of a repeat of a dynamically shaped tensor: the convolution after it then has no known
    input width and stays a TensorFlow (Flex) op, which TFLite's built-in interpreter refuses.
    """

    def call(self, inputs):
        height, width, channels = ops.shape(inputs)[1], ops.shape(inputs)[2], inputs.shape[-1]
        x = ops.stack([inputs] * self.size, axis=3)  # (B, H, W, size, C)
        x = ops.reshape(x, (-1, height, width * self.size, channels))
        x = ops.stack([x] * self.size, axis=2)  # (B, H, size, W * size, C)
        return ops.reshape(x, (-1, height * self.size, width * self.size, channels))


@keras.saving.register_keras_serializable(package="keras_privacy")
class L2Normalize(keras.layers.Layer):
    """Scale each row to unit L2 norm along the last axis (the SimCLR projection output).

    As PyTorch's `F.normalize(eps=1e-12)`, with the norm clamped below by `epsilon` through the
    squared norm, so the gradient of an all-zero row is finite rather than NaN.
    """

    def __init__(self, epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def call(self, inputs):
        squared = ops.sum(ops.square(inputs), axis=-1, keepdims=True)
        return inputs * ops.rsqrt(ops.maximum(squared, self.epsilon**2))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "epsilon": self.epsilon}


@keras.saving.register_keras_serializable(package="keras_privacy")
class TemporalDifference(keras.layers.Layer):
    """Clips (B, T, H, W, C) -> (B, T, H, W, 2C): each frame with its difference to the next
    (zero for the last frame), as TSN's RGB-difference input. It hands a small network the
    motion signal directly, so it learns motion classes in a few epochs instead of sitting at
    chance while it discovers frame differencing itself."""

    def call(self, inputs):
        difference = inputs[:, 1:] - inputs[:, :-1]
        difference = ops.concatenate([difference, ops.zeros_like(inputs[:, :1])], axis=1)
        return ops.concatenate([inputs, difference], axis=-1)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], 2 * input_shape[-1])


@keras.saving.register_keras_serializable(package="keras_privacy")
class InputNormalization(keras.layers.Layer):
    """(x - mean) / std per channel: the input normalisation a pretrained model's weights
    expect (torchvision's Kinetics-400 or ImageNet statistics), inside the model, so every
    pipeline keeps feeding frames in [0, 1] and a saved or exported model carries it. `mean`
    and `std` are saved in the layer's config."""

    def __init__(self, mean: tuple = (0.0, 0.0, 0.0), std: tuple = (1.0, 1.0, 1.0), **kwargs):
        super().__init__(**kwargs)
        if len(mean) != len(std) or min(std) <= 0:
            raise ValueError(f"InputNormalization: mean {mean} and std {std} do not fit")
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)

    def call(self, inputs):
        mean = ops.convert_to_tensor(self.mean, dtype=inputs.dtype)
        std = ops.convert_to_tensor(self.std, dtype=inputs.dtype)
        return (inputs - mean) / std

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self) -> dict:
        return {**super().get_config(), "mean": list(self.mean), "std": list(self.std)}
