"""Compiled loops: a simple ``while_loop`` frame becomes one python ``while`` statement.

The general runner (``runtime/frames.py``) pays for frames, iterations, pending counts and dead
tensors on every node of every iteration. Most loops need little of that: their frame holds one
``LoopCond``, the loop variables' ``Merge``/``Switch``/``NextIteration``/``Exit`` and kernels that
never wait (conds inside are fine: a value that may be dead is tracked by the predicates it depends
on, and a kernel with a dead input is skipped, its outputs dead). Running the iterations one after another is a schedule
TensorFlow's semantics allow (``parallel_iterations`` bounds parallelism, it does not require it),
so such a frame is replaced, before the step runs, by a single node of its parent frame:

* its inputs are the inputs of the frame's ``Enter`` nodes, its outputs those of its ``Exit``
  nodes, and it runs when they have all arrived (dead inputs make it dead, as a loop inside an
  untaken branch is);
* its kernel is generated python source, one line per node, like the executor's straight-line
  schedule: the nodes that run in every iteration (up to the predicate), ``if not pred: break``,
  then the body, then the loop variables take the ``NextIteration`` values;
* an error names the node inside the loop that failed.

Inner loops are compiled first, so a nest of simple loops becomes nested python loops. A frame
that does not qualify (a kernel that waits, a loop Merge's ``value_index`` read, a loop variable
that could be dead, ...) runs under the general runner, unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.ir import DEAD, NodeDef, parse_input, topological_order
from tensorgrid.core.variable import VarRef
from tensorgrid.runtime import frame_budget as fb

_PLAIN, _STEP, _ASYNC = 0, 1, 2
_ENTERS = ("Enter", "RefEnter")
_EXITS = ("Exit", "RefExit")
_NEXTS = ("NextIteration", "RefNextIteration")
_MERGES = ("Merge", "RefMerge")
_SWITCHES = ("Switch", "RefSwitch")
# a transfer needs the frame and iteration in its key, which the general runner gives it
_NOT_IN_SIMPLE = frozenset({"ControlTrigger", "_Arg", "_Retval", "_Send", "_Recv"})


def _deref(value: Any, node: str) -> Any:
    if type(value) is VarRef:
        return value.var.read(node)
    return value


def _truth(value: Any, node: str) -> bool:
    if type(value) is np.bool_ or type(value) is bool:
        return bool(value)
    arr = np.asarray(value)
    if arr.size != 1 or arr.ndim > 1:
        raise errors.InvalidArgumentError(
            f"The loop predicate must be a scalar, got shape {list(arr.shape)}", node_name=node,
            op_type="LoopCond")
    return bool(arr.reshape(()))


def compile_loops(nodes: Sequence[Any], frame_of: dict[str, int], parents: Sequence[int],
                  child_of_enter: dict[str, int],
                  located: Callable[[BaseException, Any], BaseException],
                  budget: fb.FrameBudget | None = None) -> list[Any]:
    """Replace every simple loop frame (innermost first) by one node running it as a python loop.

    Args:
        nodes: the executor's nodes in topological order (back edges aside).
        frame_of: each node's frame id (0 is the root); ``parents[fid]`` is a frame's parent.
        child_of_enter: each Enter node's frame id.
        located: maps an exception of a node's kernel to the error naming that node.
        budget: the task's per-step tensor budget (each node's line then checks it:
            ``frame_budget``), or None.

    Returns:
        The nodes, with each compiled frame's Enter, inner and Exit nodes replaced by its loop
        node (placed where its last Enter was), and their consumers reading the loop's outputs.
    """
    depth = [0] * len(parents)
    for fid in range(1, len(parents)):
        d, p = 0, fid
        while p > 0:
            d, p = d + 1, parents[p]
        depth[fid] = d
    current = list(nodes)
    frame_of = dict(frame_of)
    for fid in sorted(range(1, len(parents)), key=lambda f: -depth[f]):
        compiled = _compile_frame(current, frame_of, fid, child_of_enter, located, budget)
        if compiled is not None:
            current, loop_node = compiled
            frame_of[loop_node.node.name] = parents[fid]
    return current


def _compile_frame(nodes: list[Any], frame_of: dict[str, int], fid: int,
                   child_of_enter: dict[str, int],
                   located: Callable[[BaseException, Any], BaseException],
                   budget: fb.FrameBudget | None) -> Any:
    enters = [cn for cn in nodes if child_of_enter.get(cn.node.name) == fid]
    inner = [cn for cn in nodes if frame_of.get(cn.node.name) == fid]
    if not enters or not inner:
        return None
    plan = _analyze(enters, inner, nodes)
    if plan is None:
        return None
    generated = _generate(plan, located, budget)
    if generated is None:
        return None
    fn, kind = generated
    loop_name = f"{inner[0].node.name.rsplit('/', 1)[0]}/_loop_{fid}"
    ins: list[str] = []
    derefs: list[bool] = []
    ctrl: list[str] = []
    for e in enters:
        for inp in e.node.inputs:
            if not inp.startswith("^"):
                ins.append(inp)
                derefs.append(e.derefs[0])
            elif inp not in ctrl:
                ctrl.append(inp)
    exits = plan["exits"]
    loop_def = NodeDef(loop_name, "_Loop", tuple(ins + ctrl), enters[-1].node.device, {})
    loop = dataclasses.replace(
        enters[-1], node=loop_def, kind=kind, fn=fn, in_slots=tuple(range(len(ins))),
        derefs=tuple(derefs),
        out_slots=tuple(range(max(len(exits), 1))) if len(exits) != 1 else (0,),
        consumers=(), static=None, is_identity=False)
    exit_out = {cn.node.name: k for k, cn in enumerate(exits)}
    removed = {cn.node.name for cn in enters} | {cn.node.name for cn in inner}
    out: list[Any] = []
    last_enter = enters[-1].node.name
    for cn in nodes:
        name = cn.node.name
        if name == last_enter:
            out.append(loop)
            continue
        if name in removed:
            continue
        new_inputs = []
        changed = False
        for inp in cn.node.inputs:
            src, _, is_ctrl = parse_input(inp)
            if src in exit_out:
                changed = True
                k = exit_out[src]
                new_inputs.append(f"^{loop_name}" if is_ctrl else f"{loop_name}:{k}")
            else:
                new_inputs.append(inp)
        out.append(dataclasses.replace(cn, node=cn.node.with_(inputs=new_inputs)) if changed
                   else cn)
    # an Exit may come before an Enter in the old order (one feeding only the body): order again
    by_name = {cn.node.name: cn for cn in out}
    return [by_name[n.name] for n in topological_order([cn.node for cn in out])], loop


def _analyze(enters: list[Any], inner: list[Any], nodes: list[Any]) -> dict[str, Any] | None:
    """The loop's structure when the frame is simple, else None."""
    by_name = {cn.node.name: cn for cn in inner}
    enter_names = {cn.node.name: k for k, cn in enumerate(enters)}
    consumers: dict[str, list[tuple[str, int, bool]]] = {}
    for cn in nodes:
        for inp in cn.node.inputs:
            src, idx, is_ctrl = parse_input(inp)
            consumers.setdefault(src, []).append((cn.node.name, idx, is_ctrl))
    loop_conds = [cn for cn in inner if cn.node.op == "LoopCond"]
    if len(loop_conds) != 1:
        return None
    pred_name = loop_conds[0].node.name
    merges: list[Any] = []
    cond_switches: set[str] = set()
    cond_merges: set[str] = set()
    for cn in inner:
        op = cn.node.op
        if cn.kind == _ASYNC or op in _NOT_IN_SIMPLE \
                or op in _ENTERS:
            return None
        ins = cn.node.inputs
        if op in _MERGES:
            data = [parse_input(i) for i in ins]
            if not any(by_name.get(src) is not None and by_name[src].node.op in _NEXTS
                       for src, _, _ in data):
                # a cond's Merge inside the loop: its inputs come from this frame
                if any(src not in by_name for src, _, c in data if not c):
                    return None
                cond_merges.add(cn.node.name)
                continue
            if len(ins) != 2 or any(c for _, _, c in data):
                return None
            (a, _, _), (b, _, _) = data
            if a not in enter_names or b not in by_name or by_name[b].node.op not in _NEXTS:
                return None
            if enters[enter_names[a]].node.attrs.get("is_constant", False):
                return None
            if any(idx == 1 for _, idx, _ in consumers.get(cn.node.name, ())):
                return None  # value_index is read: keep the general runner's answer
            merges.append(cn)
        elif op in _SWITCHES:
            if len(ins) == 2 and parse_input(ins[1]) != (pred_name, 0, False):
                # a cond's Switch inside the loop (no control edges out of it)
                if any(is_ctrl for _, _, is_ctrl in consumers.get(cn.node.name, ())):
                    return None
                cond_switches.add(cn.node.name)
                continue
            if len(ins) != 2:
                return None
            for c, idx, is_ctrl in consumers.get(cn.node.name, ()):
                if is_ctrl or (idx == 0 and by_name.get(c) is not None
                               and by_name[c].node.op not in _EXITS):
                    return None
        elif op in _EXITS:
            src, idx, is_ctrl = parse_input(ins[0])
            if is_ctrl or idx != 0 or by_name.get(src) is None \
                    or by_name[src].node.op not in _SWITCHES or len(ins) != 1:
                return None
    # a non-constant Enter feeds its Merge and nothing else
    for e in enters:
        cons = consumers.get(e.node.name, ())
        if not e.node.attrs.get("is_constant", False) and (
                len(cons) != 1 or by_name.get(cons[0][0]) is None
                or by_name[cons[0][0]].node.op not in _MERGES):
            return None
    # the body: what runs only when the predicate holds (downstream of a Switch's true side)
    body: set[str] = set()
    for cn in inner:
        if cn.node.op in _EXITS:
            continue
        for inp in cn.node.inputs:
            src, idx, is_ctrl = parse_input(inp)
            s = by_name.get(src)
            if s is not None and (src in body or (s.node.op in _SWITCHES and idx == 1
                                                  and src not in cond_switches)):
                body.add(cn.node.name)
                break
    exits = [cn for cn in inner if cn.node.op in _EXITS]
    if not exits or any(cn.node.name in body for cn in inner
                        if cn.node.op in _SWITCHES and cn.node.name not in cond_switches):
        return None
    return {"enters": enters, "inner": inner, "merges": merges, "body": body,
            "cond_switches": cond_switches, "cond_merges": cond_merges,
            "pred": pred_name, "exits": exits,
            "by_name": by_name, "enter_index": enter_names}


Guards = frozenset[tuple[str, int]] | None  # a value is live when every (pred, side) holds


def _merge_guards(inputs: list[Guards]) -> Guards:
    """When a Merge's output may be dead: never, if its inputs are the two sides of one predicate
    under the same outer guards (a cond's Merge); else it is not known here (None)."""
    if any(g is None for g in inputs):
        return None
    sets = [g for g in inputs if g is not None]
    if all(g == sets[0] for g in sets):
        return sets[0]
    preds = {p for g in sets for p, _ in g}
    for p in preds:
        rest = {g - {(p, 0), (p, 1)} for g in sets}
        sides = {side for g in sets for q, side in g if q == p}
        if len(rest) == 1 and sides == {0, 1} and all((p, 0) in g or (p, 1) in g for g in sets):
            return next(iter(rest))
    return None


def _merge_live(*inputs: Any) -> tuple[Any, Any]:
    for k, v in enumerate(inputs):
        if v is not DEAD:
            return v, np.int32(k)
    return DEAD, DEAD


def _dead_next(name: str) -> errors.OpError:
    return errors.InvalidArgumentError(
        f"NextIteration '{name}' got a dead tensor inside a compiled loop", node_name=name,
        op_type="NextIteration")


def _generate(plan: dict[str, Any], located: Callable[[BaseException, Any], BaseException],
              budget: fb.FrameBudget | None = None) -> tuple[Callable[..., Any], int] | None:
    """Write the loop as python source and compile it; returns (function, how it is called),
    or None when a value the loop itself needs could be dead (the general runner takes it)."""
    env: dict[str, Any] = {"_deref": _deref, "_truth": _truth, "DEAD": DEAD,
                           "_merge_live": _merge_live, "_dead_next": _dead_next, **fb.LOOP_ENV}
    enters, inner = plan["enters"], plan["inner"]
    enter_index = plan["enter_index"]
    cond_switches, cond_merges = plan["cond_switches"], plan["cond_merges"]
    ref: dict[tuple[str, int], str] = {}
    guards: dict[str, Guards] = {}  # per node: when its outputs are live
    switch_pred: dict[str, str] = {}  # a cond Switch -> its predicate's expression
    mark: dict[str, str] = {}  # per node: an expression that is DEAD when the node is dead
    for k, e in enumerate(enters):
        ref[(e.node.name, 0)] = f"a{k}"
        guards[e.node.name] = frozenset()
    merge_var = {}
    for k, m in enumerate(plan["merges"]):
        merge_var[m.node.name] = f"m{k}"
        ref[(m.node.name, 0)] = f"m{k}"
        guards[m.node.name] = frozenset()
    pre: list[tuple[list[str], Any]] = []
    body: list[tuple[list[str], Any]] = []
    nexts: list[tuple[str, str]] = []
    exits: list[str] = []
    for i, cn in enumerate(inner):
        n = cn.node
        op = n.op
        if op in _MERGES and n.name not in cond_merges:
            continue
        raw: list[str] = []
        args: list[str] = []
        in_guards: list[Guards] = []
        dead_checks: list[str] = []
        data = [x for x in n.inputs if not x.startswith("^")]
        for pos, inp in enumerate(data):
            src, idx, _ = parse_input(inp)
            a = ref.get((src, idx))
            if a is None:
                raise errors.InternalError(f"Loop compiler: no value for '{inp}' of '{n.name}'")
            in_guards.append(_out_guard(guards, switch_pred, src, idx))
            raw.append(a)
            args.append(f"_deref({a}, {n.name!r})" if cn.derefs[pos] else a)
        for inp in n.inputs:
            if inp.startswith("^"):
                src = inp[1:]
                g = guards.get(src, frozenset())
                in_guards.append(g)
                if g != frozenset() and src in mark:
                    dead_checks.append(f"{mark[src]} is DEAD")
        for a, g in zip(raw, in_guards):
            if g != frozenset():
                dead_checks.append(f"{a} is DEAD")
        target = body if n.name in plan["body"] else pre
        if op in _SWITCHES and n.name not in cond_switches:
            if in_guards[0] != frozenset():
                return None  # the loop's own variable could be dead
            ref[(n.name, 1)] = args[0]
            ref[(n.name, 0)] = args[0]
            guards[n.name] = frozenset()
            continue
        if op in _EXITS:
            exits.append(args[0])
            continue
        if op in _NEXTS:
            if in_guards[0] != frozenset():
                return None
            nexts.append((n.name, args[0]))
            continue
        if op == "LoopCond":
            if in_guards[0] != frozenset():
                return None
            ref[(n.name, 0)] = f"v{i}"
            guards[n.name] = frozenset()
            target.append(([f"v{i} = {args[0]}",
                            f"if not _truth(v{i}, {n.name!r}): break"], cn))
            continue
        if n.name in cond_switches:
            switch_pred[n.name] = raw[1]  # the predicate's value names the condition
            base = in_guards[0]
            if base is not None and in_guards[1] is not None:
                base = base | in_guards[1]
            else:
                base = None
            guards[n.name] = base
            ref[(n.name, 0)] = f"v{i}_0"
            ref[(n.name, 1)] = f"v{i}_1"
            checks = " or ".join(dead_checks) or "False"
            target.append(([f"if {checks}:",
                            f"    v{i}_0 = v{i}_1 = DEAD",
                            f"elif _truth({args[1]}, {n.name!r}):",
                            f"    v{i}_0, v{i}_1 = DEAD, {args[0]}",
                            "else:",
                            f"    v{i}_0, v{i}_1 = {args[0]}, DEAD"], cn))
            continue
        if n.name in cond_merges:
            guards[n.name] = _merge_guards(in_guards[:len(raw)])
            ref[(n.name, 0)] = f"v{i}_0"
            ref[(n.name, 1)] = f"v{i}_1"
            mark[n.name] = f"v{i}_0"
            target.append(([f"v{i}_0, v{i}_1 = _merge_live({', '.join(args)})"], cn))
            continue
        g_all: Guards = frozenset()
        for g in in_guards:
            g_all = None if g is None or g_all is None else g_all | g
        guards[n.name] = g_all
        if op in ("Identity", "Snapshot") and not cn.derefs[0] and len(n.inputs) == 1:
            ref[(n.name, 0)] = args[0]  # another name for its input (dead when it is)
            mark[n.name] = raw[0]
            continue
        outs = max(len(cn.out_slots), 1)
        names = [f"v{i}_{k}" for k in range(outs)]
        for k, nm in enumerate(names):
            ref[(n.name, k)] = nm
        mark[n.name] = names[0]
        lhs = ", ".join(names) if outs > 1 else names[0]
        if cn.static is not None:
            env[f"s{i}"] = cn.static
            call = f"s{i}"
        else:
            env[f"k{i}"] = cn.fn
            call = f"k{i}({', '.join((['step'] if cn.kind == _STEP else []) + args)})"
        entry = budget.entry(cn) if budget is not None and cn.static is None else None
        line = f"{lhs} = {call}" if entry is None else budget.loop_line(  # type: ignore[union-attr]
            entry, lhs, call, args)
        if g_all == frozenset():
            target.append(([line], cn))
        else:
            target.append(([f"if {' or '.join(dead_checks) or 'False'}:",
                            f"    {' = '.join(names)} = DEAD",
                            "else:",
                            f"    {line}"], cn))
    # the back edges: each Merge takes its NextIteration's value
    next_of_merge = []
    for m in plan["merges"]:
        back = parse_input(m.node.inputs[1])[0]
        next_of_merge.append((merge_var[m.node.name], dict(nexts)[back]))
    params = ", ".join(["step"] + [f"a{k}" for k in range(len(enters))])
    lines = [f"def _loop({params}):"]
    for m in plan["merges"]:
        a = parse_input(m.node.inputs[0])[0]
        lines.append(f"    {merge_var[m.node.name]} = a{enter_index[a]}")
    if budget is not None:
        lines.append("    " + fb.LOOP_START)
    lines.append("    while True:")
    if budget is not None:
        lines.append("        " + fb.LOOP_NEXT)
    src_line: dict[int, Any] = {}
    for stmts, cn in pre + body:
        for stmt in stmts:
            lines.append("        " + stmt)
            src_line[len(lines)] = cn
    if next_of_merge:
        lines.append("        " + ", ".join(m for m, _ in next_of_merge) + " = "
                     + ", ".join(v for _, v in next_of_merge))
    if budget is not None:
        lines.append("    " + fb.LOOP_END)
    if len(exits) == 1:
        lines.append(f"    return {exits[0]}")
    else:
        lines.append(f"    return ({', '.join(exits)}{',' if len(exits) == 1 else ''})")
    filename = f"<tensorgrid loop {id(plan):x}>"
    exec(compile("\n".join(lines), filename, "exec"), env)
    loop_fn = env["_loop"]
    first = inner[0]

    def run(step: Any, *args: Any) -> Any:
        try:
            return loop_fn(step, *args)
        except Exception as exc:  # noqa: BLE001 - mapped to an error naming the node
            cn = _failed(exc, filename, src_line) or first
            raise located(exc, cn) from None

    return run, _STEP


def _out_guard(guards: dict[str, Guards], switch_pred: dict[str, str], src: str, idx: int
               ) -> Guards:
    """When output ``idx`` of ``src`` is live (a cond Switch's output: when its side is taken)."""
    g = guards.get(src, frozenset())
    pred = switch_pred.get(src)
    if pred is not None:
        return None if g is None else g | {(pred, idx)}
    return g


def _failed(exc: BaseException, filename: str, src_line: dict[int, Any]) -> Any:
    tb = exc.__traceback__
    found = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            found = src_line.get(tb.tb_lineno)
        tb = tb.tb_next
    return found
