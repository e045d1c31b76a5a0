"""The state of a FIFO queue: elements (tuples of arrays) in arrival order, with a capacity.

Enqueues wait while the queue is full and dequeues while it is empty (``waitable``); closing it
fails the waits that can no longer be served.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape
from tensorgrid.kernels.waitable import NOT_YET, WaitableResource


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
