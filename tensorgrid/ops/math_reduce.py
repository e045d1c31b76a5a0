"""Reductions, arg-reductions and cumulative ops (TensorFlow's ``Sum``/``Mean``/``Max``/``Min``/
``Prod``/``Any``/``All``, ``ArgMax``/``ArgMin``, ``Cumsum``/``Cumprod``): definitions and inference.

Every reduction takes the axes as input 1 (any integer vector or scalar; negative axes count from
the end; an empty list reduces nothing) and the attr ``keep_dims``. The python API is
``tensorgrid.framework.math_reduce_ops``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import const_ints, spec

_REDUCTION_DEFAULTS = {"keep_dims": False, "Tidx": dtypes.int32}


def _reduction(allowed: Callable[[dtypes.DType], bool],
               what: str) -> Callable[[InferContext], Sequence[TensorSpec]]:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(2)
        dt = ctx.dtype(0)
        if not allowed(dt):
            ctx.fail(f"does not support dtype {dt.name}; needs {what}")
        if not ctx.dtype(1).is_integer:
            ctx.fail(f"reduction indices must be int32 or int64, got {ctx.dtype(1).name}")
        if ctx.shape(1).rank not in (None, 0, 1):
            ctx.fail(f"reduction indices must be a scalar or a vector, got shape {ctx.shape(1)}")
        shape = ctx.shape(0)
        keep = bool(ctx.attr("keep_dims"))
        axes = const_ints(ctx, 1)
        if shape.dims is None:
            return [spec(dt, TensorShape(None))]
        rank = len(shape.dims)
        if axes is None:
            # Unknown axes: only a kept rank (or a full reduction of a rank-0 input) is known.
            return [spec(dt, [None] * rank if keep else (() if rank == 0 else None))]
        norm = set()
        for a in axes:
            if not -rank <= a < rank:
                ctx.fail(f"Invalid reduction dimension {a} for input with {rank} dimensions")
            norm.add(a % rank)
        dims = [1 if i in norm else d for i, d in enumerate(shape.dims)] if keep else \
            [d for i, d in enumerate(shape.dims) if i not in norm]
        return [spec(dt, dims)]

    return infer


def _numeric(dt: dtypes.DType) -> bool:
    return dt.is_numeric


def _real(dt: dtypes.DType) -> bool:
    return dt.is_floating or dt.is_integer


def _boolean(dt: dtypes.DType) -> bool:
    return dt.is_bool


for _name in ("Sum", "Mean", "Prod"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_numeric, "a numeric type"))
for _name in ("Max", "Min"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_real, "an integer or floating type"))
for _name in ("Any", "All"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_boolean, "bool"))


def _arg_reduction(ctx: InferContext) -> Sequence[TensorSpec]:
    """ArgMax/ArgMin: input 1 is the scalar dimension; the output drops it."""
    ctx.expect_inputs(2)
    if not _real(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs an integer or floating type")
    if not ctx.dtype(1).is_integer or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"dimension must be an integer scalar, got {ctx.dtype(1).name} of shape "
                 f"{ctx.shape(1)}")
    out = dtypes.as_dtype(ctx.attr("output_type"))
    if out not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"output_type must be int32 or int64, got {out.name}")
    shape = ctx.shape(0)
    if shape.dims is None:
        return [spec(out, TensorShape(None))]
    rank = len(shape.dims)
    if rank == 0:
        ctx.fail("cannot reduce a scalar over a dimension")
    axis = const_ints(ctx, 1)
    if axis is None:
        return [spec(out, [None] * (rank - 1))]
    a = axis[0]
    if not -rank <= a < rank:
        ctx.fail(f"Expected dimension in the range [{-rank}, {rank}), but got {a}")
    a %= rank
    return [spec(out, [d for i, d in enumerate(shape.dims) if i != a])]


for _name in ("ArgMax", "ArgMin"):
    op(_name, defaults={"output_type": dtypes.int64, "Tidx": dtypes.int32})(_arg_reduction)


def _scan(ctx: InferContext) -> Sequence[TensorSpec]:
    """Cumsum/Cumprod: input 1 is the scalar axis; the output has the input's spec."""
    ctx.expect_inputs(2)
    if not ctx.dtype(0).is_numeric:
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a numeric type")
    if not ctx.dtype(1).is_integer or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"axis must be an integer scalar, got {ctx.dtype(1).name} of shape {ctx.shape(1)}")
    rank = ctx.shape(0).rank
    axis = const_ints(ctx, 1)
    if rank is not None and axis is not None and not -rank <= axis[0] < rank:
        ctx.fail(f"axis {axis[0]} is out of range for a tensor of rank {rank}")
    return [ctx.input(0)]


for _name in ("Cumsum", "Cumprod"):
    op(_name, defaults={"exclusive": False, "reverse": False, "Tidx": dtypes.int32})(_scan)


declare_attrs({
    "All": "T Tidx keep_dims",
    "Any": "T Tidx keep_dims",
    "ArgMax": "T Tidx output_type",
    "ArgMin": "T Tidx output_type",
    "Cumprod": "T Tidx exclusive reverse",
    "Cumsum": "T Tidx exclusive reverse",
    "Max": "T Tidx keep_dims",
    "Mean": "T Tidx keep_dims",
    "Min": "T Tidx keep_dims",
    "Prod": "T Tidx keep_dims",
    "Sum": "T Tidx keep_dims",
})
