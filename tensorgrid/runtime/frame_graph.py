"""The static side of frames: which frame each node of a partition belongs to, and the edges,
pending counts and input buffers the runner (``runtime/frames.py``) keeps per iteration.

A node's frame is found by walking the graph in dataflow order (back edges aside): a node is in
the frame its inputs come from; an ``Enter`` leads into the child frame its ``frame_name`` names,
an ``Exit`` back to the parent. Nodes whose inputs come from two frames are an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import errors
from tensorgrid.core.ir import BACK_EDGE_OPS, CONTROL_FLOW_OPS, NodeDef, parse_input

# what the runner does with a node beyond calling its kernel
NORMAL, SWITCH, MERGE, ENTER, EXIT, NEXT, TRIGGER, ARG, RETVAL, SEND, RECV = range(11)
_KIND_OF_OP = {
    "Switch": SWITCH, "RefSwitch": SWITCH, "Merge": MERGE, "RefMerge": MERGE,
    "Enter": ENTER, "RefEnter": ENTER, "Exit": EXIT, "RefExit": EXIT,
    "NextIteration": NEXT, "RefNextIteration": NEXT, "ControlTrigger": TRIGGER,
    "_Arg": ARG, "_Retval": RETVAL, "_Send": SEND, "_Recv": RECV,
}


def needs_frames(nodes: Sequence[NodeDef]) -> bool:
    """Whether a partition needs the frame runner: it has control-flow ops, or a ``_Recv`` that
    the partitioner marked ``_may_be_dead`` (a value out of a conditional on another task)."""
    return any(n.op in CONTROL_FLOW_OPS or (n.op == "_Recv" and n.attrs.get("_may_be_dead"))
               for n in nodes)


class FrameNode:
    """What the runner knows of one node, computed once."""

    __slots__ = (
        "base", "child", "cn", "ctrl_edges", "frame", "is_constant", "kind", "local", "mem",
        "multi", "n_back", "n_fwd", "n_in", "name", "out_edges", "pending0", "plain", "ret_index",
    )

    def __init__(self, cn: Any) -> None:
        self.cn = cn
        self.name: str = cn.node.name
        self.kind = _KIND_OF_OP.get(cn.node.op, NORMAL)
        self.frame = 0
        self.local = 0
        self.base = 0
        self.n_in = len(cn.in_slots)
        self.out_edges: list[list[tuple[FrameNode, int]]] = []  # per output: (consumer, input position)
        self.ctrl_edges: list[FrameNode] = []
        self.pending0 = 0
        self.n_fwd = 0  # a Merge's inputs that are not back edges
        self.n_back = 0
        self.child = -1  # an Enter's frame
        self.is_constant = False
        self.plain = not any(cn.derefs)
        self.ret_index = int(cn.node.attrs["index"]) if self.kind in (ARG, RETVAL) else -1
        # the kernel returns a tuple of outputs (the executor's rule: more than one output slot)
        self.multi = self.kind in (SWITCH, MERGE) or len(cn.out_slots) > 1
        self.mem: Any = None  # what the step budget does here (``frame_budget.Entry``)


class FrameInfo:
    """A frame of the graph: its name, parent, nodes and loop bound."""

    __slots__ = ("exits", "fid", "n_enters", "n_inputs", "name", "parallel", "parent", "pending0",
                 "size")

    def __init__(self, fid: int, name: str, parent: int) -> None:
        self.fid = fid
        self.name = name
        self.parent = parent
        self.parallel = 10
        self.n_enters = 0
        self.exits: list[FrameNode] = []
        self.size = 0
        self.n_inputs = 0
        self.pending0: list[int] = []



class FrameGraph:
    """A partition's nodes with their frames and edges wired.

    Raises:
        InvalidArgumentError: a node reads from two frames, an Enter has no frame_name, or an Exit
            or NextIteration sits in the root frame (the message names the node).
    """

    def __init__(self, nodes: Sequence[Any]) -> None:
        self._build(nodes)

    def _build(self, nodes: Sequence[Any]) -> None:
        """Find every node's frame and wire the edges, pending counts and input buffers."""
        items = [FrameNode(cn) for cn in nodes]
        self.items = items
        by_name = {it.name: it for it in items}
        self.frames: list[FrameInfo] = [FrameInfo(0, "", -1)]
        child_of: dict[tuple[int, str], int] = {}
        out_frame: dict[str, int] = {}
        for it in items:
            n = it.cn.node
            frame = -1
            data_pos = 0
            for inp in n.inputs:
                src_name, idx, ctrl = parse_input(inp)
                src = by_name[src_name]
                back = src.cn.node.op in BACK_EDGE_OPS
                if not back:
                    f = out_frame[src_name]
                    if frame == -1:
                        frame = f
                    elif f != frame:
                        raise errors.InvalidArgumentError(
                            f"Node '{n.name}' (op {n.op}) has inputs from different frames: "
                            f"'{src_name}' is in frame '{self._frame_name(f)}', another input in "
                            f"'{self._frame_name(frame)}'", node_name=n.name, op_type=n.op)
                if ctrl:
                    src.ctrl_edges.append(it)
                    continue
                while len(src.out_edges) <= idx:
                    src.out_edges.append([])
                src.out_edges[idx].append((it, data_pos))
                data_pos += 1
                if it.kind == MERGE:
                    if back:
                        it.n_back += 1
                    else:
                        it.n_fwd += 1
            it.frame = max(frame, 0)
            out_frame[it.name] = self._output_frame(it, child_of)
        for it in items:
            info = self.frames[it.frame]
            it.local = info.size
            info.size += 1
            it.base = info.n_inputs
            info.n_inputs += it.n_in
            n_ctrl = sum(1 for i in it.cn.node.inputs if i.startswith("^"))
            # a Merge waits for its control inputs (2 each) and its first live input (the low bit)
            it.pending0 = (n_ctrl << 1) | 1 if it.kind == MERGE else n_ctrl + it.n_in
            info.pending0.append(it.pending0)
            if it.kind == EXIT:
                info.exits.append(it)
        for it in items:
            if it.kind == NEXT:
                for edges in it.out_edges:
                    for dst, _ in edges:
                        if dst.frame != it.frame:
                            raise errors.InvalidArgumentError(
                                f"NextIteration '{it.name}' feeds '{dst.name}' in another frame",
                                node_name=it.name, op_type=it.cn.node.op)
        self.roots = [it for it in items if it.frame == 0 and it.pending0 == 0]

    def _frame_name(self, fid: int) -> str:
        return self.frames[fid].name or "<root>"

    def _output_frame(self, it: FrameNode, child_of: dict[tuple[int, str], int]) -> int:
        n = it.cn.node
        if it.kind == ENTER:
            name = n.attrs.get("frame_name")
            if not isinstance(name, str | bytes) or not name:
                raise errors.InvalidArgumentError(
                    f"Enter node '{n.name}' has no frame_name attr", node_name=n.name, op_type=n.op)
            name = name.decode() if isinstance(name, bytes) else name
            key = (it.frame, name)
            fid = child_of.get(key)
            if fid is None:
                fid = child_of[key] = len(self.frames)
                info = FrameInfo(fid, name, it.frame)
                info.parallel = max(int(n.attrs.get("parallel_iterations", 10)), 1)
                self.frames.append(info)
            self.frames[fid].n_enters += 1
            it.child = fid
            it.is_constant = bool(n.attrs.get("is_constant", False))
            return fid
        if it.kind in (EXIT, NEXT) and it.frame == 0:
            raise errors.InvalidArgumentError(
                f"{n.op} node '{n.name}' is not inside a loop frame (no Enter leads to it)",
                node_name=n.name, op_type=n.op)
        if it.kind == EXIT:
            return self.frames[it.frame].parent
        return it.frame

    # ------------------------------------------------------------------ running
