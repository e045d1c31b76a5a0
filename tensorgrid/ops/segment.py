"""Stitching and segment reductions: ``DynamicStitch``/``ParallelDynamicStitch``, the sorted
``Segment{Sum,Mean,Max,Min}`` and ``UnsortedSegment{Max,Min}`` (TensorFlow's op names, inputs and
attrs). ``UnsortedSegmentSum`` lives with the other scatters in ``ops/array_index.py``.

TensorFlow's gradient of a reduction over a tensor of unknown shape builds the kept-dims shape with
``DynamicStitch``, so graphs that TensorFlow exports need it. The python API is
``tensorgrid.framework.segment_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import int_input, is_numeric, is_real, spec


def _stitch(ctx: InferContext) -> Sequence[TensorSpec]:
    """indices[0..N-1], data[0..N-1] -> merged: row ``indices[i][j...]`` is ``data[i][j...]``."""
    if ctx.num_inputs == 0 or ctx.num_inputs % 2:
        ctx.fail(f"expects N indices then N data tensors, got {ctx.num_inputs} inputs")
    n = ctx.num_inputs // 2
    for i in range(n):
        if ctx.dtype(i) is not dtypes.int32:
            ctx.fail(f"indices[{i}] must be int32, got {ctx.dtype(i).name}")
    dt = ctx.same_dtype(*range(n, 2 * n))
    inner: TensorShape | None = None
    for i in range(n):
        idx, data = ctx.shape(i), ctx.shape(n + i)
        if idx.dims is None or data.dims is None:
            continue
        if len(data.dims) < len(idx.dims) or not TensorShape(
                data.dims[:len(idx.dims)]).is_compatible_with(idx):
            ctx.fail(f"data[{i}].shape = {data} does not start with indices[{i}].shape = {idx}")
        rest = TensorShape(data.dims[len(idx.dims):])
        if inner is not None and not inner.is_compatible_with(rest):
            ctx.fail(f"data[{i}] has inner shape {rest}, data of an earlier input has {inner}")
        inner = rest if inner is None else inner.merge_with(rest)
    size: int | None = None
    consts = [ctx.const(i) for i in range(n)]
    if all(c is not None for c in consts):
        size = max((int(c.max()) + 1 for c in consts if c is not None and c.size), default=0)
    if inner is None or inner.dims is None:
        return [spec(dt, None)]
    return [spec(dt, [size, *inner.dims])]


op("DynamicStitch")(_stitch)
op("ParallelDynamicStitch")(_stitch)


def _sorted_segment(allowed: str) -> object:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(2)
        ok = is_numeric if allowed == "numeric" else is_real
        if not ok(ctx.dtype(0)):
            ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a {allowed} type")
        int_input(ctx, 1, "segment_ids")
        ids, data = ctx.shape(1), ctx.shape(0)
        if ids.rank not in (None, 1):
            ctx.fail(f"segment_ids should be a vector, got shape {ids}")
        if data.rank == 0:
            ctx.fail("data must be at least rank 1")
        if ids.dims is not None and data.dims is not None and not TensorShape(
                data.dims[:1]).is_compatible_with(ids):
            ctx.fail(f"segment_ids should be the same size as dimension 0 of data: {ids} vs {data}")
        ids_v = ctx.const(1)
        num = None if ids_v is None else (int(ids_v[-1]) + 1 if ids_v.size else 0)
        if data.dims is None:
            return [spec(ctx.dtype(0), None)]
        return [spec(ctx.dtype(0), [num, *data.dims[1:]])]

    return infer


for _name, _allowed in (("SegmentSum", "numeric"), ("SegmentMean", "numeric"),
                        ("SegmentMax", "real"), ("SegmentMin", "real"), ("SegmentProd", "numeric")):
    op(_name)(_sorted_segment(_allowed))  # type: ignore[arg-type]


def _unsorted_minmax(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    if not is_real(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a real type")
    int_input(ctx, 1, "segment_ids")
    int_input(ctx, 2, "num_segments")
    if ctx.shape(2).rank not in (None, 0):
        ctx.fail(f"num_segments must be a scalar, got shape {ctx.shape(2)}")
    v = ctx.const(2)
    num = None if v is None else int(np.reshape(v, -1)[0])
    d, ids = ctx.shape(0).dims, ctx.shape(1).dims
    if d is None or ids is None:
        return [spec(ctx.dtype(0), None)]
    if len(ids) > len(d) or not TensorShape(d[:len(ids)]).is_compatible_with(ids):
        ctx.fail(f"data.shape = {ctx.shape(0)} does not start with segment_ids.shape = "
                 f"{ctx.shape(1)}")
    return [spec(ctx.dtype(0), [num, *d[len(ids):]])]


op("UnsortedSegmentMax", defaults={"Tnumsegments": dtypes.int32})(_unsorted_minmax)
op("UnsortedSegmentMin", defaults={"Tnumsegments": dtypes.int32})(_unsorted_minmax)
op("UnsortedSegmentProd", defaults={"Tnumsegments": dtypes.int32})(_unsorted_minmax)


# ------------------------------------------------------------------------------ sparse segments
# SparseSegment{Sum,Mean,SqrtN}(data, indices, segment_ids): the sorted segment reduction of
# data's rows at ``indices`` (what embedding_lookup_sparse builds), and their gradients' ops
# SparseSegment*Grad(grad, indices, segment_ids, output_dim0).

SPARSE_SEGMENT = ("SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN")


def _sparse_segment(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    if not is_real(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a real type")
    int_input(ctx, 1, "indices")
    int_input(ctx, 2, "segment_ids")
    for i, what in ((1, "indices"), (2, "segment_ids")):
        if ctx.shape(i).rank not in (None, 1):
            ctx.fail(f"{what} should be a vector, got shape {ctx.shape(i)}")
    if not ctx.shape(1).is_compatible_with(ctx.shape(2)):
        ctx.fail(f"segment_ids and indices should have the same size: {ctx.shape(2)} vs "
                 f"{ctx.shape(1)}")
    data = ctx.shape(0)
    if data.dims is None:
        return [spec(ctx.dtype(0), None)]
    if not data.dims:
        ctx.fail("data must be at least rank 1")
    return [spec(ctx.dtype(0), [None, *data.dims[1:]])]


def _sparse_segment_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    int_input(ctx, 1, "indices")
    int_input(ctx, 2, "segment_ids")
    v = ctx.const(3)
    dim0 = None if v is None else int(np.reshape(v, -1)[0])
    g = ctx.shape(0)
    if g.dims is None:
        return [spec(ctx.dtype(0), None)]
    return [spec(ctx.dtype(0), [dim0, *g.dims[1:]])]


for _name in SPARSE_SEGMENT:
    op(_name, defaults={"Tidx": dtypes.int32, "Tsegmentids": dtypes.int32})(_sparse_segment)
    op(_name + "Grad", defaults={"Tidx": dtypes.int32, "Tsegmentids": dtypes.int32})(
        _sparse_segment_grad)


def _sparse_segment_grad_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    """grad, indices, segment_ids, dense_output_dim0 -> (the rows of the gradient at the sorted
    unique indices, those indices): the gradient as IndexedSlices."""
    ctx.expect_inputs(4)
    int_input(ctx, 1, "indices")
    int_input(ctx, 2, "segment_ids")
    g = ctx.shape(0)
    rows = spec(ctx.dtype(0), None if g.dims is None else [None, *g.dims[1:]])
    return [rows, spec(ctx.dtype(1), [None])]


for _name in SPARSE_SEGMENT:
    op(_name + "GradV2", defaults={"Tidx": dtypes.int32, "Tsegmentids": dtypes.int32})(
        _sparse_segment_grad_v2)


declare_attrs({
    "DynamicStitch": "N T",
    "ParallelDynamicStitch": "N T",
    "SegmentMax": "T Tindices",
    "SegmentMean": "T Tindices",
    "SegmentMin": "T Tindices",
    "SegmentProd": "T Tindices",
    "SegmentSum": "T Tindices",
    "SparseSegmentMean": "T Tidx Tsegmentids sparse_gradient",
    "SparseSegmentMeanGrad": "T Tidx Tsegmentids",
    "SparseSegmentMeanGradV2": "T Tidx Tsegmentids",
    "SparseSegmentSqrtN": "T Tidx Tsegmentids sparse_gradient",
    "SparseSegmentSqrtNGrad": "T Tidx Tsegmentids",
    "SparseSegmentSqrtNGradV2": "T Tidx Tsegmentids",
    "SparseSegmentSum": "T Tidx Tsegmentids sparse_gradient",
    "SparseSegmentSumGrad": "T Tidx Tsegmentids",
    "SparseSegmentSumGradV2": "T Tidx Tsegmentids",
    "UnsortedSegmentMax": "T Tindices Tnumsegments",
    "UnsortedSegmentMin": "T Tindices Tnumsegments",
    "UnsortedSegmentProd": "T Tindices Tnumsegments",
})
