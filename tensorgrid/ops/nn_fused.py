"""Fused op definitions that the compiler writes into plans (``compiler.remap``); graphs built
with the python API never hold them.

``_FusedMaxPoolGrad(orig_input, orig_output, grad)`` with ``fused_ops = ["ReluGrad"]`` is
``ReluGrad(MaxPoolGrad(orig_input, orig_output, grad), orig_input)``: the gradient through a max
pool of a relu's output and then through that relu (the relu's output is the pool's input, so one
input serves both). Its attrs are ``MaxPoolGrad``'s plus ``fused_ops``.

``_FusedConv2D(input, filter, bias)`` is ``Conv2D`` followed by adding ``bias`` (one value per
output channel) and, when ``fused_ops`` is ``["BiasAdd", "Relu"]``, a relu: TensorFlow's remapper
op of that name, with its three inputs spelled out instead of a list. Its attrs are ``Conv2D``'s
plus ``fused_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec
from tensorgrid.ops.nn import (
    _CONV_DEFAULTS,
    _POOL_DEFAULTS,
    _conv_out,
    _float_conv,
    _max_pool_grad,
    _merge,
    _rank4,
    text_attr,
)

# the epilogues a fused convolution may carry, in order
FUSED_CONV_OPS = (("BiasAdd",), ("BiasAdd", "Relu"))


def fused_ops_of(value: Any) -> tuple[str, ...]:
    """The ``fused_ops`` attr as a tuple of op names (the attr may hold bytes)."""
    return tuple(text_attr(v) for v in (value or ()))


@op("_FusedConv2D", defaults={**_CONV_DEFAULTS, "fused_ops": ["BiasAdd"]})
def _fused_conv2d(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    dt = _float_conv(ctx, 0, 1, 2)
    fused = fused_ops_of(ctx.attr("fused_ops"))
    if fused not in FUSED_CONV_OPS:
        ctx.fail(f"fused_ops must be one of {[list(f) for f in FUSED_CONV_OPS]}, got "
                 f"{list(fused)}")
    x, f = _rank4(ctx, 0, "input"), _rank4(ctx, 1, "filter")
    _merge(ctx, x[3], f[2], "input depth must equal the filter's in_channels")
    out = _conv_out(ctx, x, f)
    bias = ctx.shape(2)
    if bias.rank not in (None, 1):
        ctx.fail(f"bias must be 1-dimensional, got shape {bias}")
    n_bias = bias.dims[0] if bias.dims is not None else None
    if n_bias is not None and out[3] is not None and n_bias != out[3]:
        ctx.fail(f"bias has {n_bias} values; the convolution has {out[3]} output channels")
    return [spec(dt, out)]


op("_FusedMaxPoolGrad", defaults={**_POOL_DEFAULTS, "fused_ops": ["ReluGrad"]})(
    _max_pool_grad(0))

declare_attrs({
    "_FusedConv2D": ("T data_format dilations explicit_paddings padding strides "
                     "use_cudnn_on_gpu fused_ops:list(string)"),
    "_FusedMaxPoolGrad": ("T data_format explicit_paddings ksize padding strides "
                          "fused_ops:list(string)"),
})
# written into plans after gradients are built: no graph a gradient is taken of holds one
not_differentiable("_FusedConv2D", "_FusedMaxPoolGrad")
