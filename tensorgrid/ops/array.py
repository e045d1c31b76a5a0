"""Array op definitions: shapes, reshaping, transposing, reversing, joining and splitting
(TensorFlow's op names, inputs, attrs and inference). The python API is
``tensorgrid.framework.array_ops``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import (
    INDEX_TYPES,
    const_ints,
    const_scalar,
    int_input,
    normalize_axis,
    scalar_input,
    spec,
    vector_len,
)

# ------------------------------------------------------------------------------ definitions


def _shape_like(vector: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(1)
        out_type = ctx.attr("out_type")
        if out_type not in INDEX_TYPES:
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
    if out_type not in INDEX_TYPES:
        ctx.fail(f"out_type must be int32 or int64, got {out_type.name}")
    return [spec(out_type, [s.shape.rank]) for s in ctx.inputs]


@op("Rank")
def _rank(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [spec(dtypes.int32, ())]


@op("Reshape", defaults={"Tshape": dtypes.int32})
def _reshape(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "shape")
    n = vector_len(ctx, 1, "shape")
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
    int_input(ctx, 1, "dim")
    axis = const_scalar(ctx, 1, "'dim'")
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
    int_input(ctx, 1, "perm")
    n = vector_len(ctx, 1, "perm")
    dims = ctx.shape(0).dims
    if dims is not None and n is not None and n != len(dims):
        ctx.fail(f"transpose expects a vector of size {len(dims)}, but perm has size {n}")
    perm = const_ints(ctx, 1)
    rank = len(dims) if dims is not None else n
    if perm is None:
        return [spec(ctx.dtype(0), None if rank is None else [None] * rank)]
    if sorted(perm) != list(range(len(perm))):
        ctx.fail(f"perm {perm} is not a permutation of 0..{len(perm) - 1}")
    out = [dims[p] if dims is not None else None for p in perm]
    return [spec(ctx.dtype(0), out)]


op("Transpose", defaults={"Tperm": dtypes.int32})(_transpose)
op("ConjugateTranspose", defaults={"Tperm": dtypes.int32})(_transpose)


@op("InvertPermutation", defaults={"T": dtypes.int32})
def _invert_permutation(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    int_input(ctx, 0, "x")
    n = vector_len(ctx, 0, "x")
    return [spec(ctx.dtype(0), [n])]


def _concat_like(ctx: InferContext, values: Sequence[int], axis_input: int) -> TensorSpec:
    """The spec of joining inputs ``values`` along the constant axis input (Concat/ConcatV2)."""
    if not values:
        ctx.fail("needs at least one value to concatenate")
    dt = ctx.same_dtype(*values)
    int_input(ctx, axis_input, "axis")
    scalar_input(ctx, axis_input, "axis")
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
    axis = const_scalar(ctx, axis_input, "axis")
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
    return [_concat_like(ctx, list(range(n)), n)]


@op("Concat")
def _concat_v1(ctx: InferContext) -> Sequence[TensorSpec]:
    return [_concat_like(ctx, list(range(1, ctx.num_inputs)), 0)]


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
    int_input(ctx, axis_input, "split_dim")
    scalar_input(ctx, axis_input, "split_dim")
    dims = ctx.shape(value).dims
    axis = const_scalar(ctx, axis_input, "split_dim")
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
    int_input(ctx, 1, "size_splits")
    n = vector_len(ctx, 1, "size_splits")
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
    int_input(ctx, 1, "axis")
    vector_len(ctx, 1, "axis")
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


declare_attrs({
    "Concat": "N T",
    "ConcatV2": "N T Tidx",
    "ConjugateTranspose": "T Tperm",
    "ExpandDims": "T Tdim",
    "InvertPermutation": "T",
    "Pack": "N T axis",
    "Rank": "T",
    "Reshape": "T Tshape",
    "ReverseV2": "T Tidx",
    "Shape": "T out_type",
    "ShapeN": "N T out_type",
    "Size": "T out_type",
    "Split": "T num_split",
    "SplitV": "T Tlen num_split",
    "Squeeze": "T squeeze_dims",
    "Transpose": "T Tperm",
    "Unpack": "T axis num",
})
