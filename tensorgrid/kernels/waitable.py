"""What the queue and accumulator resources share: parking ops that must wait for a state change.

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
from collections.abc import Callable
from typing import Any


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
