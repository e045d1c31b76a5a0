"""Where a between-graph training step's time goes, read from its FULL_TRACE step stats.

A worker's step of the ``train.*`` units is a chain: it pulls the weights from the ps, computes
the gradients, pushes them to the ps, and the ps applies them; the step ends when the ps's
partition does. From one traced step (the ``StepStats`` of ``RunMetadata``, every node of every
task with its start and duration) ``step_phases`` measures each link of that chain for one variable
(the big one, whose transfers dominate):

  pull     step start -> the worker's ``_Recv`` of the variable's value ends
  compute  -> the worker's ``_Send`` of the variable's gradient starts
  push     -> the ps's ``_Recv`` of that gradient ends
  apply    -> the ps's update of the variable (``ApplyAdam``...) ends (wire casts included)
  tail     -> the step ends (the ps's last nodes, the answers to the master)

tensorgrid's stats name every transfer (``_Send``/``_Recv`` nodes labelled with the tensor they
carry); TensorFlow's do not record its Send/Recv nodes, so its steps have no phases here.

    python bench/xhost.py --framework tensorgrid --units train.wide.async.1gbit --trace-steps 30
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

PHASES = ("pull", "compute", "push", "apply", "tail", "step")

# (device, node name, start in microseconds since the epoch, duration in microseconds, label)
NodeRow = tuple[str, str, int, int, str]


def node_rows(step_stats: Any) -> list[NodeRow]:
    """The nodes of a ``StepStats`` message as plain rows."""
    return [(d.device, n.node_name, int(n.all_start_micros), int(n.all_end_rel_micros),
             n.timeline_label) for d in step_stats.dev_stats for n in d.node_stats]


def _first(rows: Iterable[NodeRow], job: str, name_part: str, *ops: str) -> NodeRow | None:
    """The first node of a task of ``job`` whose name contains ``name_part`` and whose op's name
    starts with one of ``ops``."""
    for row in rows:
        dev, name, _, _, label = row
        if f"/job:{job}/" in dev and "/device:" in dev and name_part in name \
                and any(f"= {op}" in label for op in ops):
            return row
    return None


def step_phases(rows: Sequence[NodeRow], variable: str = "W1",
                gradient: str = "gradients/MatMul_grad/MatMul_1") -> dict[str, float] | None:
    """The phases of one traced step in milliseconds, or None when a node of the chain is not
    in ``rows`` (not a between-graph training step of that variable).

    Args:
        rows: the step's nodes (``node_rows``).
        variable: the variable whose chain is measured (its value read as ``<variable>/read``,
            updated by ``.../update_<variable>/...``).
        gradient: the name of the op computing its gradient on the worker.
    """
    if not rows:
        return None
    start = min(r[2] for r in rows)
    end = max(r[2] + r[3] for r in rows)
    pulled = _first(rows, "worker", f"{variable}/read", "_Recv(")
    sent = _first(rows, "worker", gradient, "_Send(")
    pushed = _first(rows, "ps", gradient, "_Recv(")
    applied = _first(rows, "ps", f"update_{variable}/", "Apply", "ResourceApply")
    if pulled is None or sent is None or pushed is None or applied is None:
        return None
    marks = [start, pulled[2] + pulled[3], sent[2], pushed[2] + pushed[3],
             applied[2] + applied[3], end]
    out = {name: (b - a) / 1000 for name, a, b in zip(PHASES, marks, marks[1:])}
    out["step"] = (end - start) / 1000
    return out


def median_phases(steps: Iterable[dict[str, float] | None]) -> dict[str, Any]:
    """Per phase, the median over the steps that had all their phases (milliseconds), and
    ``steps``: how many did."""
    got = [s for s in steps if s is not None]
    out: dict[str, Any] = {"steps": len(got)}
    for name in PHASES:
        if got:
            out[name] = round(statistics.median(s[name] for s in got), 2)
    return out
