"""Which of OpenBLAS's kernel sets this process multiplies with, chosen by measured speed.

An OpenBLAS built for several CPUs (``DYNAMIC_ARCH``, as numpy's wheels ship it) picks one set of
kernels for the CPU it finds at load time. On a CPU with AVX-512 it picks the Skylake-X set; on
AMD's Zen 4, whose AVX-512 units are 256 bits wide, its Haswell set (AVX2, the one OpenBLAS uses
for Zen 1-3) multiplied faster, measured on one thread: the products of the CNN of
``bench/local.py`` ran 99 -> 103 GFLOP/s (a convolution block, 784x800 by 800x64) and 78 -> 97
(its dense layer, 64x3136 by 3136x1024), and its whole training step took 5% less CPU.

So ``prefer_faster_core`` (run when the kernels are imported) times a few such products under the
set OpenBLAS picked and under the Haswell set, by the CPU time of the calling thread (another
process's load does not count), and keeps the Haswell set only when it is ``GAIN`` faster. It is
tried only where OpenBLAS picked an AVX-512 set and can switch sets at run time (its
``gotoblas_dynamic_init``); elsewhere, and for any other BLAS, nothing changes. The switch goes
through OpenBLAS's own start-up path (``OpenBlasCore.select``), made while no product runs: at
import, before any kernel runs. (It costs ~50 ms of one core, once per process. A set forced with
``OPENBLAS_CORETYPE`` at start is measured like one OpenBLAS picked.)
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

# the kernel sets OpenBLAS picks for AVX-512 CPUs, and the one tried instead
AVX512_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
ALTERNATIVE = "Haswell"
# the alternative replaces the picked set only when this fraction faster
GAIN = 0.05
# the corename getters an OpenBLAS build may export (plain, numpy's scipy-openblas 64-bit build)
_CORENAME_SYMBOLS = ("openblas_get_corename", "scipy_openblas_get_corename64_",
                     "openblas_get_corename64_")
_ENV = b"OPENBLAS_CORETYPE"

_lock = threading.Lock()


class OpenBlasCore:
    """The kernel set of one loaded OpenBLAS: its name, and switching it."""

    def __init__(self, lib: Any, corename: Any) -> None:
        self._lib, self._corename = lib, corename

    def name(self) -> str:
        """The kernel set in use (OpenBLAS's name for it: ``SkylakeX``, ``Haswell``...)."""
        return bytes(self._corename()).decode(errors="replace")

    def select(self, name: str) -> str:
        """Switch to kernel set ``name`` (OpenBLAS's names); the set in use afterwards (OpenBLAS
        falls back to the one it detects for a name it does not know). No product may run
        meanwhile, on any thread.

        OpenBLAS's start-up (``gotoblas_dynamic_init``) takes the set named by the C environment's
        ``OPENBLAS_CORETYPE``: it is set there for the call and removed after it (written through
        the C library, so Python's copy of the environment, which no configuration here reads
        and child processes inherit, is left as it was)."""
        libc = _libc()
        if libc is None:
            return self.name()
        with _lock:
            libc.setenv(_ENV, name.encode(), 1)
            try:
                self._lib.gotoblas_dynamic_quit()
                self._lib.gotoblas_dynamic_init()
            finally:
                libc.unsetenv(_ENV)
        return self.name()


def _libc() -> Any:
    """The C library (its ``setenv``), or None where there is none to load."""
    try:
        libc = ctypes.CDLL(None)
        libc.setenv.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
        libc.unsetenv.argtypes = [ctypes.c_char_p]
        return libc
    except (OSError, AttributeError):
        return None


def openblas_core() -> OpenBlasCore | None:
    """The loaded OpenBLAS's kernel set, when numpy's BLAS is an OpenBLAS that can switch sets
    at run time; None otherwise."""
    try:
        from threadpoolctl import threadpool_info  # lazy: scans the loaded libraries

        infos = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    except (ImportError, OSError, AttributeError, RuntimeError):
        return None
    if len(infos) != 1:  # none, or two OpenBLAS copies: leave them be
        return None
    try:
        lib = ctypes.CDLL(infos[0]["filepath"])
        lib.gotoblas_dynamic_init.restype = lib.gotoblas_dynamic_quit.restype = None
    except (OSError, AttributeError, KeyError):
        return None
    for symbol in _CORENAME_SYMBOLS:
        corename = getattr(lib, symbol, None)
        if corename is not None:
            corename.restype = ctypes.c_char_p
            return OpenBlasCore(lib, corename)
    return None


def product_seconds(repeats: int = 3) -> float:
    """The calling thread's CPU seconds for the reference products (the least of ``repeats``
    rounds): a convolution block's and a dense layer's float32 products."""
    rng = np.random.default_rng(0)
    a, b = rng.random((784, 800), np.float32), rng.random((800, 64), np.float32)
    x, w = rng.random((64, 1568), np.float32), rng.random((1568, 1024), np.float32)
    best = float("inf")
    for _ in range(repeats + 1):  # the first round warms caches and pages
        t0 = time.thread_time()
        for _ in range(2):
            np.matmul(a, b)
        np.matmul(x, w)
        best = min(best, time.thread_time() - t0)
    return best


def prefer_faster_core(core: OpenBlasCore | None,
                       measure: Callable[[], float] = product_seconds) -> str | None:
    """Keep whichever of the picked kernel set and ``ALTERNATIVE`` runs ``measure`` faster, when
    the picked one is an AVX-512 set; the set in use afterwards (None without a switchable
    OpenBLAS). ``measure`` runs with BLAS at one thread."""
    if core is None:
        return None
    picked = core.name()
    if picked.lower() not in AVX512_CORES:
        return picked
    from threadpoolctl import threadpool_limits  # lazy: scans the loaded libraries

    with threadpool_limits(1, user_api="blas"):
        before = measure()
        if core.select(ALTERNATIVE).lower() != ALTERNATIVE.lower():
            return core.select(picked)
        after = measure()
        if after > (1.0 - GAIN) * before:
            return core.select(picked)
    return core.name()
