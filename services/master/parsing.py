"""Decoding and checking large requests off the event loop, without stalling it.

A worker thread alone is not enough: the thread that decodes a 200,000-node graph allocates
millions of objects, and CPython's cyclic garbage collector, which runs in whichever thread
allocates, then scans the whole heap (the graph being built, and every graph the master keeps)
while holding the interpreter lock: pauses of a second or more, during which ``/healthz`` and the
tasks' heartbeats wait. So, while a large request is decoded, the collector is paused; when the
last such decode ends, what it built is moved out of the collector's sight (``gc.freeze``) before
the collector resumes. The objects stay freed by reference counting as usual (a graph and its
nodes hold no cycles); only cycles already garbage at that moment are kept for good, and they are
few (the collector ran until the decode began), so a master that accepts one large graph a
minute keeps a few kilobytes more an hour.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import TypeVar

from starlette.concurrency import run_in_threadpool

T = TypeVar("T")

# below this a request decodes in milliseconds and the collector's passes are short
LARGE_BODY_BYTES = 1 << 20
# below this a step's request decodes faster than a hop to a worker thread
INLINE_BODY_BYTES = 64 << 10


class _CollectorPause:
    """Counts the large decodes in flight; the collector is off while there is one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._was_enabled = True

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0:
                self._was_enabled = gc.isenabled()
                gc.collect(1)  # the young garbage goes first, while it is cheap to find
                gc.disable()
            self._active += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                gc.freeze()  # what the decodes built is never scanned; see the module's text
                if self._was_enabled:
                    gc.enable()


_PAUSE = _CollectorPause()


async def off_loop(work: Callable[[], T], nbytes: int) -> T:
    """``work()`` in a worker thread; for a body of ``nbytes`` of at least ``LARGE_BODY_BYTES``,
    with the cyclic collector paused (see the module's text). What ``work`` raises."""
    if nbytes < LARGE_BODY_BYTES:
        return await run_in_threadpool(work)

    def paused() -> T:
        with _PAUSE:
            return work()

    return await run_in_threadpool(paused)


async def decoded(work: Callable[[], T], nbytes: int) -> T:
    """``work()`` at once for a body under ``INLINE_BODY_BYTES`` (a step's usual request: no
    thread hop on the hot path), else ``off_loop``. What ``work`` raises."""
    if nbytes < INLINE_BODY_BYTES:
        return work()
    return await off_loop(work, nbytes)


async def off_loop_large(work: Callable[[], T]) -> T:
    """``off_loop`` for work known to be large (``MasterCore.run_large``)."""
    return await off_loop(work, LARGE_BODY_BYTES)
