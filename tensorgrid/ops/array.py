"""Array ops: shapes, reshaping, joining and splitting, indexing, filling (TensorFlow's op names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.ops._infer import normalize_axis, same_as_input, spec

__all__ = ["zeros_like", "ones_like", "stack", "reshape", "shape", "size", "rank"]

op("ZerosLike")(same_as_input)
op("OnesLike")(same_as_input)


@op("Pack", defaults={"axis": 0})
def _pack(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("Pack needs at least one input")
    dt = ctx.same_dtype()
    shape = ctx.shape(0)
    for i in range(1, ctx.num_inputs):
        if not shape.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"Shapes of all inputs must match: values[0].shape = {shape} != "
                     f"values[{i}].shape = {ctx.shape(i)}")
        shape = shape.merge_with(ctx.shape(i))
    if shape.dims is None:
        return [spec(dt, TensorShape(None))]
    dims = list(shape.dims)
    axis = normalize_axis(ctx, int(ctx.attr("axis")), len(dims) + 1)
    dims.insert(axis, ctx.num_inputs)
    return [spec(dt, dims)]


@op("Reshape", defaults={"Tshape": dtypes.int32})
def _reshape(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    if not ctx.dtype(1).is_integer:
        ctx.fail(f"shape must be int32 or int64, got {ctx.dtype(1).name}")
    target = ctx.const(1)
    src = ctx.shape(0)
    if target is None:
        n = ctx.shape(1).num_elements() if ctx.shape(1).rank == 1 else None
        return [spec(ctx.dtype(0), TensorShape(None if n is None else [None] * n))]
    dims = [int(d) for d in target.reshape(-1)]
    if sum(1 for d in dims if d == -1) > 1:
        ctx.fail(f"can only infer one dimension, got shape {dims}")
    if any(d < -1 for d in dims):
        ctx.fail(f"size {min(dims)} must be non-negative, not in shape {dims}")
    total = src.num_elements()
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if -1 in dims:
        if total is None:
            return [spec(ctx.dtype(0), [None if d == -1 else d for d in dims])]
        if known == 0 or total % known:
            ctx.fail(f"Input to reshape is a tensor with {total} values, but the requested shape "
                     f"{dims} is not compatible")
        return [spec(ctx.dtype(0), [total // known if d == -1 else d for d in dims])]
    if total is not None and total != known:
        ctx.fail(f"Input to reshape is a tensor with {total} values, but the requested shape has "
                 f"{known}")
    return [spec(ctx.dtype(0), dims)]


def _shape_like(vector: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(1)
        out_type = ctx.attr("out_type", dtypes.int32)
        if not vector:
            return [spec(out_type, ())]
        rank = ctx.shape(0).rank
        return [spec(out_type, [rank])]

    return infer


op("Shape", defaults={"out_type": dtypes.int32})(_shape_like(True))
op("Size", defaults={"out_type": dtypes.int32})(_shape_like(False))


@op("Rank")
def _rank(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [spec(dtypes.int32, ())]


def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """The same values with a new shape (one dimension may be -1: inferred)."""
    t = convert_to_tensor(tensor)
    s = convert_to_tensor(shape, dtype_hint=dtypes.int32)
    return make_op("Reshape", [t, s], {"T": t.dtype, "Tshape": s.dtype}, name=name or "Reshape")


def shape(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002
    """The dynamic shape of a tensor as a 1-D integer tensor."""
    t = convert_to_tensor(input)
    return make_op("Shape", [t], {"T": t.dtype, "out_type": dtypes.as_dtype(out_type)},
                   name=name or "Shape")


def size(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:  # noqa: A002
    """The number of elements of a tensor."""
    t = convert_to_tensor(input)
    return make_op("Size", [t], {"T": t.dtype, "out_type": dtypes.as_dtype(out_type)},
                   name=name or "Size")


def rank(input: Any, name: str | None = None) -> Tensor:  # noqa: A002
    """The number of dimensions of a tensor."""
    t = convert_to_tensor(input)
    return make_op("Rank", [t], {"T": t.dtype}, name=name or "Rank")


def zeros_like(tensor: Any, dtype: Any = None, name: str | None = None,
               optimize: bool = True) -> Tensor:
    """A tensor of zeros with the shape (and, unless given, the dtype) of ``tensor``."""
    t = convert_to_tensor(tensor)
    if dtype is not None and dtypes.as_dtype(dtype) is not t.dtype:
        from tensorgrid.ops.math import cast

        t = cast(t, dtype)
    return make_op("ZerosLike", [t], {"T": t.dtype}, name=name or "zeros_like")


def ones_like(tensor: Any, dtype: Any = None, name: str | None = None,
              optimize: bool = True) -> Tensor:
    """A tensor of ones with the shape (and, unless given, the dtype) of ``tensor``."""
    t = convert_to_tensor(tensor)
    if dtype is not None and dtypes.as_dtype(dtype) is not t.dtype:
        from tensorgrid.ops.math import cast

        t = cast(t, dtype)
    return make_op("OnesLike", [t], {"T": t.dtype}, name=name or "ones_like")


def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Tensor:
    """Stack rank-R tensors into one rank-(R+1) tensor along ``axis``."""
    ts = [convert_to_tensor(v) for v in values]
    if ts and any(t.dtype is not ts[0].dtype for t in ts):
        ts = [convert_to_tensor(v, dtype=ts[0].dtype) for v in values]
    return make_op("Pack", ts, {"T": ts[0].dtype if ts else dtypes.float32, "N": len(ts),
                                "axis": int(axis)}, name=name)
