"""The straight-line schedule of a partition without waits, written as one python function.

One line per node, in topological order; constants and variable handles are resolved at build
time and identities become other names for their inputs. An error's line number tells which
node failed, so the function carries no bookkeeping. A task's per-step tensor budget
(``memory_budget``) adds a check to the line of a node only where the step's live bytes are not
known when the plan is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorgrid.runtime import memory_budget as mb


def straight_line(nodes: Sequence[Any], deref: Callable[[Any, str], Any], step_kind: int,
                  budget: mb.Budget | None, tag: str
                  ) -> tuple[Callable[..., Any], str, dict[int, int]]:
    """Compile the schedule of ``nodes`` (the executor's, in order).

    Args:
        nodes: the executor's nodes: ``node``, ``index``, ``kind``, ``fn``, ``in_slots``,
            ``derefs``, ``out_slots``, ``static``, ``is_identity``, ``mem``, ``mem_prefix``.
        deref: reads a variable reference as its value (named for the reading node).
        step_kind: the ``kind`` of kernels that take the step as first argument.
        budget: the task's per-step budget, or None.
        tag: makes the code's file name unique.

    Returns:
        the function ``run(step) -> rets``, its file name, and the node index of each line.
    """
    env: dict[str, Any] = {"_deref": deref, "_budget": budget, "_nd": np.ndarray}
    lines = ["def _run(step):", "    args = step.args", "    rets = step.rets"]
    if budget is not None:
        lines.append("    _n = 0")  # bytes made by nodes of run-time shape, this step
    limit = budget.limit if budget is not None else 0
    line_of_node: dict[int, int] = {}
    alias: dict[int, str] = {}

    def ref(slot: int) -> str:
        return alias.get(slot, f"v{slot}")

    for cn in nodes:
        n = cn.node
        args = []
        for slot, d in zip(cn.in_slots, cn.derefs):
            a = ref(slot)
            if d:
                a = f"_deref({a}, {n.name!r})"
            args.append(a)
        outs = [f"v{s}" if s >= 0 else "_" for s in cn.out_slots]
        target = ""
        if len(outs) == 1:
            target = outs[0] + " = "
        elif len(outs) > 1:
            target = ", ".join(outs) + " = "
        if n.op == "_Arg":
            stmt = f"{target}args[{int(n.attrs['index'])}]" if target else "pass"
        elif n.op == "_Retval":
            stmt = f"rets[{int(n.attrs['index'])}] = {args[0]}"
        elif cn.static is not None:
            if not target:
                continue
            env[f"s{cn.index}"] = cn.static
            stmt = f"{target}s{cn.index}"
        elif cn.is_identity and len(outs) == 1 and outs[0] != "_":
            alias[cn.out_slots[0]] = args[0]
            continue
        elif cn.is_identity and not target:
            continue
        else:
            env[f"k{cn.index}"] = cn.fn
            call = f"k{cn.index}({', '.join((['step'] if cn.kind == step_kind else []) + args)})"
            # the budget's checks sit on the node's own line, so an error names the node; the
            # running total lives in a local, and each comparison is against a constant
            over = f"_n > {limit - cn.mem_prefix} and _budget.refuse(_n + {cn.mem_prefix})"
            if cn.mem == mb.OVER:  # refused before its kernel allocates
                stmt = f"_budget.refuse({cn.mem_prefix})"
            elif cn.mem == mb.MEASURE and len(outs) == 1:
                # arrays only (a numpy scalar is a few bytes, and its nbytes is slow to read): a
                # scalar's line costs one type check
                v = outs[0]
                stmt = (f"{target}{call}\nif type({v}) is _nd:\n    _n += {v}.nbytes"
                        f"\n    {over}")
            elif cn.mem == mb.MEASURE:
                stmt = f"_r = {call}; _n += _budget.bytes(_r); {over}; {target}_r"
            elif cn.mem == mb.CHECK:
                stmt = f"{over}; {target}{call}"
            else:
                stmt = f"{target}{call}"
        for line in stmt.split("\n"):  # every line of a node names it in an error
            lines.append("    " + line)
            line_of_node[len(lines)] = cn.index
    lines.append("    return rets")
    filename = f"<tensorgrid plan {tag}>"
    exec(compile("\n".join(lines), filename, "exec"), env)
    return env["_run"], filename, line_of_node
