"""Fused batch normalization: ``FusedBatchNorm``/``V2``/``V3`` and their gradients
``FusedBatchNormGrad``/``V2``/``V3`` (TensorFlow's op names, inputs, outputs and attrs).

``x`` is 4-D (``NHWC``/``NCHW``) or 5-D (``NDHWC``/``NCDHW``); statistics are per channel. In
training the outputs ``batch_mean``/``batch_variance`` are the running statistics to store (the
variance Bessel-corrected, blended with the inputs when ``exponential_avg_factor`` < 1) and the
reserve spaces hold the batch mean and (biased) variance that the gradient needs, as TensorFlow's
CPU kernel does. The python API is ``tensorgrid.framework.nn_norm_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

FORMATS = {"NHWC": 4, "NCHW": 4, "NDHWC": 5, "NCDHW": 5}
NORM_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)


def channel_axis(data_format: str) -> int:
    """The axis of the channels: 1 for ``NC...`` formats, the last for ``N...C``."""
    return 1 if data_format.startswith("NC") else -1


def _format(ctx: InferContext) -> str:
    fmt = ctx.attr("data_format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
    if fmt not in FORMATS:
        ctx.fail(f"data_format must be one of {sorted(FORMATS)}, got {fmt!r}")
    return fmt


def _channels(ctx: InferContext, x: int, fmt: str) -> int | None:
    """x's channel count (None when unknown); checks x's rank against the format."""
    dims = ctx.shape(x).dims
    if ctx.dtype(x) not in NORM_FLOATS:
        ctx.fail(f"x must be a floating type, got {ctx.dtype(x).name}")
    if dims is None:
        return None
    if len(dims) != FORMATS[fmt]:
        ctx.fail(f"x must be {FORMATS[fmt]}-dimensional for data_format {fmt}, got shape "
                 f"{ctx.shape(x)}")
    return dims[channel_axis(fmt)]


def _vector(ctx: InferContext, i: int, what: str, channels: int | None, may_be_empty: bool) -> None:
    s = ctx.shape(i)
    if s.rank not in (None, 1):
        ctx.fail(f"{what} must be 1-dimensional, got shape {s}")
    n = s.dims[0] if s.dims else None
    if n is not None and channels is not None and n != channels and not (may_be_empty and n == 0):
        ctx.fail(f"{what} must have {channels} elements (the channels of x), got {n}")


def _fused(version: int) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(5)
        fmt = _format(ctx)
        c = _channels(ctx, 0, fmt)
        u = ctx.dtype(1)
        if version == 1 and u is not ctx.dtype(0):
            ctx.fail(f"scale has dtype {u.name}; FusedBatchNorm needs x's dtype")
        ctx.same_dtype(1, 2, 3, 4)
        training = bool(ctx.attr("is_training"))
        for i, what in ((1, "scale"), (2, "offset"), (3, "mean"), (4, "variance")):
            _vector(ctx, i, what, c, may_be_empty=training and i >= 3)
        vec = spec(u, [c])
        out = [spec(ctx.dtype(0), ctx.shape(0)), vec, vec, vec, vec]
        return [*out, spec(u, None)] if version == 3 else out

    return infer


def _fused_grad(version: int) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(6 if version == 3 else 5)
        fmt = _format(ctx)
        c = _channels(ctx, 1, fmt)
        ctx.same_dtype(0, 1)
        if not ctx.shape(0).is_compatible_with(ctx.shape(1)):
            ctx.fail(f"y_backprop has shape {ctx.shape(0)}, x has {ctx.shape(1)}; they must match")
        for i, what in ((2, "scale"), (3, "reserve_space_1"), (4, "reserve_space_2")):
            _vector(ctx, i, what, c, may_be_empty=False)
        u = ctx.dtype(2)
        vec = spec(u, [c])
        return [spec(ctx.dtype(1), ctx.shape(1)), vec, vec, spec(u, None), spec(u, None)]

    return infer


_DEFAULTS = {"epsilon": 0.0001, "exponential_avg_factor": 1.0, "data_format": "NHWC",
             "is_training": True}
op("FusedBatchNorm", defaults=_DEFAULTS)(_fused(1))
op("FusedBatchNormV2", defaults={**_DEFAULTS, "U": dtypes.float32})(_fused(2))
op("FusedBatchNormV3", defaults={**_DEFAULTS, "U": dtypes.float32})(_fused(3))
_GRAD_DEFAULTS = {"epsilon": 0.0001, "data_format": "NHWC", "is_training": True}
op("FusedBatchNormGrad", defaults=_GRAD_DEFAULTS)(_fused_grad(1))
op("FusedBatchNormGradV2", defaults={**_GRAD_DEFAULTS, "U": dtypes.float32})(_fused_grad(2))
op("FusedBatchNormGradV3", defaults={**_GRAD_DEFAULTS, "U": dtypes.float32})(_fused_grad(3))


declare_attrs({
    "FusedBatchNorm": "T data_format epsilon exponential_avg_factor is_training",
    "FusedBatchNormGrad": "T data_format epsilon is_training",
    "FusedBatchNormGradV2": "T U data_format epsilon is_training",
    "FusedBatchNormGradV3": "T U data_format epsilon is_training",
    "FusedBatchNormV2": "T U data_format epsilon exponential_avg_factor is_training",
    "FusedBatchNormV3": "T U data_format epsilon exponential_avg_factor is_training",
})
