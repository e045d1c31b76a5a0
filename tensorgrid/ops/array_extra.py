"""``ReverseSequence`` (reverse the first ``seq_lengths[b]`` entries of each batch row; what
``bidirectional_dynamic_rnn`` builds) and ``MatrixBandPart`` (keep a band of the innermost
matrices; attention masks), with TensorFlow's op names, inputs and attrs. The python API is
``tensorgrid.framework.array_extra_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import int_input, scalar_input, spec


@op("ReverseSequence", defaults={"batch_dim": 0})
def _reverse_sequence(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "seq_lengths")
    seq_dim, batch_dim = int(ctx.attr("seq_dim")), int(ctx.attr("batch_dim"))
    dims = ctx.shape(0).dims
    if ctx.shape(1).rank not in (None, 1):
        ctx.fail(f"seq_lengths must be 1-dim, not {ctx.shape(1)}")
    if dims is not None:
        for what, d in (("seq_dim", seq_dim), ("batch_dim", batch_dim)):
            if not 0 <= d < len(dims):
                ctx.fail(f"{what} {d} is out of range for an input of rank {len(dims)}")
        if seq_dim == batch_dim:
            ctx.fail(f"seq_dim == batch_dim == {seq_dim}")
        len_dims = ctx.shape(1).dims
        n = len_dims[0] if len_dims else None
        if n is not None and dims[batch_dim] is not None and n != dims[batch_dim]:
            ctx.fail(f"len(seq_lengths) = {n} != input.dims({batch_dim}) = {dims[batch_dim]}")
    return [ctx.input(0)]


@op("MatrixBandPart")
def _matrix_band_part(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    rank = ctx.shape(0).rank
    if rank is not None and rank < 2:
        ctx.fail(f"input must be at least 2-dim, got shape {ctx.shape(0)}")
    for i, what in ((1, "num_lower"), (2, "num_upper")):
        int_input(ctx, i, what)
        scalar_input(ctx, i, what)
    return [ctx.input(0)]


# ``Diag``/``DiagPart``: a rank-k tensor <-> the rank-2k tensor with it on the diagonal (what
# tf.metrics.mean_iou builds); ``MatrixDiag``/``MatrixDiagPart``: the same on the innermost dims
# of a batch (v1 ops, square matrices).


@op("Diag")
def _diag(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dims = ctx.shape(0).dims
    if dims is not None and not dims:
        ctx.fail("Diag needs input of rank 1 or more")
    return [spec(ctx.dtype(0), None if dims is None else [*dims, *dims])]


@op("DiagPart")
def _diag_part(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dims = ctx.shape(0).dims
    if dims is None:
        return [spec(ctx.dtype(0), None)]
    k = len(dims) // 2
    if not dims or len(dims) % 2 or not TensorShape(dims[:k]).is_compatible_with(dims[k:]):
        ctx.fail(f"Input must have even rank with matching halves, got shape {ctx.shape(0)}")
    return [spec(ctx.dtype(0), TensorShape(dims[:k]).merge_with(dims[k:]))]


@op("MatrixDiag")
def _matrix_diag(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dims = ctx.shape(0).dims
    if dims is not None and not dims:
        ctx.fail("input must be at least 1-dim")
    return [spec(ctx.dtype(0), None if dims is None else [*dims, dims[-1]])]


@op("MatrixDiagPart")
def _matrix_diag_part(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dims = ctx.shape(0).dims
    if dims is None:
        return [spec(ctx.dtype(0), None)]
    if len(dims) < 2:
        ctx.fail(f"input must be at least 2-dim, got shape {ctx.shape(0)}")
    m, n = dims[-2], dims[-1]
    return [spec(ctx.dtype(0), [*dims[:-2], None if m is None or n is None else min(m, n)])]


declare_attrs({
    "Diag": "T",
    "DiagPart": "T",
    "MatrixBandPart": "T Tindex",
    "MatrixDiag": "T",
    "MatrixDiagPart": "T",
    "ReverseSequence": "T Tlen batch_dim seq_dim",
})
