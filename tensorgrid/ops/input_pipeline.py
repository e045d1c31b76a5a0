"""Op definitions of TF1's input pipelines: ``RandomShuffleQueueV2``, ``QueueDequeueUpToV2`` and
``CountUpTo`` (TensorFlow's names and attrs; definitions only, the kernels are in
``kernels/shuffle_queue.py`` and ``kernels/count_up_to.py``).

``RandomShuffleQueueV2`` is a queue like ``FIFOQueueV2`` whose dequeues take random elements
and, until it is closed, leave at least ``min_after_dequeue`` behind; the queue ops of
``ops/data_flow.py`` (enqueue, dequeue, size, close) work on it. ``QueueDequeueUpToV2`` is
``QueueDequeueManyV2`` that, on a closed queue, returns what is left when fewer than ``n``
remain. ``CountUpTo`` increments an integer variable and fails with ``OutOfRangeError`` once it
reached ``limit`` (what ``num_epochs`` counts with).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

_HANDLE = (dtypes.resource, ())


@op("RandomShuffleQueueV2", stateful=True, ref_outputs=(0,),
    defaults={"shapes": [], "capacity": -1, "min_after_dequeue": 0, "seed": 0, "seed2": 0,
              "container": "", "shared_name": ""})
def _random_shuffle_queue(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("component_types"))
    shapes = list(ctx.attr("shapes"))
    if not types:
        ctx.fail("a queue needs at least one component type")
    if shapes and len(shapes) != len(types):
        ctx.fail(f"shapes has {len(shapes)} entries but component_types has {len(types)}")
    capacity = int(ctx.attr("capacity"))
    if capacity == 0 or capacity < -1:
        ctx.fail(f"capacity must be positive or -1 (unbounded), got {capacity}")
    after = int(ctx.attr("min_after_dequeue"))
    if after < 0 or (capacity > 0 and after >= capacity):
        ctx.fail(f"min_after_dequeue ({after}) must be >= 0 and below the capacity "
                 f"({capacity})")
    return [spec(*_HANDLE)]


@op("QueueDequeueUpToV2", stateful=True, ref_inputs=(0,), defaults={"timeout_ms": -1})
def _dequeue_up_to(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    if ctx.dtype(0) is not dtypes.resource:
        ctx.fail("input 0 must be the handle of a queue (dtype resource)")
    if ctx.dtype(1) is not dtypes.int32 or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"n must be an int32 scalar, got {ctx.dtype(1).name} {ctx.shape(1)}")
    return [spec(dt, TensorShape(None)) for dt in ctx.attr("component_types")]


@op("CountUpTo", stateful=True, ref_inputs=(0,))
def _count_up_to(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    ref = ctx.input(0)
    if ref.dtype not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"CountUpTo needs an int32 or int64 variable, got {ref.dtype.name}")
    if ref.shape.rank not in (None, 0):
        ctx.fail(f"CountUpTo needs a scalar variable, got shape {ref.shape}")
    return [spec(ref.dtype, ())]


not_differentiable("RandomShuffleQueueV2", "QueueDequeueUpToV2", "CountUpTo")


declare_attrs({
    "CountUpTo": "T limit",
    "QueueDequeueUpToV2": "component_types timeout_ms",
    "RandomShuffleQueueV2": ("capacity component_types container min_after_dequeue seed seed2 shapes "
        "shared_name"),
})
