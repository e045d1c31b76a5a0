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

from tensorgrid.kernels.blas_chooser import BLOCKS, MODES, SINGLE, THREADED, BlasChooser
from tensorgrid.kernels.blas_core import openblas_core, prefer_faster_core
from tensorgrid.kernels.heap import keep_freed_memory

R = TypeVar("R")
__all__ = ["BLOCKS", "MODES", "SINGLE", "THREADED", "BlasChooser", "BlockRunner",
           "blas_chooser", "machine_idle_seconds", "matmul", "quiet_matmul", "run_blocks",
           "split_batch"]

# the kernels' large temporaries reuse the heap's pages from step to step (see kernels.heap)
keep_freed_memory()
# the products run on the fastest of OpenBLAS's kernel sets for this CPU (see kernels.blas_core);
# the set in use, or None for a BLAS other than a switchable OpenBLAS
BLAS_CORE = prefer_faster_core(openblas_core())


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


# A memory-bound kernel (a pool, an activation's gradient) splits its batch over the block
# runner only from this many bytes of input, into this many blocks per thread: a few, so a thread
# that is not scheduled leaves its share to the others, each large enough that handing it over
# costs little next to its work. On two threads the CNN of bench/local.py's first max-pool
# gradient (6.4 MB) ran 2.5 -> 1.5 ms; its second (3.2 MB) ran 1.0 -> 1.15 ms, so it stays whole.
SPLIT_BYTES = 4 << 20
BLOCKS_PER_THREAD = 2


def split_batch(fn: Callable[[int, int], R], n: int, nbytes: int) -> list[R]:
    """``fn(b0, b1)`` over a memory-bound kernel's batch of ``n`` (``nbytes`` of input): a few
    blocks on the block runner when the input holds ``SPLIT_BYTES`` or more, else one call on the
    caller. ``fn`` writes only its own block of its output (see ``BlockRunner.run``)."""
    if nbytes < SPLIT_BYTES or n <= 1:
        return [fn(0, n)]
    return _RUNNER.run(fn, n, -(-n // (BLOCKS_PER_THREAD * max(1, _RUNNER.threads()))))


def run_blocks(fn: Callable[[int, int], R], n: int, block: int) -> list[R]:
    """``fn(b0, b1)`` for each block of ``block`` images of a batch of ``n``, on this process's
    block runner (see ``BlockRunner.run``)."""
    return _RUNNER.run(fn, n, block)


# Products smaller than this are not timed: they run on BLAS's threads in a threaded period
# (BLAS itself keeps the smallest on one) and on one thread otherwise.
MIN_CHOOSE_FLOPS = 4_000_000
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_CLOCK_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def machine_idle_seconds() -> float | None:
    """Seconds the machine's cores have sat idle since boot, summed over them (Linux's
    ``/proc/stat``: idle and iowait); None where that cannot be read. (One short read: the chooser
    calls it twice per half-second period, and only while a single-core mode is chosen.)"""
    try:
        with open("/proc/stat", "rb") as stat:
            fields = stat.readline().split()
        return (int(fields[4]) + int(fields[5])) / _CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        return None


_CHOOSER = BlasChooser(idle_seconds=machine_idle_seconds)


def blas_chooser() -> BlasChooser:
    """This process's chooser of how large products run (its ``trace`` and figures are read by
    ``bench/blas_modes.py``)."""
    return _CHOOSER


def matmul(a: Any, b: Any) -> Any:
    """``a @ b``; a large float product of 2-D arrays, while BLAS may use several threads, runs
    in the mode (``MODES``) that ``BlasChooser`` measures fastest now.
    The result is ``np.matmul``'s either way (up to the BLAS's summation order)."""
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or a.ndim != 2 \
            or b.ndim != 2 or a.dtype not in _FLOATS or b.dtype != a.dtype:
        return np.matmul(a, b)
    threads = _RUNNER.threads()
    if threads <= 1:
        return np.matmul(a, b)
    flops = 2 * a.shape[0] * a.shape[1] * b.shape[1]
    if flops < MIN_CHOOSE_FLOPS:
        return quiet_matmul(a, b)
    mode = _CHOOSER.pick(time.perf_counter())
    if mode == THREADED:
        out = np.matmul(a, b)
    elif mode == BLOCKS:
        out = _matmul_on_blocks(a, b, threads)
    else:
        out = _matmul_single(a, b)
    _CHOOSER.record(time.perf_counter(), flops)
    return out


def quiet_matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for a small or memory-bound product (a matrix-vector one): on BLAS's threads
    only inside a threaded period. OpenBLAS splits products from ~0.5 MFLOP up: outside such a
    period one would wake its threads, which then spin beside the block runner's."""
    return np.matmul(a, b) if _CHOOSER.mode == THREADED else _matmul_single(a, b)


def _matmul_single(a: Any, b: Any, out: Any = None) -> Any:
    """``a @ b`` on the calling thread, BLAS held at one thread for the process meanwhile."""
    _RUNNER.hold_single()
    try:
        return np.matmul(a, b, out=out)
    finally:
        _RUNNER.release_single()


# Rows (or columns) per block of a product split over the block runner, at least: fewer make
# BLAS's single-threaded kernels run short panels (and a product this short is quick anyway).
MIN_SPLIT_ROWS = 16


def _matmul_on_blocks(a: Any, b: Any, threads: int) -> Any:
    """``a @ b`` split into one block per thread on the block runner (a block whose thread is
    not scheduled is taken by one that is): by rows of ``a`` when the result has more rows than
    columns, else by columns of ``b``, so each thread reads (and BLAS packs) only its share of
    the larger operand: a dense layer's 64 x 3136 @ 3136 x 1024 reads half its weights per
    thread, where a split by rows read them all twice."""
    m, n = a.shape[0], b.shape[1]
    by_rows = m >= n
    size = m if by_rows else n
    block = max(MIN_SPLIT_ROWS, -(-size // threads))
    if block >= size:  # too small to split
        return _matmul_single(a, b)
    out = np.empty((m, n), dtype=a.dtype)

    def rows(r0: int, r1: int) -> None:
        np.matmul(a[r0:r1], b, out=out[r0:r1])

    def columns(c0: int, c1: int) -> None:
        # a column block of the result is a strided view BLAS writes directly (unit column stride)
        np.matmul(a, b[:, c0:c1], out=out[:, c0:c1])

    _RUNNER.run(rows if by_rows else columns, size, block)
    return out
