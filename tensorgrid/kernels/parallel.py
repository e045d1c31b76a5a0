"""Blocks of a batch run on threads, BLAS single-threaded meanwhile: how the convolution kernels use
the cores.

A convolution is many independent blocks (copy the block's windows out, multiply by the filter).
Left to BLAS, each block's matmul is split over BLAS's threads, which meet at the end of every
call: on a busy machine a call waits for its slowest thread to be scheduled, and a CNN step (a
hundred calls) ran 10-20x slower under load than alone. Here whole blocks go to threads instead,
each running its own copy and its own single-threaded matmul with its data in its own core's
cache: nothing waits on another thread until the kernel ends, and a quiet machine is used as fully.

The thread count is the BLAS thread count in effect when a kernel starts (what the session's
``intra_op_parallelism_threads`` or the task's share of the machine set, else one per core), so a
task that was given one thread keeps to one. While blocks run, BLAS is held at one thread for the
whole process (it is one setting per process), and restored when the last running kernel ends.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from tensorgrid.kernels.heap import keep_freed_memory

R = TypeVar("R")

# the kernels' large temporaries reuse the heap's pages from step to step (see kernels.heap)
keep_freed_memory()


class BlockRunner:
    """Runs ``fn(b0, b1)`` over the blocks of a batch on up to the BLAS thread count of threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blas: list[Any] | None = None  # threadpoolctl's controllers of the loaded BLAS
        self._depth = 0  # kernels running blocks now
        self._saved = 1  # the BLAS thread count to restore when the last one ends
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._pool_pid = 0  # a forked child has none of its parent's pool threads

    def _controllers(self) -> list[Any]:
        if self._blas is None:
            try:
                from threadpoolctl import ThreadpoolController  # lazy: scans loaded libraries

                self._blas = list(ThreadpoolController().select(user_api="blas").lib_controllers)
            except (ImportError, OSError, AttributeError, RuntimeError):  # run on the caller
                self._blas = []
        return self._blas

    def threads(self) -> int:
        """The threads a ``run`` starting now would use: the BLAS thread count in effect (the
        one held aside while another kernel runs blocks)."""
        with self._lock:
            if self._depth > 0:
                return self._saved
            libs = self._controllers()
            return max((int(lib.get_num_threads() or 1) for lib in libs), default=1)

    def _enter(self) -> int:
        """Hold BLAS at one thread; the thread count to use for blocks."""
        with self._lock:
            if self._depth == 0:
                libs = self._controllers()
                if not libs:
                    return 1
                self._saved = max(int(lib.get_num_threads() or 1) for lib in libs)
                if self._saved > 1:
                    for lib in libs:
                        lib.set_num_threads(1)
            self._depth += 1
            return self._saved

    def hold_single(self) -> None:
        """Hold BLAS at one thread (until ``release_single``) for a call made on the caller."""
        self._enter()

    def release_single(self) -> None:
        """End a ``hold_single``."""
        self._exit()

    def _exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._saved > 1:
                for lib in self._controllers():
                    lib.set_num_threads(self._saved)

    def _executor(self, threads: int) -> ThreadPoolExecutor:
        with self._lock:
            forked = self._pool_pid != os.getpid()
            if self._pool is None or self._pool_size < threads or forked:
                old = self._pool
                self._pool = ThreadPoolExecutor(threads, thread_name_prefix="tg-kernel-block")
                self._pool_size, self._pool_pid = threads, os.getpid()
                if old is not None and not forked:
                    old.shutdown(wait=False)
            return self._pool

    def run(self, fn: Callable[[int, int], R], n: int, block: int) -> list[R]:
        """``[fn(b0, min(n, b0 + block)) for b0 in range(0, n, block)]``, the calls spread over
        threads when there are several blocks and more than one thread is allowed.

        The calling thread works too: it and its helpers take the next block from a shared
        queue, so when a helper is not scheduled (a busy machine) the others take its share, and
        the call waits only for blocks already started, never for a helper that has not begun.
        ``fn`` must be safe to run concurrently for different blocks (it writes only its own
        block's part of an output). Results come back in block order; the first exception raised
        by a block is raised here after every started block has ended.
        """
        starts = list(range(0, n, max(1, block)))
        if len(starts) <= 1:
            return [fn(b0, min(n, b0 + block)) for b0 in starts]
        threads = self._enter()
        try:
            if threads <= 1:
                return [fn(b0, min(n, b0 + block)) for b0 in starts]
            job = _Job(fn, n, block, starts)
            pool = self._executor(max(1, min(threads, os.cpu_count() or threads) - 1))
            for _ in range(min(threads, len(starts)) - 1):
                pool.submit(job.work)
            job.work()
            return job.results()
        finally:
            self._exit()


class _Job:
    """The blocks of one ``BlockRunner.run`` call, taken in turn by whichever thread is free."""

    def __init__(self, fn: Callable[[int, int], Any], n: int, block: int,
                 starts: list[int]) -> None:
        self.fn, self.n, self.block, self.starts = fn, n, block, starts
        self.out: list[Any] = [None] * len(starts)
        self.error: BaseException | None = None
        self.next = 0
        self.done = 0
        self.cond = threading.Condition()

    def work(self) -> None:
        """Run blocks until none is left to take."""
        while True:
            with self.cond:
                if self.next >= len(self.starts) or self.error is not None:
                    return
                k = self.next
                self.next += 1
            b0 = self.starts[k]
            try:
                self.out[k] = self.fn(b0, min(self.n, b0 + self.block))
            except Exception as exc:  # noqa: BLE001 - re-raised by the calling thread
                with self.cond:
                    self.error = self.error or exc
            finally:
                with self.cond:
                    self.done += 1
                    self.cond.notify_all()

    def results(self) -> list[Any]:
        """Wait for the blocks taken by other threads; the results in block order."""
        with self.cond:
            self.cond.wait_for(lambda: self.done == self.next)
            if self.error is not None:
                raise self.error
        return self.out


_RUNNER = BlockRunner()


def run_blocks(fn: Callable[[int, int], R], n: int, block: int) -> list[R]:
    """``fn(b0, b1)`` for each block of ``block`` images of a batch of ``n``, on this process's
    block runner (see ``BlockRunner.run``)."""
    return _RUNNER.run(fn, n, block)



class BlasChooser:
    """Whether large products run on BLAS's own threads or on one, chosen by measured speed.

    BLAS's threads busy-wait between calls and meet at the end of each one. Alone on its cores
    that is the fastest way to multiply (a 784-256-10 MLP step: 0.8 ms on two threads, 1.3 ms on
    one); on a machine whose cores other processes also want, every call waits for a thread that
    is not scheduled, and the threads spinning between calls take the core from the work between
    the products: the same step measured 5-40 ms. Neither setting is right for long, so time is
    cut into periods, each run under one setting and measured as wall seconds per flop of the
    large products made in it, everything between them included (a product timed alone looks
    faster threaded while the spinning slows the rest of the step). The faster setting runs for
    ``period_s``; the other is tried for ``probe_period_s`` once every ``probe_s``, so a change of
    load is noticed both ways (a period is measured from the end of its first product, which
    pays for waking BLAS's threads). A period with a pause longer than ``idle_s`` between products is
    not counted (the process was doing something else). On one thread BLAS is held at one for the
    whole process while the product runs (the block runner's hold), so no BLAS thread spins.
    """

    def __init__(self, probe_s: float = 4.0, period_s: float = 0.5, probe_period_s: float = 0.1,
                 idle_s: float = 0.05) -> None:
        self.probe_s, self.period_s, self.probe_period_s = probe_s, period_s, probe_period_s
        self.idle_s = idle_s
        self.cost = {True: 0.0, False: 0.0}  # seconds per flop, threaded / single; 0 = unknown
        self.measured = {True: -1e9, False: -1e9}  # when each was last measured
        self.threaded = True  # the setting of the current period
        self.start = -1.0  # when the current period began (< 0: none yet)
        self.length = probe_period_s
        self.flops = 0
        self.last = -1.0  # when the last product ended
        self.warming = False  # the period's first product is not counted (threads wake up)

    def pick(self, now: float) -> bool:
        """True: let BLAS use its threads for the next product (the current period's setting,
        or the next period's when this one is over)."""
        if self.start < 0.0 or now - self.last > self.idle_s:
            self._begin(now, self.threaded, self.length)  # the first, or after a pause
        elif now - self.start >= self.length:
            # (read once: kernels on other threads may begin the next period meanwhile; a
            # measurement they disturb is one period's, corrected by the next)
            flops, threaded = self.flops, self.threaded
            if flops > 0:
                self.cost[threaded] = (now - self.start) / flops
                self.measured[threaded] = now
            self._next(now)
        return self.threaded

    def record(self, now: float, flops: int) -> None:
        """A product of ``flops`` ended at ``now`` under the current period's setting."""
        if self.warming:  # the period is measured from the end of its first product
            self.warming, self.start = False, now
        else:
            self.flops += flops
        self.last = now

    def _next(self, now: float) -> None:
        other = not self.threaded
        if self.cost[other] == 0.0 or now - self.measured[other] > self.probe_s:
            self._begin(now, other, self.probe_period_s)  # unknown or old: try it
        else:
            best = self.cost[True] <= self.cost[False]
            self._begin(now, best, self.period_s)

    def _begin(self, now: float, threaded: bool, length: float) -> None:
        self.threaded, self.start, self.length, self.flops = threaded, now, length, 0
        self.last, self.warming = now, True


# Products smaller than this leave BLAS to decide (it runs them on one thread anyway).
MIN_CHOOSE_FLOPS = 4_000_000
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_CHOOSER = BlasChooser()


def matmul(a: Any, b: Any) -> Any:
    """``a @ b``; a large float product of 2-D arrays, while BLAS may use several threads, runs
    on BLAS's threads or on one thread, whichever ``BlasChooser`` measures faster now.
    The result is ``np.matmul``'s either way (up to the BLAS's summation order)."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.ndim != 2 \
            or b.ndim != 2 or a.dtype not in _FLOATS or b.dtype != a.dtype:
        return np.matmul(a, b)
    flops = 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if flops < MIN_CHOOSE_FLOPS or _RUNNER.threads() <= 1:
        return np.matmul(a, b)
    threaded = _CHOOSER.pick(time.perf_counter())
    if threaded:
        out = np.matmul(a, b)
    else:
        _RUNNER.hold_single()
        try:
            out = np.matmul(a, b)
        finally:
            _RUNNER.release_single()
    _CHOOSER.record(time.perf_counter(), flops)
    return out
