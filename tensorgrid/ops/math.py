"""Math ops: elementwise arithmetic, comparisons, reductions, matmul (TensorFlow's op names/attrs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import binary_inputs, convert_to_tensor, make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.ops._infer import binary, const_ints, is_numeric, spec

__all__ = ["add", "subtract", "multiply", "matmul", "add_n", "reduce_sum", "cast"]

op("AddV2")(binary(allowed=is_numeric, what="a numeric type"))
op("Sub")(binary(allowed=is_numeric, what="a numeric type"))
op("Mul")(binary(allowed=is_numeric, what="a numeric type"))


@op("MatMul", defaults={"transpose_a": False, "transpose_b": False})
def _matmul(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    a, b = ctx.shape(0), ctx.shape(1)
    if a.rank not in (None, 2) or b.rank not in (None, 2):
        ctx.fail(f"MatMul needs rank-2 inputs, got shapes {a} and {b}")
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    a_dims = (list(a.dims)[::-1] if ta else list(a.dims)) if a.dims is not None else [None, None]
    b_dims = (list(b.dims)[::-1] if tb else list(b.dims)) if b.dims is not None else [None, None]
    if a_dims[1] is not None and b_dims[0] is not None and a_dims[1] != b_dims[0]:
        ctx.fail(f"Matrix size-incompatible: In[0]: {a}, In[1]: {b}"
                 f"{' (transpose_a)' if ta else ''}{' (transpose_b)' if tb else ''}")
    return [spec(dt, TensorShape([a_dims[0], b_dims[1]]))]


@op("AddN")
def _add_n(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("AddN needs at least one input")
    dt = ctx.same_dtype()
    shape = ctx.shape(0)
    for i in range(1, ctx.num_inputs):
        if not shape.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"inputs must all have the same shape: {shape} vs {ctx.shape(i)}")
        shape = shape.merge_with(ctx.shape(i))
    return [spec(dt, shape)]


def _reduction(ctx: InferContext) -> Sequence[TensorSpec]:
    """Sum/Mean/Max/Min/Prod/Any/All: input 1 holds the axes; attr keep_dims."""
    ctx.expect_inputs(2)
    if not ctx.dtype(1).is_integer:
        ctx.fail(f"reduction indices must be int32 or int64, got {ctx.dtype(1).name}")
    shape = ctx.shape(0)
    keep = bool(ctx.attr("keep_dims"))
    axes = const_ints(ctx, 1)
    if shape.dims is None or axes is None:
        return [spec(ctx.dtype(0), TensorShape(None) if shape.dims is None or not keep
                     else [None] * len(shape.dims))]
    rank = len(shape.dims)
    norm = set()
    for a in axes:
        if not -rank <= a < max(rank, 1):
            ctx.fail(f"Invalid reduction dimension {a} for input with {rank} dimensions")
        norm.add(a % rank if rank else 0)
    dims = [1 if i in norm else d for i, d in enumerate(shape.dims)] if keep else \
        [d for i, d in enumerate(shape.dims) if i not in norm]
    return [spec(ctx.dtype(0), dims)]


op("Sum", defaults={"keep_dims": False, "Tidx": dtypes.int32})(_reduction)


@op("Cast", defaults={"Truncate": False})
def _cast(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [spec(ctx.attr("DstT"), ctx.shape(0))]


def add_n(inputs: Sequence[Any], name: str | None = None) -> Tensor:
    """Elementwise sum of a list of tensors of one shape and dtype."""
    ts = [convert_to_tensor(i) for i in inputs]
    if not ts:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(ts) == 1 and name is None:
        return ts[0]
    return make_op("AddN", ts, {"T": ts[0].dtype, "N": len(ts)}, name=name or "AddN")


def _axes(x: Tensor, axis: Any) -> Tensor:
    if axis is None:
        rank = x.shape.rank
        if rank is not None:
            return convert_to_tensor(list(range(rank)), dtype=dtypes.int32)
        from tensorgrid.ops.array import range as range_, rank as rank_

        return range_(0, rank_(x))
    return convert_to_tensor(axis, dtype_hint=dtypes.int32)


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """Sum over ``axis`` (all axes when None), keeping reduced dims as 1 when ``keepdims``."""
    x = convert_to_tensor(input_tensor)
    ax = _axes(x, axis if axis is not None else reduction_indices)
    keep = bool(keepdims if keepdims is not None else keep_dims)
    return make_op("Sum", [x, ax], {"T": x.dtype, "Tidx": ax.dtype, "keep_dims": keep},
                   name=name or "Sum")


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """Convert to ``dtype`` (a no-op identity-free passthrough when the dtype already matches)."""
    t = convert_to_tensor(x)
    dt = dtypes.as_dtype(dtype)
    if t.dtype is dt:
        return t
    return make_op("Cast", [t], {"SrcT": t.dtype, "DstT": dt}, name=name or "Cast")


def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    x, y = binary_inputs(x, y)
    return make_op("AddV2", [x, y], {"T": x.dtype}, name=name or "add")


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    x, y = binary_inputs(x, y)
    return make_op("Sub", [x, y], {"T": x.dtype}, name=name or "sub")


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    x, y = binary_inputs(x, y)
    return make_op("Mul", [x, y], {"T": x.dtype}, name=name or "mul")


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           name: str | None = None) -> Tensor:
    a, b = binary_inputs(a, b)
    return make_op("MatMul", [a, b], {"T": a.dtype, "transpose_a": bool(transpose_a),
                                      "transpose_b": bool(transpose_b)}, name=name or "MatMul")


def _install_overloads() -> None:
    Tensor.__add__ = lambda self, other: add(self, other)  # type: ignore[method-assign]
    Tensor.__radd__ = lambda self, other: add(other, self)  # type: ignore[attr-defined]
    Tensor.__sub__ = lambda self, other: subtract(self, other)  # type: ignore[attr-defined]
    Tensor.__rsub__ = lambda self, other: subtract(other, self)  # type: ignore[attr-defined]
    Tensor.__mul__ = lambda self, other: multiply(self, other)  # type: ignore[attr-defined]
    Tensor.__rmul__ = lambda self, other: multiply(other, self)  # type: ignore[attr-defined]
    Tensor.__matmul__ = lambda self, other: matmul(self, other)  # type: ignore[attr-defined]
    Tensor.__rmatmul__ = lambda self, other: matmul(other, self)  # type: ignore[attr-defined]


_install_overloads()
