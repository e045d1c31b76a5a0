"""Kernels of the queue and conditional-accumulator ops.

A queue or an accumulator is an object in its device's ``ResourceMgr``, found by (container,
shared_name or node name) when the handle op's kernel is built. Its state changes under a lock, so
steps of several plans (and, in a local Session, several threads with their own event loops) may use
it at once.

Their states are ``fifo_queue.FIFOQueue`` and ``conditional_accumulator.ConditionalAccumulator``;
how an op waits on them, and why a cancelled wait loses nothing, is told in ``waitable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import AsyncKernel, KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.shapes import as_shape
from tensorgrid.kernels.conditional_accumulator import ConditionalAccumulator
from tensorgrid.kernels.fifo_queue import FIFOQueue

# queues and accumulators live in host memory (as TensorFlow's): their ops run on a CPU
HOST = "CPU"
T = TypeVar("T")


def _resource(ctx: KernelContext, kind: type[T], create: Callable[[], T],
              why_not: Callable[[T], str | None]) -> T:
    name = ctx.attr("shared_name") or ctx.name
    found = ctx.resources.lookup_or_create(ctx.attr("container"), name, create)
    if not isinstance(found, kind):
        raise ctx.error(errors.InvalidArgumentError,
                        f"Resource '{name}' on {ctx.device} is a {type(found).__name__}, not a "
                        f"{kind.__name__}")
    problem = why_not(found)
    if problem is not None:
        raise ctx.error(errors.InvalidArgumentError, problem)
    return found


def _handle(ctx: KernelContext, value: Any, kind: type[T]) -> T:
    if not isinstance(value, kind):
        raise ctx.error(errors.InvalidArgumentError,
                        f"Input 0 must be the handle of a {kind.__name__}, got "
                        f"{type(value).__name__}")
    return value


@kernel("FIFOQueueV2", HOST)
def _fifo_queue(ctx: KernelContext) -> Callable[[], FIFOQueue]:
    types = [dtypes.as_dtype(d) for d in ctx.attr("component_types")]
    shapes = [as_shape(s) for s in ctx.attr("shapes")]
    capacity = int(ctx.attr("capacity"))
    name = ctx.attr("shared_name") or ctx.name
    queue = _resource(ctx, FIFOQueue, lambda: FIFOQueue(name, types, shapes, capacity),
                      lambda q: q.matches(types, shapes, capacity))
    return lambda: queue


def _to_device(ctx: KernelContext, values: Sequence[Any]) -> list[Any]:
    xp = ctx.xp
    return [xp.asarray(v) for v in values]


@kernel("QueueEnqueueV2", HOST)
def _enqueue(ctx: KernelContext) -> AsyncKernel:
    async def run(step: Any, handle: Any, *components: Any) -> None:
        queue = _handle(ctx, handle, FIFOQueue)
        comps = _to_device(ctx, components)
        queue._check(comps, batched=False)
        await queue.enqueue([tuple(comps)])

    return AsyncKernel(run)


@kernel("QueueEnqueueManyV2", HOST)
def _enqueue_many(ctx: KernelContext) -> AsyncKernel:
    async def run(step: Any, handle: Any, *components: Any) -> None:
        queue = _handle(ctx, handle, FIFOQueue)
        comps = _to_device(ctx, components)
        n = queue._check(comps, batched=True)
        await queue.enqueue([tuple(c[i] for c in comps) for i in range(n)])

    return AsyncKernel(run)


def _outputs(values: tuple[Any, ...]) -> Any:
    """A kernel's result: the value itself for one output, else the tuple."""
    return values[0] if len(values) == 1 else values


@kernel("QueueDequeueV2", HOST)
def _dequeue(ctx: KernelContext) -> AsyncKernel:
    async def run(step: Any, handle: Any) -> Any:
        queue = _handle(ctx, handle, FIFOQueue)
        return _outputs(await queue.dequeue(1, batched=False))

    return AsyncKernel(run)


@kernel("QueueDequeueManyV2", HOST)
def _dequeue_many(ctx: KernelContext) -> AsyncKernel:
    xp = ctx.xp

    async def run(step: Any, handle: Any, n: Any) -> Any:
        queue = _handle(ctx, handle, FIFOQueue)
        return _outputs(await queue.dequeue(int(n), batched=True, xp=xp))

    return AsyncKernel(run)


@kernel("QueueSizeV2", HOST)
def _queue_size(ctx: KernelContext) -> Callable[[Any], Any]:
    return lambda handle: np.int32(len(_handle(ctx, handle, FIFOQueue)))


@kernel("QueueIsClosedV2", HOST)
def _queue_is_closed(ctx: KernelContext) -> Callable[[Any], Any]:
    return lambda handle: np.bool_(_handle(ctx, handle, FIFOQueue).closed)


@kernel("QueueCloseV2", HOST)
def _queue_close(ctx: KernelContext) -> Callable[[Any], None]:
    cancel = bool(ctx.attr("cancel_pending_enqueues"))
    return lambda handle: _handle(ctx, handle, FIFOQueue).close(cancel)


@kernel("ConditionalAccumulator", HOST)
def _accumulator(ctx: KernelContext) -> Callable[[], ConditionalAccumulator]:
    dtype = dtypes.as_dtype(ctx.attr("dtype"))
    shape = as_shape(ctx.attr("shape"))
    reduction = str(ctx.attr("reduction_type"))
    name = ctx.attr("shared_name") or ctx.name
    acc = _resource(ctx, ConditionalAccumulator,
                    lambda: ConditionalAccumulator(name, dtype, shape, reduction),
                    lambda a: a.matches(dtype, shape, reduction))
    return lambda: acc


@kernel("AccumulatorApplyGradient", HOST)
def _apply_gradient(ctx: KernelContext) -> Callable[[Any, Any, Any], None]:
    xp = ctx.xp

    def run(handle: Any, local_step: Any, grad: Any) -> None:
        _handle(ctx, handle, ConditionalAccumulator).apply(int(local_step), xp.asarray(grad))

    return run


@kernel("AccumulatorTakeGradient", HOST)
def _take_gradient(ctx: KernelContext) -> AsyncKernel:
    async def run(step: Any, handle: Any, num_required: Any) -> Any:
        return await _handle(ctx, handle, ConditionalAccumulator).take(int(num_required))

    return AsyncKernel(run)


@kernel("AccumulatorWaitForGradients", HOST)
def _wait_for_gradients(ctx: KernelContext) -> AsyncKernel:
    timeout_ms = int(ctx.attr("timeout_ms"))
    fail = bool(ctx.attr("fail_on_timeout"))

    async def run(step: Any, handle: Any, num_required: Any) -> Any:
        acc = _handle(ctx, handle, ConditionalAccumulator)
        if timeout_ms < 0:
            return np.int32(await acc.wait_for(int(num_required)))
        try:
            return np.int32(await asyncio.wait_for(acc.wait_for(int(num_required)),
                                                   timeout_ms / 1000.0))
        except TimeoutError:
            if fail:
                raise ctx.error(errors.DeadlineExceededError,
                                f"{acc.num_accumulated} of {int(num_required)} gradients in "
                                f"accumulator '{acc.name}' after {timeout_ms} ms") from None
            return np.int32(acc.num_accumulated)  # fewer than asked: the caller tries again

    return AsyncKernel(run)


@kernel("AccumulatorSetGlobalStep", HOST)
def _set_global_step(ctx: KernelContext) -> Callable[[Any, Any], None]:
    return lambda handle, step: _handle(ctx, handle, ConditionalAccumulator).set_global_step(
        int(step))


@kernel("AccumulatorNumAccumulated", HOST)
def _num_accumulated(ctx: KernelContext) -> Callable[[Any], Any]:
    return lambda handle: np.int32(_handle(ctx, handle, ConditionalAccumulator).num_accumulated)
