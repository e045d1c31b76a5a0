"""Array ops: shapes, reshaping, transposing, reversing, joining and splitting (TensorFlow's op
names, inputs and attrs).

The ops that make tensors (fill, zeros, range, one_hot, tile, pad, broadcast_to) live in
``array_create`` and the indexing ops (slicing, ``Tensor.__getitem__``, gathering, scattering,
masking) in ``array_index``; this module re-exports both, so ``from tensorgrid.ops.array import *``
gives the whole TF1 array API.
"""

from __future__ import annotations

import builtins  # builtins.range: this module re-exports tf's range, which shadows it
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ParamSpec, TypeVar

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.graph import Graph, Tensor, get_default_graph
from tensorgrid.framework.tensor_util import constant_value
from tensorgrid.ops._infer import const_ints, normalize_axis, spec

__all__ = [
    "newaxis", "shape", "shape_n", "size", "rank", "reshape", "expand_dims", "squeeze",
    "transpose", "invert_permutation", "concat", "stack", "unstack", "split", "reverse",
    "reverse_v2",
]

newaxis = None
"""``x[tf.newaxis]`` inserts a dimension of size 1, as ``None`` does in numpy."""

_INDEX_TYPES = (dtypes.int32, dtypes.int64)


# ------------------------------------------------------------------------------ inference helpers


def _int_input(ctx: InferContext, i: int, what: str) -> None:
    if ctx.dtype(i) not in _INDEX_TYPES:
        ctx.fail(f"{what} must be int32 or int64, got {ctx.dtype(i).name}")


def _scalar_input(ctx: InferContext, i: int, what: str) -> None:
    if ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")


def _vector_len(ctx: InferContext, i: int, what: str) -> int | None:
    """The length of the 1-D input i when known; fails when the input is not 1-D."""
    s = ctx.shape(i)
    if s.rank is None:
        return None
    if s.rank != 1:
        ctx.fail(f"{what} must be a vector (1-D), got shape {s}")
    return s.dims[0]  # type: ignore[index]


def _const_scalar(ctx: InferContext, i: int, what: str) -> int | None:
    v = ctx.const(i)
    if v is None:
        return None
    if v.size != 1:
        ctx.fail(f"{what} must hold a single value, got shape {list(v.shape)}")
    return int(v.reshape(-1)[0])


# ------------------------------------------------------------------------------ definitions


def _shape_like(vector: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(1)
        out_type = ctx.attr("out_type")
        if out_type not in _INDEX_TYPES:
            ctx.fail(f"out_type must be int32 or int64, got {out_type.name}")
        return [spec(out_type, [ctx.shape(0).rank] if vector else ())]

    return infer


op("Shape", defaults={"out_type": dtypes.int32})(_shape_like(True))
op("Size", defaults={"out_type": dtypes.int32})(_shape_like(False))


@op("ShapeN", defaults={"out_type": dtypes.int32})
def _shape_n(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("ShapeN needs at least one input")
    out_type = ctx.attr("out_type")
    if out_type not in _INDEX_TYPES:
        ctx.fail(f"out_type must be int32 or int64, got {out_type.name}")
    return [spec(out_type, [s.shape.rank]) for s in ctx.inputs]


@op("Rank")
def _rank(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [spec(dtypes.int32, ())]


@op("Reshape", defaults={"Tshape": dtypes.int32})
def _reshape(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "shape")
    n = _vector_len(ctx, 1, "shape")
    target = ctx.const(1)
    src = ctx.shape(0)
    if target is None:
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
        ctx.fail(f"Input to reshape is a tensor with {total} values, but the requested shape "
                 f"{dims} has {known}")
    return [spec(ctx.dtype(0), dims)]


@op("ExpandDims", defaults={"Tdim": dtypes.int32})
def _expand_dims(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "dim")
    axis = _const_scalar(ctx, 1, "'dim'")
    dims = ctx.shape(0).dims
    if dims is None:
        return [spec(ctx.dtype(0), None)]
    rank = len(dims)
    if axis is None:
        return [spec(ctx.dtype(0), [None] * (rank + 1))]
    if not -rank - 1 <= axis <= rank:
        ctx.fail(f"Tried to expand dim index {axis} for tensor with {rank} dimensions")
    out = list(dims)
    out.insert(axis % (rank + 1), 1)
    return [spec(ctx.dtype(0), out)]


@op("Squeeze", defaults={"squeeze_dims": []})
def _squeeze(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dims = ctx.shape(0).dims
    axes = [int(a) for a in ctx.attr("squeeze_dims")]
    if dims is None:
        return [spec(ctx.dtype(0), None)]
    rank = len(dims)
    if not axes:
        if any(d is None for d in dims):
            return [spec(ctx.dtype(0), None)]  # which dims are 1 is known only at run time
        return [spec(ctx.dtype(0), [d for d in dims if d != 1])]
    drop = set()
    for a in axes:
        if not -rank <= a < rank:
            ctx.fail(f"Tried to squeeze dim index {a} for tensor with {rank} dimensions")
        a %= rank
        if dims[a] is not None and dims[a] != 1:
            ctx.fail(f"Can not squeeze dim[{a}], expected a dimension of 1, got {dims[a]}")
        drop.add(a)
    return [spec(ctx.dtype(0), [d for i, d in enumerate(dims) if i not in drop])]


def _transpose(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "perm")
    n = _vector_len(ctx, 1, "perm")
    dims = ctx.shape(0).dims
    if dims is not None and n is not None and n != len(dims):
        ctx.fail(f"transpose expects a vector of size {len(dims)}, but perm has size {n}")
    perm = const_ints(ctx, 1)
    rank = len(dims) if dims is not None else n
    if perm is None:
        return [spec(ctx.dtype(0), None if rank is None else [None] * rank)]
    if sorted(perm) != list(builtins.range(len(perm))):
        ctx.fail(f"perm {perm} is not a permutation of 0..{len(perm) - 1}")
    out = [dims[p] if dims is not None else None for p in perm]
    return [spec(ctx.dtype(0), out)]


op("Transpose", defaults={"Tperm": dtypes.int32})(_transpose)
op("ConjugateTranspose", defaults={"Tperm": dtypes.int32})(_transpose)


@op("InvertPermutation", defaults={"T": dtypes.int32})
def _invert_permutation(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _int_input(ctx, 0, "x")
    n = _vector_len(ctx, 0, "x")
    return [spec(ctx.dtype(0), [n])]


def _concat_like(ctx: InferContext, values: Sequence[int], axis_input: int) -> TensorSpec:
    """The spec of joining inputs ``values`` along the constant axis input (Concat/ConcatV2)."""
    if not values:
        ctx.fail("needs at least one value to concatenate")
    dt = ctx.same_dtype(*values)
    _int_input(ctx, axis_input, "axis")
    _scalar_input(ctx, axis_input, "axis")
    rank = None
    for i in values:
        r = ctx.shape(i).rank
        if r is None:
            continue
        if rank is None:
            rank = r
        elif r != rank:
            ctx.fail(f"Shape of values[{values.index(i)}] must be rank {rank} but is rank {r} "
                     "(all inputs must have the same rank)")
    if rank is None:
        return spec(dt, None)
    if rank == 0:
        ctx.fail("Can't concatenate scalars (use tf.stack instead)")
    axis = _const_scalar(ctx, axis_input, "axis")
    if axis is None:
        return spec(dt, [None] * rank)
    if not -rank <= axis < rank:
        ctx.fail(f"ConcatOp : Expected concatenating dimensions in the range [{-rank}, {rank}), "
                 f"but got {axis}")
    axis %= rank
    out: list[int | None] = [None] * rank
    total: int | None = 0
    first: dict[int, int] = {}
    for k, i in enumerate(values):
        dims = ctx.shape(i).dims
        if dims is None:
            total = None
            continue
        for j, d in enumerate(dims):
            if j == axis:
                total = None if total is None or d is None else total + d
            elif d is not None:
                if out[j] is None:
                    out[j], first[j] = d, k
                elif out[j] != d:
                    ctx.fail(f"ConcatOp : Dimension {j} in both shapes must be equal: "
                             f"values[{first[j]}] has {out[j]} and values[{k}] has {d} "
                             f"(shapes {ctx.shape(values[first[j]])} and {ctx.shape(i)})")
    out[axis] = total
    return spec(dt, out)


@op("ConcatV2", defaults={"Tidx": dtypes.int32})
def _concat_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    n = ctx.num_inputs - 1
    return [_concat_like(ctx, list(builtins.range(n)), n)]


@op("Concat")
def _concat_v1(ctx: InferContext) -> Sequence[TensorSpec]:
    return [_concat_like(ctx, list(builtins.range(1, ctx.num_inputs)), 0)]


@op("Pack", defaults={"axis": 0})
def _pack(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("Pack needs at least one input")
    dt = ctx.same_dtype()
    shape = ctx.shape(0)
    for i in builtins.range(1, ctx.num_inputs):
        if not shape.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"Shapes of all inputs must match: values[0].shape = {shape} != "
                     f"values[{i}].shape = {ctx.shape(i)}")
        shape = shape.merge_with(ctx.shape(i))
    if shape.dims is None:
        return [spec(dt, None)]
    dims = list(shape.dims)
    axis = normalize_axis(ctx, int(ctx.attr("axis")), len(dims) + 1)
    dims.insert(axis, ctx.num_inputs)
    return [spec(dt, dims)]


@op("Unpack", defaults={"axis": 0})
def _unpack(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    num = int(ctx.attr("num"))
    dt, dims = ctx.dtype(0), ctx.shape(0).dims
    if dims is None:
        return [spec(dt, None)] * num
    if not dims:
        ctx.fail("Input to unstack must have rank at least 1, got a scalar")
    axis = normalize_axis(ctx, int(ctx.attr("axis")), len(dims))
    if dims[axis] is not None and dims[axis] != num:
        ctx.fail(f"Dimension {axis} of the input has size {dims[axis]}, but num = {num}")
    return [spec(dt, dims[:axis] + dims[axis + 1:])] * num


def _split_dims(ctx: InferContext, value: int, axis_input: int) -> tuple[list[Any] | None, int]:
    """The input dims and the normalized split axis (-1 when unknown) of Split/SplitV."""
    _int_input(ctx, axis_input, "split_dim")
    _scalar_input(ctx, axis_input, "split_dim")
    dims = ctx.shape(value).dims
    axis = _const_scalar(ctx, axis_input, "split_dim")
    if dims is None or axis is None:
        return (None if dims is None else list(dims)), -1
    rank = len(dims)
    if not -rank <= axis < rank:
        ctx.fail(f"split_dim {axis} is out of range for an input of rank {rank} "
                 f"(expected [{-rank}, {rank}))")
    return list(dims), axis % rank


@op("Split")
def _split(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    num = int(ctx.attr("num_split"))
    if num < 1:
        ctx.fail(f"num_split must be at least 1, got {num}")
    dt = ctx.dtype(1)
    dims, axis = _split_dims(ctx, 1, 0)
    if dims is None:
        return [spec(dt, None)] * num
    if axis < 0:
        return [spec(dt, [None] * len(dims))] * num
    d = dims[axis]
    if d is not None and d % num:
        ctx.fail(f"Number of ways to split should evenly divide the split dimension, but got "
                 f"split_dim {axis} (size = {d}) and num_split {num}")
    dims[axis] = None if d is None else d // num
    return [spec(dt, dims)] * num


@op("SplitV", defaults={"Tlen": dtypes.int64})
def _split_v(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    num = int(ctx.attr("num_split"))
    dt = ctx.dtype(0)
    _int_input(ctx, 1, "size_splits")
    n = _vector_len(ctx, 1, "size_splits")
    if n is not None and n != num:
        ctx.fail(f"size_splits has {n} entries but num_split is {num}")
    sizes = const_ints(ctx, 1)
    if sizes is not None:
        if len(sizes) != num:
            ctx.fail(f"size_splits has {len(sizes)} entries but num_split is {num}")
        if sum(1 for s in sizes if s == -1) > 1:
            ctx.fail(f"Only one dimension of size_splits can be -1, got {sizes}")
        if any(s < -1 for s in sizes):
            ctx.fail(f"size_splits must be non-negative (or one -1), got {sizes}")
    dims, axis = _split_dims(ctx, 0, 2)
    if dims is None:
        return [spec(dt, None)] * num
    if axis < 0 or sizes is None:
        return [spec(dt, [None] * len(dims))] * num
    d = dims[axis]
    known = sum(s for s in sizes if s != -1)
    if d is not None and (known > d or (-1 not in sizes and known != d)):
        ctx.fail(f"Determined shape must either match input shape along split_dim exactly if "
                 f"fully specified, or be less than the size of the input along split_dim if "
                 f"not fully specified. Got: {known} vs. {d} (size_splits {sizes})")
    out = []
    for s in sizes:
        part = list(dims)
        part[axis] = (None if d is None else d - known) if s == -1 else s
        out.append(spec(dt, part))
    return out


@op("ReverseV2", defaults={"Tidx": dtypes.int32})
def _reverse_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "axis")
    _vector_len(ctx, 1, "axis")
    axes = const_ints(ctx, 1)
    rank = ctx.shape(0).rank
    if axes is not None and rank is not None:
        seen = set()
        for a in axes:
            if not -rank <= a < rank:
                ctx.fail(f"'axis'[{axes.index(a)}] = {a} is out of valid range [{-rank}, {rank})")
            if a % rank in seen:
                ctx.fail(f"axis {a % rank} specified more than once")
            seen.add(a % rank)
    return [ctx.input(0)]


# ------------------------------------------------------------------------------ python API

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _graph_of(values: Iterable[Any]) -> Graph | None:
    for v in values:
        if isinstance(v, Tensor):
            return v.graph
        if isinstance(v, list | tuple):
            found = _graph_of(v)
            if found is not None:
                return found
        elif isinstance(getattr(v, "graph", None), Graph):  # a Variable
            return v.graph  # type: ignore[no-any-return]
    return None


def in_inputs_graph(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Build ``fn``'s ops in the graph of its tensor arguments, as TensorFlow does, so that the
    constants made for its python arguments land there even when another graph is the default."""

    @functools.wraps(fn)
    def build(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        g = _graph_of([*args, *kwargs.values()])
        if g is None or g is get_default_graph():
            return fn(*args, **kwargs)
        with g.as_default():
            return fn(*args, **kwargs)

    return build



def _int_tensor(value: Any, name: str | None = None) -> Tensor:
    """A shape/axis-like argument as an int32 tensor (int64 when the values need it)."""
    if isinstance(value, TensorShape):
        value = value.as_list()
    if isinstance(value, list | tuple) and not value:  # [] would otherwise become float32
        value = np.zeros(0, np.int32)
    return convert_to_tensor(value, dtype_hint=dtypes.int32, name=name)


def _static_ints(value: Any) -> list[int] | None:
    """``value`` as a list of python ints when it is known while building, else None."""
    if isinstance(value, TensorShape):
        return value.as_list() if value.is_fully_defined() else None  # type: ignore[return-value]
    if isinstance(value, Tensor):
        v = constant_value(value)
        return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if arr.ndim > 1 or (arr.dtype.kind not in "iu" and arr.size):
        return None
    return [int(d) for d in arr.reshape(-1)]


@in_inputs_graph
def shape(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:
    """The dynamic shape of a tensor as a 1-D integer tensor."""
    t = convert_to_tensor(input)
    return make_op("Shape", [t], {"T": t.dtype, "out_type": dtypes.as_dtype(out_type)},
                   name=name or "Shape")


@in_inputs_graph
def shape_n(input: Sequence[Any], out_type: Any = dtypes.int32,
            name: str | None = None) -> list[Tensor]:
    """The shapes of several tensors (one ShapeN op): a list of 1-D integer tensors."""
    ts = [convert_to_tensor(t) for t in input]
    if not ts:
        raise ValueError("shape_n needs at least one tensor")
    out = make_op("ShapeN", ts, {"T": ts[0].dtype, "N": len(ts),
                                 "out_type": dtypes.as_dtype(out_type)}, name=name or "ShapeN")
    return list(out) if isinstance(out, tuple) else [out]


@in_inputs_graph
def size(input: Any, name: str | None = None, out_type: Any = dtypes.int32) -> Tensor:
    """The number of elements of a tensor."""
    t = convert_to_tensor(input)
    return make_op("Size", [t], {"T": t.dtype, "out_type": dtypes.as_dtype(out_type)},
                   name=name or "Size")


@in_inputs_graph
def rank(input: Any, name: str | None = None) -> Tensor:
    """The number of dimensions of a tensor."""
    t = convert_to_tensor(input)
    return make_op("Rank", [t], {"T": t.dtype}, name=name or "Rank")


@in_inputs_graph
def reshape(tensor: Any, shape: Any, name: str | None = None) -> Tensor:
    """The same values with a new shape (one dimension may be -1: inferred).

    Raises:
        InvalidArgumentError: the element counts cannot match (at build time when known).
    """
    t = convert_to_tensor(tensor)
    s = _int_tensor(shape)
    return make_op("Reshape", [t, s], {"T": t.dtype, "Tshape": s.dtype}, name=name or "Reshape")


@in_inputs_graph
def expand_dims(input: Any, axis: Any = None, name: str | None = None,
                dim: Any = None) -> Tensor:
    """Insert a dimension of size 1 at ``axis`` (in ``[-rank-1, rank]``)."""
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    t = convert_to_tensor(input)
    a = _int_tensor(axis)
    return make_op("ExpandDims", [t, a], {"T": t.dtype, "Tdim": a.dtype},
                   name=name or "ExpandDims")


@in_inputs_graph
def squeeze(input: Any, axis: Any = None, name: str | None = None,
            squeeze_dims: Any = None) -> Tensor:
    """Remove dimensions of size 1: those in ``axis``, or all of them when ``axis`` is None.

    Raises:
        InvalidArgumentError: a listed dimension is not 1.
    """
    if axis is not None and squeeze_dims is not None:
        raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
    axis = squeeze_dims if axis is None else axis
    axes = [] if axis is None else [int(axis)] if np.ndim(axis) == 0 else [int(a) for a in axis]
    t = convert_to_tensor(input)
    return make_op("Squeeze", [t], {"T": t.dtype, "squeeze_dims": axes}, name=name or "Squeeze")


@in_inputs_graph
def transpose(a: Any, perm: Any = None, name: str = "transpose",
              conjugate: bool = False) -> Tensor:
    """Permute the dimensions of ``a``: output dim i is input dim ``perm[i]`` (default: reversed).

    ``conjugate=True`` also conjugates complex values (ConjugateTranspose).
    """
    t = convert_to_tensor(a)
    if perm is None:
        r = t.shape.rank
        if r is not None:
            p = convert_to_tensor(list(builtins.range(r - 1, -1, -1)), dtype=dtypes.int32)
        else:
            from tensorgrid.ops.array_create import range as range_
            from tensorgrid.ops.math import subtract

            n = rank(t)
            p = subtract(subtract(n, 1), range_(0, n))
    else:
        p = _int_tensor(perm)
    op_type = "ConjugateTranspose" if conjugate and t.dtype.is_complex else "Transpose"
    return make_op(op_type, [t, p], {"T": t.dtype, "Tperm": p.dtype}, name=name)


@in_inputs_graph
def invert_permutation(x: Any, name: str | None = None) -> Tensor:
    """The inverse permutation y of x: ``y[x[i]] = i``."""
    t = _int_tensor(x)
    return make_op("InvertPermutation", [t], {"T": t.dtype}, name=name or "InvertPermutation")


def _same_dtype(values: Sequence[Any]) -> list[Tensor]:
    """Convert a list of values, giving python values the dtype of the first tensor among them."""
    first = next((v for v in values if isinstance(v, Tensor)), None)
    if first is None:
        ts = [convert_to_tensor(v) for v in values]
        first = ts[0] if ts else None
        if first is None or all(t.dtype is first.dtype for t in ts):
            return ts
    return [convert_to_tensor(v, dtype=first.dtype) if not isinstance(v, Tensor) else v
            for v in values]


@in_inputs_graph
def concat(values: Sequence[Any], axis: Any, name: str = "concat") -> Tensor:
    """Join tensors along ``axis``; all other dimensions must match.

    Raises:
        InvalidArgumentError: ranks or non-axis dimensions differ, or the axis is out of range.
    """
    if not isinstance(values, list | tuple):
        values = [values]
    if len(values) == 1:
        from tensorgrid.ops.core_ops import identity

        a = _int_tensor(axis)
        t = convert_to_tensor(values[0])
        r = t.shape.rank
        ax = _static_ints(a)
        if r is not None and ax and not -r <= ax[0] < r:
            raise ValueError(f"axis {ax[0]} is out of range for a tensor of rank {r}")
        return identity(t, name=name)
    ts = _same_dtype(values)
    a = _int_tensor(axis)
    return make_op("ConcatV2", [*ts, a], {"T": ts[0].dtype, "N": len(ts), "Tidx": a.dtype},
                   name=name)


@in_inputs_graph
def stack(values: Sequence[Any], axis: int = 0, name: str = "stack") -> Tensor:
    """Stack rank-R tensors of one shape into one rank-(R+1) tensor along ``axis``."""
    ts = _same_dtype(list(values))
    if not ts:
        raise ValueError("stack needs at least one value")
    return make_op("Pack", ts, {"T": ts[0].dtype, "N": len(ts), "axis": int(axis)}, name=name)


@in_inputs_graph
def unstack(value: Any, num: int | None = None, axis: int = 0,
            name: str = "unstack") -> list[Tensor]:
    """Split a rank-R tensor along ``axis`` into a list of rank-(R-1) tensors.

    Raises:
        ValueError: ``num`` is None and the size of ``axis`` is not known statically.
    """
    t = convert_to_tensor(value)
    if num is None:
        dims = t.shape.dims
        if dims is None:
            raise ValueError(f"Cannot infer num from shape {t.shape}")
        if not -len(dims) <= axis < max(len(dims), 1):
            raise ValueError(f"axis = {axis} not in [{-len(dims)}, {len(dims)})")
        num = dims[axis] if dims else None
        if num is None:
            raise ValueError(f"Cannot infer num from shape {t.shape}")
    out = make_op("Unpack", [t], {"T": t.dtype, "num": int(num), "axis": int(axis)}, name=name)
    return list(out) if isinstance(out, tuple) else [out] if isinstance(out, Tensor) else []


@in_inputs_graph
def split(value: Any, num_or_size_splits: Any, axis: Any = 0, num: int | None = None,
          name: str = "split") -> list[Tensor]:
    """Split ``value`` along ``axis`` into ``num_or_size_splits`` equal parts (an int), or into
    parts of the given sizes (a 1-D list/tensor; one size may be -1).

    Raises:
        ValueError: the number of parts cannot be inferred (pass ``num``).
        InvalidArgumentError: the sizes do not fit the dimension.
    """
    t = convert_to_tensor(value)
    a = _int_tensor(axis)
    if isinstance(num_or_size_splits, int | np.integer) and not isinstance(num_or_size_splits,
                                                                           bool):
        n = int(num_or_size_splits)
        out = make_op("Split", [a, t], {"T": t.dtype, "num_split": n}, name=name)
    else:
        sizes = _int_tensor(num_or_size_splits)
        if num is None:
            dims = sizes.shape.dims
            if dims is None or len(dims) != 1 or dims[0] is None:
                raise ValueError(f"Cannot infer argument `num` from shape {sizes.shape}")
            num = dims[0]
        out = make_op("SplitV", [t, sizes, a], {"T": t.dtype, "Tlen": sizes.dtype,
                                               "num_split": int(num)}, name=name)
    return list(out) if isinstance(out, tuple) else [out]


@in_inputs_graph
def reverse(tensor: Any, axis: Any, name: str | None = None) -> Tensor:
    """Reverse ``tensor`` along each dimension in ``axis`` (a list of ints)."""
    t = convert_to_tensor(tensor)
    a = _int_tensor(axis)
    return make_op("ReverseV2", [t, a], {"T": t.dtype, "Tidx": a.dtype}, name=name or "ReverseV2")


reverse_v2 = reverse


# The rest of the API (imported last: it builds on the functions above).
from tensorgrid.ops import array_create as _array_create  # noqa: E402
from tensorgrid.ops import array_index as _array_index  # noqa: E402
from tensorgrid.ops.array_create import *  # noqa: E402,F403
from tensorgrid.ops.array_index import *  # noqa: E402,F403

__all__ += _array_create.__all__ + _array_index.__all__
