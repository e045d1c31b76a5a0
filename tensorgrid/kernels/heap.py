"""Keep the C heap's freed memory in the process: large kernel temporaries reuse mapped pages.

A training step allocates the same large arrays every step (activations, gradients, im2col
scratch: 1-10 MB each). glibc serves blocks above its mmap threshold (128 KiB at first, raised
dynamically up to 32 MiB as large blocks are freed) with a fresh ``mmap`` and gives them back with
``munmap`` when freed, and it trims the top of the heap once 128 KiB of it is free. Either way the
next step's array lands on pages the kernel must fault in and zero again; on a virtual machine
that first touch ran at ~0.6 GB/s, slower than the arithmetic done on the array, and the CNN of
``bench/local.py`` spent a tenth of its step there.

``keep_freed_memory`` raises the mmap threshold to glibc's maximum (32 MiB: larger blocks still
come from ``mmap`` and go back when freed) and the trim threshold to ``TRIM_BYTES``, so blocks up
to 32 MiB are carved from the heap and, once freed, stay mapped for the next step. The process's
resident size then stays at its peak working set (up to ``TRIM_BYTES`` more at the top of the
heap) instead of falling between steps. On a C library other than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import sys
import threading

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# glibc's largest mmap threshold on 64-bit: HEAP_MAX_SIZE / 2
MMAP_THRESHOLD_BYTES = 32 << 20
# free memory kept at the top of the heap before it is given back to the system
TRIM_BYTES = 512 << 20

_lock = threading.Lock()
_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds as described above, once per process.

    Returns True when they are set (now or by an earlier call), False when the C library is not
    glibc or refused a setting. Never raises.
    """
    global _applied
    with _lock:
        if _applied is None:
            _applied = _apply()
        return _applied


def _apply() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded into this process
        mallopt = libc.mallopt
        # glibc's own symbol: musl and others have a mallopt that changes nothing
        is_glibc = hasattr(libc, "gnu_get_libc_version")

    except (OSError, AttributeError):
        return False
    if not is_glibc:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on a value out of range
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_BYTES)
    )
