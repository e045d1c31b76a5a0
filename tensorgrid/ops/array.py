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

__all__ = ["zeros_like", "ones_like", "stack"]

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
