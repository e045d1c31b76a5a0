"""Indexing ops: slicing (``Slice``, ``StridedSlice`` and ``Tensor.__getitem__``), gathering,
scattering, segment sums, masks and ``unique`` (TensorFlow's op names, inputs and attrs).

The strided-slice rules (how begin/end/strides and the five masks select elements) are written once
here, as ``dense_slice``; inference, the kernels and the gradient all use it. The python API is
``tensorgrid.framework.array_index_ops``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, NamedTuple

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import (
    INDEX_TYPES,
    const_ints,
    const_scalar,
    int_input,
    is_numeric,
    scalar_input,
    spec,
    vector_len,
)

SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")

# ------------------------------------------------------------------------------ strided slices

DIM, NEW_AXIS, SHRINK = 0, 1, 2


class SliceDim(NamedTuple):
    """One entry of a dense strided-slice spec, in output order.

    ``kind`` is DIM (a range of input dim ``axis``), NEW_AXIS (a new dim of size 1) or SHRINK
    (input dim ``axis`` taken at index ``begin`` and dropped). ``begin``/``end`` of None mean "from
    the start"/"to the end" in the stride's direction (a masked bound); ``stride`` is None when not
    known yet; ``known`` is False when the bounds are tensors whose values are not known yet.
    """

    kind: int
    axis: int
    begin: int | None
    end: int | None
    stride: int | None
    known: bool


def dense_slice(rank: int, n: int, begin: Sequence[int] | None, end: Sequence[int] | None,
                strides: Sequence[int] | None, masks: Sequence[int]) -> list[SliceDim]:
    """Expand a sparse strided-slice spec of ``n`` entries over an input of rank ``rank``.

    Follows TensorFlow: bits at or past ``n`` are ignored; an ellipsis bit wins over a new-axis
    bit, which wins over a shrink bit; without an ellipsis one is implied after the last entry; an
    ellipsis covers every dim that the entries after it do not use.

    Args:
        begin, end, strides: the ``n`` values of each, or None when not known (while building).
        masks: (begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask).

    Raises:
        ValueError: several ellipses, a zero stride, or more entries than the input has dims.
    """
    keep = (1 << n) - 1
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = (int(m) & keep
                                                                        for m in masks)
    if ellipsis_mask & (ellipsis_mask - 1):
        raise ValueError("Multiple ellipses in slice spec not allowed")
    if strides is not None:
        for i, s in enumerate(strides):
            if s == 0:
                raise ValueError(f"strides[{i}] must be non-zero")
    ellipsis_at = ellipsis_mask.bit_length() - 1 if ellipsis_mask else n
    sparse = n if ellipsis_mask else n + 1
    new_after = sum(1 for i in builtins.range(ellipsis_at + 1, n) if new_axis_mask >> i & 1)
    out: list[SliceDim] = []
    full = 0
    for i in builtins.range(sparse):
        if i == ellipsis_at:
            stop = min(rank - (sparse - i) + 1 + new_after, rank)
            while full < stop:
                out.append(SliceDim(DIM, full, None, None, 1, True))
                full += 1
            continue
        if new_axis_mask >> i & 1:
            out.append(SliceDim(NEW_AXIS, -1, None, None, 1, True))
            continue
        if full >= rank:
            raise ValueError(f"Index out of range using input dim {full}; input has only {rank} "
                             "dims")
        stride = None if strides is None else int(strides[i])
        if shrink_mask >> i & 1:
            b = None if begin is None else int(begin[i])
            out.append(SliceDim(SHRINK, full, b, None, stride, begin is not None))
        else:
            bm, em = bool(begin_mask >> i & 1), bool(end_mask >> i & 1)
            b = None if bm or begin is None else int(begin[i])
            e = None if em or end is None else int(end[i])
            known = (bm or begin is not None) and (em or end is not None)
            out.append(SliceDim(DIM, full, b, e, stride, known))
        full += 1
    return out


def numpy_index(entries: Sequence[SliceDim]) -> tuple[Any, ...]:
    """The numpy basic index selecting what ``entries`` select (python slices clamp exactly as
    TensorFlow's strided slice does). It ends in an Ellipsis, so that taking every dim at an index
    still gives a 0-d array, never a bare scalar."""
    idx: list[Any] = []
    for e in entries:
        if e.kind == NEW_AXIS:
            idx.append(None)
        elif e.kind == SHRINK:
            idx.append(e.begin)
        else:
            idx.append(builtins.slice(e.begin, e.end, e.stride))
    idx.append(Ellipsis)
    return tuple(idx)


def sliced_dims(entries: Sequence[SliceDim], dims: Sequence[int | None]) -> list[int | None]:
    """The output dims of a dense spec over an input with ``dims`` (None: unknown).

    Raises:
        ValueError: a shrunk index is out of bounds of a known dim.
    """
    out: list[int | None] = []
    for e in entries:
        if e.kind == NEW_AXIS:
            out.append(1)
            continue
        d = dims[e.axis]
        if e.kind == SHRINK:
            if e.known and d is not None and e.begin is not None and not -d <= e.begin < d:
                raise ValueError(f"slice index {e.begin} of dimension {e.axis} out of bounds")
            continue
        if d is None or not e.known or e.stride is None:
            out.append(None)
        else:
            out.append(len(builtins.range(*builtins.slice(e.begin, e.end, e.stride).indices(d))))
    return out


def _slice_spec_len(ctx: InferContext, first: int) -> int | None:
    """The common length of the begin/end/strides inputs (first, first+1, first+2)."""
    ctx.same_dtype(first, first + 1, first + 2)
    n = None
    for i, what in zip(builtins.range(first, first + 3), ("begin", "end", "strides")):
        int_input(ctx, i, what)
        k = vector_len(ctx, i, what)
        if k is not None:
            if n is not None and k != n:
                ctx.fail(f"begin, end and strides must have the same length, got {what} of "
                         f"length {k} and {n}")
            n = k
    return n


def _strided_dims(ctx: InferContext, dims: Sequence[int | None] | None,
                  first: int) -> list[int | None] | None:
    n = _slice_spec_len(ctx, first)
    b, e, s = (const_ints(ctx, first + k) for k in builtins.range(3))
    if n is None:
        n = next((len(v) for v in (b, e, s) if v is not None), None)
    if dims is None or n is None:
        return None
    masks = [int(ctx.attr(m)) for m in SLICE_MASKS]
    try:
        return sliced_dims(dense_slice(len(dims), n, b, e, s, masks), dims)
    except ValueError as exc:
        return ctx.fail(str(exc))


@op("StridedSlice", defaults=dict.fromkeys(SLICE_MASKS, 0))
def _strided_slice(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    return [spec(ctx.dtype(0), _strided_dims(ctx, ctx.shape(0).dims, 1))]


@op("StridedSliceGrad", defaults=dict.fromkeys(SLICE_MASKS, 0))
def _strided_slice_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(5)
    int_input(ctx, 0, "shape")
    n = vector_len(ctx, 0, "shape")
    full = const_ints(ctx, 0)
    sliced = _strided_dims(ctx, full, 1)
    if sliced is not None and not ctx.shape(4).is_compatible_with(sliced):
        ctx.fail(f"dy has shape {ctx.shape(4)} but the slice has shape {TensorShape(sliced)}")
    if full is None:
        return [spec(ctx.dtype(4), None if n is None else [None] * n)]
    return [spec(ctx.dtype(4), full)]


@op("Slice")
def _slice(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    ctx.same_dtype(1, 2)
    int_input(ctx, 1, "begin")
    nb, ns = vector_len(ctx, 1, "begin"), vector_len(ctx, 2, "size")
    dims = ctx.shape(0).dims
    begin, sizes = const_ints(ctx, 1), const_ints(ctx, 2)
    n = next((k for k in (nb, ns, None if begin is None else len(begin),
                          None if sizes is None else len(sizes)) if k is not None), None)
    for k in (nb, ns):
        if k is not None and ((dims is not None and k != len(dims)) or k != n):
            ctx.fail(f"Expected begin and size arguments to be 1-D tensors of size "
                     f"{len(dims) if dims is not None else n}, but got shapes {ctx.shape(1)} and "
                     f"{ctx.shape(2)} instead")
    rank = len(dims) if dims is not None else n
    if sizes is None:
        return [spec(ctx.dtype(0), None if rank is None else [None] * rank)]
    out: list[int | None] = []
    for i, s in enumerate(sizes):
        d = dims[i] if dims is not None else None
        b = begin[i] if begin is not None else None
        if b is not None and (b < 0 or (d is not None and b > d)):
            ctx.fail(f"Expected begin[{i}] in [0, {'?' if d is None else d}], but got {b}")
        if s == -1:
            out.append(None if d is None or b is None else d - b)
        elif s < -1:
            ctx.fail(f"Expected size[{i}] >= -1, but got {s}")
        else:
            if d is not None and b is not None and b + s > d:
                ctx.fail(f"Expected size[{i}] in [0, {d - b}], but got {s}")
            out.append(s)
    return [spec(ctx.dtype(0), out)]


# ------------------------------------------------------------------------------ gather/scatter


def _gather_dims(ctx: InferContext, axis: int | None, batch_dims: int) -> Any:
    p, ind = ctx.shape(0).dims, ctx.shape(1).dims
    if ind is not None:
        if batch_dims < 0:
            batch_dims += len(ind)
        if not 0 <= batch_dims <= len(ind):
            ctx.fail(f"batch_dims must be in [-{len(ind)}, {len(ind)}] for indices of rank "
                     f"{len(ind)}, got {ctx.attr('batch_dims', 0)}")
    if p is None or ind is None:
        return None
    if axis is None:
        return [None] * (len(p) + len(ind) - 1 - batch_dims)
    if not -len(p) <= axis < len(p):
        ctx.fail(f"Expected axis in the range [{-len(p)}, {len(p)}), but got {axis}")
    axis %= len(p)
    if batch_dims > axis:
        ctx.fail(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis})")
    batch = TensorShape(p[:batch_dims])
    if not batch.is_compatible_with(ind[:batch_dims]):
        ctx.fail(f"params.shape[:{batch_dims}] = {batch} and indices.shape[:{batch_dims}] = "
                 f"{TensorShape(ind[:batch_dims])} must be equal (batch_dims)")
    merged = list(batch.merge_with(ind[:batch_dims]).dims or ())
    return merged + list(p[batch_dims:axis]) + list(ind[batch_dims:]) + list(p[axis + 1:])


@op("GatherV2", defaults={"batch_dims": 0, "Taxis": dtypes.int32})
def _gather_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    int_input(ctx, 1, "indices")
    int_input(ctx, 2, "axis")
    scalar_input(ctx, 2, "axis")
    axis = const_scalar(ctx, 2, "axis")
    return [spec(ctx.dtype(0), _gather_dims(ctx, axis, int(ctx.attr("batch_dims"))))]


@op("Gather", defaults={"validate_indices": True})
def _gather_v1(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "indices")
    return [spec(ctx.dtype(0), _gather_dims(ctx, 0, 0))]


@op("GatherNd")
def _gather_nd(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "indices")
    p, ind = ctx.shape(0).dims, ctx.shape(1).dims
    if ind is not None and not ind:
        ctx.fail("indices must be at least a vector")
    if ind is None or ind[-1] is None:
        return [spec(ctx.dtype(0), None)]
    m = ind[-1]
    if p is None:
        return [spec(ctx.dtype(0), None)]
    if m > len(p):
        ctx.fail(f"indices.shape[-1] must be <= params.rank, but saw indices shape "
                 f"{ctx.shape(1)} and params shape {ctx.shape(0)}")
    return [spec(ctx.dtype(0), list(ind[:-1]) + list(p[m:]))]


@op("ScatterNd")
def _scatter_nd(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    int_input(ctx, 0, "indices")
    int_input(ctx, 2, "shape")
    if ctx.dtype(0) is not ctx.dtype(2):
        ctx.fail(f"indices ({ctx.dtype(0).name}) and shape ({ctx.dtype(2).name}) must have the "
                 "same dtype")
    n = vector_len(ctx, 2, "shape")
    out = const_ints(ctx, 2)
    ind, upd = ctx.shape(0).dims, ctx.shape(1).dims
    if out is None:
        return [spec(ctx.dtype(1), None if n is None else [None] * n)]
    if any(d < 0 for d in out):
        ctx.fail(f"shape must be non-negative, got {out}")
    if ind is not None and ind and ind[-1] is not None and upd is not None:
        m = ind[-1]
        if m > len(out):
            ctx.fail(f"indices.shape[-1] = {m} must be <= the rank of shape {out}")
        want = TensorShape(list(ind[:-1]) + out[m:])
        if not want.is_compatible_with(upd):
            ctx.fail(f"updates must have shape indices.shape[:-1] + shape[indices.shape[-1]:] "
                     f"= {want}, got {ctx.shape(1)}")
    return [spec(ctx.dtype(1), out)]


@op("UnsortedSegmentSum", defaults={"Tnumsegments": dtypes.int32})
def _unsorted_segment_sum(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    if not is_numeric(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a numeric type")
    int_input(ctx, 1, "segment_ids")
    int_input(ctx, 2, "num_segments")
    scalar_input(ctx, 2, "num_segments")
    num = const_scalar(ctx, 2, "num_segments")
    if num is not None and num < 0:
        ctx.fail(f"num_segments must be non-negative, got {num}")
    d, ids = ctx.shape(0).dims, ctx.shape(1).dims
    if d is None or ids is None:
        return [spec(ctx.dtype(0), None)]
    if len(ids) > len(d) or not TensorShape(d[:len(ids)]).is_compatible_with(ids):
        ctx.fail(f"data.shape = {ctx.shape(0)} does not start with segment_ids.shape = "
                 f"{ctx.shape(1)}")
    return [spec(ctx.dtype(0), [num, *list(d[len(ids):])])]


@op("Unique", defaults={"out_idx": dtypes.int32})
def _unique(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if ctx.shape(0).rank not in (None, 1):
        ctx.fail(f"unique expects a 1D vector, got shape {ctx.shape(0)}")
    out_idx = ctx.attr("out_idx")
    if out_idx not in INDEX_TYPES:
        ctx.fail(f"out_idx must be int32 or int64, got {out_idx.name}")
    dims = ctx.shape(0).dims
    return [spec(ctx.dtype(0), [None]), spec(out_idx, [dims[0] if dims else None])]


declare_attrs({
    "Gather": "Tindices Tparams validate_indices",
    "GatherNd": "Tindices Tparams bad_indices_policy",
    "GatherV2": "Taxis Tindices Tparams batch_dims",
    "ScatterNd": "T Tindices bad_indices_policy",
    "Slice": "Index T",
    "StridedSlice": "Index T begin_mask ellipsis_mask end_mask new_axis_mask shrink_axis_mask",
    "StridedSliceGrad": "Index T begin_mask ellipsis_mask end_mask new_axis_mask shrink_axis_mask",
    "Unique": "T out_idx",
    "UnsortedSegmentSum": "T Tindices Tnumsegments",
})
