"""The executor: runs one partition's nodes in dataflow order.

``Executable(nodes, devices)`` builds every node's kernel once. A step then runs in one of two ways:

* ``run_sync``: when no kernel waits, the plan is a *straight-line schedule*: the topological order
  (pending counts and a ready queue, computed once) turned into a generated python function, one line
  per node, with constants, variable handles and identities resolved at build time. An error's line
  number tells which node failed, so the fast path carries no bookkeeping. Graphs over
  ``CODEGEN_LIMIT`` nodes run the same schedule in a plain loop instead.
* ``run_async``: when some kernels wait (Recv, queues, barriers), a dataflow loop keeps pending counts
  and a ready queue per step; async kernels run as tasks and wake the loop when they finish, so no
  receive blocks an unrelated send.
* a graph with control flow (``Switch``/``Merge``/``Enter``/``Exit``/``NextIteration``, or a
  ``_Recv`` that may get a dead tensor) runs under ``runtime.frames.FramePlan``: frames, iterations
  and dead tensors, in either mode; graphs without those never pay for them.

Neither path recurses (a 100,000-node chain runs). A traced step times each node into a
``TraceRecord`` on paths of its own.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorgrid.core import errors, registry
from tensorgrid.core.device import DeviceSpec
from tensorgrid.core.ir import (
    NodeDef,
    attrs_key,
    parse_input,
    topological_order,
)
from tensorgrid.core.registry import AsyncKernel, KernelContext, StepKernel, TensorSpec
from tensorgrid.core.variable import VarRef
from tensorgrid.runtime import memory_budget as mb
from tensorgrid.runtime.codegen import straight_line
from tensorgrid.runtime.frame_budget import FrameBudget
from tensorgrid.runtime.frame_graph import needs_frames
from tensorgrid.runtime.frames import FramePlan
from tensorgrid.runtime.resources import ResourceMgr
from tensorgrid.runtime.update_thread import UpdateThread, is_update_op, offload_thread, update_cost

CODEGEN_LIMIT = 20_000

_PLAIN, _STEP, _ASYNC = 0, 1, 2  # how each kernel is called


@dataclass
class LocalDevice:
    """A device of this process: its full name, type, array module and resources."""

    name: str
    device_type: str = "CPU"
    xp: Any = np
    resources: ResourceMgr = field(default_factory=ResourceMgr)


# (node index, start and end in time.perf_counter seconds, thread id, value): what the node made
# (a tuple for several outputs), for a ``_Send`` the tensor it sent
TraceRecord = tuple[int, float, float, int, Any]


@dataclass
class StepContext:
    """What one step of one partition carries: its id, arguments, results and rendezvous."""

    step_id: int = 0
    args: Sequence[Any] = ()
    rets: list[Any] = field(default_factory=list)
    rendezvous: Any = None
    deadline: float | None = None  # time.monotonic() bound, when set
    trace: list[TraceRecord] | None = None  # set to a list to trace the step
    tensor_bytes: int = 0  # what nodes of run-time shape made (``memory_budget``)


@dataclass
class _Node:
    index: int
    node: NodeDef
    device: str
    kind: int
    fn: Any
    in_slots: tuple[int, ...]
    derefs: tuple[bool, ...]
    out_slots: tuple[int, ...]
    consumers: tuple[int, ...] = ()
    static: Any = None  # a value known at build time (Const, VariableV2 handle)
    is_identity: bool = False
    mem: int = mb.NONE  # what the per-step budget checks here, and the declared bytes so far
    mem_prefix: int = 0
    updates: UpdateThread | None = None  # an update kernel's thread, for large variables
    update_cost: int = 1  # its passes over the variable relative to gradient descent's


def _deref(value: Any, node: str) -> Any:
    if type(value) is VarRef:
        return value.var.read(node)
    return value


class Executable:
    """One partition's nodes with their kernels built, ready to run steps.

    Args:
        nodes: the partition's nodes (any order); ``_Arg``/``_Retval`` nodes take the step's
            arguments and deliver its results.
        devices: the local devices by full name; a node runs on ``devices[node.device]`` or, when its
            device is empty or unknown here, on ``default_device``.
        output_specs: optional inferred specs per node (kernels may use them).
        memory_budget: most bytes of tensors one step may keep live (``memory_budget``);
            None: no budget.

    Raises:
        InvalidArgumentError: a cycle (naming a node on it) or a malformed node.
        NotFoundError: an unknown op, or an op without a kernel for its device.
    """

    def __init__(
        self,
        nodes: Sequence[NodeDef],
        devices: Mapping[str, LocalDevice],
        default_device: str,
        output_specs: Mapping[str, Sequence[TensorSpec]] | None = None,
        memory_budget: int | None = None,
    ) -> None:
        order = topological_order(nodes)
        self.devices = devices
        self.default_device = default_device
        specs = output_specs or {}
        self._slot_of: dict[tuple[str, int], int] = {}
        self.nodes: list[_Node] = []
        self.num_args = 0
        self.num_rets = 0
        index_of = {n.name: i for i, n in enumerate(order)}
        nslots = 0
        opdefs = [registry.get_op(n.op, n) for n in order]
        # outputs: one slot per (node, output index) that something reads
        needed: dict[str, set[int]] = {}
        for n in order:
            for inp in n.inputs:
                src, idx, ctrl = parse_input(inp)
                if not ctrl:
                    needed.setdefault(src, set()).add(idx)
        for n in order:
            for idx in sorted(needed.get(n.name, ())):
                self._slot_of[(n.name, idx)] = nslots
                nslots += 1
        self.num_slots = nslots
        consumers: list[set[int]] = [set() for _ in order]
        for i, (n, opdef) in enumerate(zip(order, opdefs)):
            dev = self._device_for(n)
            in_slots, derefs = [], []
            for pos, inp in enumerate(n.inputs):
                src, idx, ctrl = parse_input(inp)
                consumers[index_of[src]].add(i)
                if ctrl:
                    continue
                src_node = order[index_of[src]]
                src_def = opdefs[index_of[src]]
                if idx >= _num_outputs_hint(src_node, src_def, specs):
                    raise errors.InvalidArgumentError(
                        f"Node '{n.name}' reads output {idx} of '{src}', which has fewer outputs",
                        node_name=n.name, op_type=n.op,
                    )
                in_slots.append(self._slot_of[(src, idx)])
                is_ref_src = idx in src_def.ref_outputs
                derefs.append(is_ref_src and pos not in opdef.ref_inputs)
            out_count = max(needed[n.name]) + 1 if n.name in needed else 0
            if out_count and len(specs.get(n.name, ())) > 1:
                # a multi-output kernel returns a tuple even when only its output 0 is read
                out_count = max(out_count, len(specs[n.name]))
            out_slots = tuple(self._slot_of.get((n.name, k), -1) for k in range(out_count))
            kind, fn = self._build_kernel(n, opdef, dev, specs.get(n.name, ()))
            cn = _Node(i, n, dev.name, kind, fn, tuple(in_slots), tuple(derefs), out_slots)
            if n.op == "_Arg":
                self.num_args = max(self.num_args, int(n.attrs["index"]) + 1)
            elif n.op == "_Retval":
                self.num_rets = max(self.num_rets, int(n.attrs["index"]) + 1)
            elif (n.op == "Const" and kind == _PLAIN) or (n.op == "VariableV2" and kind == _PLAIN):
                cn.static = fn()
            elif n.op in ("Identity", "Snapshot") and not any(derefs):
                # in a straight-line schedule an identity is just another name for its input
                cn.is_identity = True
            elif kind == _PLAIN and is_update_op(n.op) and in_slots:
                cn.updates = dev.resources.updates
                cn.update_cost = update_cost(n.op)
            self.nodes.append(cn)
        for cn, cons in zip(self.nodes, consumers):
            cn.consumers = tuple(sorted(cons))
        self.budget = mb.Budget(memory_budget) if memory_budget is not None else None
        makes = [(bool(cn.out_slots) and cn.static is None and not cn.is_identity
                  and cn.node.op != "_Arg" and not opdef.ref_outputs,
                  specs.get(cn.node.name, ())) for cn, opdef in zip(self.nodes, opdefs)]
        for cn, (action, prefix) in zip(self.nodes, mb.plan(makes, memory_budget)):
            cn.mem, cn.mem_prefix = action, prefix
        self.has_async = any(cn.kind == _ASYNC for cn in self.nodes)
        self._pending0 = [len({parse_input(i)[0] for i in cn.node.inputs}) for cn in self.nodes]
        self._roots = [i for i, p in enumerate(self._pending0) if p == 0]
        self._sync_fn: Callable[..., Any] | None = None
        self._lines: dict[int, int] = {}
        self._frames: FramePlan | None = None
        if needs_frames([cn.node for cn in self.nodes]):
            # control flow counts its step tensors as it runs (``frame_budget``)
            fbud = None if memory_budget is None else FrameBudget(memory_budget, {
                cn.node.name: mb.declared_bytes(s) for cn, (m, s) in zip(self.nodes, makes) if m})
            self._frames = FramePlan(self.nodes, self._located, budget=fbud)
        elif not self.has_async and len(self.nodes) <= CODEGEN_LIMIT:
            self._sync_fn, self._filename, self._lines = straight_line(
                self.nodes, _deref, _STEP, self.budget, f"{id(self):x}")

    # ------------------------------------------------------------------ building
    def _device_for(self, n: NodeDef) -> LocalDevice:
        dev = self.devices.get(n.device)
        if dev is None:
            dev = self.devices[self.default_device]
            if n.device:
                want = DeviceSpec.from_string(n.device)
                for d in self.devices.values():
                    if want.matches(DeviceSpec.from_string(d.name)):
                        return d
        return dev

    def _build_kernel(self, n: NodeDef, opdef: registry.OpDef, dev: LocalDevice,
                      out_specs: Sequence[TensorSpec]) -> tuple[int, Any]:
        kdef = registry.get_kernel(n.op, dev.device_type, n, dev.name)
        ctx = KernelContext(n, opdef, dev.name, dev.device_type, dev.xp, dev.resources,
                            output_specs=out_specs)
        try:
            if opdef.stateful and n.op not in ("_Arg", "_Retval"):
                key = (n.name, n.op, attrs_key(n.attrs))
                k = dev.resources.cached_kernel(key, lambda: kdef.build(ctx))
            else:
                k = kdef.build(ctx)
        except errors.OpError as exc:
            raise errors.at_node(exc, n.name, n.op, dev.name) from None
        except (ValueError, TypeError, KeyError) as exc:
            raise errors.at_node(
                errors.InvalidArgumentError(f"Cannot build the kernel: {exc}"), n.name, n.op, dev.name
            ) from exc
        if isinstance(k, AsyncKernel):
            return _ASYNC, k.fn
        if isinstance(k, StepKernel):
            return _STEP, k.fn
        return _PLAIN, k

    # ------------------------------------------------------------------ running
    def new_step(self, args: Sequence[Any] = (), **kw: Any) -> StepContext:
        return StepContext(args=args, rets=[None] * self.num_rets, **kw)

    def run_sync(self, step: StepContext) -> list[Any]:
        """Run a step whose kernels never wait; returns the ``_Retval`` values in index order.

        Raises:
            OpError: a kernel failed; the error names the node, op and device.
        """
        if self.has_async:
            raise errors.InternalError("run_sync on a plan with async kernels; use run_async")
        if len(step.rets) < self.num_rets:
            step.rets = [None] * self.num_rets
        with np.errstate(all="ignore"):
            if self._frames is not None:
                return self._frames.run(step)
            if step.trace is not None or self._sync_fn is None:
                return self._interpret(step)
            try:
                return self._sync_fn(step)  # type: ignore[no-any-return]
            except Exception as exc:  # noqa: BLE001 - mapped to an OpError naming the node
                raise self._located(exc, self._failed_node(exc)) from None

    def _failed_node(self, exc: BaseException) -> _Node | None:
        tb = exc.__traceback__
        found = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == getattr(self, "_filename", None):
                found = self._lines.get(tb.tb_lineno)
            tb = tb.tb_next
        return None if found is None else self.nodes[found]

    def _located(self, exc: BaseException, cn: _Node | None) -> BaseException:
        if cn is None:
            return exc if isinstance(exc, errors.OpError) else errors.InternalError(str(exc))
        return kernel_error(exc, cn.node, cn.device)

    def _interpret(self, step: StepContext) -> list[Any]:
        vals: list[Any] = [None] * self.num_slots
        run_node = self._run_node if step.trace is None else self._run_node_traced
        for cn in self.nodes:
            try:
                run_node(cn, step, vals)
            except Exception as exc:  # noqa: BLE001
                raise self._located(exc, cn) from None
        return step.rets

    def _run_node_traced(self, cn: _Node, step: StepContext, vals: list[Any]) -> Any:
        """``_run_node``, timed, appending the node's ``TraceRecord`` to ``step.trace``."""
        t0 = time.perf_counter()
        result = self._run_node(cn, step, vals)
        t1 = time.perf_counter()
        sent = self._inputs(cn, vals)[0] if cn.node.op == "_Send" and cn.in_slots else result
        step.trace.append((cn.index, t0, t1, threading.get_ident(), sent))  # type: ignore[union-attr]
        return result

    async def _run_async_traced(self, cn: _Node, step: StepContext, run: Any, t0: float) -> Any:
        """Await an async kernel or an offloaded update (started at ``t0``); append its record."""
        result = await run
        step.trace.append((cn.index, t0, time.perf_counter(), threading.get_ident(), result))  # type: ignore[union-attr]
        return result

    def _inputs(self, cn: _Node, vals: list[Any]) -> list[Any]:
        out = []
        for slot, d in zip(cn.in_slots, cn.derefs):
            v = vals[slot]
            if d:
                v = _deref(v, cn.node.name)
            out.append(v)
        return out

    def _store(self, cn: _Node, result: Any, vals: list[Any]) -> None:
        slots = cn.out_slots
        if not slots:
            return
        if len(slots) == 1:
            if slots[0] >= 0:
                vals[slots[0]] = result
            return
        for s, v in zip(slots, result):
            if s >= 0:
                vals[s] = v

    def _run_node(self, cn: _Node, step: StepContext, vals: list[Any]) -> Any:  # its result
        n = cn.node
        if n.op == "_Arg":
            result = step.args[int(n.attrs["index"])]
            self._store(cn, result, vals)
            return result
        args = self._inputs(cn, vals)
        if n.op == "_Retval":
            step.rets[int(n.attrs["index"])] = args[0]
            return None
        if cn.static is not None:
            result = cn.static
        elif cn.mem:
            self._budget_before(cn, step)
            result = cn.fn(step, *args) if cn.kind == _STEP else cn.fn(*args)
            self._budget_after(cn, step, result)
        elif cn.kind == _STEP:
            result = cn.fn(step, *args)
        else:
            result = cn.fn(*args)
        self._store(cn, result, vals)
        return result

    def _budget_before(self, cn: _Node, step: StepContext) -> None:
        if cn.mem == mb.OVER:
            self.budget.refuse(cn.mem_prefix)  # type: ignore[union-attr]
        elif cn.mem == mb.CHECK:
            self.budget.check(step, cn.mem_prefix)  # type: ignore[union-attr]

    def _budget_after(self, cn: _Node, step: StepContext, result: Any) -> None:
        if cn.mem == mb.MEASURE:
            self.budget.measure(step, result, cn.mem_prefix)  # type: ignore[union-attr]

    async def run_async(self, step: StepContext) -> list[Any]:
        """Run a step in dataflow order, awaiting async kernels without blocking ready nodes.

        On the first failure every in-flight kernel is cancelled and the error (naming the node) is
        raised.
        """
        if not self.has_async:
            return self.run_sync(step)
        if len(step.rets) < self.num_rets:
            step.rets = [None] * self.num_rets
        if self._frames is not None:
            with np.errstate(all="ignore"):
                return await self._frames.run_async(step)
        vals: list[Any] = [None] * self.num_slots
        pending = list(self._pending0)
        ready: deque[int] = deque(self._roots)
        tasks: dict[asyncio.Future[Any], _Node] = {}
        loop = asyncio.get_running_loop()
        wake: list[asyncio.Future[None] | None] = [None]
        failure: list[BaseException] = []
        nodes = self.nodes
        traced = step.trace is not None
        run_node = self._run_node_traced if traced else self._run_node

        def finish(cn: _Node) -> None:
            for c in cn.consumers:
                pending[c] -= 1
                if pending[c] == 0:
                    ready.append(c)

        def on_done(fut: asyncio.Future[Any]) -> None:
            cn = tasks.pop(fut)
            if fut.cancelled():
                if not failure:
                    failure.append(errors.CancelledError(f"Step {step.step_id} was cancelled",
                                                         derived=True))
            elif fut.exception() is not None:
                if not failure:
                    failure.append(self._located(fut.exception(), cn))  # type: ignore[arg-type]
            else:
                try:
                    if cn.mem:
                        self._budget_after(cn, step, fut.result())
                except errors.OpError as exc:
                    if not failure:
                        failure.append(self._located(exc, cn))
                else:
                    self._store(cn, fut.result(), vals)
                    finish(cn)
            w = wake[0]
            if w is not None and not w.done():
                w.set_result(None)

        try:
            with np.errstate(all="ignore"):
                while True:
                    while ready and not failure:
                        cn = nodes[ready.popleft()]
                        upd = offload_thread(cn.updates, vals, cn.in_slots, cn.update_cost)
                        if cn.kind == _ASYNC or upd is not None:
                            if cn.mem:
                                try:
                                    self._budget_before(cn, step)
                                except errors.OpError as exc:
                                    failure.append(self._located(exc, cn))
                                    break
                            args = self._inputs(cn, vals)
                            run = upd.run(cn.fn, args) if upd else cn.fn(step, *args)  # off the loop
                            if traced:
                                run = self._run_async_traced(cn, step, run, time.perf_counter())
                            fut = asyncio.ensure_future(run)
                            tasks[fut] = cn
                            fut.add_done_callback(on_done)
                            continue
                        try:
                            run_node(cn, step, vals)
                        except Exception as exc:  # noqa: BLE001
                            failure.append(self._located(exc, cn))
                            break
                        finish(cn)
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
        return step.rets

    def describe(self) -> str:
        """The schedule, one node a line (for debugging and tests)."""
        return "\n".join(f"{cn.index}: {cn.node.name} ({cn.node.op}) on {cn.device}"
                         for cn in self.nodes)


def _num_outputs_hint(n: NodeDef, opdef: registry.OpDef, specs: Mapping[str, Sequence[Any]]) -> int:
    s = specs.get(n.name)
    return len(s) if s else sys.maxsize


def kernel_error(exc: BaseException, node: NodeDef, device: str) -> errors.OpError:
    """Map what a kernel raised to an OpError that names the node, op and device."""
    if isinstance(exc, errors.OpError):
        return errors.at_node(exc, node.name, node.op, device)
    if isinstance(exc, MemoryError):
        err: errors.OpError = errors.ResourceExhaustedError(f"Out of memory: {exc}")
    elif isinstance(exc, ValueError | IndexError | TypeError | ZeroDivisionError | KeyError):
        err = errors.InvalidArgumentError(f"{type(exc).__name__}: {exc}")
    elif isinstance(exc, asyncio.CancelledError):
        err = errors.CancelledError("Step was cancelled", derived=True)
    elif isinstance(exc, asyncio.TimeoutError | TimeoutError):
        err = errors.DeadlineExceededError("Deadline exceeded")
    else:
        err = errors.InternalError(f"{type(exc).__name__}: {exc}")
    return errors.at_node(err, node.name, node.op, device)


_step_ids = itertools.count(1)


def next_step_id() -> int:
    return next(_step_ids)
