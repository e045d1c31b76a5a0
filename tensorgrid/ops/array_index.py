"""Indexing ops: slicing (``Slice``, ``StridedSlice`` and ``Tensor.__getitem__``), gathering,
scattering, segment sums, masks and ``unique`` (TensorFlow's op names, inputs and attrs).

The strided-slice rules (how begin/end/strides and the five masks select elements) are written once
here, as ``dense_slice``; inference, the kernels and the gradient all use it.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import constant, convert_to_tensor, make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.framework.tensor_util import constant_value
from tensorgrid.ops import array as _array
from tensorgrid.ops._infer import const_ints, is_numeric, spec
from tensorgrid.ops.array import (
    _const_scalar,
    _int_input,
    _int_tensor,
    _scalar_input,
    _vector_len,
    concat,
    expand_dims,
    in_inputs_graph,
    reshape,
    shape,
    squeeze,
    stack,
)

__all__ = [
    "slice", "strided_slice", "gather", "gather_nd", "scatter_nd", "unsorted_segment_sum",
    "boolean_mask", "sequence_mask", "unique",
]

_INDEX_TYPES = (dtypes.int32, dtypes.int64)
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
            if e.known and d is not None and not -d <= e.begin < d:  # type: ignore[operator]
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
        _int_input(ctx, i, what)
        k = _vector_len(ctx, i, what)
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
        return ctx.fail(str(exc))  # type: ignore[no-any-return]


@op("StridedSlice", defaults=dict.fromkeys(SLICE_MASKS, 0))
def _strided_slice(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    return [spec(ctx.dtype(0), _strided_dims(ctx, ctx.shape(0).dims, 1))]


@op("StridedSliceGrad", defaults=dict.fromkeys(SLICE_MASKS, 0))
def _strided_slice_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(5)
    _int_input(ctx, 0, "shape")
    n = _vector_len(ctx, 0, "shape")
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
    _int_input(ctx, 1, "begin")
    nb, ns = _vector_len(ctx, 1, "begin"), _vector_len(ctx, 2, "size")
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
    _int_input(ctx, 1, "indices")
    _int_input(ctx, 2, "axis")
    _scalar_input(ctx, 2, "axis")
    axis = _const_scalar(ctx, 2, "axis")
    return [spec(ctx.dtype(0), _gather_dims(ctx, axis, int(ctx.attr("batch_dims"))))]


@op("Gather", defaults={"validate_indices": True})
def _gather_v1(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "indices")
    return [spec(ctx.dtype(0), _gather_dims(ctx, 0, 0))]


@op("GatherNd")
def _gather_nd(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _int_input(ctx, 1, "indices")
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
    _int_input(ctx, 0, "indices")
    _int_input(ctx, 2, "shape")
    if ctx.dtype(0) is not ctx.dtype(2):
        ctx.fail(f"indices ({ctx.dtype(0).name}) and shape ({ctx.dtype(2).name}) must have the "
                 "same dtype")
    n = _vector_len(ctx, 2, "shape")
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
    _int_input(ctx, 1, "segment_ids")
    _int_input(ctx, 2, "num_segments")
    _scalar_input(ctx, 2, "num_segments")
    num = _const_scalar(ctx, 2, "num_segments")
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
    if out_idx not in _INDEX_TYPES:
        ctx.fail(f"out_idx must be int32 or int64, got {out_idx.name}")
    dims = ctx.shape(0).dims
    return [spec(ctx.dtype(0), [None]), spec(out_idx, [dims[0] if dims else None])]


# ------------------------------------------------------------------------------ python API


def _index_vectors(*parts: Any) -> list[Tensor]:
    """begin/end/strides-like arguments as tensors of one index dtype."""
    wide = any(isinstance(p, Tensor) and p.dtype is dtypes.int64 for p in parts)
    out = []
    for p in parts:
        t = _int_tensor(p) if not wide or isinstance(p, Tensor) else \
            convert_to_tensor(p, dtype=dtypes.int64)
        if wide and t.dtype is not dtypes.int64:
            from tensorgrid.ops.math import cast

            t = cast(t, dtypes.int64)
        out.append(t)
    return out


@in_inputs_graph
def slice(input_: Any, begin: Any, size: Any, name: str | None = None) -> Tensor:
    """``input_[begin[i] : begin[i] + size[i]]`` in each dim i; a size of -1 takes the rest.

    Raises:
        InvalidArgumentError: the slice does not fit in the input (at build time when known).
    """
    t = convert_to_tensor(input_)
    b, s = _index_vectors(begin, size)
    return make_op("Slice", [t, b, s], {"T": t.dtype, "Index": b.dtype}, name=name or "Slice")


@in_inputs_graph
def strided_slice(input_: Any, begin: Any, end: Any, strides: Any = None, begin_mask: int = 0,
                  end_mask: int = 0, ellipsis_mask: int = 0, new_axis_mask: int = 0,
                  shrink_axis_mask: int = 0, var: Any = None,
                  name: str | None = None) -> Tensor:
    """Extract a strided slice, as ``Tensor.__getitem__`` does; the masks say, bit i for entry
    i: begin/end ignored (take from the start / to the end), an ellipsis, a new axis of size 1, or
    take the single index ``begin[i]`` and drop the dim.

    Raises:
        InvalidArgumentError: a bad spec (several ellipses, a zero stride, too many entries, an
            out-of-bounds index), at build time when known.
    """
    t = convert_to_tensor(input_)
    if strides is None:
        n = builtins.len(begin) if isinstance(begin, list | tuple) else None
        if n is not None:
            strides = [1] * n
        else:
            from tensorgrid.ops.array import ones_like

            strides = ones_like(_int_tensor(begin))
    b, e, s = _index_vectors(begin, end, strides)
    attrs: dict[str, Any] = {"T": t.dtype, "Index": b.dtype}
    for m, v in zip(SLICE_MASKS, (begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                  shrink_axis_mask)):
        attrs[m] = int(v)
    return make_op("StridedSlice", [t, b, e, s], attrs, name=name or "StridedSlice")


@in_inputs_graph
def strided_slice_grad(shape: Any, begin: Any, end: Any, strides: Any, dy: Any,
                       masks: Sequence[int], name: str | None = None) -> Tensor:
    """The gradient of a strided slice: ``dy`` placed where the slice took its values from, in
    zeros of ``shape``."""
    d = convert_to_tensor(dy)
    sh, b, e, s = _index_vectors(shape, begin, end, strides)
    attrs: dict[str, Any] = {"T": d.dtype, "Index": b.dtype}
    attrs.update(zip(SLICE_MASKS, (int(m) for m in masks)))
    return make_op("StridedSliceGrad", [sh, b, e, s, d], attrs, name=name or "StridedSliceGrad")


_INDEX_ERROR = ("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and scalar "
                "tf.int32/tf.int64 tensors are valid indices")


def _index_part(value: Any) -> int | Tensor:
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{_INDEX_ERROR}, got {value!r}")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, Tensor) and value.dtype in _INDEX_TYPES and \
            value.shape.rank in (None, 0):
        return value
    raise TypeError(f"{_INDEX_ERROR}, got {value!r}")


def _pack_index(parts: list[int | Tensor], name: str) -> Tensor:
    if all(isinstance(p, int) for p in parts):
        vals = np.asarray(parts, dtype=np.int64)
        fits = not vals.size or (vals.min() >= -(2**31) and vals.max() < 2**31)
        return constant(vals.astype(np.int32 if fits else np.int64), name=name)
    wide = any(isinstance(p, Tensor) and p.dtype is dtypes.int64 for p in parts)
    dt = dtypes.int64 if wide else dtypes.int32
    ts = []
    for p in parts:
        if isinstance(p, Tensor):
            if p.dtype is not dt:
                from tensorgrid.ops.math import cast

                p = cast(p, dt)
            ts.append(p)
        else:
            ts.append(constant(p, dtype=dt))
    return stack(ts, name=name)


@in_inputs_graph
def _getitem(tensor: Tensor, key: Any) -> Tensor:
    """``tensor[key]`` with numpy's basic indexing: ints (negative from the end), slices with
    steps, ``...``, ``None``/``tf.newaxis`` and scalar int tensors (one StridedSlice op)."""
    if not isinstance(key, tuple):
        key = (key,)
    begin: list[int | Tensor] = []
    end: list[int | Tensor] = []
    strides: list[int | Tensor] = []
    masks = [0] * 5
    for i, s in enumerate(key):
        bit = 1 << i
        if isinstance(s, builtins.slice):
            for part, target, k in ((s.start, begin, 0), (s.stop, end, 1)):
                if part is None:
                    target.append(0)
                    masks[k] |= bit
                else:
                    target.append(_index_part(part))
            strides.append(1 if s.step is None else _index_part(s.step))
        elif s is Ellipsis or s is None:
            begin.append(0)
            end.append(0)
            strides.append(1)
            masks[2 if s is Ellipsis else 3] |= bit
        else:
            v = _index_part(s)
            begin.append(v)
            if isinstance(v, Tensor):
                from tensorgrid.ops.math import add

                end.append(add(v, constant(1, dtype=v.dtype)))
            else:
                end.append(v + 1)
            strides.append(1)
            masks[4] |= bit
    g = tensor.graph
    with g.name_scope("strided_slice") as scope:
        b = _pack_index(begin, "stack")
        e = _pack_index(end, "stack_1")
        st = _pack_index(strides, "stack_2")
        return strided_slice(tensor, b, e, st, begin_mask=masks[0], end_mask=masks[1],
                             ellipsis_mask=masks[2], new_axis_mask=masks[3],
                             shrink_axis_mask=masks[4], name=scope)


# ``tensor[key]``; the name is for code that mypy checks (it does not see the installed method).
tensor_getitem = _getitem
setattr(Tensor, "__getitem__", _getitem)  # noqa: B010 - installed on the class at import


@in_inputs_graph
def gather(params: Any, indices: Any, validate_indices: Any = None, name: str | None = None,
           axis: Any = None, batch_dims: int = 0) -> Tensor:
    """Take slices of ``params`` along ``axis`` at ``indices``: the output shape is
    ``params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]``.

    With ``batch_dims = b`` the first b dims of params and indices are batch dims gathered
    pairwise. Indices out of range fail at run time (InvalidArgumentError).
    """
    p = convert_to_tensor(params)
    i = convert_to_tensor(indices)
    a = _int_tensor(0 if axis is None else axis)
    return make_op("GatherV2", [p, i, a], {"Tparams": p.dtype, "Tindices": i.dtype,
                                           "Taxis": a.dtype, "batch_dims": int(batch_dims)},
                   name=name or "GatherV2")


@in_inputs_graph
def gather_nd(params: Any, indices: Any, name: str | None = None) -> Tensor:
    """Gather slices of ``params`` at the multi-indices in the last dim of ``indices``: the
    output shape is ``indices.shape[:-1] + params.shape[indices.shape[-1]:]``."""
    p = convert_to_tensor(params)
    i = convert_to_tensor(indices)
    return make_op("GatherNd", [p, i], {"Tparams": p.dtype, "Tindices": i.dtype},
                   name=name or "GatherNd")


@in_inputs_graph
def scatter_nd(indices: Any, updates: Any, shape: Any, name: str | None = None) -> Tensor:
    """Zeros of ``shape`` with ``updates`` added at the multi-indices in ``indices`` (duplicate
    indices add up)."""
    i = convert_to_tensor(indices)
    u = convert_to_tensor(updates)
    s = convert_to_tensor(shape, dtype=i.dtype) if not isinstance(shape, Tensor) else shape
    return make_op("ScatterNd", [i, u, s], {"T": u.dtype, "Tindices": i.dtype},
                   name=name or "ScatterNd")


@in_inputs_graph
def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any,
                         name: str | None = None) -> Tensor:
    """``out[k] = sum of data[j...] over all j with segment_ids[j...] == k``, for k below
    ``num_segments``; negative ids are dropped, ids >= num_segments fail at run time."""
    d = convert_to_tensor(data)
    ids = convert_to_tensor(segment_ids)
    n = _int_tensor(num_segments)
    return make_op("UnsortedSegmentSum", [d, ids, n], {"T": d.dtype, "Tindices": ids.dtype,
                                                       "Tnumsegments": n.dtype},
                   name=name or "UnsortedSegmentSum")


@in_inputs_graph
def boolean_mask(tensor: Any, mask: Any, name: str = "boolean_mask", axis: Any = None) -> Tensor:
    """The entries of ``tensor`` where ``mask`` is True: the mask covers dims
    ``axis .. axis + mask.rank`` of the tensor, which collapse into one dim of the selected entries.

    Raises:
        ValueError: the mask's rank is unknown or 0, or its shape does not fit the tensor's.
    """
    t = convert_to_tensor(tensor)
    m = convert_to_tensor(mask)
    nd = m.shape.rank
    if nd is None:
        raise ValueError("Number of mask dimensions must be specified, even if some dimensions "
                         "are None. E.g. shape=[None] is ok, but shape=None is not.")
    if nd == 0:
        raise ValueError("mask cannot be scalar.")
    ax = 0 if axis is None else int(axis)
    dims = t.shape.dims
    if dims is not None:
        if ax < 0:
            ax += len(dims)
        covered = TensorShape(dims[ax:ax + nd])
        if covered.rank != nd or not covered.is_compatible_with(m.shape):
            raise ValueError(f"Shapes {covered} and {m.shape} are incompatible (tensor dims "
                             "covered by the mask)")
    from tensorgrid.ops.math import where

    with t.graph.name_scope(name):
        new_shape: Any
        if dims is not None and t.shape.is_fully_defined():
            new_shape = [*dims[:ax], _product(dims[ax:ax + nd]), *dims[ax + nd:]]
        else:
            full = shape(t)
            if nd == 1:
                lead_t = _getitem(full, builtins.slice(ax, ax + 1))
            else:
                from tensorgrid.ops.math import reduce_prod

                lead_t = reshape(reduce_prod(_getitem(full, builtins.slice(ax, ax + nd))), [1])
            new_shape = concat([_getitem(full, builtins.slice(None, ax)), lead_t,
                                _getitem(full, builtins.slice(ax + nd, None))], 0)
        flat = reshape(t, new_shape)
        if dims is not None:  # what is known of the collapsed shape
            flat.set_shape([*dims[:ax], _product(dims[ax:ax + nd]), *dims[ax + nd:]])
        picked = squeeze(where(reshape(m, [-1])), axis=[1])
        return gather(flat, picked, axis=ax)


def _product(dims: Sequence[int | None]) -> int | None:
    n = 1
    for d in dims:
        if d is None:
            return None
        n *= d
    return n


@in_inputs_graph
def sequence_mask(lengths: Any, maxlen: Any = None, dtype: Any = dtypes.bool_,
                  name: str | None = None) -> Tensor:
    """``mask[..., j] = j < lengths[...]`` for j below ``maxlen`` (default: the largest length)."""
    from tensorgrid.ops.math import cast, less, reduce_max

    lens = convert_to_tensor(lengths)
    with lens.graph.name_scope(name or "SequenceMask"):
        limit = reduce_max(lens) if maxlen is None else \
            convert_to_tensor(maxlen, dtype_hint=lens.dtype)
        row = _array.range(constant(0, dtype=limit.dtype), limit,
                           constant(1, dtype=limit.dtype))
        mask = less(row, cast(expand_dims(lens, -1), limit.dtype))
        want = dtypes.as_dtype(dtype)
        return mask if want is dtypes.bool_ else cast(mask, want)


class UniqueOutput(NamedTuple):
    """What ``unique`` returns: the distinct values in order of first appearance, and for each
    input element the position of its value in ``y``."""

    y: Tensor
    idx: Tensor


@in_inputs_graph
def unique(x: Any, out_idx: Any = dtypes.int32, name: str | None = None) -> UniqueOutput:
    """The distinct values of a 1-D tensor in order of first appearance, with each element's
    position among them (``x == gather(y, idx)``)."""
    t = convert_to_tensor(x)
    y, idx = make_op("Unique", [t], {"T": t.dtype, "out_idx": dtypes.as_dtype(out_idx)},
                     name=name or "Unique")
    return UniqueOutput(y, idx)


def static_ints(t: Tensor) -> list[int] | None:
    """A tensor's value as a list of ints when known while building (for gradient rules)."""
    v = constant_value(t)
    return None if v is None else [int(d) for d in np.asarray(v).reshape(-1)]
