"""Keep the C heap's freed memory in the process: a step's large arrays reuse mapped pages.

A training step allocates the same large arrays every step (activations, gradients, im2col
scratch, the weights a worker pulls and their casts for the wire: 1-10 MB each). glibc serves
blocks above its mmap threshold (128 KiB at first, raised dynamically up to 32 MiB as large
blocks are freed) with a fresh ``mmap`` and gives them back with ``munmap`` when freed, and it
trims the free top of a heap (the main one, and the per-thread heaps an event loop's thread
uses) once 128 KiB of it is free. Either way the next step's array lands on pages the kernel
must fault in and zero again: a 3.2 MB array costs ~800 faults each time it is made, and on a
virtual machine that first touch ran at ~0.6 GB/s, slower than the arithmetic done on the array
(the CNN of ``bench/local.py`` spent a tenth of its step there; a cross-host Adam worker 15 ms
of CPU per step instead of 9).

``keep_freed_memory`` raises the mmap threshold to glibc's maximum (32 MiB: larger blocks still
come from ``mmap`` and go back when freed) and the trim threshold to ``keep_bytes``, so blocks up
to 32 MiB are carved from the heap and, once freed, stay mapped for the next step. The process's
resident size then stays at its peak working set (up to ``keep_bytes`` more of free heap)
instead of falling between steps, as with the caching allocators of other runtimes' tensors.
Importing the kernels applies ``KEEP_BYTES``; a task applies its ``malloc_keep_bytes`` setting
at start (0: glibc's default thresholds back). On a C library other than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import platform
import threading
from typing import Any

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2); larger blocks are still mapped
# and unmapped one by one
MMAP_THRESHOLD_BYTES = 32 << 20
# free heap kept mapped by default (a task's ``TENSORGRID_MALLOC_KEEP_BYTES``)
KEEP_BYTES = 256 << 20
# glibc's initial thresholds, set back by ``keep_freed_memory(0)``
_GLIBC_DEFAULT_BYTES = 128 << 10

_lock = threading.Lock()


def keep_freed_memory(keep_bytes: int = KEEP_BYTES) -> bool:
    """Make this process's malloc keep freed blocks for reuse instead of returning them.

    Process-wide; calling it again sets the thresholds again (the last call wins).

    Args:
        keep_bytes: free heap to keep mapped (the trim threshold; capped at 2 GiB - 1, the
            most mallopt's int takes); 0 sets glibc's initial thresholds back.

    Returns:
        True when memory is now kept; False for 0, or when the C library is not glibc (musl,
        macOS), whose allocators have no such thresholds, or refused a value. Never raises for
        a C library's answer.

    Raises:
        ValueError: ``keep_bytes`` is negative.
    """
    if keep_bytes < 0:
        raise ValueError(f"keep_bytes must be >= 0, got {keep_bytes}")
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    with _lock:
        if keep_bytes == 0:
            mallopt(_M_MMAP_THRESHOLD, _GLIBC_DEFAULT_BYTES)
            mallopt(_M_TRIM_THRESHOLD, _GLIBC_DEFAULT_BYTES)
            return False
        # mallopt answers 1 on success, 0 on a value out of range
        return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
            mallopt(_M_TRIM_THRESHOLD, min(keep_bytes, 2**31 - 1)))


def _glibc_mallopt() -> Any:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded into this process
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc's own: musl's mallopt does nothing
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt
