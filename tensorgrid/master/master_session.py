"""A master session: one client's graph, its plan cache, and the steps it runs.

Per step signature (graph version, feeds, fetches, targets) the chain ``prune -> passes -> place ->
partition`` runs once; the partitions are registered once on their tasks; later steps with the same
signature only send ``RunGraph`` to every task in parallel (the plan cache's hits are counted).

A session reaches its tasks only through its ``SessionHost`` (the master core), which owns the
task clients, the cluster's incarnations and the steps in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from tensorgrid.compiler.infer import check_declared_sizes, infer_graph
from tensorgrid.compiler.plan import Plan, PlanOptions, partition_plan, place_graph
from tensorgrid.compiler.wire import WireCodec, WireDelta, WirePolicy
from tensorgrid.core import dtypes, errors
from tensorgrid.core.device import DeviceSpec
from tensorgrid.core.ir import NodeDef, parse_tensor_name
from tensorgrid.core.registry import TensorSpec
from tensorgrid.master.cluster import ClusterState
from tensorgrid.master.plan_cache import PlanCache, PlanKey, RegisteredPlan, plan_key
from tensorgrid.master.session_stats import (
    SCALAR_SUMMARY_OPS,
    ScalarLog,
    StepTimes,
    TraceSampler,
    summary_scalars,
)
from tensorgrid.master.step import StepTrace, master_row

# The longest step deadline: a client may ask for any int64 of milliseconds, but a deadline this far
# off (about 24.8 days, int32 milliseconds) already means "no practical limit", and longer ones
# would overflow the deadline arithmetic of the tasks.
MAX_STEP_TIMEOUT_S = (2**31 - 1) / 1000.0


@dataclass(frozen=True)
class SessionOptions:
    allow_soft_placement: bool = False
    log_device_placement: bool = False
    device_filters: tuple[str, ...] = ()
    do_cse: bool = True
    do_constant_folding: bool = True
    timeout_s: float = 0.0  # 0: the master's default step deadline
    client_task: str = ""
    # lossy compression of cross-task float32 edges (compiler/wire.py): the wire type's name
    # ("bfloat16", "float16"; "": none), the smallest tensor it applies to, gradients only
    wire_dtype: str = ""
    wire_min_bytes: int = 0
    wire_gradients_only: bool = False
    # lossless compression of cross-task edges (compiler/wire.py WireCodec): the codec's name
    # ("lz4", "lz4hc", "zstd", "zlib"; "": none) and its settings (plain fields: the options are
    # kept in the session store as they are)
    wire_codec: str = ""
    wire_codec_level: int = WireCodec.level
    wire_codec_min_bytes: int = WireCodec.min_bytes
    wire_codec_edges: str = WireCodec.edges
    wire_codec_integers: bool = WireCodec.integers
    wire_codec_shuffle: str = WireCodec.shuffle
    wire_codec_blocksize: int = WireCodec.blocksize
    wire_codec_cross_host_only: bool = WireCodec.cross_host_only
    # variables read across hosts sent as deltas of the reader's version (compiler/wire.py
    # WireDelta): the delta frame's codec ("lz4", "zstd"; "": off) and its settings
    wire_delta: str = ""
    wire_delta_level: int = WireDelta.level
    wire_delta_min_bytes: int = WireDelta.min_bytes
    wire_delta_cross_host_only: bool = WireDelta.cross_host_only

    def wire_policy(self) -> WirePolicy | None:
        """The WirePolicy these options ask for, or None.

        Raises:
            ValueError: a wire type or codec setting out of range (says which).
        """
        codec = None
        if self.wire_codec:
            codec = WireCodec(self.wire_codec, self.wire_codec_level, self.wire_codec_min_bytes,
                              self.wire_codec_edges, self.wire_codec_integers,
                              self.wire_codec_shuffle, self.wire_codec_blocksize,
                              self.wire_codec_cross_host_only)
        delta = WireDelta(self.wire_delta, self.wire_delta_level, self.wire_delta_min_bytes,
                          self.wire_delta_cross_host_only) if self.wire_delta else None
        if not self.wire_dtype and codec is None and delta is None:
            return None
        return WirePolicy(dtypes.as_dtype(self.wire_dtype) if self.wire_dtype else None,
                          self.wire_min_bytes, self.wire_gradients_only, codec, delta=delta)


class SessionHost(Protocol):
    """What a session needs of its master: the cluster, and calls to its tasks."""

    cluster: ClusterState
    client_task: str
    default_timeout: float
    # largest tensor a graph may declare with a fully known shape (None: unchecked)
    max_declared_tensor_bytes: int | None
    # the master traces one step in N of every session by itself (0: only when asked)
    trace_every_n_steps: int

    def log(self, message: str) -> None: ...

    async def ensure_incarnations(self, tasks: Collection[str]) -> None: ...

    async def register_partitions(self, session: str, parts: Mapping[str, Sequence[NodeDef]],
                                  incarnations: Mapping[str, int]) -> dict[str, str]: ...

    async def run_plan(self, reg: RegisteredPlan, values: Sequence[Any], timeout: float,
                       step_id: int | None = None, session: str = "",
                       trace: StepTrace | None = None) -> list[Any]: ...

    async def deregister_session(self, session: str, tasks: set[str]) -> None: ...


class MasterSession:
    """One client's graph on the master.

    Args:
        handle: the session's handle.
        host: the master that runs its steps.
        nodes: its initial graph (validated here).
        options: its options.
    """

    def __init__(self, handle: str, host: SessionHost, nodes: Sequence[NodeDef],
                 options: SessionOptions) -> None:
        self.handle = handle
        self.host = host
        self.options = options
        try:  # a bad wire setting fails the session's creation, not its first step
            self.wire = options.wire_policy()
        except ValueError as e:
            raise errors.InvalidArgumentError(f"Session option: {e}") from None
        self.nodes: list[NodeDef] = []
        self.specs: dict[str, list[TensorSpec]] = {}
        self.version = 0
        self.plans = PlanCache()
        self._counts = {"steps": 0, "failed_steps": 0, "timed_out_steps": 0, "registrations": 0}
        self.created = time.time()
        self.last_used = time.time()
        self.last_plan: Plan | None = None
        self.last_trace: StepTrace | None = None  # of the latest traced step that succeeded
        # for the dashboard: step times, the client's scalars, steps the master traces itself
        self.step_times = StepTimes()
        self.scalars = ScalarLog()
        self.sampler = TraceSampler(host.trace_every_n_steps)
        self._summary_nodes: set[str] = set()  # scalar summaries fetched go to the scalars
        self._plan_lock = asyncio.Lock()
        self.extend(nodes, 0)

    @property
    def stats(self) -> dict[str, int]:
        """Counts of the session's steps, registrations and plan cache hits and misses."""
        return {"plan_cache_hits": self.plans.hits, "plan_cache_misses": self.plans.misses,
                **self._counts}

    # ------------------------------------------------------------------ graph
    def extend(self, nodes: Sequence[NodeDef], current_version: int) -> int:
        """Add nodes (new names only); returns the new graph version.

        Raises:
            FailedPreconditionError: ``current_version`` is stale.
            InvalidArgumentError / NotFoundError: a duplicate name, a dangling input, an unknown
                op, a cycle, a type/shape mismatch or a device outside the cluster; the session's
                graph is left unchanged.
        """
        if current_version != self.version:
            raise errors.FailedPreconditionError(
                f"Session {self.handle} is at graph version {self.version}, not {current_version}")
        if not nodes:
            return self.version
        existing = {n.name for n in self.nodes}
        seen: set[str] = set()
        for n in nodes:
            if n.name in existing or n.name in seen:
                raise errors.InvalidArgumentError(f"Duplicate node name in graph: '{n.name}'",
                                                  node_name=n.name, op_type=n.op)
            seen.add(n.name)
        merged = self.nodes + list(nodes)
        specs = infer_graph(merged, known=self.specs)  # validates before anything changes
        limit = self.host.max_declared_tensor_bytes
        if limit is not None:
            check_declared_sizes(nodes, specs, limit)
        if not self.options.allow_soft_placement:
            self.host.cluster.validate_devices(nodes)
        self.nodes = merged
        self.specs = specs
        self._summary_nodes.update(n.name for n in nodes if n.op in SCALAR_SUMMARY_OPS)
        self.version += 1
        return self.version

    # ------------------------------------------------------------------ steps
    def check_feeds(self, feeds: Sequence[tuple[str, Any]]) -> None:
        """Check each fed value's dtype and shape against the tensor it replaces.

        Raises:
            NotFoundError: a feed names a node that is not in the graph.
            InvalidArgumentError: a feed names a missing output, or its value has another dtype
                or an incompatible shape (names the node).
        """
        for name, value in feeds:
            node, idx = parse_tensor_name(name)
            outs = self.specs.get(node)
            if outs is None:
                raise errors.NotFoundError(f"Feed '{name}' names node '{node}', which is not in "
                                           "the graph", node_name=node)
            if idx >= len(outs):
                raise errors.InvalidArgumentError(
                    f"Feed '{name}': node '{node}' has {len(outs)} output(s)", node_name=node)
            spec = outs[idx]
            got = dtypes.as_dtype(np.asarray(value).dtype)
            if got is not spec.dtype:
                raise errors.InvalidArgumentError(
                    f"Cannot feed a {got.name} value for tensor '{name}' (node '{node}'), which "
                    f"has dtype {spec.dtype.name}", node_name=node)
            shape = tuple(np.shape(value))
            if not spec.shape.is_compatible_with(shape):
                raise errors.InvalidArgumentError(
                    f"Cannot feed a value of shape {list(shape)} for tensor '{name}' (node "
                    f"'{node}'), which has shape {spec.shape}", node_name=node)

    async def run(self, feeds: Sequence[tuple[str, Any]], fetches: Sequence[str],
                  targets: Sequence[str], timeout: float | None = None,
                  step_id: int | None = None, trace: StepTrace | None = None) -> list[Any]:
        """Run one step; returns the fetched values in order (``step_id``: the step's id, or
        None for a fresh random one). The feeds are checked first (``check_feeds``), whichever
        front end the step came through. ``trace`` (see ``new_trace``) collects what every task
        ran and the master's planning and dispatch time.

        Raises:
            OpError: a bad feed or a planning error (naming the node), the root cause of a
                task's failure (naming it), UnavailableError/AbortedError when a task is
                unreachable or restarted (retryable).
        """
        self.last_used = time.time()
        self.check_feeds(feeds)
        names = tuple(n for n, _ in feeds)
        if self.sampler.take() and trace is None:
            trace = self.new_trace()  # kept as last_trace only, the client did not ask for it
        t0 = time.perf_counter()
        misses = self.plans.misses
        reg = await self._plan(plan_key(self.version, names, fetches, targets), names, fetches,
                               targets)
        if trace is not None:
            what = "cache hit" if self.plans.misses == misses else \
                "prune, place, partition, register"
            trace.span(f"plan ({what})", f"plan ({what}) = Plan()", t0, time.perf_counter())
        values = [v for _, v in feeds]
        deadline = min(timeout or self.options.timeout_s or self.host.default_timeout,
                       MAX_STEP_TIMEOUT_S)
        try:
            results = await self.host.run_plan(reg, values, deadline, step_id, self.handle,
                                               trace)
        except errors.OpError as exc:
            self._counts["timed_out_steps" if errors.gave_up_waiting(exc) else "failed_steps"] += 1
            if exc.error_code in (errors.UNAVAILABLE, errors.ABORTED, errors.NOT_FOUND):
                self.invalidate_plans()  # registrations may be void after a restart
            raise
        reg.runs += 1
        self._counts["steps"] += 1
        self.step_times.record(time.perf_counter() - t0)
        if self._summary_nodes:
            for name, value in zip(fetches, results):
                if parse_tensor_name(name)[0] in self._summary_nodes:
                    self.scalars.log_fitting(summary_scalars(value), self._counts["steps"])
        if trace is not None:
            self.last_trace = trace
        return results

    def new_trace(self) -> StepTrace:
        """An empty trace for one step of this session (the master's row named after the task
        hosting the master, if any)."""
        return StepTrace(master_row(self.host.client_task))

    async def _plan(self, key: PlanKey, feeds: Sequence[str], fetches: Sequence[str],
                    targets: Sequence[str]) -> RegisteredPlan:
        """The registered plan of a step signature, built and registered on a cache miss."""
        reg = self.plans.get(key)
        if reg is None:
            async with self._plan_lock:
                reg = self.plans.get(key)
                if reg is None:
                    reg = await self._prepare(key, feeds, fetches, targets)
                    self.plans.misses += 1
                    return reg
        self.plans.hits += 1
        return reg

    async def _prepare(self, key: PlanKey, feeds: Sequence[str], fetches: Sequence[str],
                       targets: Sequence[str]) -> RegisteredPlan:
        host = self.host
        devices = host.cluster.devices(self.options.device_filters)
        if not devices:
            raise errors.InvalidArgumentError(
                f"No device matches the session's device_filters {list(self.options.device_filters)}")
        default = default_device(devices, self.options.client_task, host.client_task)
        placed = place_graph(
            self.nodes, self.specs, feeds, fetches, targets, devices, default,
            PlanOptions(allow_soft_placement=self.options.allow_soft_placement,
                        do_cse=self.options.do_cse,
                        do_constant_folding=self.options.do_constant_folding,
                        wire=self.wire))
        if self.options.log_device_placement:
            for name, dev in placed.placement.devices.items():
                host.log(f"{name}: {dev}")
        # the Send/Recv pairs carry their sender's incarnation: learn those first
        await host.ensure_incarnations(placed.tasks())
        if placed.wire is not None and (placed.wire.codec is not None
                                        or placed.wire.delta is not None):
            # the hosts are known now (the tasks' status replies): a codec skips same-host edges
            placed = replace(placed, wire=placed.wire.with_hosts(
                {t: host.cluster.task(t).host_id for t in placed.tasks()}))
        plan = partition_plan(placed, lambda task: host.cluster.task(task).incarnation)
        incarnations = {t: host.cluster.task(t).incarnation for t in plan.partitions}
        handles = await host.register_partitions(self.handle, plan.partitions, incarnations)
        self._counts["registrations"] += len(handles)
        self.last_plan = plan
        reg = RegisteredPlan.of(plan, handles, incarnations)
        self.plans.put(key, reg)
        return reg

    def invalidate_plans(self, task: str | None = None) -> None:
        """Forget registered plans (those touching ``task``, or all)."""
        self.plans.invalidate(task)

    async def close(self) -> None:
        """Drop the session's partitions from every task they were registered on."""
        tasks = self.plans.tasks()
        self.plans.clear()
        await self.host.deregister_session(self.handle, tasks)

    def describe(self) -> dict[str, Any]:
        return {"session": self.handle, "graph_version": self.version, "nodes": len(self.nodes),
                "plans": len(self.plans), **self.stats}


def default_device(devices: Sequence[str], *preferred_tasks: str) -> str:
    """Where unconstrained work goes: the CPU of the first preferred task (the client's task,
    then the master's host task) among ``devices``, else of the first worker, else the first
    device."""
    for candidate in preferred_tasks:
        if candidate:
            want = DeviceSpec.from_string(candidate)
            for d in devices:
                ds = DeviceSpec.from_string(d)
                if want.matches(ds) and ds.device_type == "CPU":
                    return d
    for d in devices:
        ds = DeviceSpec.from_string(d)
        if ds.job == "worker" and ds.task == 0 and ds.device_type == "CPU":
            return d
    return devices[0]
