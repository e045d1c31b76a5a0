"""The worker core: what a worker or parameter-server task does, without the network.

``WorkerCore`` owns the task's devices and resources (variables live here, shared by name by every
graph registered on the task), a graph manager (registered partitions by handle) and the rendezvous
of live steps. The transport layer wraps it in a gRPC servicer and gives it a ``RemoteRecv`` to fetch
tensors from peer tasks.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.device import task_of
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.rendezvous_key import parse_key
from tensorgrid.runtime.executor import LocalDevice, StepContext
from tensorgrid.runtime.graph_manager import GraphManager
from tensorgrid.runtime.metrics import TaskMetrics
from tensorgrid.runtime.rendezvous import Rendezvous, RendezvousMgr
from tensorgrid.runtime.resources import ResourceMgr
from tensorgrid.runtime.step_stats import device_step_stats, tensor_bytes

log = logging.getLogger("tensorgrid.worker")


class RemoteRecv(Protocol):
    """Fetches a tensor that a peer task sends in a step (implemented by the transport)."""

    async def recv(self, src_task: str, step_id: int, key: str) -> Any: ...


def new_incarnation() -> int:
    """A random, nonzero 63-bit number that tells this start of a task from any other."""
    return secrets.randbits(63) | 1


class StepRendezvous:
    """What _Send/_Recv kernels see: the step's local table, and the way to peers."""

    __slots__ = ("local", "step_id", "worker")

    def __init__(self, local: Any, worker: WorkerCore, step_id: int) -> None:
        self.local = local
        self.worker = worker
        self.step_id = step_id

    def send(self, key: str, value: Any) -> None:
        self.local.send(key, value)

    async def recv(self, key: str, src_task: str) -> Any:
        if src_task == self.worker.task:
            return await self.local.recv(key)
        remote = self.worker.remote
        if remote is None:
            raise errors.UnavailableError(
                f"Task {self.worker.task} cannot reach {src_task}: no transport configured")
        t0 = time.perf_counter()
        value = await remote.recv(src_task, self.step_id, key)
        self.worker.metrics.received(src_task, tensor_bytes(value), time.perf_counter() - t0)
        return value


class WorkerCore:
    """One task's runtime: registered graphs, resources, rendezvous.

    Args:
        task: this task's name, '/job:J/replica:0/task:T'.
        devices: its local devices by full name (CPU:0 first).
        remote: how to receive from peers (None for a single task).
        step_memory_bytes: most bytes of tensors one step may keep live here (None: no budget);
            a step over it fails with ResourceExhaustedError naming the node.
    """

    def __init__(self, task: str, devices: Mapping[str, LocalDevice] | None = None,
                 remote: RemoteRecv | None = None, rendezvous_ttl: float = 60.0,
                 step_memory_bytes: int | None = None) -> None:
        self.task = task
        if devices is None:
            cpu = f"{task}/device:CPU:0"
            devices = {cpu: LocalDevice(cpu, "CPU", np, ResourceMgr())}
        self.devices = dict(devices)
        self.default_device = next(iter(self.devices))
        self.remote = remote
        self.incarnation = new_incarnation()
        self.started = time.time()
        self.graphs = GraphManager(task, self.devices, self.default_device, step_memory_bytes)
        self.rendezvous = RendezvousMgr(ttl=rendezvous_ttl)
        self.cluster: dict[str, str] = {}  # task name -> address, as the master last told us
        # masters that registered graphs here (address -> time of the last registration): the
        # task's heartbeats go to them
        self.masters: dict[str, float] = {}
        self.steps_run = 0
        self.steps_failed = 0
        self._running: dict[int, asyncio.Task[Any]] = {}
        self.metrics = TaskMetrics(task, self.graphs, lambda: len(self.rendezvous))
        self.metrics.watch_bytes("tensorgrid_task_rendezvous_bytes",
                                 "Bytes of tensors sent by the task's steps and not received yet",
                                 self.rendezvous.pending_bytes)

    # ------------------------------------------------------------------ graphs
    def register_graph(self, nodes: Sequence[NodeDef], session: str = "",
                       cluster: Mapping[str, str] | None = None, master_address: str = "",
                       expected_incarnation: int = 0) -> str:
        """Build a partition's executor and return its handle.

        ``expected_incarnation`` (nonzero) is the incarnation the master planned for: a task that
        restarted since refuses the registration, so the master learns it and plans again.

        Raises:
            AbortedError: this task is not the incarnation the master expected.
            InvalidArgumentError / NotFoundError: the partition is malformed, names a device
                not on this task, or uses an op without a kernel here (names the node).
        """
        if expected_incarnation and expected_incarnation != self.incarnation:
            raise errors.AbortedError(
                f"Task {self.task} restarted: incarnation is {self.incarnation:x}, the master "
                f"expected {expected_incarnation:x}")
        handle = self.graphs.register(nodes, session)
        if cluster:
            self.learn_addresses(cluster)
        if master_address:
            self.masters[master_address] = time.time()
        return handle

    def learn_addresses(self, cluster: Mapping[str, str]) -> None:
        """Add the addresses of tasks this task does not know yet. A known task's address never
        changes: this task's configuration (its cluster spec) says where its peers are, so a
        registration cannot re-point the tensors it pulls to an address of the caller's
        choosing."""
        for task, address in cluster.items():
            known = self.cluster.get(task)
            if known is None:
                self.cluster[task] = address
            elif known != address:
                log.warning("task %s: a registration says %s is at %s; keeping %s", self.task,
                            task, address, known)

    def deregister_graph(self, handle: str = "", session: str = "") -> int:
        """Drop one registered partition by handle, or (no handle) every partition of
        ``session``; returns how many went.

        Raises:
            NotFoundError: ``handle`` is not registered here.
        """
        if handle:
            self.graphs.deregister(handle)
            return 1
        return self.graphs.deregister_session(session) if session else 0

    # ------------------------------------------------------------------ steps
    async def run_graph(self, handle: str, step_id: int, args: Sequence[Any],
                        timeout: float | None = None, stats: list[Any] | None = None
                        ) -> list[Any]:
        """Run one step of a registered partition and return its ``_Retval`` values.

        On failure the step's rendezvous is aborted, so peers waiting on this task fail too.
        ``stats`` (a list) traces the step: the ``DeviceStepStats`` of each device of the task
        that ran a node are appended to it when the step succeeds.

        Raises:
            AbortedError: unknown handle (the task restarted, or the session's partitions were
                dropped): the caller recreates its session and retries.
            DeadlineExceededError: ``timeout`` passed.
            OpError: what a kernel raised (naming the node), or the step's abort error.
        """
        graph = self.graphs.get(handle)
        if graph is None:
            raise errors.AbortedError(
                f"Graph handle {handle} is not registered on {self.task} (was the task restarted? "
                f"its incarnation is now {self.incarnation:x}); recreate the session and retry")
        rdv = self.rendezvous.find_or_create(step_id)
        if rdv.aborted is not None:
            raise rdv.aborted
        step = StepContext(step_id=step_id, args=args, rets=[None] * graph.exe.num_rets,
                           rendezvous=StepRendezvous(rdv, self, step_id),
                           trace=None if stats is None else [])
        graph.runs += 1
        t0 = time.perf_counter()
        try:
            if not graph.exe.has_async:
                rets = graph.exe.run_sync(step)
            else:
                task = asyncio.ensure_future(graph.exe.run_async(step))
                self._running[step_id] = task
                try:
                    rets = await asyncio.wait_for(task, timeout) if timeout else await task
                except TimeoutError:
                    raise errors.DeadlineExceededError(
                        f"Step {step_id} on {self.task} did not finish within {timeout:.3g}s") \
                        from None
                except asyncio.CancelledError:
                    err = rdv.aborted or errors.CancelledError(
                        f"Step {step_id} was cancelled", derived=True)
                    raise err from None
                finally:
                    self._running.pop(step_id, None)
        except errors.OpError as exc:
            self.steps_failed += 1
            self.metrics.step_done(time.perf_counter() - t0, False)
            self.rendezvous.abort(step_id, _as_abort(exc, self.task))
            raise
        finally:
            self.rendezvous.step_done(step_id)
        self.steps_run += 1
        graph.steps_ok += 1
        self.metrics.step_done(time.perf_counter() - t0, True)
        if stats is not None:
            stats.extend(device_step_stats(graph.exe, step.trace or ()))
            self.metrics.traced(graph.exe, step.trace or ())
        return rets

    def hold_result(self, step_id: int, key: str, value: Any) -> None:
        """Keep a step's result here until the master takes it with ``recv_tensor`` (big results
        travel over the data plane instead of inside the RunGraph answer)."""
        rdv = self.rendezvous.find_or_create(step_id)
        rdv.send(key, value)
        rdv.done = True  # taking the last held value drops the rendezvous

    async def recv_tensor(self, step_id: int, key: str) -> Any:
        """Take a value this task sends in a step, waiting until it is produced (RecvTensor).

        Raises:
            AbortedError: the key names another incarnation of this task (it restarted), or the
                step was aborted.
        """
        self._check_key(key)
        rdv = self.rendezvous.find_or_create(step_id)
        value = await rdv.recv(key)
        self.rendezvous.consumed(step_id)
        return value

    def recv_tensor_future(self, step_id: int, key: str) -> tuple[Rendezvous, asyncio.Future[Any]]:
        """``recv_tensor`` without a task of its own: the step's rendezvous and a future of the
        value (done already when it was sent). Call ``rendezvous.consumed(step_id)`` once the
        value is taken, or ``Rendezvous.forget`` to give up on it.

        Raises:
            as ``recv_tensor``.
        """
        self._check_key(key)
        rdv = self.rendezvous.find_or_create(step_id)
        return rdv, rdv.recv_future(key)

    def _check_key(self, key: str) -> None:
        parsed = parse_key(key)
        if task_of(parsed.send_device) != self.task:
            raise errors.InvalidArgumentError(
                f"Rendezvous key {key} names sender {parsed.send_device}, not on task {self.task}")
        if parsed.incarnation and parsed.incarnation != self.incarnation:
            raise errors.AbortedError(
                f"Task {self.task} was restarted: the step expected incarnation "
                f"{parsed.incarnation:x}, this is {self.incarnation:x}; recreate the session")

    def abort_step(self, step_id: int, message: str = "",
                   code: int = errors.ABORTED) -> None:
        """Fail the step here: pending receives and running kernels stop with the given error."""
        # an abort always follows another failure (elsewhere, or the step's deadline)
        err = errors.make_error(code, message or f"Step {step_id} was aborted", derived=True)
        self.rendezvous.abort(step_id, err)
        task = self._running.get(step_id)
        if task is not None:
            task.cancel()

    def abort_all(self, message: str) -> None:
        self.rendezvous.abort_all(errors.AbortedError(message))
        for task in list(self._running.values()):
            task.cancel()

    # ------------------------------------------------------------------ state
    def reset(self, containers: Sequence[str] | None = None) -> None:
        """Drop variables (of the given containers, or all) on every device of the task."""
        for dev in self.devices.values():
            dev.resources.reset(list(containers) if containers else None)

    def status(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "incarnation": self.incarnation,
            "devices": [{"name": d.name, "type": d.device_type} for d in self.devices.values()],
            "graphs": len(self.graphs),
            "live_steps": len(self.rendezvous),
            "steps_run": self.steps_run,
            "steps_failed": self.steps_failed,
            "uptime_s": time.time() - self.started,
        }


def _as_abort(exc: errors.OpError, task: str) -> errors.OpError:
    """What peers of a failed step see: the same code, saying where it failed."""
    if exc.error_code in (errors.ABORTED, errors.CANCELLED, errors.UNAVAILABLE):
        return exc
    return errors.AbortedError(f"Step aborted: {task} failed: {exc.message}",
                               node_name=exc.node_name, op_type=exc.op_type, device=exc.device,
                               derived=True)
