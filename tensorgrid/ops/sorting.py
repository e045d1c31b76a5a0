"""The k largest entries of the last dimension: ``TopKV2`` (k an input) and the older ``TopK``
(k an attr), TensorFlow's op names, inputs and attrs. The python API is
``tensorgrid.framework.nn_norm_ops.top_k``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import INDEX_TYPES, const_scalar, is_real, scalar_input, spec


def _top_k_specs(ctx: InferContext, k: int | None) -> Sequence[TensorSpec]:
    if not is_real(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a real type")
    if k is not None and k < 0:
        ctx.fail(f"Need k >= 0, got {k}")
    index_type = ctx.attr("index_type", dtypes.int32)
    if index_type not in INDEX_TYPES:
        ctx.fail(f"index_type must be int32 or int64, got {index_type.name}")
    dims = ctx.shape(0).dims
    if dims is None:
        return [spec(ctx.dtype(0), None), spec(index_type, None)]
    if not dims:
        ctx.fail("input must be at least 1-D")
    if k is not None and dims[-1] is not None and dims[-1] < k:
        ctx.fail(f"input must have at least k={k} columns, got shape {ctx.shape(0)}")
    out = [*dims[:-1], k]
    return [spec(ctx.dtype(0), out), spec(index_type, out)]


@op("TopKV2", defaults={"sorted": True, "index_type": dtypes.int32, "Tk": dtypes.int32})
def _top_k_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    if ctx.dtype(1) not in INDEX_TYPES:
        ctx.fail(f"k must be int32 or int64, got {ctx.dtype(1).name}")
    scalar_input(ctx, 1, "k")
    return _top_k_specs(ctx, const_scalar(ctx, 1, "k"))


@op("TopK", defaults={"sorted": True})
def _top_k(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return _top_k_specs(ctx, int(ctx.attr("k")))


declare_attrs({
    "TopK": "T k sorted",
    "TopKV2": "T Tk index_type sorted",
})
