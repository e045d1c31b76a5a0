"""The C allocator of a task process: freed tensor memory is kept for the next step.

Every step of a training task allocates and frees tensors of megabytes: the weights it pulls, the
gradients it computes and pushes, their casts for the wire. With glibc's defaults, malloc gives
the memory of large blocks back to the kernel when they are freed (``munmap`` above its mmap
threshold; ``madvise`` of a thread heap's free top above its trim threshold), and the next step
takes page faults to get the same memory back, zero-filled: a 3.2 MB array costs ~800 faults each
time it is made. The event loop of a task runs on a thread of its own, whose heap glibc trims
eagerly, so this happens every step.

``keep_freed_memory`` raises both thresholds (``mallopt``): blocks up to ``MMAP_THRESHOLD_BYTES``
come from the heap, and up to ``keep_bytes`` of free heap stay mapped. Measured on the cross-host
Adam trainer (``bench/xhost.py``, bfloat16 on the wire, 3 simulated hosts on 2 cores), a worker
spent ~15 ms of CPU per step with the defaults and ~9 ms with these. The cost is memory: a task
keeps what its largest steps used, as allocators of other runtimes' tensors (TF's BFC) do.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# the most glibc accepts for M_MMAP_THRESHOLD on 64-bit (HEAP_MAX_SIZE / 2); bigger blocks are
# still mapped and unmapped one by one
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
# how much free heap a task keeps by default (``TENSORGRID_MALLOC_KEEP_BYTES``)
KEEP_BYTES = 256 * 1024 * 1024


def keep_freed_memory(keep_bytes: int = KEEP_BYTES) -> bool:
    """Make this process's malloc keep freed blocks for reuse instead of returning them.

    Process-wide and meant for a task's start (a ``tf.train.Server`` or a service); calling it
    again just sets the same values.

    Args:
        keep_bytes: free heap to keep mapped (the trim threshold); 0 leaves glibc's defaults.

    Returns:
        True when applied; False for 0, or when the C library is not glibc (musl, macOS),
        whose allocators have no such thresholds.

    Raises:
        ValueError: ``keep_bytes`` is negative.
    """
    if keep_bytes < 0:
        raise ValueError(f"keep_bytes must be >= 0, got {keep_bytes}")
    if keep_bytes == 0 or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt answers 1 on success; an int argument caps keep_bytes at 2 GiB - 1
    trim = min(keep_bytes, 2**31 - 1)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, trim))
