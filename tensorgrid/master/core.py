"""The master: sessions over a cluster, and the driver of every step.

``MasterCore`` holds the cluster state, the sessions and the graphs submitted for later use. It talks
to tasks only through ``TaskClient`` objects (gRPC, or direct calls to a task in the same process),
so it runs unchanged inside the HTTP master service, inside a ``train.Server``, and in tests.

A step runs every partition at once. The first failure aborts the step on every other task (their
pending receives fail at once instead of waiting), and the error that caused it is raised, naming the
task. A task that the health monitor declares dead fails its live steps the same way.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tensorgrid.core import errors
from tensorgrid.core.device import DeviceSpec
from tensorgrid.core.ir import NodeDef
from tensorgrid.master.cluster import ClusterState, TaskState
from tensorgrid.master.session import (
    MasterSession,
    RegisteredPlan,
    SessionOptions,
    TaskClient,
    gave_up_waiting,
    new_step_id,
)


@dataclass(frozen=True)
class Limits:
    """Bounds checked on submissions before anything is allocated."""

    max_nodes: int = 200_000
    max_graph_bytes: int = 512 * 1024 * 1024
    max_request_bytes: int = 1024 * 1024 * 1024
    max_sessions: int = 1000


class SessionStore(Protocol):
    """Where a master keeps its sessions so that they outlive it (the HTTP master: Redis)."""

    async def put(self, handle: str, record: dict[str, Any]) -> None: ...

    async def get(self, handle: str) -> dict[str, Any] | None: ...

    async def delete(self, handle: str) -> None: ...


class _LiveStep:
    __slots__ = ("failure", "session", "tasks")

    def __init__(self, tasks: set[str], failure: asyncio.Future[None], session: str = "") -> None:
        self.session = session
        self.tasks = tasks
        self.failure = failure


class MasterCore:
    """Sessions and steps over a cluster.

    Args:
        cluster: the cluster's state (tasks, incarnations, health).
        client_for: returns the TaskClient of a task.
        default_timeout: the deadline of a step when the client sets none (seconds).
        client_task: where unconstrained work goes by default (e.g. the hosting worker).
    """

    def __init__(self, cluster: ClusterState, client_for: Callable[[TaskState], TaskClient], *,
                 default_timeout: float = 300.0, client_task: str = "",
                 limits: Limits = Limits(), logger: Callable[[str], None] | None = None,
                 rpc_timeout: float = 30.0) -> None:
        self.cluster = cluster
        self._client_for = client_for
        self._clients: dict[str, TaskClient] = {}
        self.default_timeout = default_timeout
        self.rpc_timeout = rpc_timeout
        self.startup_wait = 5.0
        self.client_task = client_task
        self.limits = limits
        self.sessions: dict[str, MasterSession] = {}
        self.graphs: dict[str, tuple[NodeDef, ...]] = {}
        self.incarnation = secrets.randbits(63) | 1
        self.started = time.time()
        self._live: dict[int, _LiveStep] = {}
        self._background: set[asyncio.Future[None]] = set()  # aborts sent to dead tasks
        self._log = logger or (lambda msg: print(msg, file=sys.stderr))
        self.counters = {"steps": 0, "failed_steps": 0, "timed_out_steps": 0,
                         "aborted_by_health": 0, "sessions_restored": 0}
        self.store: SessionStore | None = None
        # this master's MasterService address, when it serves one: tasks it registers graphs on
        # send their heartbeats there
        self.address = ""

    # ------------------------------------------------------------------ plumbing
    def client(self, task: str) -> TaskClient:
        c = self._clients.get(task)
        if c is None:
            c = self._clients[task] = self._client_for(self.cluster.task(task))
        return c

    def forget_client(self, task: str) -> None:
        client = self._clients.pop(task, None)
        close = getattr(client, "close", None)
        if close is not None:
            close()

    def close_clients(self) -> None:
        """Close every task client's streams (the master is stopping)."""
        for task in list(self._clients):
            self.forget_client(task)

    def log(self, message: str) -> None:
        self._log(message)

    def default_device(self, client_task: str, devices: Sequence[str]) -> str:
        """The CPU of the client's task, else of the first worker, else the first device."""
        for candidate in (client_task, self.client_task):
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

    def validate_devices(self, nodes: Sequence[NodeDef], soft: bool) -> None:
        """Every explicit device must name a job and task of the cluster (unless soft placement).

        Raises:
            InvalidArgumentError: naming the node and the device.
        """
        if soft:
            return
        for n in nodes:
            if not n.device:
                continue
            spec = DeviceSpec.from_string(n.device)
            if spec.job is not None and spec.job not in self.cluster.jobs:
                raise errors.InvalidArgumentError(
                    f"Node '{n.name}' requests device '{n.device}', but the cluster has no job "
                    f"'{spec.job}' (jobs: {', '.join(sorted(self.cluster.jobs))})",
                    node_name=n.name, op_type=n.op, device=n.device)
            if spec.job is not None and spec.task is not None and \
                    spec.task not in self.cluster.jobs[spec.job]:
                raise errors.InvalidArgumentError(
                    f"Node '{n.name}' requests device '{n.device}', but job '{spec.job}' has no "
                    f"task {spec.task} (tasks: {sorted(self.cluster.jobs[spec.job])})",
                    node_name=n.name, op_type=n.op, device=n.device)

    # ------------------------------------------------------------------ sessions
    async def create_session(self, nodes: Sequence[NodeDef],
                             options: SessionOptions = SessionOptions()) -> MasterSession:
        """Validate the graph and open a session on it.

        Raises:
            InvalidArgumentError / NotFoundError: the graph is malformed (names the node).
            ResourceExhaustedError: too many nodes or sessions.
        """
        if len(nodes) > self.limits.max_nodes:
            raise errors.ResourceExhaustedError(
                f"Graph has {len(nodes)} nodes; the limit is {self.limits.max_nodes}")
        if len(self.sessions) >= self.limits.max_sessions:
            raise errors.ResourceExhaustedError(
                f"Too many open sessions ({len(self.sessions)}); close some first")
        handle = secrets.token_hex(8)
        session = MasterSession(handle, self, nodes, options)
        self.sessions[handle] = session
        await self._persist(session)
        return session

    def session(self, handle: str) -> MasterSession:
        """A session held in memory (``find_session`` also looks in the session store).

        Raises:
            NotFoundError: no such open session.
        """
        s = self.sessions.get(handle)
        if s is None:
            raise errors.NotFoundError(f"Session {handle} is not open on this master "
                                       "(closed, or the master restarted)")
        return s

    async def find_session(self, handle: str) -> MasterSession:
        """The session of a handle, brought back from the session store when this master started
        after it was created (its plans are then rebuilt on first use).

        Raises:
            NotFoundError: no such session here or in the store.
        """
        s = self.sessions.get(handle)
        if s is not None:
            return s
        record = await self._load(handle)
        if record is None:
            return self.session(handle)  # raises NotFoundError
        from tensorgrid.core import serde

        graph = serde.graph_from_bytes(record["graph"])
        s = MasterSession(handle, self, graph.nodes, SessionOptions(**record["options"]))
        s.version = int(record["version"])
        s.created = float(record.get("created", s.created))
        self.sessions.setdefault(handle, s)
        self.counters["sessions_restored"] += 1
        self.log(f"session {handle} restored from the session store (graph version {s.version})")
        return self.sessions[handle]

    async def extend_session(self, handle: str, nodes: Sequence[NodeDef],
                             current_version: int) -> int:
        """Grow a session's graph (see ``MasterSession.extend``) and keep the store in step."""
        s = await self.find_session(handle)
        version = s.extend(nodes, current_version)
        await self._persist(s)
        return version

    async def _persist(self, s: MasterSession) -> None:
        if self.store is None:
            return
        from dataclasses import asdict

        from tensorgrid.core import serde
        from tensorgrid.core.ir import GraphDef

        options = asdict(s.options)
        options["device_filters"] = list(options["device_filters"])
        record = {"graph": serde.graph_to_bytes(GraphDef(tuple(s.nodes))), "options": options,
                  "version": s.version, "created": s.created}
        try:
            await self.store.put(s.handle, record)
        except Exception as exc:  # noqa: BLE001 - the session works; it only won't outlive us
            self.log(f"could not keep session {s.handle} in the session store: {exc}")

    async def _load(self, handle: str) -> dict[str, Any] | None:
        if self.store is None:
            return None
        try:
            return await self.store.get(handle)
        except Exception as exc:  # noqa: BLE001 - an unreachable store means "not found"
            self.log(f"session store unavailable while looking up {handle}: {exc}")
            return None

    async def close_session(self, handle: str) -> None:
        if handle not in self.sessions:
            await self.find_session(handle)
        s = self.sessions.pop(handle)
        if self.store is not None:
            try:
                await self.store.delete(handle)
            except Exception as exc:  # noqa: BLE001 - closing must not fail on the store
                self.log(f"could not drop session {handle} from the session store: {exc}")
        # its running steps stop now (a step blocked in a queue would otherwise wait out its
        # deadline); their tasks are told to abort them
        for live in self._live.values():
            if live.session == handle and not live.failure.done():
                live.failure.set_exception(errors.CancelledError(
                    f"Session {handle} was closed while the step ran"))
        await s.close()

    def list_devices(self) -> list[str]:
        return self.cluster.devices()

    async def reset(self, containers: Sequence[str] = ()) -> None:
        """Clear the variables of every task (the given containers, or all)."""
        await asyncio.gather(*(self.client(t).reset(list(containers), self.rpc_timeout)
                               for t in self.cluster.tasks))
        # registered partitions hold the variables their kernels found: plan again, so the next
        # step registers kernels that see the cleared containers
        for s in self.sessions.values():
            s.invalidate_plans()

    # ------------------------------------------------------------------ tasks
    async def refresh_task(self, task: str) -> dict[str, Any]:
        status = await self._while_starting(
            task, lambda: self.client(task).get_status(self.rpc_timeout))
        restarted = self.cluster.observe(task, int(status["incarnation"]),
                                         status.get("host_id", ""),
                                         [d["type"] for d in status.get("devices", [])] or None)
        if restarted:
            self.task_restarted(task)
        return status

    async def _while_starting(self, task: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """Run a control call, trying again for ``startup_wait`` seconds while the task refuses
        connections (it may still be starting: a cluster's processes come up in any order); a
        task the health monitor has found dead fails at once."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(self.startup_wait, self.rpc_timeout)
        delay = 0.05
        while True:
            self._refuse_dead(task)
            try:
                return await call()
            except errors.UnavailableError:
                if loop.time() + delay >= deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _refuse_dead(self, task: str) -> None:
        if self.cluster.state(task) == "dead":
            raise errors.UnavailableError(
                f"Task {task} ({self.cluster.task(task).address}) is dead: "
                f"{self.cluster.death_reason(task)}")

    async def ensure_incarnations(self, tasks: Mapping[str, Any] | Sequence[str]) -> None:
        unknown = [t for t in tasks if not self.cluster.task(t).incarnation]
        if unknown:
            await asyncio.gather(*(self.refresh_task(t) for t in unknown))

    def heartbeat(self, task: str, incarnation: int, address: str = "", host_id: str = "") -> None:
        """A task says it is alive. A new incarnation means it restarted: what was registered on
        its predecessor is gone, and steps that involved it fail now instead of waiting."""
        restarted = self.cluster.observe(task, incarnation, host_id, address=address or None)
        if restarted:
            self.task_restarted(task)
            self.forget_client(task)
            self.fail_steps_on(task, errors.AbortedError(
                f"Task {task} restarted (new incarnation {incarnation:x}); the step was lost"))

    def task_restarted(self, task: str) -> None:
        """A task came back with a new incarnation: its registrations are gone."""
        for s in self.sessions.values():
            s.invalidate_plans(task)

    async def register_partitions(self, session: str, parts: Mapping[str, Sequence[NodeDef]],
                                  incarnations: Mapping[str, int]) -> dict[str, str]:
        cluster = self.cluster.addresses()

        async def one(task: str) -> tuple[str, str]:
            try:
                handle, _inc = await self._while_starting(
                    task, lambda: self.client(task).register_graph(
                        parts[task], session, cluster, incarnations[task], self.rpc_timeout,
                        self.address))
            except errors.OpError as exc:
                if exc.error_code in (errors.ABORTED, errors.UNAVAILABLE):
                    # the task may have restarted: learn its new incarnation so the next
                    # attempt plans for it (the caller's session is recreated and retries)
                    try:
                        await self.refresh_task(task)
                    except errors.OpError:
                        pass
                raise
            return task, handle

        done = await asyncio.gather(*(one(t) for t in parts))
        return dict(done)

    async def deregister_session(self, session: str, tasks: set[str]) -> None:
        async def one(task: str) -> None:
            try:
                await self.client(task).deregister_graph("", session, self.rpc_timeout)
            except errors.OpError:
                pass  # a dead task holds nothing worth cleaning

        await asyncio.gather(*(one(t) for t in tasks))

    # ------------------------------------------------------------------ steps
    async def run_partitions(self, reg: RegisteredPlan, values: Sequence[Any],
                             timeout: float, step_id: int | None = None,
                             session: str = "") -> list[Any]:
        """Run one step of a registered plan on all its tasks; the results of its fetches.

        ``step_id`` names the step (None: a fresh random id).

        Raises:
            the root-cause OpError of the first failing task (others are aborted).
        """
        step_id = step_id or new_step_id()
        loop = asyncio.get_running_loop()
        calls: dict[asyncio.Future[Any], str] = {}
        # remote tasks first: a task of this process runs its partition up to its first wait
        # before the next call is even written, so it goes last
        order = sorted(reg.handles, key=lambda t: getattr(self.client(t), "in_process", False))
        for task in order:
            args = [values[i] for i in reg.args_by_task[task]]
            fut = asyncio.ensure_future(
                self.client(task).run_graph(reg.handles[task], step_id, args, timeout))
            calls[fut] = task
        failure: asyncio.Future[None] = loop.create_future()
        self._live[step_id] = _LiveStep(set(reg.handles), failure, session)
        self.counters["steps"] += 1
        try:
            results = await self._gather(step_id, calls, failure)
        except errors.OpError as exc:
            self.counters["timed_out_steps" if gave_up_waiting(exc) else "failed_steps"] += 1
            raise
        finally:
            self._live.pop(step_id, None)
            if not failure.done():
                failure.cancel()
        return [results[t][i] for t, i in reg.rets]

    async def _gather(self, step_id: int, calls: dict[asyncio.Future[Any], str],
                      failure: asyncio.Future[None]) -> dict[str, list[Any]]:
        results: dict[str, list[Any]] = {}
        pending: set[asyncio.Future[Any]] = set(calls) | {failure}
        first: errors.OpError | None = None
        while first is None and len(pending) > 1:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for d in done:
                exc = d.exception()
                if d is failure:
                    first = _root_cause(first, _op_error(exc, ""))  # type: ignore[arg-type]
                elif exc is not None:
                    first = _root_cause(first, _op_error(exc, calls[d]))
                else:
                    results[calls[d]] = d.result()
        if first is None:
            return results
        # abort the step wherever it may still run, then hear what the others say. A task the
        # health monitor declared dead cannot answer: its abort is not waited for and neither is
        # its call, so the error reaches the client now (a frozen task, whose connections stay
        # open, would otherwise hold it for both timeouts)
        dead = {t for t in calls.values() if self.cluster.state(t) == "dead"}
        if dead:
            later = asyncio.ensure_future(self._abort(step_id, dead, first))
            self._background.add(later)
            later.add_done_callback(self._background.discard)
        await self._abort(step_id, set(calls.values()) - dead, first)
        leftovers = []
        for p in pending:
            if p is failure:
                continue
            if calls[p] in dead:
                p.cancel()
            else:
                leftovers.append(p)
        if leftovers:
            done, still = await asyncio.wait(leftovers, timeout=2.0)
            for d in done:
                if d.exception() is not None:
                    first = _root_cause(first, _op_error(d.exception(), calls[d]))  # type: ignore[arg-type]
            for s in still:
                s.cancel()
        raise first

    async def _abort(self, step_id: int, tasks: set[str], cause: errors.OpError) -> None:
        message = f"Step {step_id} aborted: {cause.message}"

        async def one(task: str) -> None:
            try:
                await self.client(task).abort(step_id, errors.ABORTED, message, 2.0)
            except errors.OpError:
                pass  # a task we cannot reach has nothing to abort

        await asyncio.gather(*(one(t) for t in tasks))

    def fail_steps_on(self, task: str, error: errors.OpError) -> int:
        """Fail every live step that involves ``task`` (the health monitor found it dead)."""
        n = 0
        for live in self._live.values():
            if task in live.tasks and not live.failure.done():
                live.failure.set_exception(error)
                n += 1
        self.counters["aborted_by_health"] += n
        return n

    def live_steps(self) -> int:
        return len(self._live)

    def describe(self) -> dict[str, Any]:
        return {
            "incarnation": f"{self.incarnation:x}",
            "uptime_s": round(time.time() - self.started, 3),
            "sessions": len(self.sessions),
            "live_steps": len(self._live),
            **self.counters,
            "plan_cache_hits": sum(s.stats["plan_cache_hits"] for s in self.sessions.values()),
            "plan_cache_misses": sum(s.stats["plan_cache_misses"] for s in self.sessions.values()),
        }


def _op_error(exc: BaseException, task: str) -> errors.OpError:
    if isinstance(exc, errors.OpError):
        return exc
    if isinstance(exc, asyncio.CancelledError):
        return errors.CancelledError(f"Step on {task} was cancelled")
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return errors.DeadlineExceededError(f"Step on {task} timed out")
    return errors.InternalError(f"{task}: {type(exc).__name__}: {exc}")


def _is_secondary(err: errors.OpError) -> bool:
    """Errors that follow from another failure (an abort, a cancel) rather than cause one."""
    return err.error_code in (errors.ABORTED, errors.CANCELLED) and "aborted" in err.message.lower()


def _root_cause(current: errors.OpError | None, new: errors.OpError) -> errors.OpError:
    """Keep the first error, unless it only reports an abort and the new one says why."""
    if current is None or (_is_secondary(current) and not _is_secondary(new)):
        return new
    return current
