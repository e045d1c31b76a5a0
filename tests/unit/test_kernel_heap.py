"""kernels.heap: freed kernel temporaries stay mapped, so the next step's arrays reuse their pages
instead of faulting fresh ones in."""

from __future__ import annotations

import resource
import sys

import numpy as np
import pytest

from tensorgrid.kernels import heap


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_keep_freed_memory_is_idempotent() -> None:
    first = heap.keep_freed_memory()
    assert heap.keep_freed_memory() is first


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc only")
def test_a_freed_large_array_is_reused_without_page_faults() -> None:
    if not heap.keep_freed_memory():
        pytest.skip("the C library is not glibc")
    size = 8 << 20  # above glibc's initial 128 KiB mmap threshold, under the 32 MiB we set
    a = np.empty(size, dtype=np.uint8)
    a.fill(1)  # touch every page once
    del a
    before = _minor_faults()
    b = np.empty(size, dtype=np.uint8)
    b.fill(2)
    faults = _minor_faults() - before
    # a fresh mapping would fault every 4 KiB page in again: 2048 faults
    assert faults < 64, f"{faults} page faults re-filling a freed 8 MiB block"
    assert int(b[-1]) == 2
