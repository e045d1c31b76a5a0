"""Frames, iterations and dead tensors: how the executor runs a graph with control flow.

TensorFlow 1.x's semantics, rebuilt on our executor's nodes:

* **Dead tensors.** A ``Switch`` sends its input to the output its predicate picks and a dead tensor
  to the other. A node with a dead input (data or control) does not run: its outputs are dead too.
  A ``Merge`` runs on its first live input, or with a dead output once all of its inputs are dead;
  a ``ControlTrigger`` always runs live.
* **Frames.** Every node belongs to a frame: the root, or a loop's, named by the ``frame_name`` of
  the ``Enter`` nodes that lead into it. The frame of a node is found once, statically, by walking
  the graph from its roots: ``Enter`` leads into a child frame, ``Exit`` back to the parent.
* **Iterations.** At run time a frame has *instances* (one per iteration of the enclosing frame that
  enters it), and an instance has *iterations*. Each iteration keeps its own pending counts, dead
  counts and input buffers, as TF's executor does. ``Enter`` delivers to iteration 0 (or, with
  ``is_constant``, to every iteration: a loop invariant); ``NextIteration`` delivers to the next
  iteration, which it starts; ``Exit`` delivers to the parent instance's iteration. At most
  ``parallel_iterations`` iterations of an instance are alive; a ``NextIteration`` beyond that waits
  until the oldest iteration is done.
* **Transfers.** A ``_Send`` runs even when its input is dead (it sends the dead tensor), and a
  ``_Recv`` even when its control input is dead; a received dead tensor makes the ``_Recv``'s
  output dead. Inside a loop both put their frame instance and iteration in the rendezvous key, so
  the copies of a loop on several tasks exchange each iteration's values (the partitioner gives
  every task its own copy of the loop's control structure: ``compiler/control_loops.py``).
* **Completion.** An iteration is done when none of its nodes is ready or running, no child frame of
  it is alive, every ``Enter`` of its frame has delivered, and every older iteration is done. When an
  instance's last iteration is done, the instance is done: each of its ``Exit`` nodes that never
  delivered a live value delivers a dead one to the parent (a loop inside an untaken branch), and
  its parent iteration may now be done.

Graphs without control-flow ops never come here: the executor's straight-line schedule runs them.
Which frame each node is in is worked out once (``runtime/frame_graph.py``); simple loops are
compiled to python loops before the step runs (``runtime/loops.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.ir import DEAD
from tensorgrid.core.variable import VarRef
from tensorgrid.runtime.frame_budget import FrameBudget
from tensorgrid.runtime.frame_graph import ARG as _ARG
from tensorgrid.runtime.frame_graph import ENTER as _ENTER
from tensorgrid.runtime.frame_graph import EXIT as _EXIT
from tensorgrid.runtime.frame_graph import MERGE as _MERGE
from tensorgrid.runtime.frame_graph import NEXT as _NEXT
from tensorgrid.runtime.frame_graph import NORMAL as _NORMAL
from tensorgrid.runtime.frame_graph import RECV as _RECV
from tensorgrid.runtime.frame_graph import RETVAL as _RETVAL
from tensorgrid.runtime.frame_graph import SEND as _SEND
from tensorgrid.runtime.frame_graph import SWITCH as _SWITCH
from tensorgrid.runtime.frame_graph import TRIGGER as _TRIGGER
from tensorgrid.runtime.frame_graph import FrameGraph, FrameInfo
from tensorgrid.runtime.frame_graph import FrameNode as _Item
from tensorgrid.runtime.loops import compile_loops

# how a kernel is called (the executor's constants)
_PLAIN, _STEP, _ASYNC = 0, 1, 2


class _Iter:
    """One iteration of one frame instance: its pending counts, dead counts and input buffers."""

    __slots__ = ("bytes", "children", "dead", "frame", "id", "inputs", "outstanding", "pending")

    def __init__(self, frame: _Frame, iter_id: int) -> None:
        info = frame.info
        self.frame = frame
        self.id = iter_id
        self.pending = list(info.pending0)
        self.dead = [0] * info.size
        self.inputs: list[Any] = [None] * info.n_inputs
        self.outstanding = 0
        self.children: dict[int, _Frame] = {}
        self.bytes = 0  # what its nodes made, under a step budget (``frame_budget``)


class _Frame:
    """One instance of a frame (a loop entered from one iteration of its parent)."""
    __slots__ = ("count", "deferred", "held", "info", "invariants", "iters", "key", "live_exits",
                 "oldest", "parent_iter", "pending_enters", "step")

    def __init__(self, info: FrameInfo, parent_iter: _Iter | None) -> None:
        self.info = info
        self.parent_iter = parent_iter
        # the instance's name in rendezvous keys: the same on every task that runs a copy of the
        # loop (frame names and the iterations of the enclosing frames agree), and ';'-free
        self.key: str = "0" if parent_iter is None else \
            f"{parent_iter.frame.key}/{parent_iter.id}/{info.name.replace(';', ',')}"
        self.iters: dict[int, _Iter] = {0: _Iter(self, 0)}
        self.count = 0  # the newest iteration's id
        self.oldest = 0
        self.pending_enters = info.n_enters
        self.invariants: list[tuple[_Item, Any]] = []
        self.live_exits: set[_Item] = set()
        self.deferred: list[tuple[_Item, Any]] = []
        self.step: Any = None if parent_iter is None else parent_iter.frame.step
        self.held = 0  # the bytes of the last iteration deleted, live until the next one is


class FramePlan:
    """The control-flow structure of one partition, and the runner of its steps.

    Args:
        nodes: the executor's nodes (``executor._Node``) in topological order (back edges aside).
        located: maps an exception raised by a node's kernel to the error to raise (naming it).
        budget: the task's per-step tensor budget, or None (``frame_budget``).

    Raises:
        InvalidArgumentError: a node reads from two different frames, or an Exit or NextIteration
            sits in the root frame (the message names the node).
    """

    def __init__(self, nodes: Sequence[Any],
                 located: Callable[[BaseException, Any], BaseException],
                 compile_simple_loops: bool = True, budget: FrameBudget | None = None) -> None:
        self._located = located
        self._budget = budget
        self._adopt(FrameGraph(nodes))
        self.compiled_loops = 0
        if compile_simple_loops and len(self.frames) > 1:
            frame_of = {it.name: it.frame for it in self.items}
            parents = [f.parent for f in self.frames]
            child_of_enter = {it.name: it.child for it in self.items if it.kind == _ENTER}
            new_nodes = compile_loops(nodes, frame_of, parents, child_of_enter, located, budget)
            self.compiled_loops = sum(1 for cn in new_nodes if cn.node.op == "_Loop")
            if self.compiled_loops:
                self._adopt(FrameGraph(new_nodes))

    def _adopt(self, graph: FrameGraph) -> None:
        self.items = graph.items
        self.frames = graph.frames
        self._roots = graph.roots
        for item in self.items:
            item.mem = self._budget.entry(item.cn) if self._budget is not None and \
                item.kind in (_NORMAL, _RECV) and item.cn.static is None else None

    def run(self, step: Any) -> list[Any]:
        """Run one step whose kernels never wait; returns ``step.rets``.

        Raises:
            OpError: a kernel failed (naming the node), a fetched tensor is dead, or nodes were
                left waiting for inputs that never came.
        """
        root, ready = self._start(step)
        trace = step.trace
        while ready:
            item, it = ready.popleft()
            t0 = time.perf_counter() if trace is not None else 0.0
            self._process(item, it, step, ready, None)
            if trace is not None:
                trace.append((item.name, item.cn.node.op, t0, time.perf_counter()))
        return self._finish(root, step)

    async def run_async(self, step: Any) -> list[Any]:
        """Run one step, awaiting async kernels (Recv, queues) without blocking ready nodes."""
        root, ready = self._start(step)
        tasks: dict[asyncio.Future[Any], tuple[_Item, _Iter]] = {}
        loop = asyncio.get_running_loop()

        def spawn(item: _Item, it: _Iter, coro: Any) -> None:
            fut = asyncio.ensure_future(coro)
            tasks[fut] = (item, it)
            fut.add_done_callback(on_done)

        wake: list[asyncio.Future[None] | None] = [None]
        failure: list[BaseException] = []

        def on_done(fut: asyncio.Future[Any]) -> None:
            item, it = tasks.pop(fut)
            if fut.cancelled():
                if not failure:
                    failure.append(errors.CancelledError(f"Step {step.step_id} was cancelled"))
            elif fut.exception() is not None:
                if not failure:
                    failure.append(self._located(fut.exception(), item.cn))  # type: ignore[arg-type]
            else:
                try:
                    value = fut.result()
                    if item.mem is not None and value is not DEAD:
                        self._budget.measured(item.mem, step, it, value)  # type: ignore[union-attr]
                    self._propagate(item, it, value, value is DEAD, ready)
                    self._done_one(it, ready)
                except Exception as exc:  # noqa: BLE001
                    if not failure:
                        failure.append(self._located(exc, item.cn))
            w = wake[0]
            if w is not None and not w.done():
                w.set_result(None)

        try:
            while True:
                while ready and not failure:
                    item, it = ready.popleft()
                    try:
                        self._process(item, it, step, ready, spawn)
                    except Exception as exc:  # noqa: BLE001
                        failure.append(exc)
                        break
                if failure or not tasks:
                    break
                if not ready:
                    woken = wake[0] = loop.create_future()
                    await woken
                    wake[0] = None
        finally:
            if tasks:
                for fut in list(tasks):
                    fut.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        if failure:
            raise failure[0]
        return self._finish(root, step)

    def _start(self, step: Any) -> tuple[_Frame, deque[tuple[_Item, _Iter]]]:
        root = _Frame(self.frames[0], None)
        root.step = step
        it0 = root.iters[0]
        ready: deque[tuple[_Item, _Iter]] = deque((item, it0) for item in self._roots)
        it0.outstanding = len(self._roots)
        return root, ready

    def _finish(self, root: _Frame, step: Any) -> list[Any]:
        missing = [i for i, r in enumerate(step.rets) if r is None]
        if missing:
            it0 = root.iters[0]
            waiting = [item.name for item in self.items
                       if item.frame == 0 and it0.pending[item.local] > 0]
            raise errors.InternalError(
                f"The step ended with fetch(es) {missing} never computed; nodes still waiting "
                f"for inputs: {waiting[:5]}")
        return step.rets  # type: ignore[no-any-return]

    def _process(self, item: _Item, it: _Iter, step: Any, ready: deque[tuple[_Item, _Iter]],
                 spawn: Callable[[_Item, _Iter, Any], None] | None) -> None:
        """Run one ready node in one iteration and hand its outputs on."""
        kind = item.kind
        if kind == _MERGE:
            ins = it.inputs
            for k in range(item.base, item.base + item.n_in):
                v = ins[k]
                if v is not None and v is not DEAD:
                    if not item.plain:
                        try:
                            v = _convert_one(item.cn, k - item.base, v)
                        except Exception as exc:  # noqa: BLE001 - names the node
                            raise self._located(exc, item.cn) from None
                    out: Any = (v, _index(k - item.base))
                    break
            else:
                self._propagate(item, it, None, True, ready)
                self._done_one(it, ready)
                return
            self._propagate(item, it, out, False, ready)
            self._done_one(it, ready)
            return
        if it.dead[item.local] and kind != _TRIGGER and kind != _SEND and kind != _RECV:
            if kind == _RETVAL:
                raise errors.InvalidArgumentError(
                    f"Fetch {item.ret_index} ('{item.cn.node.attrs.get('_fetch', item.name)}') "
                    "is a dead tensor: it lies on a branch of a conditional that was not taken",
                    node_name=item.name, op_type=item.cn.node.op)
            self._propagate(item, it, None, True, ready)
            self._done_one(it, ready)
            return
        cn = item.cn
        try:
            if item.n_in:
                args = it.inputs[item.base:item.base + item.n_in]
                if not item.plain:
                    args = _convert(cn, args)
            else:
                args = []
            if kind in (_ENTER, _EXIT, _NEXT):
                result: Any = args[0]
                if kind == _EXIT and self._budget is not None:
                    self._budget.exited(it, it.frame.parent_iter, result)
            elif kind == _ARG:
                result = step.args[item.ret_index]
            elif kind == _RETVAL:
                step.rets[item.ret_index] = args[0]
                result = None
            elif kind == _SEND:
                frame = it.frame
                cn.fn(step, *args, frame_iter=f"{frame.key}:{it.id}" if frame.info.fid else None)
                result = None
            elif kind == _RECV:
                if spawn is None:
                    raise errors.InternalError("A _Recv ran in a synchronous step; use run_async")
                frame = it.frame
                spawn(item, it, cn.fn(step, frame_iter=f"{frame.key}:{it.id}"
                                      if frame.info.fid else None))
                return
            elif cn.static is not None:
                result = cn.static
            elif item.mem is not None and cn.kind != _ASYNC:
                result = self._budget.run(item.mem, step, it, cn, args)  # type: ignore[union-attr]
            elif cn.kind == _PLAIN:
                result = cn.fn(*args)
            elif cn.kind == _STEP:
                result = cn.fn(step, *args)
            else:
                if spawn is None:
                    raise errors.InternalError(
                        "A kernel that waits ran in a synchronous step; use run_async")
                spawn(item, it, cn.fn(step, *args))
                return
        except Exception as exc:  # noqa: BLE001 - mapped to an OpError naming the node
            raise self._located(exc, cn) from None
        self._propagate(item, it, result, False, ready)
        self._done_one(it, ready)

    # ------------------------------------------------------------------ propagation
    def _propagate(self, item: _Item, it: _Iter, result: Any, dead: bool,
                   ready: deque[tuple[_Item, _Iter]]) -> None:
        kind = item.kind
        if kind in (_NORMAL, _SWITCH, _MERGE, _TRIGGER, _ARG, _RETVAL, _SEND, _RECV):
            self._activate_all(item, it, result, dead, ready)
        elif kind == _ENTER:
            child = it.children.get(item.child)
            if child is None:
                child = it.children[item.child] = _Frame(self.frames[item.child], it)
            value = DEAD if dead else result
            if item.is_constant:
                child.invariants.append((item, value))
                for target in list(child.iters.values()):
                    self._activate_all(item, target, value, dead, ready)
            else:
                self._activate_all(item, child.iters[0], value, dead, ready)
            child.pending_enters -= 1
            if child.pending_enters == 0:
                self._cleanup(child, ready)
        elif kind == _EXIT:
            if not dead:
                frame = it.frame
                frame.live_exits.add(item)
                self._activate_all(item, frame.parent_iter, result, False, ready)  # type: ignore[arg-type]
        elif kind == _NEXT:
            if dead:
                return  # a dead NextIteration ends its loop: nothing flows to the next iteration
            frame = it.frame
            nxt = frame.iters.get(it.id + 1)
            if nxt is None:
                if it.id + 1 <= frame.count:
                    raise errors.InternalError(f"Iteration {it.id + 1} of frame "
                                               f"'{frame.info.name}' is gone")
                if len(frame.iters) >= frame.info.parallel:
                    frame.deferred.append((item, result))
                    return
                nxt = self._new_iteration(frame, ready)
            self._activate_all(item, nxt, result, False, ready)

    def _new_iteration(self, frame: _Frame, ready: deque[tuple[_Item, _Iter]]) -> _Iter:
        frame.count += 1
        nxt = frame.iters[frame.count] = _Iter(frame, frame.count)
        for inv_item, value in frame.invariants:
            self._activate_all(inv_item, nxt, value, value is DEAD, ready)
        return nxt

    def _activate_all(self, item: _Item, it: _Iter, result: Any, dead: bool,
                      ready: deque[tuple[_Item, _Iter]]) -> None:
        edges = item.out_edges
        if edges:
            if dead:
                for per_output in edges:
                    for dst, pos in per_output:
                        self._activate(dst, pos, DEAD, it, ready)
            elif not item.multi:
                # the common case inline: a live value to nodes that are not Merges
                pending = it.pending
                inputs = it.inputs
                for dst, pos in edges[0]:
                    if dst.kind == _MERGE:
                        self._activate(dst, pos, result, it, ready)
                        continue
                    local = dst.local
                    inputs[dst.base + pos] = result
                    pending[local] -= 1
                    if pending[local] == 0:
                        it.outstanding += 1
                        ready.append((dst, it))
            else:
                for k, per_output in enumerate(edges):
                    if per_output:
                        v = result[k]
                        for dst, pos in per_output:
                            self._activate(dst, pos, v, it, ready)
        if item.ctrl_edges:
            ctrl_value = DEAD if dead and item.kind != _TRIGGER else None
            for dst in item.ctrl_edges:
                self._activate(dst, -1, ctrl_value, it, ready)

    def _activate(self, dst: _Item, pos: int, value: Any, it: _Iter,
                  ready: deque[tuple[_Item, _Iter]]) -> None:
        local = dst.local
        pending = it.pending
        if dst.kind == _MERGE:
            if pos < 0:
                pending[local] -= 2
                count = pending[local]
                go = count == 0 or (count == 1 and it.dead[local] == _merge_inputs(dst, it))
            elif value is not DEAD:
                count = pending[local]
                if count & 1:
                    pending[local] = count - 1
                    it.inputs[dst.base + pos] = value
                go = count == 1
            else:
                it.dead[local] += 1
                it.inputs[dst.base + pos] = DEAD
                go = pending[local] == 1 and it.dead[local] == _merge_inputs(dst, it)
        else:
            if pos >= 0:
                it.inputs[dst.base + pos] = value
            if value is DEAD:
                it.dead[local] += 1
            pending[local] -= 1
            go = pending[local] == 0
        if go:
            it.outstanding += 1
            ready.append((dst, it))

    # ------------------------------------------------------------------ completion
    def _done_one(self, it: _Iter, ready: deque[tuple[_Item, _Iter]]) -> None:
        it.outstanding -= 1
        if it.outstanding == 0 and it.frame.info.fid != 0:
            self._cleanup(it.frame, ready)

    def _cleanup(self, frame: _Frame, ready: deque[tuple[_Item, _Iter]]) -> None:
        """Delete the done iterations of an instance, oldest first; then the instance when its
        last iteration is done, and so on up the parents."""
        while frame.info.fid != 0:
            if frame.pending_enters:
                return
            while True:
                it = frame.iters.get(frame.oldest)
                if it is None or it.outstanding or it.children:
                    break
                del frame.iters[frame.oldest]
                frame.oldest += 1
                if it.bytes or frame.held:  # its tensors live until the next iteration is done
                    frame.step.tensor_bytes -= frame.held
                    frame.held = it.bytes
                if frame.deferred:
                    nxt = self._new_iteration(frame, ready)
                    deferred, frame.deferred = frame.deferred, []
                    for item, value in deferred:
                        self._activate_all(item, nxt, value, False, ready)
            if frame.iters:
                return
            if frame.held:
                frame.step.tensor_bytes -= frame.held
            parent_it = frame.parent_iter
            assert parent_it is not None
            for exit_item in frame.info.exits:
                if exit_item not in frame.live_exits:
                    self._activate_all(exit_item, parent_it, None, True, ready)
            del parent_it.children[frame.info.fid]
            if parent_it.outstanding or parent_it.children:
                return
            frame = parent_it.frame


def _merge_inputs(dst: _Item, it: _Iter) -> int:
    """How many inputs of a Merge can arrive in this iteration: a loop's Merge reads its Enter in
    iteration 0 and its NextIteration afterwards."""
    if dst.n_back and it.id > 0:
        return dst.n_back
    return dst.n_fwd


_INDEX_CACHE: list[Any] = []


def _index(i: int) -> Any:
    """A Merge's ``value_index`` output (int32 scalars, made once)."""
    while len(_INDEX_CACHE) <= i:
        _INDEX_CACHE.append(np.int32(len(_INDEX_CACHE)))
    return _INDEX_CACHE[i]


def _convert_one(cn: Any, pos: int, v: Any) -> Any:
    """An input as the kernel takes it: a variable reference read where the op wants a value."""
    if cn.derefs[pos] and type(v) is VarRef:
        v = v.var.read(cn.node.name)
    return v


def _convert(cn: Any, args: list[Any]) -> list[Any]:
    """Every input as the kernel takes it (see ``_convert_one``)."""
    return [v.var.read(cn.node.name) if d and type(v) is VarRef else v
            for v, d in zip(args, cn.derefs)]
