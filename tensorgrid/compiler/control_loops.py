"""Control flow across tasks: what partitioning adds so that each task runs its own copy of a
loop's control structure, and the partitions of a loop keep in step.

TensorFlow's distributed control-flow design (its whitepaper's section on control flow; "Dynamic
Control Flow in Large-Scale Machine Learning", EuroSys 2018), rebuilt on our IR:

* **Colocation.** Before anything is split, the control-flow nodes move next to the data they
  steer, so that fewer edges cross tasks inside a frame: a ``Switch`` to the task of its data
  input, an ``Exit`` to the task of its input, a ``NextIteration`` and an ``Enter`` (one that does
  not take a reference) to the task of their first consumer. An invariant ``Enter`` then sits with
  its reader, and its value crosses once per step instead of once per iteration.
* **Control loops.** For every loop frame whose nodes lie on more than one task, every task taking
  part gets a small loop of its own: ``Enter -> Merge -> Switch -> NextIteration`` (back to the
  Merge), whose Switch reads the frame's ``LoopCond``, received from the task that computes it.
  The predicate's owner thus drives the iterations of every other task: each runs as many
  iterations as the owner, no more and no fewer. A nested frame's control loop enters from its
  parent frame's control Merge on the same task; a top-level one from a constant.
* **Receives in a frame.** Every ``_Recv`` of a value produced in a loop frame gets a control edge
  from that frame's control Merge on its task, so it runs once in every iteration (the Merge is
  live in every iteration, the last one included); the matching ``_Send`` runs in every iteration
  too, sending a dead tensor when its input is dead. The executor puts the frame and iteration in
  the rendezvous key of both (``runtime/frames.py``), so the values of iteration 7 meet their
  receiver in iteration 7.
* **Dead tensors across tasks.** A ``_Recv`` of a value that can be dead (anything downstream of a
  ``Switch``) is marked ``_may_be_dead``: its partition runs under the executor's frame runner,
  which hands a received dead tensor on as dead.

A task that takes part in a nested frame takes part in its parent frames too (its control loop for
the inner frame enters from the outer one's), so the participants of a frame include those of its
children.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tensorgrid.core import dtypes, errors, registry
from tensorgrid.core.device import DeviceSpec, task_of
from tensorgrid.core.ir import CONTROL_FLOW_OPS, NodeDef, parse_input

_ENTERS = ("Enter", "RefEnter")
_EXITS = ("Exit", "RefExit")
_SWITCHES = ("Switch", "RefSwitch")
_NEXTS = ("NextIteration", "RefNextIteration")
ROOT = ""  # the root frame's name
# the attr that marks a _Recv whose value can be dead
MAY_BE_DEAD = "_may_be_dead"


@dataclass
class LoopFrame:
    """One loop frame of the graph (by its ``frame_name``)."""

    name: str
    parent: str = ROOT
    parallel: int = 10
    cond: str | None = None  # the LoopCond node
    tasks: dict[str, str] = field(default_factory=dict)  # participant task -> a device on it


@dataclass(frozen=True)
class ControlLoop:
    """The control loop of one frame on one task: its nodes, and the Merge that anchors the
    frame's receives on that task."""

    frame: str
    task: str
    merge: str
    nodes: tuple[NodeDef, ...]


def has_control_flow(nodes: Sequence[NodeDef]) -> bool:
    return any(n.op in CONTROL_FLOW_OPS for n in nodes)


def frames_of(nodes: Sequence[NodeDef]) -> tuple[dict[str, str], dict[str, str],
                                                 dict[str, LoopFrame]]:
    """Which frame every node runs in, which frame its outputs belong to, and the loop frames.

    A node runs in the frame its inputs come from (the root when it has none); an ``Enter`` runs
    in the frame its ``frame_name`` names, and an ``Exit``'s outputs belong to the parent frame.

    Args:
        nodes: the graph in topological order (back edges aside).

    Returns:
        (frame of each node, output frame of each node, loop frames by name).

    Raises:
        InvalidArgumentError: an Enter without ``frame_name``, or two LoopConds in one frame.
    """
    frame: dict[str, str] = {}
    out: dict[str, str] = {}
    loops: dict[str, LoopFrame] = {}
    for n in nodes:
        inner = ROOT
        for inp in n.inputs:
            src, _, _ = parse_input(inp)
            if src in out:  # a back edge's source comes later in the order
                inner = out[src]
                break
        if n.op in _ENTERS:
            name = n.attrs.get("frame_name")
            if isinstance(name, bytes):
                name = name.decode()
            if not isinstance(name, str) or not name:
                raise errors.InvalidArgumentError(
                    f"Enter node '{n.name}' has no frame_name attr", node_name=n.name,
                    op_type=n.op)
            if name not in loops:
                loops[name] = LoopFrame(name, inner,
                                        max(int(n.attrs.get("parallel_iterations", 10)), 1))
            frame[n.name] = name
            out[n.name] = name
            continue
        frame[n.name] = inner
        if n.op in _EXITS and inner != ROOT:
            out[n.name] = loops[inner].parent if inner in loops else ROOT
        else:
            out[n.name] = inner
        if n.op == "LoopCond" and inner in loops:
            if loops[inner].cond is not None:
                raise errors.InvalidArgumentError(
                    f"Frame '{inner}' has two LoopCond nodes: '{loops[inner].cond}' and "
                    f"'{n.name}'", node_name=n.name, op_type=n.op)
            loops[inner].cond = n.name
    return frame, out, loops


def colocate(nodes: Sequence[NodeDef]) -> list[NodeDef]:
    """Move control-flow nodes to the task of the data they steer (see the module docstring).

    Only moves across tasks happen (a node stays on its device when its neighbour is on the same
    task); a node moved to a task lands on its neighbour's device when that is a CPU, else on the
    task's CPU:0 (the control-flow kernels are CPU kernels).

    Args:
        nodes: the placed graph in topological order (back edges aside).
    """
    device = {n.name: n.device for n in nodes}
    by_name = {n.name: n for n in nodes}
    first_consumer: dict[str, str] = {}
    for n in nodes:
        for inp in n.inputs:
            src, _, ctrl = parse_input(inp)
            if not ctrl:
                first_consumer.setdefault(src, n.name)
    moved: dict[str, str] = {}
    for n in nodes:  # in order: a Switch has moved before the Exit that follows it
        target = None
        data = [parse_input(i)[0] for i in n.inputs if not i.startswith("^")]
        if n.op in _SWITCHES or n.op in _EXITS:
            target = device[data[0]] if data else None
        elif n.op == "Enter" or n.op in _NEXTS:
            if n.op == "Enter" and data and _is_ref_output(n.inputs[0], by_name):
                continue
            consumer = first_consumer.get(n.name)
            target = device[consumer] if consumer is not None else None
        if target is None or not target or not n.device or task_of(target) == task_of(n.device):
            continue
        if DeviceSpec.from_string(target).device_type not in (None, "CPU"):
            target = f"{task_of(target)}/device:CPU:0"
        device[n.name] = moved[n.name] = target
    if not moved:
        return list(nodes)
    return [n.with_(device=moved[n.name]) if n.name in moved else n for n in nodes]


def _is_ref_output(inp: str, by_name: Mapping[str, NodeDef]) -> bool:
    src, idx, _ = parse_input(inp)
    n = by_name[src]
    try:
        return idx in registry.get_op(n.op, n).ref_outputs
    except errors.OpError:
        return False


def may_be_dead(nodes: Sequence[NodeDef]) -> set[str]:
    """The nodes whose outputs can be dead: everything downstream of a Switch."""
    consumers: dict[str, list[str]] = {}
    for n in nodes:
        for inp in n.inputs:
            consumers.setdefault(parse_input(inp)[0], []).append(n.name)
    seen = {n.name for n in nodes if n.op in _SWITCHES}
    todo = list(seen)
    while todo:
        for c in consumers.get(todo.pop(), ()):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def control_loops(nodes: Sequence[NodeDef], frame: Mapping[str, str],
                  loops: dict[str, LoopFrame], short: Mapping[str, str]
                  ) -> dict[tuple[str, str], ControlLoop]:
    """The control loop of every (frame, task) pair whose frame lies on more than one task.

    Args:
        nodes: the placed (and colocated) graph.
        frame: each node's frame (``frames_of``); loops: the loop frames, whose ``tasks`` this fills.
        short: a short name of each task, for node names.

    Returns:
        (frame name, task) -> its ControlLoop (whose nodes are not in ``nodes`` yet).

    Raises:
        InvalidArgumentError: a frame on several tasks has no LoopCond.
    """
    for n in nodes:
        f = frame[n.name]
        if f != ROOT:
            loops[f].tasks.setdefault(task_of(n.device), n.device)
    # a task in a frame is in its parents too (innermost frames first)
    def depth(f: str) -> int:
        d = 0
        while f != ROOT:
            f, d = loops[f].parent, d + 1
        return d

    order = sorted(loops, key=depth, reverse=True)
    for name in order:
        parent = loops[name].parent
        if parent != ROOT:
            for t, dev in loops[name].tasks.items():
                loops[parent].tasks.setdefault(t, dev)
    result: dict[tuple[str, str], ControlLoop] = {}
    for name in reversed(order):  # outer frames first: an inner loop enters from the outer one
        info = loops[name]
        if len(info.tasks) < 2:
            continue
        if info.cond is None:
            raise errors.InvalidArgumentError(
                f"The loop frame '{name}' spans tasks {sorted(info.tasks)} but has no LoopCond "
                "node to drive its iterations")
        for t, dev in sorted(info.tasks.items()):
            if DeviceSpec.from_string(dev).device_type not in (None, "CPU"):
                dev = f"{t}/device:CPU:0"
            outer = result.get((info.parent, t))
            result[(name, t)] = _control_loop(info, t, dev, short[t],
                                              None if outer is None else outer.merge)
    return result


def _control_loop(info: LoopFrame, task: str, device: str, short: str,
                  outer_merge: str | None) -> ControlLoop:
    base = f"_cloop/{info.name}/{short}"
    i32 = dtypes.int32
    made: list[NodeDef] = []
    if outer_merge is None:
        outer_merge = f"{base}/start"
        made.append(NodeDef(outer_merge, "Const", (), device,
                            {"value": np.zeros((), np.int32), "dtype": i32}))
    enter, merge, switch, nxt = (f"{base}/enter", f"{base}/merge", f"{base}/switch",
                                 f"{base}/next")
    made += [
        NodeDef(enter, "Enter", (outer_merge,), device,
                {"T": i32, "frame_name": info.name, "is_constant": False,
                 "parallel_iterations": info.parallel}),
        NodeDef(merge, "Merge", (enter, nxt), device, {"T": i32, "N": 2}),
        NodeDef(switch, "Switch", (merge, f"{info.cond}"), device, {"T": i32}),
        NodeDef(nxt, "NextIteration", (f"{switch}:1",), device, {"T": i32}),
    ]
    return ControlLoop(info.name, task, merge, tuple(made))

