"""``tf.cond`` and ``tf.case``, and the control-flow contexts that ``tf.while_loop``
(``framework/while_loop_ops.py``) shares, built from Switch/Merge/Enter/Exit/NextIteration the way
TensorFlow 1.x builds them.

While a branch or a loop body is built, the graph's *control-flow context* (a ``CondContext`` or a
``WhileContext``) sees every op created:

* a tensor from outside the context is routed in: through a ``Switch`` on the predicate (a cond
  branch; the untaken side is dead) or an ``Enter`` with ``is_constant`` (a loop invariant); from
  nested contexts, through each one on the way in;
* an op with no inputs (a constant) gets a control input from the context's pivot, so it belongs
  to the branch (dead when the branch is not taken) or to the loop's frame and iteration.

The graphs are TensorFlow's, node for node in kind, so a GraphDef either side writes runs on the
other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorgrid.core import dtypes, registry
from tensorgrid.framework.array_ops import stack
from tensorgrid.framework.convert import convert_to_tensor
from tensorgrid.framework.debug_ops import Assert
from tensorgrid.framework.graph import Graph, Operation, Tensor, get_default_graph
from tensorgrid.framework.math_ops import cast, less_equal
from tensorgrid.framework.math_reduce_ops import reduce_sum

# ------------------------------------------------------------------------------ primitive ops


def new_op(g: Graph, op_type: str, inputs: Sequence[Tensor], attrs: dict[str, Any],
        name: str) -> Operation:
    """Create an op in ``g`` (with the graph's current control-flow context)."""
    return g.create_op(op_type, list(inputs), attrs, name=name)


def _is_ref(t: Tensor) -> bool:
    """Whether ``t`` is a variable reference (it then passes RefSwitch/RefEnter, staying one)."""
    return t.value_index in registry.get_op(t.op.type).ref_outputs


def switch(data: Any, pred: Any, name: str | None = None) -> tuple[Tensor, Tensor]:
    """``(output_false, output_true)``: ``data`` on the side ``pred`` picks, a dead tensor on the
    other (a variable reference passes a RefSwitch)."""
    data = getattr(data, "_variable", None) or data
    data = convert_to_tensor(data)
    pred = convert_to_tensor(pred, dtype=dtypes.bool_)
    op_type = "RefSwitch" if _is_ref(data) else "Switch"
    op = new_op(data.graph, op_type, [data, pred], {"T": data.dtype}, name or "Switch")
    return op.outputs[0], op.outputs[1]


def merge(inputs: Sequence[Any], name: str | None = None) -> tuple[Tensor, Tensor]:
    """``(output, value_index)``: the first live input and its position."""
    ts = [convert_to_tensor(t) for t in inputs]
    op = new_op(ts[0].graph, "Merge", ts, {"T": ts[0].dtype, "N": len(ts)}, name or "Merge")
    return op.outputs[0], op.outputs[1]


def enter(data: Tensor, frame_name: str, is_constant: bool, parallel_iterations: int,
           name: str = "Enter") -> Tensor:
    """An Enter (RefEnter for a reference) of ``data`` into frame ``frame_name``."""
    return new_op(data.graph, "RefEnter" if _is_ref(data) else "Enter", [data], {
        "T": data.dtype, "frame_name": frame_name, "is_constant": is_constant,
        "parallel_iterations": parallel_iterations}, name).outputs[0]


def identity_in(x: Tensor, name: str = "Identity") -> Tensor:
    """An Identity of ``x``, built in the current context."""
    return new_op(x.graph, "Identity", [x], {"T": x.dtype}, name).outputs[0]


# ------------------------------------------------------------------------------ contexts


def op_context(g: Graph, op: Operation) -> Any:
    """The cond branch or loop context ``op`` was built in (None: outside any)."""
    table: dict[Operation, Any] = g.__dict__.setdefault("_cf_context_of", {})
    return table.get(op)


def set_op_context(g: Graph, op: Operation, ctx: Any) -> None:
    """Record that ``op`` belongs to context ``ctx``."""
    g.__dict__.setdefault("_cf_context_of", {})[op] = ctx


class _Context:
    """A branch or loop body under construction: the graph's context while its ops are made."""

    def __init__(self, g: Graph) -> None:
        self.graph = g
        self.outer: _Context | None = g._control_flow_context
        self.values: dict[Tensor, Tensor] = {}  # outside tensor -> its stand-in inside
        self.pivot: Operation | None = None

    def encloses(self, ctx: Any) -> bool:
        """Whether ``ctx`` is this context or nested in it."""
        while ctx is not None:
            if ctx is self:
                return True
            ctx = ctx.outer
        return False

    def prepare_inputs(self, inputs: Sequence[Tensor]) -> list[Tensor]:
        """The inputs of an op being created here, each routed in if it comes from outside."""
        out = []
        for t in inputs:
            if isinstance(t, Tensor) and not self.encloses(op_context(self.graph, t.op)):
                t = self.add_value(t)
            out.append(t)
        return out

    def add_op(self, op: Operation) -> None:
        set_op_context(self.graph, op, self)
        if not op.inputs and self.pivot is not None and op.type not in ("Enter",):
            op._add_control_input(self.pivot)

    def outer_value(self, t: Tensor) -> Tensor:
        """``t`` as seen from the enclosing context (routed into it first when it is from further
        out)."""
        if self.outer is None or self.outer.encloses(op_context(self.graph, t.op)):
            return t
        return self.outer.add_value(t)

    def add_value(self, t: Tensor) -> Tensor:  # pragma: no cover - overridden
        raise NotImplementedError

    def in_outer(self, fn: Callable[[], Any]) -> Any:
        """Build with the outer context current and no control dependencies."""
        g = self.graph
        saved = g._control_flow_context
        g._control_flow_context = self.outer
        try:
            with g.control_dependencies(None):
                return fn()
        finally:
            g._control_flow_context = saved

    def __enter__(self) -> _Context:
        self._saved = self.graph._control_flow_context
        self.graph._control_flow_context = self
        return self

    def __exit__(self, *exc: Any) -> None:
        self.graph._control_flow_context = self._saved


class CondContext(_Context):
    """One branch of a cond: values from outside pass a Switch on the predicate."""

    def __init__(self, g: Graph, pred: Tensor, pivot: Tensor, branch: int) -> None:
        super().__init__(g)
        self.pred = pred
        self.pivot = pivot.op
        self.branch = branch

    def add_value(self, t: Tensor) -> Tensor:
        found = self.values.get(t)
        if found is not None:
            return found
        outer_t = self.outer_value(t)
        res = self.in_outer(lambda: switch(outer_t, self.pred)[self.branch])
        self.values[outer_t] = res
        self.values[t] = res
        self.values[res] = res
        return res


class WhileContext(_Context):
    """A loop's condition and body: values from outside are entered as loop invariants."""

    def __init__(self, g: Graph, frame_name: str, parallel_iterations: int) -> None:
        super().__init__(g)
        self.frame_name = frame_name
        self.parallel_iterations = parallel_iterations
        # the tensors of the enclosing context entered as loop invariants -> their Enter
        self.captured: dict[Tensor, Tensor] = {}
        # a tensor the body named -> the enclosing context's value of it that was entered
        self.origin: dict[Tensor, Tensor] = {}
        self.loop: Any = None  # while_loop_ops.LoopInfo, once the loop is built
        self.var_enters: list[Tensor] = []  # the loop variables' Enters

    def add_op(self, op: Operation) -> None:
        """An op that reads only loop invariants runs once per iteration, after the pivot (as
        an op with no inputs does): without that it would run once more, in the iteration that
        ends the loop."""
        set_op_context(self.graph, op, self)
        outside = [c for c in op._control_inputs
                   if not self.encloses(op_context(self.graph, c))]
        if outside and op.type not in ("Enter", "RefEnter"):
            # a control input from outside the loop (a control_dependencies block around the
            # while_loop) cannot reach into the frame: the loop's Enters wait for it instead
            op._control_inputs = [c for c in op._control_inputs if c not in outside]
            op._changed()
            for e in self.var_enters:
                e.op._add_control_inputs(outside)
        if self.pivot is None or op.type in ("Enter", "RefEnter") or op.control_inputs:
            return
        if all(t.op.type in ("Enter", "RefEnter") and t.op.get_attr("is_constant")
               for t in op.inputs):
            op._add_control_input(self.pivot)

    def add_value(self, t: Tensor) -> Tensor:
        found = self.values.get(t)
        if found is not None:
            return found
        outer_t = self.outer_value(t)
        res = self.in_outer(lambda: enter(outer_t, self.frame_name, True,
                                           self.parallel_iterations))
        set_op_context(self.graph, res.op, self)
        self.captured[outer_t] = res
        self.origin[t] = outer_t
        self.values[outer_t] = res  # the same value, reached from the enclosing context
        self.values[t] = res
        self.values[res] = res
        return res


# ------------------------------------------------------------------------------ structures


def flatten(structure: Any) -> list[Any]:
    """The leaves of a nested structure (lists, tuples, dicts by sorted key), in order."""
    if isinstance(structure, dict):
        return [x for k in sorted(structure) for x in flatten(structure[k])]
    if isinstance(structure, list | tuple):
        return [x for s in structure for x in flatten(s)]
    return [structure]


def pack(structure: Any, flat: Sequence[Any]) -> Any:
    """``flat`` laid out in the shape of ``structure`` (the inverse of ``flatten``)."""
    it = iter(flat)

    def build(s: Any) -> Any:
        if isinstance(s, dict):
            return {k: build(s[k]) for k in sorted(s)}
        if isinstance(s, list | tuple):
            vals = [build(x) for x in s]
            return type(s)(vals) if not hasattr(s, "_fields") else type(s)(*vals)
        return next(it)

    return build(structure)


# ------------------------------------------------------------------------------ cond and case


def cond(pred: Any, true_fn: Callable[[], Any] | None = None,
         false_fn: Callable[[], Any] | None = None, strict: bool = False,
         name: str | None = None) -> Any:
    """Return ``true_fn()`` if ``pred`` is true else ``false_fn()``; only the taken branch runs.

    Both functions must return the same structure of tensors (python values become constants).
    A singleton list or tuple comes back as its element unless ``strict``.

    Raises:
        TypeError: a function is missing or not callable.
        ValueError: the branches return different structures or dtypes.
    """
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("cond: true_fn and false_fn must be callables")
    g = pred.graph if isinstance(pred, Tensor) else get_default_graph()
    with g.as_default(), g.name_scope(name or "cond"):
        pred_t = convert_to_tensor(pred, dtype=dtypes.bool_)
        p_false, p_true = switch(pred_t, pred_t)
        pivot_t = identity_in(p_true, "switch_t")
        pivot_f = identity_in(p_false, "switch_f")
        pred_id = identity_in(pred_t, "pred_id")
        results = []
        for branch, fn, pivot in ((1, true_fn, pivot_t), (0, false_fn, pivot_f)):
            ctx = CondContext(g, pred_id, pivot, branch)
            with ctx:
                out = fn()
                flat = []
                for v in flatten(out) if out is not None else []:
                    t = convert_to_tensor(v)  # a python value: a constant of this branch
                    if not ctx.encloses(op_context(g, t.op)):
                        t = ctx.add_value(t)  # a tensor from outside: dead when not taken
                    flat.append(t)
            results.append((out, flat))
        (out_t, flat_t), (_, flat_f) = results
        if len(flat_t) != len(flat_f):
            raise ValueError(f"cond: true_fn returned {len(flat_t)} tensors but false_fn "
                             f"{len(flat_f)}; both must return the same structure")
        if out_t is None:
            return None
        merged = []
        for a, b in zip(flat_f, flat_t):
            if a.dtype is not b.dtype:
                raise ValueError(f"cond: the branches return {b.dtype.name} (true) and "
                                 f"{a.dtype.name} (false) for the same output")
            merged.append(merge([a, b])[0])
        packed = pack(out_t, merged)
        if not strict and isinstance(packed, list | tuple) and len(packed) == 1:
            return packed[0]
        return packed


def case(pred_fn_pairs: Any, default: Callable[[], Any] | None = None, exclusive: bool = False,
         strict: bool = False, name: str = "case") -> Any:
    """The result of the function paired with the first true predicate, else ``default()``.

    Built as a chain of conds, as TensorFlow 1.x does; without ``default`` the last pair's function
    is the fallback. With ``exclusive=True`` every predicate is evaluated and running the result
    fails with InvalidArgumentError when more than one of them is true.

    Raises:
        TypeError: the pairs are not (predicate, callable).
    """
    pairs = list(pred_fn_pairs.items()) if isinstance(pred_fn_pairs, dict) else list(pred_fn_pairs)
    for p in pairs:
        if not isinstance(p, tuple) or len(p) != 2 or not callable(p[1]):
            raise TypeError("case: each entry of pred_fn_pairs must be a (predicate, callable)")
    if not pairs:
        if default is None:
            raise ValueError("case: no pred_fn_pairs and no default")
        return default()
    g = pairs[0][0].graph if isinstance(pairs[0][0], Tensor) else get_default_graph()
    with g.as_default(), g.name_scope(name):
        check = _at_most_one_true([p for p, _ in pairs]) if exclusive and len(pairs) > 1 else None
        if default is None:
            default = pairs[-1][1]
            pairs = pairs[:-1]
        fn: Callable[[], Any] = default
        for pred, branch_fn in reversed(pairs):
            fn = (lambda p, t, f: lambda: cond(p, t, f, strict=strict))(pred, branch_fn, fn)
        if check is None:
            return fn()
        with g.control_dependencies([check]):
            return fn()


def _at_most_one_true(preds: Sequence[Any]) -> Operation:
    """An Assert that fails when more than one of ``preds`` (bool scalars) is true; its message
    names the predicates and its data holds their values."""
    flags = stack([convert_to_tensor(p, dtype=dtypes.bool_) for p in preds], name="preds")
    count = reduce_sum(cast(flags, dtypes.int32), name="num_true")
    names = ", ".join(p.name for p in preds if isinstance(p, Tensor))
    message = (f"Input error: exclusive=True: more than 1 conditions ({names}) evaluated as "
               "True:")
    return Assert(less_equal(count, 1), [message, flags], summarize=len(preds),
                  name="exclusive_check")
