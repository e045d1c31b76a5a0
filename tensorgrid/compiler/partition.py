"""Partition a placed graph into one graph per task, with a Send/Recv pair on every cross-task edge.

* One transfer per (tensor, destination task): every consumer of that tensor on the destination task
  reads the same ``_Recv``.
* A control edge across tasks becomes a tiny transfer: a scalar Const that runs after the source
  node is sent, and the destination node gets a control edge from its ``_Recv``.
* ``_Arg``/``_Retval`` indices are renumbered per partition (0..k-1 on each task).
* Every Send/Recv carries the incarnation of its sending task (``get_incarnation``), which is part
  of the rendezvous key: a task that restarted refuses the keys of its previous incarnation.
* With a ``WirePolicy``, a float32 edge it selects travels narrowed: a ``Cast`` to the wire type
  before the ``_Send`` on the producer's task, a ``Cast`` back after the ``_Recv`` on the consumer's;
  an edge its codec selects travels encoded: ``_WireEncode`` before the ``_Send`` (after the cast,
  if any), ``_WireDecode`` after the ``_Recv`` (before the cast back); an edge its ``delta``
  selects (a variable read) instead gets its Send/Recv marked ``_wire_delta`` (codec) and
  ``_wire_delta_level``, and the transport sends it as deltas of what the reader holds.
* A graph with control flow first gets its control-flow nodes colocated with their data, then a
  control loop per task for every loop frame that spans tasks, and every ``_Recv`` inside a frame
  a control edge from its task's control loop (``compiler/control_loops.py``); a ``_Recv`` of a
  value that can be dead is marked so.

Within a task, edges between devices need no Send/Recv: the devices of a task share its memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensorgrid.compiler.control_loops import (
    MAY_BE_DEAD,
    ROOT,
    colocate,
    control_loops,
    frames_of,
    has_control_flow,
    may_be_dead,
)
from tensorgrid.compiler.wire import DELTA_CODEC_ATTR, DELTA_LEVEL_ATTR, WirePolicy
from tensorgrid.core import dtypes, errors
from tensorgrid.core.device import task_of
from tensorgrid.core.ir import NodeDef, parse_input, topological_order
from tensorgrid.core.registry import TensorSpec
from tensorgrid.core.shapes import TensorShape


def _short(task: str) -> str:
    # '/job:worker/replica:0/task:1' -> 'worker_1'
    parts = dict(p.split(":", 1) for p in task.strip("/").split("/"))
    return f"{parts['job']}_{parts['task']}"


def partition(nodes: Sequence[NodeDef], specs: Mapping[str, Sequence[TensorSpec]],
              wire: WirePolicy | None = None,
              get_incarnation: Callable[[str], int] = lambda task: 0
              ) -> dict[str, tuple[NodeDef, ...]]:
    """Split placed ``nodes`` (every node has a full device) by task.

    Args:
        nodes: the placed graph. specs: the output specs of its nodes.
        wire: which cross-task edges travel in a narrower type or encoded (None: every edge as
            it is).
        get_incarnation: the incarnation of a task by name, stamped on the Send/Recv pairs it
            sends from (0, the default, when no task can restart: one process).

    Returns:
        task name ('/job:J/replica:0/task:T') -> the nodes of that task's partition.
    """
    task_by_device = {d: task_of(d) for d in {n.device for n in nodes}}
    if len(set(task_by_device.values())) == 1:  # one task: no edge crosses, nothing to insert
        return {t: tuple(_renumber(list(nodes))) for t in task_by_device.values()}
    anchors: dict[tuple[str, str], str] = {}  # (frame, task) -> its control loop's Merge
    out_frame: dict[str, str] = {}
    dead: set[str] = set()
    if has_control_flow(nodes):
        nodes = colocate(topological_order(nodes))
        frame, out_frame, loops = frames_of(nodes)
        tasks = {task_of(n.device) for n in nodes}
        cloops = control_loops(nodes, frame, loops, {t: _short(t) for t in tasks})
        extra = [n for cl in cloops.values() for n in cl.nodes]
        for cl in cloops.values():
            anchors[(cl.frame, cl.task)] = cl.merge
        nodes = [*nodes, *extra]
        dead = may_be_dead(nodes)
        task_by_device = {d: task_of(d) for d in {n.device for n in nodes}}
    by_name = {n.name: n for n in nodes}
    task = {n.name: task_by_device[n.device] for n in nodes}
    parts: dict[str, list[NodeDef]] = {}
    sends: dict[tuple[str, int, str], str] = {}  # (src, idx, dst task) -> recv node name
    ctrl_sends: dict[tuple[str, str], str] = {}  # (src, dst task) -> recv node name

    def add(t: str, n: NodeDef) -> None:
        parts.setdefault(t, []).append(n)

    def recv_node(name: str, src: str, dst_task: str, dst_device: str,
                  attrs: dict[str, Any]) -> NodeDef:
        """A _Recv of ``src``'s output: in a loop frame, anchored to the frame's control loop on
        the receiving task so it runs once per iteration."""
        f = out_frame.get(src, ROOT)
        inputs: tuple[str, ...] = ()
        if f != ROOT:
            anchor = anchors.get((f, dst_task))
            if anchor is None:
                raise errors.InternalError(
                    f"No control loop of frame '{f}' on {dst_task} for the receive of '{src}'")
            inputs = (f"^{anchor}",)
        if src in dead:
            attrs = {**attrs, MAY_BE_DEAD: True}
        return NodeDef(name, "_Recv", inputs, dst_device, attrs)

    def transfer(src: str, idx: int, dst_task: str, dst_device: str) -> str:
        key = (src, idx, dst_task)
        found = sends.get(key)
        if found is not None:
            return found
        src_node = by_name[src]
        spec = specs[src][idx]
        base = f"{src}/_{idx}_to_{_short(dst_task)}"
        narrow = wire.wire_dtype(src, spec) if wire is not None else None
        sent, dtype = f"{src}:{idx}", spec.dtype
        if narrow is not None:
            sent, dtype = f"{base}/_to_wire", narrow
            add(task[src], NodeDef(sent, "Cast", (f"{src}:{idx}",), src_node.device,
                                   {"SrcT": spec.dtype, "DstT": narrow, "Truncate": False}))
        wire_spec = TensorSpec(dtype, spec.shape)
        delta = wire.wire_delta(src_node, by_name, wire_spec, task[src], dst_task) \
            if wire is not None else None
        codec = wire.wire_codec(src, wire_spec, task[src], dst_task) \
            if wire is not None and delta is None else None
        if codec is not None:
            encoded = f"{base}/_encode"
            add(task[src], NodeDef(encoded, "_WireEncode", (sent,), src_node.device,
                                   {"T": dtype, "codec": codec.codec, "level": codec.level,
                                    "shuffle": codec.shuffle_filter,
                                    "blocksize": codec.blocksize}))
            sent, dtype = encoded, dtypes.uint8
        attrs = {
            "tensor_name": sent if ":" in sent else f"{sent}:0",
            "send_device": src_node.device,
            "send_device_incarnation": get_incarnation(task[src]),
            "recv_device": dst_device,
            "client_terminated": False,
        }
        if delta is not None:
            attrs.update({DELTA_CODEC_ATTR: delta.codec, DELTA_LEVEL_ATTR: delta.level})
        add(task[src], NodeDef(f"{base}/_send", "_Send", (sent,), src_node.device,
                               {**attrs, "T": dtype}))
        recv = f"{base}/_recv"
        recv_shape = TensorShape([None]) if codec is not None else spec.shape
        add(dst_task, recv_node(recv, src, dst_task, dst_device,
                                {**attrs, "tensor_type": dtype, "shape": recv_shape}))
        if codec is not None:
            decoded = f"{base}/_decode"
            add(dst_task, NodeDef(decoded, "_WireDecode", (recv,), dst_device,
                                  {"T": wire_spec.dtype, "shape": spec.shape}))
            recv = decoded
        if narrow is not None:
            widened = f"{base}/_from_wire"
            add(dst_task, NodeDef(widened, "Cast", (recv,), dst_device,
                                  {"SrcT": narrow, "DstT": spec.dtype, "Truncate": False}))
            recv = widened
        sends[key] = recv
        return recv

    def control_transfer(src: str, dst_task: str, dst_device: str) -> str:
        key = (src, dst_task)
        found = ctrl_sends.get(key)
        if found is not None:
            return found
        src_node = by_name[src]
        base = f"{src}/_ctrl_to_{_short(dst_task)}"
        dummy = f"{base}/_trigger"
        add(task[src], NodeDef(dummy, "Const", (f"^{src}",), src_node.device,
                               {"value": np.zeros((), np.int32), "dtype": dtypes.int32}))
        attrs = {
            "tensor_name": f"{dummy}:0",
            "send_device": src_node.device,
            "send_device_incarnation": get_incarnation(task[src]),
            "recv_device": dst_device,
            "client_terminated": False,
        }
        add(task[src], NodeDef(f"{base}/_send", "_Send", (dummy,), src_node.device,
                               {**attrs, "T": dtypes.int32}))
        recv = f"{base}/_recv"
        add(dst_task, recv_node(recv, src, dst_task, dst_device,
                                {**attrs, "tensor_type": dtypes.int32, "shape": TensorShape([])}))
        ctrl_sends[key] = recv
        return recv

    for n in nodes:
        t = task[n.name]
        new_inputs = []
        for inp in n.inputs:
            src, idx, ctrl = parse_input(inp)
            if task[src] == t:
                new_inputs.append(inp)
            elif ctrl:
                new_inputs.append("^" + control_transfer(src, t, n.device))
            else:
                new_inputs.append(transfer(src, idx, t, n.device))
        add(t, n if tuple(new_inputs) == n.inputs else n.with_(inputs=new_inputs))

    return {t: tuple(_renumber(ns)) for t, ns in parts.items()}


def _renumber(nodes: list[NodeDef]) -> list[NodeDef]:
    """Give the ``_Arg`` and ``_Retval`` nodes of one partition indices 0..k-1, in global order."""
    out = list(nodes)
    for op in ("_Arg", "_Retval"):
        frame = sorted((int(n.attrs["index"]), i) for i, n in enumerate(out) if n.op == op)
        for local, (_, i) in enumerate(frame):
            n = out[i]
            out[i] = n.with_(attrs={**n.attrs, "index": local})
    return out
