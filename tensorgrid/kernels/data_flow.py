"""Kernels of the queue and conditional-accumulator ops, and the resources they share.

A queue or an accumulator is an object in its device's ``ResourceMgr``, found by (container,
shared_name or node name) when the handle op's kernel is built. Its state changes under a lock, so
steps of several plans (and, in a local Session, several threads with their own event loops) may use
it at once.

How a wait works, and why it is safe to cancel: an op that must wait (dequeue from an empty queue,
enqueue into a full one, take from an accumulator with too few gradients) parks a future and, when
the state changes, is woken to *try again*; an attempt that succeeds changes the state at once
under the lock, with no await between the check and the change. A cancelled waiter (its step hit a
deadline or was aborted) is therefore cancelled while parked, before it took anything: a cancelled
dequeue or take returns nothing and loses no element or gradient. Every state change wakes every
waiter of the resource; each re-checks (waiters are few: the steps in flight on one device).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import AsyncKernel, KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.shapes import TensorShape, as_shape

# queues and accumulators live in host memory (as TensorFlow's): their ops run on a CPU, and a
# value made on a GPU is copied over by the executor's transfer
HOST = "CPU"
T = TypeVar("T")


class _NotYet:
    """What an attempt returns when it must wait for the state to change."""


NOT_YET = _NotYet()


def _set_woken(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _wake(fut: asyncio.Future[None]) -> None:
    """Wake a parked waiter from any thread: directly on its own loop, else through it."""
    loop = fut.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        _set_woken(fut)
        return
    try:
        loop.call_soon_threadsafe(_set_woken, fut)
    except RuntimeError:
        pass  # its loop is closed: nobody waits there any more


class WaitableResource:
    """A resource whose ops may wait for its state to change (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    def _changed(self) -> None:
        """Wake every parked waiter (call with the lock held)."""
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            _wake(fut)

    async def _wait_until(self, attempt: Callable[[], Any]) -> Any:
        """Run ``attempt`` under the lock until it returns something other than NOT_YET (or
        raises), parking between tries. Cancellation while parked leaves the state untouched."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                out = attempt()
                if out is not NOT_YET:
                    return out
                fut: asyncio.Future[None] = loop.create_future()
                self._waiters.append(fut)
            try:
                await fut
            except BaseException:
                # cancelled while parked (or woken and cancelled before trying again): nothing
                # was taken; other waiters were woken by the same change, so none misses it
                with self._lock:
                    if fut in self._waiters:
                        self._waiters.remove(fut)
                raise

    @property
    def num_waiters(self) -> int:
        """How many ops are parked on this resource (tests and diagnostics)."""
        with self._lock:
            return len(self._waiters)


# ------------------------------------------------------------------------------ FIFO queue


class FIFOQueue(WaitableResource):
    """The state of a ``FIFOQueueV2``: elements (tuples of arrays) in arrival order.

    Args:
        name: the queue's (shared) name, for messages.
        component_types: the dtypes of an element's components.
        shapes: their shapes ([] or None entries: any shape).
        capacity: the most elements held; -1: unbounded.
    """

    def __init__(self, name: str, component_types: Sequence[dtypes.DType],
                 shapes: Sequence[TensorShape], capacity: int) -> None:
        super().__init__(name)
        self.component_types = tuple(component_types)
        self.shapes = tuple(shapes) if shapes else tuple(TensorShape(None)
                                                         for _ in component_types)
        self.capacity = int(capacity)
        self.closed = False
        self._items: deque[tuple[Any, ...]] = deque()
        self._cancel_generation = 0  # bumped by close(cancel_pending_enqueues=True)

    def __len__(self) -> int:
        return len(self._items)

    def matches(self, component_types: Sequence[dtypes.DType], shapes: Sequence[TensorShape],
                capacity: int) -> str | None:
        """Why a queue op asking for these attrs cannot share this queue (None: it can)."""
        if tuple(component_types) != self.component_types:
            return (f"Shared queue '{self.name}' has component types "
                    f"{[d.name for d in self.component_types]} but requested component types "
                    f"{[d.name for d in component_types]}")
        want = tuple(shapes) if shapes else tuple(TensorShape(None) for _ in component_types)
        if want != self.shapes:
            return (f"Shared queue '{self.name}' has component shapes {list(self.shapes)} but "
                    f"requested component shapes {list(want)}")
        if int(capacity) != self.capacity:
            return (f"Shared queue '{self.name}' has capacity {self.capacity} but requested "
                    f"capacity was {capacity}")
        return None

    # -------------------------------------------------------------- checks
    def _check(self, components: Sequence[Any], batched: bool) -> int:
        """Validate the components of one element (or of a batch); returns the element count."""
        if len(components) != len(self.component_types):
            raise errors.InvalidArgumentError(
                f"Queue '{self.name}' expects {len(self.component_types)} components, got "
                f"{len(components)}")
        count = 1
        for i, (c, dt, shape) in enumerate(zip(components, self.component_types, self.shapes)):
            if getattr(c, "dtype", None) != dt.np:
                raise errors.InvalidArgumentError(
                    f"Queue '{self.name}': component {i} has dtype {getattr(c, 'dtype', '?')}, "
                    f"expected {dt.name}")
            elem_shape = tuple(c.shape)
            if batched:
                if not elem_shape:
                    raise errors.InvalidArgumentError(
                        f"Queue '{self.name}': component {i} of an enqueue_many must have a batch "
                        "dimension")
                n, elem_shape = elem_shape[0], elem_shape[1:]
                if i == 0:
                    count = n
                elif n != count:
                    raise errors.InvalidArgumentError(
                        f"Queue '{self.name}': enqueue_many components have different batch sizes "
                        f"({count} and {n})")
            if shape.dims is not None and not shape.is_compatible_with(elem_shape):
                raise errors.InvalidArgumentError(
                    f"Shape mismatch in tuple component {i}. Expected {shape}, got "
                    f"{list(elem_shape)} (queue '{self.name}')")
        return count

    # -------------------------------------------------------------- operations
    async def enqueue(self, elements: Sequence[tuple[Any, ...]]) -> None:
        """Add elements in order, waiting while the queue is full (elements go in as room appears,
        as in TensorFlow).

        Raises:
            CancelledError: the queue is closed, or was closed with cancel_pending_enqueues while
                this waited.
        """
        todo = deque(elements)
        generation = self._cancel_generation
        first = [True]

        def attempt() -> Any:
            if self.closed and (first[0] or self._cancel_generation != generation):
                raise errors.CancelledError(f"FIFOQueue '{self.name}' is closed.")
            first[0] = False
            moved = False
            while todo and (self.capacity < 0 or len(self._items) < self.capacity):
                self._items.append(todo.popleft())
                moved = True
            if moved:
                self._changed()
            return None if not todo else NOT_YET

        await self._wait_until(attempt)

    async def dequeue(self, n: int, batched: bool, xp: Any = np) -> Any:
        """Take ``n`` elements (one unbatched element when not ``batched``), waiting until there
        are enough. Returns the components (a tuple), stacked along a new dimension 0 when batched.

        Raises:
            OutOfRangeError: the queue is closed and holds fewer than ``n`` elements.
            InvalidArgumentError: ``n`` is negative, or batched elements have different shapes.
        """
        if n < 0:
            raise errors.InvalidArgumentError(f"Dequeue count must be >= 0, got {n}")

        def attempt() -> Any:
            if len(self._items) >= n:
                if batched:
                    self._check_stackable(n)
                taken = [self._items.popleft() for _ in range(n)]
                if n:
                    self._changed()
                return taken
            if self.closed:
                raise errors.OutOfRangeError(
                    f"FIFOQueue '{self.name}' is closed and has insufficient elements (requested "
                    f"{n}, current size {len(self._items)})")
            return NOT_YET

        taken = await self._wait_until(attempt)
        if not batched:
            return taken[0]
        return self._stack(taken, n, xp)

    def _stack(self, taken: list[tuple[Any, ...]], n: int, xp: Any) -> tuple[Any, ...]:
        out = []
        for i, (dt, shape) in enumerate(zip(self.component_types, self.shapes)):
            if n == 0:
                if not shape.is_fully_defined():
                    raise errors.InvalidArgumentError(
                        f"Queue '{self.name}': dequeue_many(0) needs fully defined component "
                        "shapes")
                out.append(xp.zeros((0, *shape.as_list()), dtype=dt.np))
                continue
            out.append(xp.stack([e[i] for e in taken]))
        return tuple(out)

    def _check_stackable(self, n: int) -> None:
        """The first ``n`` elements can be stacked (checked before taking any, so a failed
        dequeue_many loses nothing)."""
        for i in range(len(self.component_types)):
            shapes = {tuple(self._items[k][i].shape) for k in range(n)}
            if len(shapes) > 1:
                raise errors.InvalidArgumentError(
                    f"Queue '{self.name}': dequeue_many needs elements of one shape, component "
                    f"{i} has shapes {sorted(shapes)}")

    def close(self, cancel_pending_enqueues: bool) -> None:
        """Close the queue: later enqueues fail; waiting dequeues that cannot be served fail."""
        with self._lock:
            self.closed = True
            if cancel_pending_enqueues:
                self._cancel_generation += 1
            self._changed()


# ------------------------------------------------------------------------------ accumulator


class ConditionalAccumulator(WaitableResource):
    """The state of a ``ConditionalAccumulator``: the running sum of the gradients applied since
    the last take, their count, and the accumulator's global step.

    A gradient whose local step is older than the global step is stale and dropped. A take of
    ``n`` waits until ``count >= n``, returns the mean (or sum), resets, and advances the global
    step by one. Counters (for diagnostics and tests): ``applied`` and ``stale_dropped``
    gradients, ``takes``, and ``gradients_taken`` (the gradients those takes aggregated).
    """

    def __init__(self, name: str, dtype: dtypes.DType, shape: TensorShape,
                 reduction_type: str = "MEAN") -> None:
        super().__init__(name)
        self.dtype = dtype
        self.shape = shape
        self.reduction_type = reduction_type
        self.global_step = 0
        self.applied = 0
        self.stale_dropped = 0
        self.takes = 0
        self.gradients_taken = 0
        self._sum: Any = None
        self._count = 0

    @property
    def num_accumulated(self) -> int:
        return self._count

    def matches(self, dtype: dtypes.DType, shape: TensorShape, reduction_type: str) -> str | None:
        """Why an accumulator op with these attrs cannot share this one (None: it can)."""
        if dtype is not self.dtype or shape != self.shape or reduction_type != self.reduction_type:
            return (f"Shared accumulator '{self.name}' has dtype {self.dtype.name}, shape "
                    f"{self.shape} and reduction {self.reduction_type}, but a node asks for "
                    f"{dtype.name}, {shape} and {reduction_type}")
        return None

    def apply(self, local_step: int, grad: Any) -> bool:
        """Add a gradient computed at ``local_step``; False when it was stale and dropped.

        Raises:
            InvalidArgumentError: the gradient's dtype or shape does not fit.
        """
        if getattr(grad, "dtype", None) != self.dtype.np:
            raise errors.InvalidArgumentError(
                f"Accumulator '{self.name}' takes {self.dtype.name} gradients, got "
                f"{getattr(grad, 'dtype', type(grad))}")
        if self.shape.dims is not None and not self.shape.is_compatible_with(grad.shape):
            raise errors.InvalidArgumentError(
                f"Shape mismatch: accumulator '{self.name}' expects shape {self.shape}, got "
                f"{list(grad.shape)}")
        with self._lock:
            if local_step < self.global_step:
                self.stale_dropped += 1
                return False
            if self._count == 0:
                self._sum = grad.copy()
            else:
                if self._sum.shape != grad.shape:
                    raise errors.InvalidArgumentError(
                        f"Shape mismatch: accumulator '{self.name}' holds gradients of shape "
                        f"{list(self._sum.shape)}, got {list(grad.shape)}")
                self._sum = self._sum + grad
            self._count += 1
            self.applied += 1
            self._changed()
            return True

    async def take(self, num_required: int) -> Any:
        """Wait until at least ``num_required`` gradients are in; their mean (or sum).

        Raises:
            InvalidArgumentError: ``num_required`` < 1.
        """
        _check_required(self.name, num_required)

        def attempt() -> Any:
            if self._count < num_required:
                return NOT_YET
            total, count = self._sum, self._count
            self._sum, self._count = None, 0
            self.global_step += 1
            self.takes += 1
            self.gradients_taken += count
            self._changed()
            if self.reduction_type == "SUM":
                return total
            return (total / count).astype(self.dtype.np, copy=False)

        return await self._wait_until(attempt)

    async def wait_for(self, num_required: int) -> int:
        """Wait until at least ``num_required`` gradients are in; takes nothing; the count."""
        _check_required(self.name, num_required)

        def attempt() -> Any:
            return self._count if self._count >= num_required else NOT_YET

        return int(await self._wait_until(attempt))

    def set_global_step(self, step: int) -> None:
        with self._lock:
            self.global_step = int(step)
            self._changed()


def _check_required(name: str, num_required: int) -> None:
    if num_required < 1:
        raise errors.InvalidArgumentError(
            f"Argument num_required must be positive, got {num_required} (accumulator '{name}')")


# ------------------------------------------------------------------------------ kernels


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
