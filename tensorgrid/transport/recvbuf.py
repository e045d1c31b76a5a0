"""Memory for received tensors, reused once the arrays that used it are gone.

A fresh buffer for every big tensor a consumer pulls costs more than the pull's copy: the kernel
faults in and zeroes every page of new memory (a 256 MB tensor is 128 huge pages cleared, twice
the time the socket takes to copy the bytes into them). A trainer pulls the same tensors every
step, so ``ReceiveBuffers`` keeps the memory of a received tensor whose arrays have all been
collected, and hands it to the next tensor of the same size, whose bytes then land in pages that
are already mapped. TF's allocators reuse freed memory the same way.

A buffer is an anonymous ``mmap``; the array handed out views it, and a finalizer on that array
(which every view, reshape and slice of it keeps alive) gives the buffer back. Nothing is given
back while any view lives, so a buffer is never written while someone can read it. Free buffers
are held up to ``max_bytes`` (oldest dropped first); small tensors are plain allocations.
"""

from __future__ import annotations

import mmap
import threading
import weakref
from collections import OrderedDict

import numpy as np

# below this a fresh allocation is cheap (and comes from malloc's own free lists)
MIN_POOLED_BYTES = 1024 * 1024
# free memory kept for reuse by one pool
MAX_FREE_BYTES = 1024 * 1024 * 1024


class ReceiveBuffers:
    """A pool of byte buffers for received tensors, safe to use from any thread.

    Args:
        max_bytes: the most free memory held for reuse; a buffer given back past it is
            released (the oldest free ones go first).
        min_bytes: smaller requests get a fresh array and are not pooled.

    Attributes:
        reused: buffers handed out again instead of allocated.
        allocated: buffers made fresh for the pool.
    """

    def __init__(self, max_bytes: int = MAX_FREE_BYTES,
                 min_bytes: int = MIN_POOLED_BYTES) -> None:
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes
        self.reused = 0
        self.allocated = 0
        # free buffers by size, oldest first; a size may have several
        self._free: OrderedDict[int, list[mmap.mmap]] = OrderedDict()
        self._free_bytes = 0
        self._lock = threading.Lock()

    @property
    def free_bytes(self) -> int:
        """The bytes held free for reuse now."""
        return self._free_bytes

    def take(self, nbytes: int) -> np.ndarray:
        """A writable uint8 array of ``nbytes``; its content is undefined (old bytes of a reused
        buffer). Its memory comes back to the pool when it and all its views are collected."""
        if nbytes < self.min_bytes:
            return np.empty(nbytes, dtype=np.uint8)
        buf = None
        with self._lock:
            same = self._free.get(nbytes)
            if same:
                buf = same.pop()
                self._free_bytes -= nbytes
                if not same:
                    del self._free[nbytes]
                self.reused += 1
        if buf is None:
            buf = mmap.mmap(-1, nbytes)
            if hasattr(mmap, "MADV_HUGEPAGE"):
                buf.madvise(mmap.MADV_HUGEPAGE)  # fewer faults and TLB misses on first use
            self.allocated += 1
        arr = np.frombuffer(buf, dtype=np.uint8, count=nbytes)
        weakref.finalize(arr, self._give_back, buf)
        return arr

    def _give_back(self, buf: mmap.mmap) -> None:
        """Runs when the last view of a handed-out buffer is collected (on any thread)."""
        nbytes = len(buf)
        if nbytes > self.max_bytes:
            return  # too big to keep: the mapping goes with its last reference
        with self._lock:
            while self._free and self._free_bytes + nbytes > self.max_bytes:
                size, bufs = next(iter(self._free.items()))
                bufs.pop(0)
                self._free_bytes -= size
                if not bufs:
                    del self._free[size]
            self._free.setdefault(nbytes, []).append(buf)
            self._free.move_to_end(nbytes)
            self._free_bytes += nbytes

    def clear(self) -> None:
        """Release every free buffer (those handed out are unaffected)."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0
