"""Neural-network op definitions: activations, softmax and cross-entropy, bias, convolution and
pooling (TensorFlow's op names, inputs and attrs). Their TF1 python API (``tf.nn.*``) is
``tensorgrid.framework.nn_ops`` and ``nn_impl``, exported as ``tensorgrid.nn``.

The window geometry of convolutions and pools (``Window``) lives here once: inference uses it for
output shapes and the kernels use it for padding and strides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import const_ints, is_floating, is_real, spec, unary


def text_attr(value: Any) -> str:
    """A string attr as text (GraphDefs carry bytes, the python API passes str)."""
    return value.decode() if isinstance(value, bytes) else str(value)


# ------------------------------------------------------------------------------ window geometry


@dataclass(frozen=True)
class Window:
    """Strides, dilations and padding of a 2-D window sliding over the H and W dims of NHWC data.

    ``padding`` is SAME, VALID or EXPLICIT (then ``explicit`` holds top, bottom, left, right).
    """

    strides: tuple[int, int]
    dilations: tuple[int, int] = (1, 1)
    padding: str = "VALID"
    explicit: tuple[int, int, int, int] = (0, 0, 0, 0)

    def dim(self, size: int, k: int, axis: int) -> tuple[int, int, int]:
        """(output size, padding before, padding after) along H (axis 0) or W (axis 1).

        Raises:
            ValueError: the window does not fit (the output size would be negative).
        """
        stride, eff = self.strides[axis], (k - 1) * self.dilations[axis] + 1
        if self.padding == "SAME":
            out = -(-size // stride)
            need = max((out - 1) * stride + eff - size, 0)
            return out, need // 2, need - need // 2
        before, after = (self.explicit[2 * axis], self.explicit[2 * axis + 1]) \
            if self.padding == "EXPLICIT" else (0, 0)
        out = (size + before + after - eff + stride) // stride
        if out < 0:
            raise ValueError(f"Computed output size would be negative: {out} [input_size: {size}, "
                             f"effective_filter_size: {eff}, stride: {stride}]")
        return out, before, after

    def output(self, h: int, w: int, kh: int, kw: int) -> tuple[int, int, tuple[int, ...]]:
        """(out height, out width, (pad top, pad bottom, pad left, pad right))."""
        oh, pt, pb = self.dim(h, kh, 0)
        ow, pl, pr = self.dim(w, kw, 1)
        return oh, ow, (pt, pb, pl, pr)

    def out_dim(self, size: int | None, k: int | None, axis: int) -> int | None:
        """The output size when both sizes are known (for inference), else None."""
        return None if size is None or k is None else self.dim(size, k, axis)[0]


def _four(value: Any, what: str) -> list[int]:
    vals = [int(v) for v in value]
    if len(vals) != 4:
        raise ValueError(f"{what} must have 4 elements (NHWC), got {vals}")
    if vals[0] != 1 or vals[3] != 1:
        raise ValueError(f"{what} in the batch and depth dimensions must be 1, got {vals}")
    if min(vals) < 1:
        raise ValueError(f"{what} must be positive, got {vals}")
    return vals


def parse_window(attr: Callable[..., Any], dilated: bool) -> Window:
    """The Window of a Conv2D-like (``dilated``) or pool node, read through its ``attr`` getter.

    Raises:
        ValueError: a malformed strides/dilations/padding attr, or a data_format other than NHWC.
    """
    fmt = text_attr(attr("data_format", "NHWC"))
    if fmt != "NHWC":
        raise ValueError(f"only data_format NHWC is supported, got {fmt}")
    strides = _four(attr("strides"), "strides")
    dil = _four(attr("dilations", [1, 1, 1, 1]), "dilations") if dilated else [1, 1, 1, 1]
    if dil != [1, 1, 1, 1] and strides != [1, 1, 1, 1]:
        raise ValueError("strides > 1 together with dilations > 1 is not supported")
    padding = text_attr(attr("padding"))
    explicit = (0, 0, 0, 0)
    if padding == "EXPLICIT":
        pads = [int(p) for p in attr("explicit_paddings", [])]
        if len(pads) != 8 or any(p < 0 for p in pads) or pads[:2] != [0, 0] or pads[6:] != [0, 0]:
            raise ValueError("explicit_paddings must hold 8 non-negative ints, zero for the batch "
                             f"and depth dimensions, got {pads}")
        explicit = (pads[2], pads[3], pads[4], pads[5])
    elif padding not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME, VALID or EXPLICIT, got {padding!r}")
    return Window((strides[1], strides[2]), (dil[1], dil[2]), padding, explicit)


def _window(ctx: InferContext, dilated: bool) -> Window:
    try:
        return parse_window(ctx.attr, dilated)
    except ValueError as exc:
        return ctx.fail(str(exc))


def _rank4(ctx: InferContext, i: int, what: str) -> list[int | None]:
    shape = ctx.shape(i)
    if shape.rank not in (None, 4):
        ctx.fail(f"{what} must be 4-dimensional, got shape {shape}")
    return list(shape.dims) if shape.dims is not None else [None] * 4


def _merge(ctx: InferContext, a: int | None, b: int | None, what: str) -> int | None:
    if a is not None and b is not None and a != b:
        ctx.fail(f"{what}: {a} vs {b}")
    return a if a is not None else b


# ------------------------------------------------------------------------------ activations

for _name in ("Relu", "Relu6"):
    op(_name)(unary(is_real, "a real number type"))
op("LeakyRelu", defaults={"alpha": 0.2})(unary(is_floating, "a floating type"))
for _name in ("Elu", "Softplus", "Softsign"):
    op(_name)(unary(is_floating, "a floating type"))


def _grad_pair(ctx: InferContext) -> Sequence[TensorSpec]:
    """(gradients, features) -> backprops: two floats of one shape."""
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    if not dt.is_floating:
        ctx.fail(f"does not support dtype {dt.name}; needs a floating type")
    if not ctx.shape(0).is_compatible_with(ctx.shape(1)):
        ctx.fail(f"gradients and features must have the same shape, got {ctx.shape(0)} and "
                 f"{ctx.shape(1)}")
    return [spec(dt, ctx.shape(0).merge_with(ctx.shape(1)))]


for _name in ("ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad", "SoftsignGrad"):
    op(_name)(_grad_pair)
op("LeakyReluGrad", defaults={"alpha": 0.2})(_grad_pair)


def _last_axis(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if not ctx.dtype(0).is_floating:
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a floating type")
    if ctx.shape(0).rank == 0:
        ctx.fail("logits must have at least one dimension, got a scalar")
    return [ctx.input(0)]


op("Softmax")(_last_axis)
op("LogSoftmax")(_last_axis)


@op("L2Loss")
def _l2_loss(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if not ctx.dtype(0).is_floating:
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a floating type")
    return [spec(ctx.dtype(0), ())]


# ------------------------------------------------------------------------------ bias


def _channel_axis(ctx: InferContext, rank: int) -> int:
    fmt = text_attr(ctx.attr("data_format"))
    if fmt not in ("NHWC", "NCHW"):
        ctx.fail(f"data_format must be NHWC or NCHW, got {fmt!r}")
    if rank < 2:
        ctx.fail(f"value must be at least 2-dimensional, got rank {rank}")
    return 1 if fmt == "NCHW" else rank - 1


@op("BiasAdd", defaults={"data_format": "NHWC"})
def _bias_add(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    if not dt.is_numeric:
        ctx.fail(f"does not support dtype {dt.name}")
    value, bias = ctx.shape(0), ctx.shape(1)
    if bias.rank not in (None, 1):
        ctx.fail(f"bias must be 1-dimensional, got shape {bias}")
    if value.dims is None:
        return [spec(dt, value)]
    axis = _channel_axis(ctx, len(value.dims))
    dims = list(value.dims)
    c = bias.dims[0] if bias.dims is not None else None
    dims[axis] = _merge(ctx, dims[axis], c, "bias size must equal the channel dimension of value")
    return [spec(dt, dims)]


@op("BiasAddGrad", defaults={"data_format": "NHWC"})
def _bias_add_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    shape = ctx.shape(0)
    if shape.dims is None:
        return [spec(ctx.dtype(0), [None])]
    return [spec(ctx.dtype(0), [shape.dims[_channel_axis(ctx, len(shape.dims))]])]


# ------------------------------------------------------------------------------ cross-entropy


def _logits_2d(ctx: InferContext) -> tuple[int | None, int | None]:
    if not ctx.dtype(0).is_floating:
        ctx.fail(f"logits must be a floating type, got {ctx.dtype(0).name}")
    shape = ctx.shape(0)
    if shape.rank not in (None, 2):
        ctx.fail(f"logits must be 2-dimensional [batch_size, num_classes], got shape {shape}")
    return (shape.dims[0], shape.dims[1]) if shape.dims is not None else (None, None)


@op("SoftmaxCrossEntropyWithLogits")
def _xent(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    batch, classes = _logits_2d(ctx)
    labels = ctx.shape(1)
    if labels.rank not in (None, 2):
        ctx.fail(f"labels must be 2-dimensional [batch_size, num_classes], got shape {labels}")
    if labels.dims is not None:
        batch = _merge(ctx, batch, labels.dims[0], "logits and labels must have the same batch size")
        classes = _merge(ctx, classes, labels.dims[1],
                         "logits and labels must have the same number of classes")
    return [spec(dt, [batch]), spec(dt, [batch, classes])]


@op("SparseSoftmaxCrossEntropyWithLogits", defaults={"Tlabels": dtypes.int64})
def _sparse_xent(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = ctx.dtype(0)
    batch, classes = _logits_2d(ctx)
    if ctx.dtype(1) not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"labels must be int32 or int64, got {ctx.dtype(1).name}")
    labels = ctx.shape(1)
    if labels.rank not in (None, 1):
        ctx.fail(f"labels must be 1-dimensional [batch_size], got shape {labels}")
    if labels.dims is not None:
        batch = _merge(ctx, batch, labels.dims[0], "logits and labels must have the same batch size")
    return [spec(dt, [batch]), spec(dt, [batch, classes])]


@op("InTopKV2")
def _in_top_k(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    if ctx.dtype(0) is not dtypes.float32:
        ctx.fail(f"predictions must be float32, got {ctx.dtype(0).name}")
    tdt = ctx.same_dtype(1, 2)
    if tdt not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"targets and k must be int32 or int64, got {tdt.name}")
    batch, _ = _logits_2d(ctx)
    if ctx.shape(1).rank not in (None, 1):
        ctx.fail(f"targets must be 1-dimensional [batch_size], got shape {ctx.shape(1)}")
    if ctx.shape(2).rank not in (None, 0):
        ctx.fail(f"k must be a scalar, got shape {ctx.shape(2)}")
    targets = ctx.shape(1).dims
    if targets is not None:
        batch = _merge(ctx, batch, targets[0],
                       "predictions and targets must have the same batch size")
    return [spec(dtypes.bool_, [batch])]


# ------------------------------------------------------------------------------ conv and pools

_CONV_DEFAULTS = {"data_format": "NHWC", "dilations": [1, 1, 1, 1], "use_cudnn_on_gpu": True,
                  "explicit_paddings": []}


def _conv_out(ctx: InferContext, x: list[int | None], f: list[int | None]) -> list[int | None]:
    win = _window(ctx, dilated=True)
    try:
        return [x[0], win.out_dim(x[1], f[0], 0), win.out_dim(x[2], f[1], 1), f[3]]
    except ValueError as exc:
        return ctx.fail(str(exc))


def _float_conv(ctx: InferContext, *idx: int) -> dtypes.DType:
    dt = ctx.same_dtype(*idx)
    if not dt.is_floating:
        ctx.fail(f"does not support dtype {dt.name}; needs a floating type")
    return dt


@op("Conv2D", defaults=_CONV_DEFAULTS)
def _conv2d(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = _float_conv(ctx, 0, 1)
    x, f = _rank4(ctx, 0, "input"), _rank4(ctx, 1, "filter")
    _merge(ctx, x[3], f[2], "input depth must equal the filter's in_channels")
    return [spec(dt, _conv_out(ctx, x, f))]


def _sizes(ctx: InferContext, i: int, what: str) -> list[int | None]:
    if not ctx.dtype(i).is_integer or ctx.shape(i).rank not in (None, 1):
        ctx.fail(f"{what} must be a 1-D int32 or int64 tensor, got {ctx.dtype(i).name} "
                 f"{ctx.shape(i)}")
    vals = const_ints(ctx, i)
    if vals is None:
        return [None] * 4
    if len(vals) != 4 or min(vals) < 0:
        ctx.fail(f"{what} must hold 4 non-negative sizes, got {vals}")
    return list(vals)


@op("Conv2DBackpropInput", defaults=_CONV_DEFAULTS)
def _conv2d_backprop_input(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    dt = _float_conv(ctx, 1, 2)
    x = _sizes(ctx, 0, "input_sizes")
    f, dy = _rank4(ctx, 1, "filter"), _rank4(ctx, 2, "out_backprop")
    x[3] = _merge(ctx, x[3], f[2], "input depth must equal the filter's in_channels")
    _check_backprop(ctx, _conv_out(ctx, x, f), dy)
    return [spec(dt, x)]


@op("Conv2DBackpropFilter", defaults=_CONV_DEFAULTS)
def _conv2d_backprop_filter(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    dt = _float_conv(ctx, 0, 2)
    x, dy = _rank4(ctx, 0, "input"), _rank4(ctx, 2, "out_backprop")
    f = _sizes(ctx, 1, "filter_sizes")
    f[2] = _merge(ctx, f[2], x[3], "input depth must equal the filter's in_channels")
    _check_backprop(ctx, _conv_out(ctx, x, f), dy)
    return [spec(dt, f)]


def _check_backprop(ctx: InferContext, want: list[int | None], got: list[int | None]) -> None:
    for a, b in zip(want, got):
        if a is not None and b is not None and a != b:
            ctx.fail(f"out_backprop has shape {got} but the forward output would be {want}")


_POOL_DEFAULTS = {"data_format": "NHWC"}


def _pool_out(ctx: InferContext, x: list[int | None]) -> list[int | None]:
    win = _window(ctx, dilated=False)
    try:
        k = _four(ctx.attr("ksize"), "ksize")
        return [x[0], win.out_dim(x[1], k[1], 0), win.out_dim(x[2], k[2], 1), x[3]]
    except ValueError as exc:
        return ctx.fail(str(exc))


def _pool_padding(ctx: InferContext) -> None:
    if text_attr(ctx.attr("padding")) not in ("SAME", "VALID"):
        ctx.fail(f"padding must be SAME or VALID, got {text_attr(ctx.attr('padding'))!r}")


def _pool(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _pool_padding(ctx)
    dt = ctx.dtype(0)
    if not dt.is_floating and not (ctx.node.op == "MaxPool" and dt.is_integer):
        ctx.fail(f"does not support dtype {dt.name}")
    return [spec(dt, _pool_out(ctx, _rank4(ctx, 0, "input")))]


op("MaxPool", defaults=_POOL_DEFAULTS)(_pool)
op("AvgPool", defaults=_POOL_DEFAULTS)(_pool)


def _max_pool_grad(out_index: int) -> Callable[[InferContext], Sequence[TensorSpec]]:
    """(orig_input, orig_output, grad) -> the spec of input ``out_index``: MaxPoolGrad's grad has
    the output's shape and gives the input's; MaxPoolGradGrad's grad has the input's shape and
    gives the output's."""

    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(3)
        _pool_padding(ctx)
        dt = ctx.same_dtype()
        x, y, g = (_rank4(ctx, i, w) for i, w in enumerate(("orig_input", "orig_output", "grad")))
        if out_index == 1:
            _check_backprop(ctx, x, g)
        y = [_merge(ctx, a, b, "orig_output must have the pool's output shape")
             for a, b in zip(_pool_out(ctx, x), y)]
        if out_index == 0:
            _check_backprop(ctx, y, g)
            return [spec(dt, x)]
        return [spec(dt, y)]

    return infer


op("MaxPoolGrad", defaults=_POOL_DEFAULTS)(_max_pool_grad(0))
op("MaxPoolGradGrad", defaults=_POOL_DEFAULTS)(_max_pool_grad(1))


@op("AvgPoolGrad", defaults=_POOL_DEFAULTS)
def _avg_pool_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _pool_padding(ctx)
    x = _sizes(ctx, 0, "orig_input_shape")
    g = _rank4(ctx, 1, "grad")
    _check_backprop(ctx, _pool_out(ctx, x), g)
    return [spec(ctx.dtype(1), x)]


declare_attrs({
    "AvgPool": "T data_format ksize padding strides",
    "AvgPoolGrad": "T data_format ksize padding strides",
    "BiasAdd": "T data_format",
    "BiasAddGrad": "T data_format",
    "Conv2D": "T data_format dilations explicit_paddings padding strides use_cudnn_on_gpu",
    "Conv2DBackpropFilter": ("T data_format dilations explicit_paddings padding strides "
        "use_cudnn_on_gpu"),
    "Conv2DBackpropInput": ("T data_format dilations explicit_paddings padding strides "
        "use_cudnn_on_gpu"),
    "Elu": "T",
    "EluGrad": "T",
    "InTopKV2": "T",
    "L2Loss": "T",
    "LeakyRelu": "T alpha",
    "LeakyReluGrad": "T alpha",
    "LogSoftmax": "T",
    "MaxPool": "T data_format explicit_paddings ksize padding strides",
    "MaxPoolGrad": "T data_format explicit_paddings ksize padding strides",
    "MaxPoolGradGrad": "T data_format ksize padding strides",
    "Relu": "T",
    "Relu6": "T",
    "Relu6Grad": "T",
    "ReluGrad": "T",
    "Softmax": "T",
    "SoftmaxCrossEntropyWithLogits": "T",
    "Softplus": "T",
    "SoftplusGrad": "T",
    "Softsign": "T",
    "SoftsignGrad": "T",
    "SparseSoftmaxCrossEntropyWithLogits": "T Tlabels",
})
