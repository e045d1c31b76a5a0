"""The planning chain: prune -> passes -> place -> partition, returning a frozen Plan.

Pure functions over the IR with no network: the local Session and the master both call them and
differ only in where they run the partitions. ``build_plan`` runs the whole chain; the master runs
it in two halves (``place_graph``, then ``partition_plan``), learning the incarnation of every task
the placement chose before the Send/Recv pairs are stamped with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorgrid.compiler import passes
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.compiler.partition import partition
from tensorgrid.compiler.placement import Placement, place
from tensorgrid.compiler.prune import Pruned, prune
from tensorgrid.compiler.wire import DELTA_CODEC_ATTR, DELTA_LEVEL_ATTR, WirePolicy
from tensorgrid.core.device import task_of
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import TensorSpec


@dataclass(frozen=True)
class PlanOptions:
    allow_soft_placement: bool = False
    do_cse: bool = True
    do_constant_folding: bool = True
    preferred_types: tuple[str, ...] = ("CPU",)
    wire: WirePolicy | None = None  # lossy compression of cross-task edges (None: none)


@dataclass(frozen=True)
class Plan:
    """Everything needed to run one (feeds, fetches, targets) signature.

    Attributes:
        partitions: task name -> that task's nodes (with ``_Arg``/``_Retval`` and Send/Recv).
        args: for feed i, the (task, index of its ``_Arg`` in that task's partition).
        rets: for fetch j, the (task, index of its ``_Retval`` in that task's partition).
        placement: every node's device and the reason.
        specs: output specs of every node of the optimized graph.
    """

    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    targets: tuple[str, ...]
    partitions: Mapping[str, tuple[NodeDef, ...]]
    args: tuple[tuple[str, int], ...]
    rets: tuple[tuple[str, int], ...]
    placement: Placement
    specs: Mapping[str, Sequence[TensorSpec]]
    stats: Mapping[str, Any] = field(default_factory=dict)

    def explain(self) -> list[dict[str, str]]:
        """``[{"node", "device", "reason"}]``: every node's placement, then the casts that the
        wire policy put around Send/Recv pairs (``wire_cast``), its encoders and decoders
        (``wire_codec``) and the receives of variables sent as deltas (``wire_delta``)."""
        rows = self.placement.explain()
        for part in self.partitions.values():
            for n in part:
                if n.op == "Cast" and n.name.endswith(("/_to_wire", "/_from_wire")):
                    rows.append({"node": n.name, "device": n.device,
                                 "reason": f"wire_cast: {n.attrs['SrcT'].name} -> "
                                           f"{n.attrs['DstT'].name} around a Send/Recv"})
                elif n.op == "_WireEncode":
                    rows.append({"node": n.name, "device": n.device,
                                 "reason": f"wire_codec: encode {n.attrs['T'].name} with "
                                           f"{n.attrs['codec']}-{n.attrs['level']} "
                                           f"({n.attrs['shuffle']}) before a Send"})
                elif n.op == "_WireDecode":
                    rows.append({"node": n.name, "device": n.device,
                                 "reason": f"wire_codec: decode {n.attrs['T'].name} after a Recv"})
                elif n.op == "_Recv" and n.attrs.get(DELTA_CODEC_ATTR):
                    rows.append({"node": n.name, "device": n.device,
                                 "reason": f"wire_delta: {n.attrs['tensor_type'].name} variable "
                                           f"read as deltas of the held version "
                                           f"({n.attrs[DELTA_CODEC_ATTR]}-"
                                           f"{n.attrs.get(DELTA_LEVEL_ATTR, 1)})"})
        return rows


@dataclass(frozen=True)
class PlacedGraph:
    """The first half of a plan: the pruned, optimized graph with every node on a device."""

    feeds: tuple[str, ...]
    fetches: tuple[str, ...]
    targets: tuple[str, ...]
    nodes: tuple[NodeDef, ...]
    pruned: Pruned
    placement: Placement
    specs: Mapping[str, Sequence[TensorSpec]]
    graph_size: int
    wire: WirePolicy | None = None

    def tasks(self) -> set[str]:
        """The tasks that run some node of the graph."""
        return {task_of(d) for d in {n.device for n in self.nodes}}


def build_plan(
    nodes: Sequence[NodeDef],
    specs: Mapping[str, Sequence[TensorSpec]] | None,
    feeds: Sequence[str],
    fetches: Sequence[str],
    targets: Sequence[str],
    devices: Sequence[str],
    default_device: str,
    options: PlanOptions = PlanOptions(),
    get_incarnation: Callable[[str], int] | None = None,
) -> Plan:
    """Plan one step signature over the given devices: ``place_graph`` then ``partition_plan``.

    Raises:
        OpError subclasses from inference, pruning and placement, naming the node at fault.
    """
    placed = place_graph(nodes, specs, feeds, fetches, targets, devices, default_device, options)
    return partition_plan(placed, get_incarnation)


def place_graph(
    nodes: Sequence[NodeDef],
    specs: Mapping[str, Sequence[TensorSpec]] | None,
    feeds: Sequence[str],
    fetches: Sequence[str],
    targets: Sequence[str],
    devices: Sequence[str],
    default_device: str,
    options: PlanOptions = PlanOptions(),
) -> PlacedGraph:
    """Prune, optimize and place the graph of one step signature.

    Args:
        nodes: the whole graph.
        specs: its inferred output specs, or None to infer them here.
        feeds, fetches: tensor names; targets: node names.
        devices: full names of every device the plan may use.
        default_device: where unconstrained work goes when nothing argues otherwise (the device
            of the client's task).

    Raises:
        OpError subclasses from inference, pruning and placement, naming the node at fault.
    """
    if specs is None:
        specs = infer_graph(nodes)
    pruned = prune(nodes, specs, feeds, fetches, targets)
    protected = frozenset(pruned.targets)
    # the fed tensors' specs let folding see their static shapes (Shape of a fed [2, 3] is known)
    arg_specs = {n.name: [TensorSpec(n.attrs["T"], n.attrs["shape"])] for n in pruned.nodes
                 if n.op == "_Arg"}
    known = {**specs, **arg_specs}
    optimized = passes.optimize(pruned.nodes, known, protected, do_cse=options.do_cse,
                                do_constant_folding=options.do_constant_folding)
    new_specs = infer_graph(optimized, known=known, ordered=True)
    placement = place(optimized, new_specs, devices, default_device=default_device,
                      allow_soft_placement=options.allow_soft_placement,
                      preferred_types=options.preferred_types)
    placed = tuple(n if n.device == placement.devices[n.name] else
                   n.with_(device=placement.devices[n.name]) for n in optimized)
    return PlacedGraph(tuple(feeds), tuple(fetches), tuple(targets), placed, pruned, placement,
                       new_specs, len(nodes), options.wire)


def partition_plan(placed: PlacedGraph,
                   get_incarnation: Callable[[str], int] | None = None) -> Plan:
    """Partition a placed graph by task into a Plan.

    ``get_incarnation`` gives the incarnation of each task, stamped on its Send/Recv pairs
    (None: 0 everywhere, for tasks that never restart).
    """
    parts = partition(placed.nodes, placed.specs, placed.wire,
                      get_incarnation=get_incarnation or _no_restarts)
    args = _locate(parts, placed.pruned.arg_nodes, "_Arg")
    rets = _locate(parts, placed.pruned.retval_nodes, "_Retval")
    return Plan(placed.feeds, placed.fetches, placed.targets, parts, args, rets, placed.placement,
                placed.specs, {"nodes": len(placed.nodes), "pruned_from": placed.graph_size})


def _no_restarts(task: str) -> int:
    return 0


def _locate(parts: Mapping[str, Sequence[NodeDef]], names: Sequence[str],
            op: str) -> tuple[tuple[str, int], ...]:
    where: dict[str, tuple[str, int]] = {}
    for task, nodes in parts.items():
        for n in nodes:
            if n.op == op:
                where[n.name] = (task, int(n.attrs["index"]))
    return tuple(where[n] for n in names)
