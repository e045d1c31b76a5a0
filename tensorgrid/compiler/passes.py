"""Graph passes: pure functions from a node list to a node list that computes the same results.

* ``cse``: common-subexpression elimination. Two stateless nodes with the same op, inputs, device and
  attrs compute the same value: later ones are replaced by the first.
* ``constant_fold``: a stateless node whose data inputs are all constants is evaluated once, with its
  CPU kernel, and replaced by a Const (so are Shape/Size/Rank of fully known shapes). Its control
  inputs stay on the new Const.

Neither pass touches stateful nodes, ``_Arg``/``_Retval``, the control-flow ops
(``core.ir.CONTROL_FLOW_OPS``), or the names in ``protected``. In a graph with control flow a folded
Const keeps the control inputs of the constants it was computed from (and a folded Shape a control
edge from the tensor it measured), so it stays in the same branch and loop frame.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tensorgrid.compiler.remap import fuse_conv_bias_relu
from tensorgrid.core import dtypes, errors, registry
from tensorgrid.core.ir import (
    CONTROL_FLOW_OPS,
    NodeDef,
    attrs_key,
    parse_input,
    topological_order,
)
from tensorgrid.core.registry import AsyncKernel, KernelContext, StepKernel, TensorSpec

# Ops whose inputs may be reordered without changing the result.
_COMMUTATIVE = frozenset({"AddV2", "Add", "Mul", "Maximum", "Minimum", "Equal", "NotEqual",
                          "LogicalAnd", "LogicalOr", "BitwiseAnd", "BitwiseOr", "BitwiseXor"})
# Folding stops at results bigger than this (bytes): a big constant is cheaper to compute than to
# ship inside every registered partition.
FOLD_LIMIT_BYTES = 10 * 1024 * 1024

Specs = Mapping[str, Sequence[TensorSpec]]


def _mergeable(n: NodeDef) -> bool:
    opdef = registry.get_op(n.op, n)
    return (not opdef.stateful and not opdef.ref_outputs and not n.op.startswith("_")
            and n.op not in CONTROL_FLOW_OPS)


def cse(nodes: Sequence[NodeDef], protected: frozenset[str] | set[str] = frozenset(),
        ordered: bool = False) -> list[NodeDef]:
    """Common-subexpression elimination (``ordered``: the nodes are in topological order already).

    Returns the nodes in topological order, duplicates removed and their consumers rewired.
    """
    order = list(nodes) if ordered else topological_order(nodes)
    rep: dict[str, str] = {}  # removed node -> the node that replaces it
    seen: dict[Any, str] = {}
    out: list[NodeDef] = []
    mergeable: dict[str, bool] = {}  # by op type
    for n in order:
        if rep:
            new_inputs = tuple(_rename(i, rep) for i in n.inputs)
            if new_inputs != n.inputs:
                n = n.with_(inputs=new_inputs)
        ok = mergeable.get(n.op)
        if ok is None:
            ok = mergeable[n.op] = _mergeable(n)
        if ok and n.name not in protected:
            data = [_canon(i) for i in n.inputs if not i.startswith("^")]
            if n.op in _COMMUTATIVE:
                data.sort()
            ctrl = tuple(sorted({i for i in n.inputs if i.startswith("^")}))
            key = (n.op, tuple(data), ctrl, n.device, attrs_key(n.attrs))
            first = seen.get(key)
            if first is not None:
                rep[n.name] = first
                continue
            seen[key] = n.name
        out.append(n)
    return out


def _canon(inp: str) -> str:
    """'x' -> 'x:0' (node names never contain ':', so one present separates the output index)."""
    return inp if ":" in inp else inp + ":0"


def _rename(inp: str, rep: Mapping[str, str]) -> str:
    node, idx, ctrl = parse_input(inp)
    target = rep.get(node)
    if target is None:
        return inp
    return f"^{target}" if ctrl else (target if idx == 0 else f"{target}:{idx}")


def constant_fold(nodes: Sequence[NodeDef], specs: Specs,
                  protected: frozenset[str] | set[str] = frozenset(),
                  ordered: bool = False) -> list[NodeDef]:
    """Replace stateless nodes computable from constants alone by Const nodes (``ordered``: the
    nodes are in topological order already).

    Returns the nodes in topological order. A node whose evaluation fails is left alone, so the
    error surfaces when the step runs, naming that node.
    """
    order = list(nodes) if ordered else topological_order(nodes)
    consts: dict[str, np.ndarray] = {}  # name of a (now) single-output Const -> value
    extra_outputs: dict[tuple[str, int], str] = {}  # multi-output results -> new Const names
    out: list[NodeDef] = []
    # with control flow, a constant's control inputs place it in a branch or a loop frame
    frames = any(n.op in CONTROL_FLOW_OPS for n in order)
    const_ctrl: dict[str, tuple[str, ...]] = {}
    for n in order:
        new_inputs = tuple(_fold_rename(i, extra_outputs) for i in n.inputs)
        if new_inputs != n.inputs:
            n = n.with_(inputs=new_inputs)
        if n.op == "Const" and isinstance(n.attrs.get("value"), np.ndarray):
            consts[n.name] = n.attrs["value"]
            if frames:
                const_ctrl[n.name] = tuple(i for i in n.inputs if i.startswith("^"))
            out.append(n)
            continue
        folded = None if n.name in protected else _try_fold(n, specs, consts)
        if folded is None:
            out.append(n)
            continue
        ctrl = tuple(i for i in n.inputs if i.startswith("^"))
        if frames:
            ctrl = _inherited_control(n, ctrl, const_ctrl)
        if len(folded) == 1:
            out.append(_const_node(n.name, folded[0], n.device, ctrl))
            consts[n.name] = folded[0]
            const_ctrl[n.name] = ctrl
        else:
            for k, value in enumerate(folded):
                name = f"{n.name}/_folded_{k}"
                out.append(_const_node(name, value, n.device, ctrl))
                consts[name] = value
                const_ctrl[name] = ctrl
                extra_outputs[(n.name, k)] = name
    return out


def _inherited_control(n: NodeDef, ctrl: tuple[str, ...],
                       const_ctrl: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The control inputs of a folded node in a graph with control flow: its own, its constant
    inputs' (which tie them to a branch or frame), and for a folded Shape/Size/Rank a control edge
    from the tensor it measured."""
    out = list(ctrl)
    for inp in n.inputs:
        src, _, is_ctrl = parse_input(inp)
        if is_ctrl:
            continue
        extra = const_ctrl.get(src)
        if extra is None:
            extra = (f"^{src}",)  # a folded shape: still runs after (and in the frame of) its input
        for c in extra:
            if c not in out:
                out.append(c)
    return tuple(out)


def _fold_rename(inp: str, extra: Mapping[tuple[str, int], str]) -> str:
    node, idx, ctrl = parse_input(inp)
    if ctrl:
        return inp
    new = extra.get((node, idx))
    return new if new is not None else inp


def _const_node(name: str, value: np.ndarray, device: str, ctrl: tuple[str, ...]) -> NodeDef:
    value = np.asarray(value)
    return NodeDef(name, "Const", ctrl, device, {"value": value, "dtype": dtypes.as_dtype(
        value.dtype) if value.dtype.kind not in "USO" else dtypes.string})


def _try_fold(n: NodeDef, specs: Specs, consts: Mapping[str, np.ndarray]
              ) -> list[np.ndarray] | None:
    opdef = registry.get_op(n.op, n)
    if not opdef.foldable or opdef.stateful or opdef.ref_outputs or n.op.startswith("_"):
        return None
    if n.op in ("Shape", "Size", "Rank"):
        return _fold_shape(n, specs)
    data = [i for i in n.inputs if not i.startswith("^")]
    if not data or n.op in ("Identity", "NoOp", "StopGradient", "PreventGradient",
                             "PlaceholderWithDefault"):
        return None
    args = []
    for i in data:
        node, idx, _ = parse_input(i)
        if idx != 0 or node not in consts:
            return None
        args.append(consts[node])
    out_specs = specs.get(n.name, ())
    if sum(_nbytes(s) for s in out_specs) > FOLD_LIMIT_BYTES:
        return None
    if not registry.has_kernel(n.op, "CPU"):
        return None
    try:
        kdef = registry.get_kernel(n.op, "CPU", n)
        # only stateless kernels are folded, and they own no resources (variables, queues):
        # the compiler needs no resource manager of the runtime's
        ctx = KernelContext(n, opdef, "", "CPU", np, None, output_specs=out_specs)
        fn = kdef.build(ctx)
        if isinstance(fn, StepKernel | AsyncKernel):
            return None
        with np.errstate(all="ignore"):
            result = fn(*args)
    except (errors.OpError, ValueError, TypeError, IndexError, ZeroDivisionError, KeyError,
            ArithmeticError):
        return None
    results = list(result) if isinstance(result, tuple | list) else [result]
    arrays = [np.asarray(r) for r in results]
    if sum(a.nbytes for a in arrays) > FOLD_LIMIT_BYTES:
        return None
    return arrays


def _nbytes(spec: TensorSpec) -> int:
    n = spec.shape.num_elements()
    return 0 if n is None else n * max(spec.dtype.size, 1)


def _fold_shape(n: NodeDef, specs: Specs) -> list[np.ndarray] | None:
    data = [i for i in n.inputs if not i.startswith("^")]
    if len(data) != 1:
        return None
    node, idx, _ = parse_input(data[0])
    outs = specs.get(node)
    if not outs or idx >= len(outs):
        return None
    shape = outs[idx].shape
    out_type = n.attrs.get("out_type", dtypes.int32)
    if n.op == "Rank":
        return None if shape.rank is None else [np.array(shape.rank, dtype=np.int32)]
    if not shape.is_fully_defined():
        return None
    if n.op == "Size":
        return [np.array(shape.num_elements(), dtype=out_type.np)]
    return [np.array(shape.as_list(), dtype=out_type.np)]


def optimize(nodes: Sequence[NodeDef], specs: Specs, protected: frozenset[str] | set[str],
             *, do_cse: bool = True, do_constant_folding: bool = True) -> list[NodeDef]:
    """Run the enabled passes: CSE, then constant folding, then CSE again on what folding exposed;
    last the remapper (``compiler.remap``: convolution + bias + relu as one node), once folding
    has removed the Shape nodes that read a convolution's output for its gradient.

    Returns the nodes in topological order.
    """
    out = cse(nodes, protected) if do_cse else topological_order(nodes)
    if do_constant_folding:
        folded = constant_fold(out, specs, protected, ordered=True)
        # a second CSE only finds something when folding made new constants
        changed = len(folded) != len(out) or any(a is not b for a, b in zip(folded, out))
        out = cse(folded, protected, ordered=True) if do_cse and changed else folded
    return fuse_conv_bias_relu(out, specs, protected)
