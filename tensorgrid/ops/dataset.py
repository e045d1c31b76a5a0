"""Op definitions behind ``tf.data`` (tensorgrid's own; definitions only, kernels in
``kernels/dataset.py``).

A ``tf.data`` pipeline is lowered to ordinary graph ops that compute element ``i`` of the
dataset from its index (``tensorgrid/data``); what is stateful is small and lives here:

* ``DatasetIteratorNext`` returns the iterator's next position and advances it, or fails with
  ``OutOfRangeError`` once the position reaches ``limit`` (-1: no end). The position is a
  resource of the device, named by ``shared_name``; with ``require_init`` it must have been set
  by ``DatasetIteratorReset`` first (an initializable iterator), else it starts at 0.
* ``DatasetIteratorReset`` sets the position to 0 and the end to its input ``limit`` (the
  initializer of an initializable iterator, whose ``DatasetIteratorNext`` uses that end).
* ``DatasetShuffleIndex`` maps output positions of a shuffled dataset to input positions: the
  order TF's buffered shuffle (a ``buffer_size`` buffer, a random slot taken per element)
  produces, drawn per ``epoch`` when ``reshuffle_each_iteration``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec


def _int64_scalar(ctx: InferContext, i: int, what: str) -> None:
    if ctx.dtype(i) is not dtypes.int64 or ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be an int64 scalar, got {ctx.dtype(i).name} {ctx.shape(i)}")


@op("DatasetIteratorNext", stateful=True,
    defaults={"container": "", "shared_name": "", "require_init": False})
def _iterator_next(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _int64_scalar(ctx, 0, "limit")
    return [spec(dtypes.int64, ())]


@op("DatasetIteratorReset", stateful=True, defaults={"container": "", "shared_name": ""})
def _iterator_reset(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _int64_scalar(ctx, 0, "limit")
    return []


@op("DatasetShuffleIndex", stateful=True,
    defaults={"seed": 0, "seed2": 0, "reshuffle_each_iteration": True})
def _shuffle_index(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    if ctx.dtype(0) is not dtypes.int64 or ctx.dtype(1) is not dtypes.int64:
        ctx.fail("index and epoch must be int64")
    if not ctx.shape(0).is_compatible_with(ctx.shape(1)):
        ctx.fail(f"index and epoch must have one shape, got {ctx.shape(0)} and {ctx.shape(1)}")
    _int64_scalar(ctx, 2, "n")
    if int(ctx.attr("buffer_size")) < 1:
        ctx.fail(f"buffer_size must be greater than zero, got {ctx.attr('buffer_size')}")
    return [spec(dtypes.int64, ctx.shape(0))]


not_differentiable("DatasetIteratorNext", "DatasetIteratorReset", "DatasetShuffleIndex")


declare_attrs({
    "DatasetIteratorNext": "container require_init shared_name",
    "DatasetIteratorReset": "container shared_name",
    "DatasetShuffleIndex": "buffer_size reshuffle_each_iteration seed seed2",
})


@op("DatasetInterleaveOrder", defaults={"cycle_length": 1, "block_length": 1})
def _interleave_order(ctx: InferContext) -> Sequence[TensorSpec]:
    """sizes (int64 [n]: the elements of each of n datasets) -> int64 [total, 2]: for each
    output position of their interleave (TensorFlow's order), the dataset and its element."""
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.int64 or ctx.shape(0).rank not in (None, 1):
        ctx.fail(f"sizes must be an int64 vector, got {ctx.dtype(0).name} {ctx.shape(0)}")
    if int(ctx.attr("cycle_length")) < 1 or int(ctx.attr("block_length")) < 1:
        ctx.fail("cycle_length and block_length must be positive")
    return [spec(dtypes.int64, (None, 2))]


not_differentiable("DatasetInterleaveOrder")
declare_attrs({"DatasetInterleaveOrder": "cycle_length:int block_length:int"})
