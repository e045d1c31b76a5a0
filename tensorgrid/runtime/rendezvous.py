"""The rendezvous: per step, a table of channels keyed by a deterministic key.

Key: ``src_device;src_incarnation;dst_device;tensor_name;frame:iter``, made and parsed by
``tensorgrid.core.rendezvous_key`` (the Send/Recv kernels build it too). ``send`` never blocks;
``recv`` waits until the value is there; ``abort`` fails everything pending, and every later call
on that step, with the abort's error. Each key carries exactly one value to exactly one receiver (the
partitioner makes one transfer per tensor and destination task), so a consumed channel is dropped and
a step whose table is empty holds nothing.

Everything here runs on one event loop thread: no locks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from tensorgrid.core import errors


class _Sent:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class Rendezvous:
    """The channels of one step on one task."""

    __slots__ = ("_error", "_table", "created", "done", "step_id")

    def __init__(self, step_id: int) -> None:
        self.step_id = step_id
        self._table: dict[str, _Sent | asyncio.Future[Any]] = {}
        self._error: errors.OpError | None = None
        self.created = time.monotonic()
        self.done = False  # the local RunGraph of this step has finished

    @property
    def aborted(self) -> errors.OpError | None:
        return self._error

    def is_empty(self) -> bool:
        return not self._table

    def pending_bytes(self) -> int:
        """Bytes of the values sent and not received yet (``nbytes`` of each array)."""
        return sum(int(getattr(item.value, "nbytes", 0)) for item in list(self._table.values())
                   if isinstance(item, _Sent))

    def send(self, key: str, value: Any) -> None:
        """Deliver a value; never blocks.

        Raises:
            the abort error when the step was aborted; InternalError on a duplicate send.
        """
        if self._error is not None:
            raise self._error
        item = self._table.get(key)
        if item is None:
            self._table[key] = _Sent(value)
        elif isinstance(item, _Sent):
            raise errors.InternalError(f"Duplicate send of rendezvous key {key} in step {self.step_id}")
        else:
            del self._table[key]
            if not item.done():
                item.set_result(value)

    def recv_future(self, key: str) -> asyncio.Future[Any]:
        """The value of ``key`` as a future: done when it was sent already (and then taken),
        pending until it is; ``forget`` it when giving up on it.

        Raises:
            the abort error when the step was aborted.
        """
        if self._error is not None:
            raise self._error
        item = self._table.get(key)
        if isinstance(item, _Sent):
            del self._table[key]
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            fut.set_result(item.value)
            return fut
        if item is None:
            item = self._table[key] = asyncio.get_running_loop().create_future()
        return item

    def forget(self, key: str, fut: asyncio.Future[Any]) -> None:
        """Give up on a pending ``recv_future``: a later send of ``key`` keeps its value."""
        if self._table.get(key) is fut:
            del self._table[key]
        fut.cancel()

    async def recv(self, key: str) -> Any:
        """Wait for, take and return the value of ``key``.

        Raises:
            the abort error when the step is (or gets) aborted.
        """
        fut = self.recv_future(key)
        try:
            return await fut
        except asyncio.CancelledError:
            self.forget(key, fut)
            raise

    def abort(self, error: errors.OpError) -> None:
        """Fail every pending recv and every later call with ``error``; drop sent values."""
        if self._error is None:
            self._error = error
        for item in self._table.values():
            if isinstance(item, asyncio.Future) and not item.done():
                item.set_exception(error)
        self._table.clear()


class RendezvousMgr:
    """The rendezvous of every live step of a task, by step id.

    A step's rendezvous is created by whichever comes first: the local RunGraph or a peer's
    RecvTensor. It is dropped when the local step is done and its table is empty; aborted steps are
    remembered for ``ttl`` seconds so late calls fail fast; leftovers of steps whose consumer vanished
    are swept after ``ttl``.
    """

    def __init__(self, ttl: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._steps: dict[int, Rendezvous] = {}
        self._ttl = ttl
        self._clock = clock
        self._last_sweep = clock()

    def __len__(self) -> int:
        return len(self._steps)

    def pending_bytes(self) -> int:
        """Bytes of the tensors that the live steps' sends hold until their receiver takes
        them (what a task's steps keep in memory between producing a tensor and handing it over)."""
        return sum(rdv.pending_bytes() for rdv in list(self._steps.values()))

    def find_or_create(self, step_id: int) -> Rendezvous:
        rdv = self._steps.get(step_id)
        if rdv is None:
            rdv = self._steps[step_id] = Rendezvous(step_id)
            self._maybe_sweep()
        return rdv

    def get(self, step_id: int) -> Rendezvous | None:
        return self._steps.get(step_id)

    def step_done(self, step_id: int) -> None:
        """The local part of the step has finished: drop the rendezvous if nothing is pending."""
        rdv = self._steps.get(step_id)
        if rdv is None:
            return
        rdv.done = True
        if rdv.aborted is None and rdv.is_empty():
            del self._steps[step_id]

    def consumed(self, step_id: int) -> None:
        """A peer took a value: drop the rendezvous if that emptied a finished step."""
        rdv = self._steps.get(step_id)
        if rdv is not None and rdv.done and rdv.aborted is None and rdv.is_empty():
            del self._steps[step_id]

    def abort(self, step_id: int, error: errors.OpError) -> None:
        self.find_or_create(step_id).abort(error)

    def abort_all(self, error: errors.OpError) -> None:
        for rdv in list(self._steps.values()):
            rdv.abort(error)

    def _maybe_sweep(self) -> None:
        now = self._clock()
        if now - self._last_sweep < self._ttl / 4:
            return
        self._last_sweep = now
        for sid, rdv in list(self._steps.items()):
            if now - rdv.created > self._ttl and (rdv.done or rdv.aborted is not None):
                del self._steps[sid]
