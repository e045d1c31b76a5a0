"""The master: sessions over a cluster, and the tasks they run on.

``MasterCore`` holds the cluster state, the sessions and the graphs submitted for later use. It talks
to tasks only through ``TaskClient`` objects (gRPC, or direct calls to a task in the same process),
so it runs unchanged inside the HTTP master service, inside a ``train.Server``, and in tests. Each
session (``master_session``) plans its steps; the core registers their partitions and runs them
with the step driver (``step.run_step``). A task that the health monitor declares dead fails its
live steps at once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from tensorgrid.core import errors, serde
from tensorgrid.core.ir import GraphDef, NodeDef
from tensorgrid.master.cluster import ClusterState, TaskState
from tensorgrid.master.cluster_health import (
    ClusterHealth,
    DropPlans,
    Event,
    FailSteps,
    ForgetClient,
    Instruction,
    StateChanged,
    TaskAnswered,
)
from tensorgrid.master.master_session import MasterSession, SessionOptions
from tensorgrid.master.plan_cache import RegisteredPlan
from tensorgrid.master.quotas import ClientCounts
from tensorgrid.master.step import LiveSteps, StepTrace, new_step_id, run_step
from tensorgrid.master.task_client import TaskClient

log = logging.getLogger("tensorgrid.master")

# a session's graph of more nodes than this is checked in a worker thread, off the event loop
LARGE_GRAPH_NODES = 10_000

@dataclass(frozen=True)
class Limits:
    """Bounds checked on submissions before anything is allocated."""

    max_nodes: int = 200_000
    max_graph_bytes: int = 512 * 1024 * 1024
    max_request_bytes: int = 1024 * 1024 * 1024
    max_sessions: int = 1000
    # largest tensor a graph may declare with a fully known shape (None: no check)
    max_declared_tensor_bytes: int | None = None
    max_live_steps: int = 10_000
    # what one named client may hold of the two caps above (see ``quotas``)
    max_sessions_per_client: int = 1000
    max_live_steps_per_client: int = 10_000


class SessionStore(Protocol):
    """Where a master keeps its sessions so that they outlive it (the HTTP master: Redis)."""

    async def put(self, handle: str, record: dict[str, Any]) -> None: ...

    async def get(self, handle: str) -> dict[str, Any] | None: ...

    async def delete(self, handle: str) -> None: ...

    async def touch(self, handles: Sequence[str]) -> None:
        """The sessions were used: they stay kept for another idle period."""


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
        self.health = ClusterHealth(cluster)
        self._client_for = client_for
        self._clients: dict[str, TaskClient] = {}
        self.default_timeout = default_timeout
        self.rpc_timeout = rpc_timeout
        self.startup_wait = 5.0
        self.client_task = client_task
        self.limits = limits
        self.max_declared_tensor_bytes = limits.max_declared_tensor_bytes
        self.trace_every_n_steps = 0  # sessions trace one step in N by themselves (0: never)
        self.sessions: dict[str, MasterSession] = {}
        self.graphs: dict[str, tuple[NodeDef, ...]] = {}
        self.incarnation = secrets.randbits(63) | 1
        self.started = time.time()
        self.live = LiveSteps()
        # runs a large graph's checks off the event loop (the HTTP master pauses the garbage
        # collector meanwhile, see services/master/parsing.py)
        self.run_large: Callable[[Callable[[], Any]], Awaitable[Any]] = asyncio.to_thread
        # the client that opened each session, and what each client holds (``quotas``)
        self.session_clients: dict[str, str] = {}
        self.client_sessions = ClientCounts("open sessions", "max_sessions_per_client",
                                            limits.max_sessions_per_client)
        self.client_steps = ClientCounts("steps in flight", "max_live_steps_per_client",
                                         limits.max_live_steps_per_client)
        self._log = logger or (lambda msg: print(msg, file=sys.stderr))
        self.counters = {"steps": 0, "failed_steps": 0, "timed_out_steps": 0,
                         "aborted_by_health": 0, "sessions_restored": 0}
        self.store: SessionStore | None = None
        self._touched = 0.0  # when the store last heard which sessions were used
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

    # ------------------------------------------------------------------ sessions
    async def create_session(self, nodes: Sequence[NodeDef],
                             options: SessionOptions = SessionOptions(),
                             client: str = "") -> MasterSession:
        """Validate the graph and open a session on it for ``client`` ("" unknown: only the
        global cap applies).

        Raises:
            InvalidArgumentError / NotFoundError: the graph is malformed (names the node).
            ResourceExhaustedError: too many nodes or sessions. ClientQuotaError (a
                ResourceExhaustedError): ``client`` holds ``max_sessions_per_client`` already.
        """
        if len(nodes) > self.limits.max_nodes:
            raise errors.ResourceExhaustedError(
                f"Graph has {len(nodes)} nodes; the limit is {self.limits.max_nodes}")
        self._check_session_room(client)
        handle = secrets.token_hex(8)
        if len(nodes) > LARGE_GRAPH_NODES:
            session = await self.run_large(lambda: MasterSession(handle, self, nodes, options))
            self._check_session_room(client)  # others may have opened sessions meanwhile
        else:
            session = MasterSession(handle, self, nodes, options)
        self._add_session(session, client)
        await self._persist(session)
        return session

    def _add_session(self, session: MasterSession, client: str) -> None:
        self.sessions[session.handle] = session
        self.session_clients[session.handle] = client
        self.client_sessions.take(client)

    def _check_session_room(self, client: str) -> None:
        self.client_sessions.check(client)
        if len(self.sessions) >= self.limits.max_sessions:
            raise errors.ResourceExhaustedError(
                f"Too many open sessions ({len(self.sessions)}, max_sessions "
                f"{self.limits.max_sessions}); close some first, or wait for idle ones to expire")

    async def expire_idle_sessions(
            self, idle_s: float, close: Callable[[str], Awaitable[None]] | None = None
    ) -> list[str]:
        """Close the sessions with no step in flight that nobody used for ``idle_s`` seconds
        (in memory and in the session store), and tell the store the others were used, so it
        keeps them as long; returns the handles closed. ``close`` closes one (default:
        ``close_session``)."""
        now = time.time()
        busy = self.live.sessions()
        idle = [h for h, s in self.sessions.items()
                if h not in busy and now - s.last_used >= idle_s]
        for handle in idle:
            self.log(f"session {handle} closed after {idle_s:g} s idle")
            await (close or self.close_session)(handle)
        used = [h for h, s in self.sessions.items() if s.last_used > self._touched]
        self._touched = now
        if used and self.store is not None:
            try:
                await self.store.touch(used)
            except Exception as exc:  # noqa: BLE001 - the sessions work; the store may lag
                self.log(f"could not refresh sessions in the session store: {exc}")
        return idle

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
        client = str(record.get("client", ""))
        self._check_session_room(client)  # a restored session counts like a new one
        graph = serde.graph_from_bytes(record["graph"])
        s = MasterSession(handle, self, graph.nodes, SessionOptions(**record["options"]))
        s.version = int(record["version"])
        s.created = float(record.get("created", s.created))
        if handle in self.sessions:  # restored meanwhile by a concurrent request
            return self.sessions[handle]
        self._add_session(s, client)
        self.counters["sessions_restored"] += 1
        self.log(f"session {handle} restored from the session store (graph version {s.version})")
        return self.sessions[handle]

    async def extend_session(self, handle: str, nodes: Sequence[NodeDef],
                             current_version: int) -> int:
        """Grow a session's graph (see ``MasterSession.extend``) and keep the store in step."""
        s = await self.find_session(handle)
        s.last_used = time.time()
        version = s.extend(nodes, current_version)
        await self._persist(s)
        return version

    async def _persist(self, s: MasterSession) -> None:
        if self.store is None:
            return
        options = asdict(s.options)
        options["device_filters"] = list(options["device_filters"])
        record = {"graph": serde.graph_to_bytes(GraphDef(tuple(s.nodes))), "options": options,
                  "version": s.version, "created": s.created,
                  "client": self.session_clients.get(s.handle, "")}
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
        self.client_sessions.give_back(self.session_clients.pop(handle, ""))
        if self.store is not None:
            try:
                await self.store.delete(handle)
            except Exception as exc:  # noqa: BLE001 - closing must not fail on the store
                self.log(f"could not drop session {handle} from the session store: {exc}")
        # its running steps stop now (a step blocked in a queue would otherwise wait out its
        # deadline); their tasks are told to abort them
        self.live.fail_session(handle, errors.CancelledError(
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
        self.deliver(TaskAnswered(task, int(status["incarnation"]), host_id=status.get("host_id", ""),
                                  device_types=tuple(d["type"] for d in status.get("devices", []))))
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

    async def ensure_incarnations(self, tasks: Collection[str]) -> None:
        """Learn the incarnation of every task of ``tasks`` not heard from yet."""
        unknown = [t for t in tasks if not self.cluster.task(t).incarnation]
        if unknown:
            await asyncio.gather(*(self.refresh_task(t) for t in unknown))

    def heartbeat(self, task: str, incarnation: int, address: str = "", host_id: str = "") -> None:
        """A task says it is alive. A new incarnation means it restarted: what was registered on
        its predecessor is gone, and steps that involved it fail now instead of waiting."""
        self.deliver(TaskAnswered(task, incarnation, address, host_id))

    def deliver(self, *events: Event) -> list[Instruction]:
        """Feed health events to the cluster's health (``ClusterHealth.handle``) and carry out
        what it says; returns every instruction (the monitor carries out the polls)."""
        instructions = self.health.handle(*events)
        for i in instructions:
            if isinstance(i, FailSteps):
                self.fail_steps_on(i.task, i.error)
            elif isinstance(i, DropPlans):
                for s in self.sessions.values():
                    s.invalidate_plans(i.task)
            elif isinstance(i, ForgetClient):
                self.forget_client(i.task)
            elif isinstance(i, StateChanged):
                log.info("task %s is %s", i.task, i.state)
        return instructions

    async def register_partitions(self, session: str, parts: Mapping[str, Sequence[NodeDef]],
                                  incarnations: Mapping[str, int]) -> dict[str, str]:
        """Register each task's partition of a session, expecting the given incarnations;
        returns task -> graph handle.

        Raises:
            AbortedError: a task restarted since it was planned for (its new incarnation is
                learned, so the next plan uses it). UnavailableError: a task is unreachable.
        """
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
    async def run_plan(self, reg: RegisteredPlan, values: Sequence[Any], timeout: float,
                       step_id: int | None = None, session: str = "",
                       trace: StepTrace | None = None) -> list[Any]:
        """Run one step of a registered plan on all its tasks (``step.run_step``); the values of
        its fetches. ``step_id`` names the step (None: a fresh random id); ``trace`` collects
        the step's stats.

        Raises:
            OpError: the root cause of the first failure (the other tasks are aborted).
        """
        if len(self.live) >= self.limits.max_live_steps:
            raise errors.ResourceExhaustedError(
                f"{len(self.live)} steps are in flight on this master (max_live_steps "
                f"{self.limits.max_live_steps}); retry when some have finished")
        owner = self.session_clients.get(session, "")
        self.client_steps.check(owner)
        clients = {t: self.client(t) for t in reg.handles}
        self.counters["steps"] += 1
        self.client_steps.take(owner)
        try:
            return await run_step(reg, clients, values, timeout, step_id=step_id or new_step_id(),
                                  live=self.live, session=session,
                                  is_dead=lambda t: self.cluster.state(t) == "dead",
                                  trace=trace)
        except errors.OpError as exc:
            self.counters["timed_out_steps" if errors.gave_up_waiting(exc)
                          else "failed_steps"] += 1
            raise
        finally:
            self.client_steps.give_back(owner)

    def fail_steps_on(self, task: str, error: errors.OpError) -> int:
        """Fail every live step that involves ``task`` (the health monitor found it dead)."""
        n = self.live.fail_task(task, error)
        self.counters["aborted_by_health"] += n
        return n

    def live_steps(self) -> int:
        return len(self.live)

    def describe(self) -> dict[str, Any]:
        return {
            "incarnation": f"{self.incarnation:x}",
            "uptime_s": round(time.time() - self.started, 3),
            "sessions": len(self.sessions),
            "live_steps": len(self.live),
            **self.counters,
            "plan_cache_hits": sum(s.stats["plan_cache_hits"] for s in self.sessions.values()),
            "plan_cache_misses": sum(s.stats["plan_cache_misses"] for s in self.sessions.values()),
        }

