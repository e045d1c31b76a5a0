"""A task's allocator keeps freed tensor memory: after ``keep_freed_memory``, arrays of megabytes
made and dropped step after step, on a thread other than the main one (as a task's event loop
is), cost next to no page faults; the setting of 0 leaves the C library alone."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from tensorgrid.kernels.heap import keep_freed_memory
from tensorgrid.settings import ClientSettings

# in a fresh process (mallopt is process-wide): 30 "steps", each making a 3.2 MB array, its
# float16 cast and a product, on a thread; prints the minor page faults per step
_STEPS = r"""
import json, resource, sys, threading
import numpy as np
from tensorgrid.kernels.heap import keep_freed_memory
applied = keep_freed_memory() if sys.argv[1] == "keep" else False
out = {}
def steps():
    r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(30):
        x = np.ones(784 * 1024, np.float32)
        y = x.astype(np.float16)
        z = x * 2
        del x, y, z
    out["faults"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0) / 30
t = threading.Thread(target=steps)
t.start()
t.join()
print(json.dumps({"applied": applied, "faults_per_step": out["faults"]}))
"""

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                                reason="the thresholds are glibc's")


def _faults(mode: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _STEPS, mode], capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@glibc_only
def test_big_tensors_made_every_step_reuse_their_memory() -> None:
    got = _faults("keep")
    assert got["applied"] is True
    # one step touches ~1,950 pages (3.2 + 1.6 + 3.2 MB); kept memory needs no fault for them
    assert got["faults_per_step"] < 200, got


def test_zero_leaves_the_allocator_alone_and_negative_is_refused() -> None:
    assert keep_freed_memory(0) is False
    with pytest.raises(ValueError, match="keep_bytes"):
        keep_freed_memory(-1)


def test_the_setting_defaults_to_keeping_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENSORGRID_MALLOC_KEEP_BYTES", "0")
    assert ClientSettings().malloc_keep_bytes == 0
    monkeypatch.delenv("TENSORGRID_MALLOC_KEEP_BYTES")
    assert ClientSettings().malloc_keep_bytes == 256 * 1024 * 1024
