"""Whole-graph inference: every node's output dtypes and shapes, in topological order.

Used to validate submitted GraphDefs (a dtype or shape mismatch fails here, naming the node) and to
give plans the specs that feeds, partitions and kernels need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from tensorgrid.core import errors, registry
from tensorgrid.core.ir import BACK_EDGE_OPS, NodeDef, parse_input, topological_order
from tensorgrid.core.registry import InferContext, TensorSpec

Specs = dict[str, list[TensorSpec]]


def infer_graph(nodes: Sequence[NodeDef], known: Mapping[str, Sequence[TensorSpec]] | None = None,
                ordered: bool = False) -> Specs:
    """Output specs of every node.

    Args:
        nodes: the graph's nodes.
        known: specs already known for some nodes (they are not inferred again).
        ordered: the nodes are already in topological order.

    Raises:
        NotFoundError: an unknown op or a dangling input.
        InvalidArgumentError: a cycle, an attr the op does not take or of the wrong type, or
            inputs the op rejects (names the node).
    """
    order = list(nodes) if ordered else topological_order(nodes)
    by_name = {n.name: n for n in order}
    if not any(n.op in BACK_EDGE_OPS for n in order):
        return _infer_pass(order, by_name, known, {})
    # A loop's Merge reads its NextIteration before that is inferred: the first pass leaves the back
    # edge out, later passes give it the previous pass's spec, until the loop's shapes stop
    # generalizing (each pass can only make a Merge's shape less specific, so this ends).
    back: dict[str, TensorSpec] = {}
    for _ in range(8):
        specs = _infer_pass(order, by_name, known, back)
        new_back = {n.name: specs[n.name][0] for n in order if n.op in BACK_EDGE_OPS}
        if new_back == back:
            break
        back = new_back
    return specs


def _infer_pass(order: Sequence[NodeDef], by_name: Mapping[str, NodeDef],
                known: Mapping[str, Sequence[TensorSpec]] | None,
                back: Mapping[str, TensorSpec]) -> Specs:
    specs: Specs = {k: list(v) for k, v in (known or {}).items()}
    for n in order:
        if n.name in specs:
            continue
        opdef = registry.get_op(n.op, n)
        registry.check_attrs(n, opdef)
        ins: list[TensorSpec | None] = []
        srcs: list[tuple[str, int]] = []
        for inp in n.inputs:
            src, idx, ctrl = parse_input(inp)
            if ctrl:
                continue
            outs = specs.get(src)
            if outs is None and src in by_name and by_name[src].op in BACK_EDGE_OPS:
                ins.append(back.get(src))  # None on the first pass: Merge reads its other inputs
                srcs.append((src, idx))
                continue
            if outs is None:
                raise errors.NotFoundError(
                    f"Node '{n.name}' (op {n.op}) has input '{inp}' naming a node that is not in "
                    "the graph", node_name=n.name, op_type=n.op)
            if idx >= len(outs):
                raise errors.InvalidArgumentError(
                    f"Node '{n.name}' (op {n.op}) reads output {idx} of '{src}', which has only "
                    f"{len(outs)} output(s)", node_name=n.name, op_type=n.op)
            ins.append(outs[idx])
            srcs.append((src, idx))

        def const(i: int, srcs: list[tuple[str, int]] = srcs) -> np.ndarray | None:
            node = by_name.get(srcs[i][0])
            if node is not None and node.op == "Const" and srcs[i][1] == 0:
                v = node.attrs.get("value")
                return v if isinstance(v, np.ndarray) else None
            return None

        try:
            specs[n.name] = list(opdef.infer(InferContext(n, opdef, ins, const)))  # type: ignore[arg-type]
        except errors.OpError as exc:
            raise errors.at_node(exc, n.name, n.op) from None
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise errors.InvalidArgumentError(
                f"Node '{n.name}' (op {n.op}): {exc}", node_name=n.name, op_type=n.op
            ) from exc
    return specs


def check_declared_sizes(nodes: Sequence[NodeDef], specs: Mapping[str, Sequence[TensorSpec]],
                         max_bytes: int) -> None:
    """Refuse a graph whose nodes declare outputs too big to allocate: every output whose
    shape is fully known (a ``Fill`` or ``zeros`` of constant dims, a constant, a reshape ...)
    may take at most ``max_bytes``. Checked before a step runs, with exact integer arithmetic,
    so a shape whose element count overflows 64 bits is refused, not wrapped.

    Raises:
        ResourceExhaustedError: names the node, the op, the shape and the limit.
    """
    for n in nodes:
        for i, spec in enumerate(specs.get(n.name, ())):
            dims = spec.shape.dims
            if dims is None:
                continue
            known = [d for d in dims if d is not None and d >= 0]
            if len(known) != len(dims):
                continue
            count = 1
            for d in known:
                count *= int(d)
            nbytes = count * max(spec.dtype.size, 1)
            if nbytes > max_bytes:
                raise errors.ResourceExhaustedError(
                    f"Node '{n.name}' (op {n.op}) output {i} has shape {list(dims)} of "
                    f"{spec.dtype.name}: {nbytes} bytes, over the limit of {max_bytes} bytes "
                    "per tensor (max_declared_tensor_bytes)", node_name=n.name, op_type=n.op)
