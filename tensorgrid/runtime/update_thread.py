"""Updates of large variables run off the event loop, on one thread per device.

A parameter server's step is mostly waiting: for the gradients its workers push, then one update
(``ApplyAdam``...) per variable. The waiting happens on the task's event loop, which also serves
every other step's pulls and pushes. An update of a large variable is several numpy passes over it
(a few milliseconds for a 784x1024 layer); run on the loop, it stops the loop from sending the
weights another worker is pulling, or reading the gradients one is pushing, for that long.

So ``Executable.run_async`` hands the update kernels whose work is at least ``OFFLOAD_BYTES`` (the
variable's bytes times the update's passes over it relative to plain gradient descent: ``ApplyAdam``
of a 784x1024 layer, ~19 MB of work, leaves the loop; ``ApplyGradientDescent`` of a 784x256 one,
0.8 MB, stays) to the device's ``UpdateThread`` and awaits them like any async kernel: numpy releases the GIL in its
loops, so the transfers of other steps go on meanwhile. One thread per device keeps the updates of
the device in the order they were handed over, one at a time, as they were on the loop: two steps
never update the same variable at once (no lost update), whatever ``use_locking`` says. Small
updates are run on the loop: a thread hop costs more than it saves (handing a 0.8 MB gradient
descent update to the thread made a one-host MLP trained on 2 workers 23% slower).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

# the least work (bytes of the variable times its update's relative cost) that leaves the loop
OFFLOAD_BYTES = 2 * 1024 * 1024
# an update's passes over its variable relative to gradient descent's (read var, read grad, write);
# the families not named cost _OTHER_COST
_COSTS = {"GradientDescent": 1, "ProximalGradientDescent": 2, "Momentum": 2, "KerasMomentum": 2,
          "Adagrad": 3, "AdagradV2": 3, "ProximalAdagrad": 3, "Adadelta": 5, "RMSProp": 5,
          "CenteredRMSProp": 6, "Adam": 6, "AdamWithAmsgrad": 7, "AdaMax": 6, "Ftrl": 7,
          "FtrlV2": 7, "PowerSign": 5, "AddSign": 5}
_OTHER_COST = 4
# the op families that update variables in place of the caller: TF's training ops
_UPDATE_PREFIXES = ("Apply", "ResourceApply", "SparseApply", "ResourceSparseApply")


def is_update_op(op: str) -> bool:
    """Whether ``op`` is a training update (``ApplyAdam``, ``ResourceApplyAdam``...)."""
    return op.startswith(_UPDATE_PREFIXES)


def update_cost(op: str) -> int:
    """The passes of update ``op`` over its variable relative to ``ApplyGradientDescent``'s."""
    for prefix in ("ResourceSparseApply", "SparseApply", "ResourceApply", "Apply"):
        if op.startswith(prefix):
            return _COSTS.get(op[len(prefix):], _OTHER_COST)
    return _OTHER_COST


def worth_offloading(target: Any, cost: int = 1) -> bool:
    """Whether an update of relative ``cost`` whose first input is ``target`` (a ``VarRef`` or
    ``ResourceHandle``) does at least ``OFFLOAD_BYTES`` of work; False for anything else, and for a
    variable not initialized yet (the kernel then fails on the loop with its usual error)."""
    var = getattr(target, "var", None)
    value = getattr(var, "value", None)
    return int(getattr(value, "nbytes", 0)) * cost >= OFFLOAD_BYTES


def offload_thread(updates: UpdateThread | None, vals: Sequence[Any],
                   in_slots: Sequence[int], cost: int = 1) -> UpdateThread | None:
    """The thread to run an update kernel of relative ``cost`` on (``updates``, the device's),
    or None to run it on the loop: not an update, or too little work."""
    if updates is None or not worth_offloading(vals[in_slots[0]], cost):
        return None
    return updates


def _call(fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    # np.errstate is per thread: the executor's "ignore" must hold here too
    with np.errstate(all="ignore"):
        return fn(*args)


class UpdateThread:
    """The one thread of a device that runs its offloaded updates, in order (started on first
    use; it ends with the process)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self.runs = 0  # updates handed over so far (tests and metrics read it)

    def run(self, fn: Callable[..., Any], args: Sequence[Any]) -> asyncio.Future[Any]:
        """Run ``fn(*args)`` on the thread; the future (of the running loop) gives its result or
        raises what it raised."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="tg-update")
            self.runs += 1
        return asyncio.get_running_loop().run_in_executor(self._pool, _call, fn, args)
