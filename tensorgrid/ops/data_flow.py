"""Queues and conditional accumulators: op definitions with TensorFlow's op names and attrs (the
python API, ``tf.FIFOQueue`` and ``tf.ConditionalAccumulator``, is ``framework.data_flow_ops``).

``FIFOQueueV2`` and ``ConditionalAccumulator`` output a *handle* (dtype ``resource``): a reference to
an object that lives in its device's ``ResourceMgr`` under ``(container, shared_name or node name)``,
so every graph registered on a task shares it by name. Every other op here takes the handle as its
input 0, a reference input, so placement puts it on the device of the queue or accumulator.

Ops that may wait are async kernels (``kernels/data_flow.py``): ``QueueDequeueV2`` and
``QueueDequeueManyV2`` wait for elements, ``QueueEnqueueV2``/``QueueEnqueueManyV2`` for room in a
full bounded queue, ``AccumulatorTakeGradient`` for enough gradients. A wait ends early, taking
nothing, when its step is cancelled or aborted (deadline, failure elsewhere).

``AccumulatorWaitForGradients`` is a tensorgrid extension (TensorFlow has no such op): it waits like
``AccumulatorTakeGradient`` but takes nothing, at most ``timeout_ms`` (-1: no limit), and returns how
many gradients are in. With ``fail_on_timeout`` it fails with ``DeadlineExceededError`` when the time
is up instead, so takes that depend on it run only when none of them can block
(``SyncReplicasOptimizer``'s update does this).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

_HANDLE = (dtypes.resource, ())
_QUEUE_ATTRS = {"shapes": [], "capacity": -1, "container": "", "shared_name": ""}
_TIMEOUT = {"timeout_ms": -1}  # as in TensorFlow, accepted and not supported: use RunOptions


def _expect_handle(ctx: InferContext) -> None:
    if ctx.num_inputs < 1 or ctx.dtype(0) is not dtypes.resource:
        ctx.fail("input 0 must be the handle of a queue or an accumulator (dtype resource)")


def _expect_scalar(ctx: InferContext, i: int, dtype: dtypes.DType, what: str) -> None:
    if ctx.dtype(i) is not dtype:
        ctx.fail(f"{what} must be {dtype.name}, got {ctx.dtype(i).name}")
    if ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")


# ------------------------------------------------------------------------------ queues


@op("FIFOQueueV2", stateful=True, ref_outputs=(0,), defaults=_QUEUE_ATTRS)
def _fifo_queue(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("component_types"))
    shapes = list(ctx.attr("shapes"))
    if not types:
        ctx.fail("a queue needs at least one component type")
    if shapes and len(shapes) != len(types):
        ctx.fail(f"shapes has {len(shapes)} entries but component_types has {len(types)}")
    if int(ctx.attr("capacity")) == 0 or int(ctx.attr("capacity")) < -1:
        ctx.fail(f"capacity must be positive or -1 (unbounded), got {ctx.attr('capacity')}")
    return [spec(*_HANDLE)]


def _enqueue_infer(many: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        _expect_handle(ctx)
        types = list(ctx.attr("Tcomponents"))
        if ctx.num_inputs - 1 != len(types):
            ctx.fail(f"expects {len(types)} components, got {ctx.num_inputs - 1}")
        for i, dt in enumerate(types, start=1):
            if ctx.dtype(i) is not dt:
                ctx.fail(f"component {i - 1} has dtype {ctx.dtype(i).name}, expected {dt.name}")
            if many and ctx.shape(i).rank == 0:
                ctx.fail(f"component {i - 1} of an enqueue_many must have a batch dimension")
        return []

    return infer


op("QueueEnqueueV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)(_enqueue_infer(False))
op("QueueEnqueueManyV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)(_enqueue_infer(True))


@op("QueueDequeueV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)
def _dequeue(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dt, TensorShape(None)) for dt in ctx.attr("component_types")]


@op("QueueDequeueManyV2", stateful=True, ref_inputs=(0,), defaults=_TIMEOUT)
def _dequeue_many(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "n")
    return [spec(dt, TensorShape(None)) for dt in ctx.attr("component_types")]


@op("QueueSizeV2", stateful=True, ref_inputs=(0,))
def _queue_size(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.int32, ())]


@op("QueueIsClosedV2", stateful=True, ref_inputs=(0,))
def _queue_is_closed(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.bool_, ())]


@op("QueueCloseV2", stateful=True, ref_inputs=(0,), defaults={"cancel_pending_enqueues": False})
def _queue_close(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return []


# ------------------------------------------------------------------------------ accumulators


@op("ConditionalAccumulator", stateful=True, ref_outputs=(0,),
    defaults={"shape": TensorShape(None), "container": "", "shared_name": "",
              "reduction_type": "MEAN"})
def _accumulator(ctx: InferContext) -> Sequence[TensorSpec]:
    dt = ctx.attr("dtype")
    if not (dt.is_floating or dt.is_integer or dt.is_complex):
        ctx.fail(f"an accumulator needs a numeric dtype, got {dt.name}")
    if ctx.attr("reduction_type") not in ("MEAN", "SUM"):
        ctx.fail(f"reduction_type must be 'MEAN' or 'SUM', got {ctx.attr('reduction_type')!r}")
    return [spec(*_HANDLE)]


@op("AccumulatorApplyGradient", stateful=True, ref_inputs=(0,))
def _apply_gradient(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int64, "local_step")
    if ctx.dtype(2) is not ctx.attr("dtype"):
        ctx.fail(f"gradient has dtype {ctx.dtype(2).name}; the accumulator's is "
                 f"{ctx.attr('dtype').name}")
    return []


@op("AccumulatorTakeGradient", stateful=True, ref_inputs=(0,))
def _take_gradient(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "num_required")
    return [spec(ctx.attr("dtype"), TensorShape(None))]


@op("AccumulatorWaitForGradients", stateful=True, ref_inputs=(0,),
    defaults={"timeout_ms": -1, "fail_on_timeout": False})
def _wait_for_gradients(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int32, "num_required")
    return [spec(dtypes.int32, ())]


@op("AccumulatorSetGlobalStep", stateful=True, ref_inputs=(0,))
def _set_global_step(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx)
    _expect_scalar(ctx, 1, dtypes.int64, "new_global_step")
    return []


@op("AccumulatorNumAccumulated", stateful=True, ref_inputs=(0,))
def _num_accumulated(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx)
    return [spec(dtypes.int32, ())]


not_differentiable(
    "FIFOQueueV2", "QueueEnqueueV2", "QueueEnqueueManyV2", "QueueDequeueV2", "QueueDequeueManyV2",
    "QueueSizeV2", "QueueIsClosedV2", "QueueCloseV2", "ConditionalAccumulator",
    "AccumulatorApplyGradient", "AccumulatorTakeGradient", "AccumulatorWaitForGradients",
    "AccumulatorSetGlobalStep", "AccumulatorNumAccumulated",
)


declare_attrs({
    "AccumulatorApplyGradient": "dtype",
    "AccumulatorNumAccumulated": "",
    "AccumulatorSetGlobalStep": "",
    "AccumulatorTakeGradient": "dtype",
    "AccumulatorWaitForGradients": "fail_on_timeout timeout_ms",
    "ConditionalAccumulator": "container dtype reduction_type shape shared_name",
    "FIFOQueueV2": "capacity component_types container shapes shared_name",
    "QueueCloseV2": "cancel_pending_enqueues",
    "QueueDequeueManyV2": "component_types timeout_ms",
    "QueueDequeueV2": "component_types timeout_ms",
    "QueueEnqueueManyV2": "Tcomponents timeout_ms",
    "QueueEnqueueV2": "Tcomponents timeout_ms",
    "QueueIsClosedV2": "",
    "QueueSizeV2": "",
})
