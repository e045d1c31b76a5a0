"""A task's per-step tensor budget (``memory_budget``) inside control flow.

The straight-line schedule keeps every output until the step ends, so its live bytes are a sum
known mostly at build time. Inside a loop that is not so: an iteration's outputs are dropped
once the loop has moved past them, and a loop may run any number of iterations. Here the step's
``tensor_bytes`` is kept exact as the frames run (``runtime/frames.py``, and the python loops of
``runtime/loops.py``):

* a node of known output shape is checked **before** its kernel runs (the step's live bytes plus
  its declared bytes), one of run-time shape is measured after; either adds its bytes to the
  step and to its iteration;
* an iteration's tensors live until the next iteration is done (the loop variables it hands on
  are read there), then they are released (the general runner may run up to
  ``parallel_iterations`` iterations side by side: each holds its own until then); a finished loop releases what is left, but for the
  values its ``Exit`` nodes deliver: their bytes move to the enclosing iteration;
* what a loop keeps of past iterations counts while it is kept: a ``StackPushV2`` (the stacks a
  gradient loop fills) or a TensorArray write/scatter/split adds the stored value's bytes to the
  step, checked before it is stored; a ``StackPopV2`` moves the popped tensor from the step's kept
  bytes to its iteration's.

A partition with no budget builds no ``FrameBudget``: the runners then do what they did before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tensorgrid.runtime.memory_budget import over, value_bytes

# ops that store a value for later iterations: the position of the stored value's input
KEEPS = {"StackPushV2": 1, "TensorArrayWriteV3": 2, "TensorArrayScatterV3": 2,
         "TensorArraySplitV3": 1}
RELEASES = frozenset({"StackPopV2"})

# what a node does about the budget
COUNT, KEEP, RELEASE = 1, 2, 3

Entry = tuple[int, int | None, int]  # (what, declared bytes or None, kept input position)


class FrameBudget:
    """The budget of one partition with control flow.

    Args:
        limit: the most bytes of tensors one step may keep live.
        declared: the nodes whose outputs are step tensors (as the executor decides: not
            constants, variables, identities or arguments), each with its outputs' declared
            bytes, or None when a shape is known only at run time.
    """

    __slots__ = ("declared", "limit")

    def __init__(self, limit: int, declared: Mapping[str, int | None]) -> None:
        self.limit = limit
        self.declared = dict(declared)

    def entry(self, cn: Any) -> Entry | None:
        """What a node (the executor's ``_Node``) does about the budget; None: nothing."""
        op = cn.node.op
        if op in KEEPS:
            return (KEEP, None, KEEPS[op])
        if op == "_Loop":  # a compiled loop: its results are measured
            return (COUNT, None, -1)
        if cn.node.name not in self.declared:
            return None
        if op in RELEASES:
            return (RELEASE, None, -1)
        return (COUNT, self.declared[cn.node.name], -1)

    # ---------------------------------------------------------------- the frame runner
    def run(self, entry: Entry, step: Any, it: Any, cn: Any, args: Any) -> Any:
        """Run a node's (non-waiting) kernel under the budget, charging iteration ``it``.

        Raises:
            ResourceExhaustedError: the step would go over the budget (before the kernel runs
                when the bytes are known before).
        """
        what, declared, pos = entry
        limit = self.limit
        if what == KEEP:
            kept = value_bytes(args[pos])
            if step.tensor_bytes + kept > limit:
                raise over(limit, step.tensor_bytes + kept, "with the value this node stores")
            result = cn.fn(*args) if cn.kind == 0 else cn.fn(step, *args)
            step.tensor_bytes += kept  # the step's until popped or the step ends
            return result
        if declared is not None:
            if step.tensor_bytes + declared > limit:
                raise over(limit, step.tensor_bytes + declared, "with this node's outputs")
            result = cn.fn(*args) if cn.kind == 0 else cn.fn(step, *args)
            step.tensor_bytes += declared
            it.bytes += declared
            return result
        result = cn.fn(*args) if cn.kind == 0 else cn.fn(step, *args)
        self.measured(entry, step, it, result)
        return result

    def measured(self, entry: Entry, step: Any, it: Any, value: Any) -> None:
        """Charge what a node of run-time shape made (a waiting kernel's value included).

        Raises:
            ResourceExhaustedError: the step went over the budget.
        """
        nbytes = value_bytes(value)
        if entry[0] == RELEASE:
            step.tensor_bytes -= nbytes  # it left the stack: now the iteration's
        step.tensor_bytes += nbytes
        it.bytes += nbytes
        if step.tensor_bytes > self.limit:
            raise over(self.limit, step.tensor_bytes, "with this node's outputs")

    @staticmethod
    def exited(it: Any, parent_it: Any, value: Any) -> None:
        """An ``Exit`` hands a value of iteration ``it`` to the enclosing iteration: its bytes
        move there (the step's total is unchanged), so they stay live when the loop's own
        tensors are released."""
        nbytes = value_bytes(value)
        it.bytes -= nbytes
        parent_it.bytes += nbytes

    # ---------------------------------------------------------------- compiled loops
    def loop_line(self, entry: Entry, lhs: str, call: str, args: list[str]) -> str:
        """One line of a compiled loop running a node under the budget: ``_n`` is the bytes of
        the current iteration, ``_over`` and ``_bytes`` are this module's (see ``LOOP_ENV``)."""
        what, declared, pos = entry
        limit = self.limit
        if what == KEEP:
            return (f"_b = _bytes({args[pos]}); step.tensor_bytes + _b > {limit} and "
                    f"_over({limit}, step.tensor_bytes + _b, 'with the value this node stores');"
                    f" {lhs} = {call}; step.tensor_bytes += _b")
        if declared is not None and what == COUNT:
            return (f"step.tensor_bytes + {declared} > {limit} and _over({limit}, "
                    f"step.tensor_bytes + {declared}, \"with this node's outputs\"); "
                    f"{lhs} = {call}; step.tensor_bytes += {declared}; _n += {declared}")
        moved = "step.tensor_bytes -= _b; " if what == RELEASE else ""
        return (f"_r = {call}; {lhs} = _r; _b = _bytes(_r); {moved}step.tensor_bytes += _b; "
                f"_n += _b; step.tensor_bytes > {limit} and _over({limit}, step.tensor_bytes, "
                "\"with this node's outputs\")")


def _raise_over(limit: int, live: int, what: str) -> None:
    raise over(limit, live, what)


# what a compiled loop's source needs when it runs under a budget
LOOP_ENV = {"_bytes": value_bytes, "_over": _raise_over}
# the loop's own lines: start (before ``while``), each iteration's first line (the iteration
# before the previous one is released), and the end (the loop's tensors are released)
LOOP_START = "_n = _p = 0"
LOOP_NEXT = "step.tensor_bytes -= _p; _p = _n; _n = 0"
LOOP_END = "step.tensor_bytes -= _p + _n"
