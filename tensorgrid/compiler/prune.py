"""Prune a graph to what a step needs, and give it a call frame.

Fed tensors become ``_Arg`` nodes (the graph is cut there: what only fed tensors need is dropped),
each fetch gets a ``_Retval`` node, and only the nodes that the fetches and targets depend on remain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tensorgrid.core import errors
from tensorgrid.core.ir import NodeDef, parse_input, parse_tensor_name
from tensorgrid.core.registry import TensorSpec

ARG_PREFIX = "_arg/"
RETVAL_PREFIX = "_retval/"


@dataclass(frozen=True)
class Pruned:
    """The pruned graph and its call frame: ``arg_nodes[i]`` takes feed i, ``retval_nodes[j]``
    delivers fetch j."""

    nodes: tuple[NodeDef, ...]
    arg_nodes: tuple[str, ...]
    retval_nodes: tuple[str, ...]
    targets: tuple[str, ...]


def prune(
    nodes: Sequence[NodeDef],
    specs: Mapping[str, Sequence[TensorSpec]],
    feeds: Sequence[str],
    fetches: Sequence[str],
    targets: Sequence[str] = (),
) -> Pruned:
    """Cut the graph at ``feeds`` and keep what ``fetches`` and ``targets`` need.

    Args:
        nodes: the whole graph.
        specs: output specs of every node (``compiler.infer.infer_graph``).
        feeds: tensor names ('x:0') whose values the caller supplies, in argument order.
        fetches: tensor names whose values the caller wants, in result order.
        targets: node names to run for their effects.

    Raises:
        NotFoundError: a feed, fetch or target names no node.
        InvalidArgumentError: a name points past a node's outputs, or a tensor is fed twice.
    """
    by_name = {n.name: n for n in nodes}

    def check_tensor(name: str, what: str) -> tuple[str, int]:
        node, idx = parse_tensor_name(name)
        if node not in by_name:
            raise errors.NotFoundError(f"{what} '{name}' names node '{node}', which is not in the "
                                       "graph", node_name=node)
        n_out = len(specs[node])
        if idx >= n_out:
            raise errors.InvalidArgumentError(
                f"{what} '{name}': node '{node}' (op {by_name[node].op}) has {n_out} output(s)",
                node_name=node, op_type=by_name[node].op)
        return node, idx

    fed: dict[tuple[str, int], str] = {}
    new_nodes: list[NodeDef] = []
    arg_names: list[str] = []
    for i, f in enumerate(feeds):
        key = check_tensor(f, "Feed")
        if key in fed:
            raise errors.InvalidArgumentError(f"Tensor '{f}' is fed more than once",
                                              node_name=key[0])
        spec = specs[key[0]][key[1]]
        arg = f"{ARG_PREFIX}{key[0]}_{key[1]}"
        fed[key] = arg
        fed_node = by_name[key[0]]
        new_nodes.append(NodeDef(arg, "_Arg", (), fed_node.device, {
            "T": spec.dtype, "index": i, "shape": spec.shape, "_fed": f"{key[0]}:{key[1]}",
            **({"_class": fed_node.attrs["_class"]} if "_class" in fed_node.attrs else {}),
        }))
        arg_names.append(arg)
    for t in targets:
        if t not in by_name:
            raise errors.NotFoundError(f"Target '{t}' is not a node in the graph", node_name=t)

    # control edges on a fed single-output node now point at its _Arg
    fed_nodes = {k[0]: v for k, v in fed.items() if k[1] == 0 and len(specs[k[0]]) == 1}

    def rewrite(inp: str) -> str:
        src, idx, ctrl = parse_input(inp)
        if ctrl:
            return "^" + fed_nodes[src] if src in fed_nodes else inp
        arg = fed.get((src, idx))
        return arg if arg is not None else inp

    retvals: list[str] = []
    for j, f in enumerate(fetches):
        key = check_tensor(f, "Fetch")
        src = fed.get(key, f"{key[0]}:{key[1]}")
        ret = f"{RETVAL_PREFIX}{j}"
        new_nodes.append(NodeDef(ret, "_Retval", (src,), "", {
            "T": specs[key[0]][key[1]].dtype, "index": j}))
        retvals.append(ret)

    # walk back from the retvals and targets, not past fed tensors
    rewritten: dict[str, NodeDef] = {n.name: n for n in new_nodes}
    keep: set[str] = set(arg_names)
    stack: list[str] = list(retvals) + list(targets)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        node = rewritten.get(name)
        if node is None:
            orig = by_name[name]
            new_inputs = tuple(rewrite(i) for i in orig.inputs)
            node = orig if new_inputs == orig.inputs else orig.with_(inputs=new_inputs)
            rewritten[name] = node
        for inp in node.inputs:
            src = parse_input(inp)[0]
            if src not in keep:
                if src not in rewritten and src not in by_name:
                    raise errors.NotFoundError(
                        f"Node '{node.name}' (op {node.op}) has input '{inp}' naming a node that "
                        "is not in the graph", node_name=node.name, op_type=node.op)
                stack.append(src)
    ordered = [rewritten[n.name] for n in nodes if n.name in keep]
    ordered.extend(n for n in new_nodes if n.name in keep)
    return Pruned(tuple(ordered), tuple(arg_names), tuple(retvals), tuple(targets))
