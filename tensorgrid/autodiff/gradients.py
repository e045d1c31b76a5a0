"""``gradients(ys, xs)``: reverse-mode differentiation that extends the graph.

The walk is TensorFlow's, done iteratively: find the ops between ``xs`` and ``ys``; give each the
count of its consumers inside that set; starting from ``ys``, take an op whose consumers have all
delivered their gradients, sum the gradients of each of its outputs (fan-out sums), call the op's
rule to get its inputs' gradients, and hand those on. Rules live in ``autodiff/rules_*.py``, one
per op, registered in the registry's gradient table.

* An x that no y depends on gets None.
* Integer and boolean tensors carry no gradient.
* ``StopGradient`` (and ops declared not differentiable) stop the flow.
* A missing rule raises LookupError naming the op and the node.
* ``gate_gradients=True`` (what optimizers ask for with ``GATE_OP``) groups the input gradients of
  each op with more than one: each is an Identity with a control input on a NoOp that waits for
  all of them (TensorFlow's ``tuple``). So the gradient of a weight is not ready before the
  gradients that read that weight are computed, and an update cannot overwrite a weight another
  gradient still has to read; TensorFlow, which runs reference variables without snapshots,
  needs this to compute the same updates from a graph written here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes, registry
from tensorgrid.core.ir import CONTROL_FLOW_OPS
from tensorgrid.framework.array_create_ops import ones_like, zeros_like
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.core_ops import tuple_
from tensorgrid.framework.graph import Graph, Operation, Tensor, get_default_graph
from tensorgrid.framework.math_ops import add_n
from tensorgrid.framework.while_loop_ops import LoopOp, loop_groups


def _backprop(t: Tensor) -> bool:
    """Whether gradients flow into ``t``: floating and complex tensors, and resource handles (a
    resource variable's gradient is the sum of its reads' gradients, as in TensorFlow)."""
    return t.dtype.is_differentiable or t.dtype is dtypes.resource


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, list | tuple) else [x]


def _to_tensor(x: Any) -> Tensor:
    ref = getattr(x, "_variable", None)  # a Variable: differentiate with respect to its reference
    if isinstance(ref, Tensor):
        return ref
    return convert_to_tensor(x)


def gradients(
    ys: Any,
    xs: Any,
    grad_ys: Any = None,
    name: str = "gradients",
    colocate_gradients_with_ops: bool = False,
    gate_gradients: bool = False,
    aggregation_method: Any = None,
    stop_gradients: Any = None,
) -> list[Tensor | None]:
    """Symbolic partial derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Args:
        ys: a tensor or list of tensors to differentiate.
        xs: a tensor, Variable, or list of them.
        grad_ys: the initial gradients of ``ys`` (ones when None), same structure as ys.
        name: the name scope of the gradient ops.
        colocate_gradients_with_ops: place each gradient op with the op it differentiates.
        gate_gradients: group each op's input gradients (see the module docstring).
        stop_gradients: tensors to treat as constants.

    Returns:
        One entry per x: its gradient tensor, or None when no y depends on it.

    Raises:
        LookupError: an op on the path has no gradient rule (names the op type and node).
        ValueError: grad_ys does not match ys.
    """
    y_list = [_to_tensor(y) for y in _as_list(ys)]
    x_list = [_to_tensor(x) for x in _as_list(xs)]
    stop_ops = {_to_tensor(s).op for s in _as_list(stop_gradients)} if stop_gradients else set()
    g = y_list[0].graph if y_list else get_default_graph()
    gys = _as_list(grad_ys) if grad_ys is not None else [None] * len(y_list)
    if len(gys) != len(y_list):
        raise ValueError(f"grad_ys has {len(gys)} entries but ys has {len(y_list)}")

    # build in the ys' graph even when another graph is the default
    with g.as_default(), g.name_scope(name):

        # initial gradients
        grads: dict[Tensor, list[Tensor]] = {}
        for y, gy in zip(y_list, gys):
            if gy is None:
                gy = ones_like(y, name=f"grad_ys_{len(grads)}")
            else:
                gy = convert_to_tensor(gy, dtype=y.dtype)
            grads.setdefault(y, []).append(gy)

        # a while_loop is stepped over as one op (its rule builds the gradient loop)
        groups = loop_groups(g)
        between, pending = _ops_between(g, y_list, x_list, stop_ops, groups)
        x_set = set(x_list)
        ready = deque(op for op in {groups.get(y.op, y.op) for y in y_list}
                      if op in between and pending[op] == 0)
        queued = set(ready)
        while ready:
            op = ready.popleft()
            out_grads = [_aggregate(grads.get(t)) for t in op.outputs]
            in_grads = _call_rule(g, op, out_grads, colocate_gradients_with_ops, stop_ops,
                                  x_set, gate_gradients, between, groups)
            for pos, (t, gr) in enumerate(zip(op.inputs, in_grads)):
                if gr is not None and _backprop(t):
                    if isinstance(gr, Tensor) and gr.dtype is not t.dtype \
                            and t.dtype is not dtypes.resource:
                        raise TypeError(
                            f"Gradient rule of op '{op.name}' ({op.type}) returned dtype "
                            f"{gr.dtype.name} for input {pos}, which is {t.dtype.name}")
                    grads.setdefault(t, []).append(gr)
                src = groups.get(t.op, t.op)
                if src in between:
                    pending[src] -= 1
                    if pending[src] == 0 and src not in queued:
                        queued.add(src)
                        ready.append(src)

        out: list[Tensor | None] = []
        for x in x_list:
            parts = grads.get(x)
            out.append(_aggregate(parts) if parts else None)
        return out


def _ops_between(g: Graph, ys: Sequence[Tensor], xs: Sequence[Tensor],
                 stop_ops: set[Operation], groups: dict[Operation, Any]
                 ) -> tuple[set[Any], dict[Any, int]]:
    """Ops on some path from an x to a y, and each one's count of consumers among them (a loop
    in ``groups`` counts as one op)."""
    consumers: dict[Any, list[Any]] = {}
    for op in dict.fromkeys(groups.get(o, o) for o in g.get_operations()):
        for t in op.inputs:
            consumers.setdefault(groups.get(t.op, t.op), []).append(op)
    reached: set[Any] = set()
    stack = [groups.get(x.op, x.op) for x in xs]
    while stack:
        op = stack.pop()
        if op in reached:
            continue
        reached.add(op)
        stack.extend(consumers.get(op, ()))
    between: set[Any] = set()
    stack = [groups.get(y.op, y.op) for y in ys]
    while stack:
        op = stack.pop()
        if op in between or op not in reached:
            continue
        between.add(op)
        if op in stop_ops:
            continue
        stack.extend(groups.get(t.op, t.op) for t in op.inputs)
    pending = dict.fromkeys(between, 0)
    for op in between:
        if op in stop_ops:
            continue
        for t in op.inputs:
            src = groups.get(t.op, t.op)
            if src in between:
                pending[src] += 1
    return between, pending


def _gate(g: Graph, op: Operation | LoopOp, in_grads: list[Any]) -> list[Any]:
    """The input gradients of ``op``, each available only once all of them are (TF's tuple).

    Control-flow ops and loops stepped over as one op are left alone: their rules build their
    own structure, and a loop's gradients leave it through Exits that finish together anyway.
    """
    if not isinstance(op, Operation) or op.type in CONTROL_FLOW_OPS \
            or sum(isinstance(x, Tensor) for x in in_grads) < 2:
        return in_grads
    # placed with no device of its own, like TensorFlow's gate, so each NoOp follows its inputs
    with g.device(None), g.colocate_with(None):
        gated = tuple_([x if isinstance(x, Tensor) else None for x in in_grads])
    return [gt if isinstance(x, Tensor) else x for x, gt in zip(in_grads, gated)]


def _aggregate(parts: list[Tensor] | None) -> Tensor | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]

    return add_n(parts)


def _call_rule(g: Graph, op: Operation | LoopOp, out_grads: list[Tensor | None], colocate: bool,
               stop_ops: set[Operation], x_set: set[Tensor], gate: bool = False,
               between: set[Any] | None = None, groups: dict[Operation, Any] | None = None
               ) -> list[Any]:
    n_in = len(op.inputs)
    if op in stop_ops or not any(gr is not None for gr in out_grads):
        return [None] * n_in
    if all(not _backprop(t) for t in op.inputs):
        return [None] * n_in
    try:
        rule = registry.get_gradient(op.type)
    except LookupError:
        raise LookupError(
            f"No gradient defined for operation '{op.name}' (op type: {op.type})") from None
    if rule is None:
        return [None] * n_in

    filled = []
    for t, gr in zip(op.outputs, out_grads):
        # (a control-flow rule builds its own zeros: they must be dead where the output was)
        if gr is None and t.dtype.is_differentiable and len(op.outputs) > 1 \
                and op.type not in CONTROL_FLOW_OPS:
            gr = zeros_like(t)
        filled.append(gr)
    # rules build in the op's graph even when another graph is the default
    with g.as_default(), g.name_scope(f"{op.name}_grad"):
        if colocate and op.type != "_WhileLoop":  # a whole loop has no one place to be
            with g.colocate_with(op):
                result = rule(op, *filled)
        else:
            result = rule(op, *filled)
        result = list(result) if isinstance(result, list | tuple) else [result]
        if len(result) != n_in:
            raise ValueError(
                f"Gradient rule of op type {op.type} returned {len(result)} gradients for node "
                f"'{op.name}', which has {n_in} inputs")
        if gate and between is not None:
            # gate only what will be used: a gated gradient runs whenever its siblings do
            result = _drop_unneeded(op, result, x_set, between, groups or {})
        return _gate(g, op, result) if gate else result


def _drop_unneeded(op: Operation | LoopOp, in_grads: list[Any], x_set: set[Tensor],
                   between: set[Any], groups: dict[Operation, Any]) -> list[Any]:
    """``in_grads`` with None for each input that is neither an x nor the output of an op on a
    path from an x (a constant, the data fed to a layer): nothing reads those gradients.

    Rules build the gradient of every input; dropping the unneeded ones before the gate keeps
    them out of the step. Ungated, such an op is pruned with the rest of the unfetched graph;
    gated, it would be a control input of its siblings' gate and run every step (the gradient
    of a first layer's input batch: a matmul as large as the weights' own gradient).
    Control-flow ops and loops stepped over as one op keep the structure their rules build.
    """
    if not isinstance(op, Operation) or op.type in CONTROL_FLOW_OPS:
        return in_grads
    return [gr if gr is None or t in x_set or groups.get(t.op, t.op) in between else None
            for t, gr in zip(op.inputs, in_grads)]


def hessians(ys: Any, xs: Any, name: str = "hessians") -> list[Tensor | None]:
    """Second derivatives of sum(ys) for each x whose gradient is a scalar-per-element map."""
    first = gradients(ys, xs, name=name)
    return [gradients(gr, x, name=name)[0] if gr is not None else None
            for gr, x in zip(first, _as_list(xs))]
