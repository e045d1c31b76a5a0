"""A task's budget for the bytes of the tensors one step keeps live.

A step keeps every output it computed until it ends (the executor's slots, a Recv's received
tensor included), so the bytes live in a step are the sum of its outputs so far. The budget is
checked without slowing the common case:

* at build time, every node whose output shapes are fully known adds its declared bytes to a
  running total in schedule order (its *prefix*). A node whose prefix alone is over the budget
  fails the step when it is reached, **before** its kernel allocates anything.
* a node whose output shape is known only at run time is measured after its kernel returns
  (``nbytes`` of the arrays it produced; numpy scalars, a few bytes each, are not counted), into
  the step's ``tensor_bytes``; after the first such node, nodes of known shape check
  ``tensor_bytes + prefix`` before they run.

A graph whose shapes are all known (a chain of adds of fed placeholders of fixed shape) thus pays
nothing per op. Constants and variables (built once, not per step), fed arguments, identities
(another name for their input) and outputs nobody reads are not step tensors and do not count.
Failing is a ``ResourceExhaustedError`` that the executor names with the node, op and device; the
step's tensors are dropped with the step, and the task lives on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import TensorSpec

# what to do at a node (``Executable``'s nodes carry one of these and their prefix)
NONE, CHECK, MEASURE, OVER = 0, 1, 2, 3


def declared_bytes(specs: Sequence[TensorSpec]) -> int | None:
    """The bytes of a node's outputs when every shape is fully known, else None (exact
    arithmetic: no overflow)."""
    if not specs:
        return None
    total = 0
    for spec in specs:
        dims = spec.shape.dims
        if dims is None:
            return None
        count = 1
        for d in dims:
            if d is None or d < 0:
                return None
            count *= int(d)
        total += count * max(spec.dtype.size, 1)
    return total


def plan(outputs: Sequence[tuple[bool, Sequence[TensorSpec]]], budget: int | None
         ) -> list[tuple[int, int]]:
    """What each node does about the budget, in schedule order.

    Args:
        outputs: per node, whether it makes step tensors (see the module's text), and its output
            specs.
        budget: the most bytes a step may keep live; None: no budget.

    Returns:
        per node, ``(action, prefix)``: the action (``NONE``, ``CHECK``, ``MEASURE``, ``OVER``)
        and the declared bytes of the nodes of known shape up to and including it.
    """
    if budget is None:
        return [(NONE, 0)] * len(outputs)
    out: list[tuple[int, int]] = []
    prefix = 0
    measured = False  # a node of run-time shape came before: the total is known only then
    for makes_tensors, specs in outputs:
        if not makes_tensors:
            out.append((NONE, prefix))
            continue
        nbytes = declared_bytes(specs)
        if nbytes is None:
            measured = True
            out.append((MEASURE, prefix))
            continue
        prefix += nbytes
        if prefix > budget:
            out.append((OVER, prefix))
        else:
            out.append((CHECK if measured else NONE, prefix))
    return out


def value_bytes(value: Any) -> int:
    """The bytes of a kernel's result: an array's ``nbytes``, a tuple's sum; 0 for handles and
    numpy scalars (a few bytes each)."""
    if type(value) is tuple or type(value) is list:
        return sum(value_bytes(v) for v in value)
    return int(value.nbytes) if isinstance(value, np.ndarray) else 0


def over(budget: int, live: int, what: str) -> errors.ResourceExhaustedError:
    """The error of a step over its task's budget (the executor adds node, op and device)."""
    return errors.ResourceExhaustedError(
        f"The step's tensors would take {live} bytes {what}, over this task's budget of "
        f"{budget} bytes per step (step_memory_bytes); the step was stopped and the task "
        "goes on")


class Budget:
    """The checks a running step makes; ``step.tensor_bytes`` is what measured nodes made."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def check(self, step: Any, prefix: int) -> None:
        """Before a node of known shape runs.

        Raises:
            ResourceExhaustedError: its outputs would take the step over the budget.
        """
        live = step.tensor_bytes + prefix
        if live > self.limit:
            raise over(self.limit, live, "with this node's outputs")

    def refuse(self, prefix: int) -> None:
        """A node of known shape whose outputs alone take the step over: before it allocates.

        Raises:
            ResourceExhaustedError: always.
        """
        raise over(self.limit, prefix, "with this node's outputs")

    @staticmethod
    def bytes(value: Any) -> int:
        """``value_bytes`` (for the generated code)."""
        return value_bytes(value)

    def measure(self, step: Any, value: Any, prefix: int) -> Any:
        """After a node of run-time shape ran; returns ``value``.

        Raises:
            ResourceExhaustedError: its outputs took the step over the budget.
        """
        step.tensor_bytes += value_bytes(value)
        live = step.tensor_bytes + prefix
        if live > self.limit:
            raise over(self.limit, live, "with this node's outputs")
        return value
