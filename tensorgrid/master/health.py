"""Cluster health: heartbeats pushed by tasks, and polls of the tasks that push none.

Every ``interval`` the monitor asks each task that has not sent a heartbeat within that interval for
its status; an answer counts as a heartbeat. A task is dead when it has been silent for the
cluster's heartbeat timeout, or at once after ``unreachable_after`` polls in a row are refused (its
process is gone: waiting out the timeout would only delay the error). The steps that involve a dead
task fail with a retryable ``UnavailableError`` naming it; a task that answers with a new incarnation
restarted (the core's ``heartbeat`` voids its registrations and aborts its live steps).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tensorgrid.core import errors
from tensorgrid.master.core import MasterCore

log = logging.getLogger("tensorgrid.master")


class HealthMonitor:
    """Watches the tasks of a master's cluster.

    Args:
        core: the master.
        interval: seconds between rounds (the heartbeat period).
        timeout: deadline of one status poll (at most ``interval``).
        unreachable_after: refused polls in a row after which a task is dead without waiting for
            the heartbeat timeout.
    """

    def __init__(self, core: MasterCore, interval: float = 0.5, timeout: float | None = None,
                 unreachable_after: int = 2) -> None:
        self.core = core
        self.interval = interval
        self.timeout = min(timeout or interval, interval)
        self.unreachable_after = unreachable_after
        self._task: asyncio.Task[None] | None = None
        self._states: dict[str, str] = {}
        self._refused: dict[str, int] = {}

    def start(self) -> None:
        """Start watching on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="health-monitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception:
                log.exception("health round failed")
            await asyncio.sleep(self.interval)

    async def poll_once(self) -> None:
        """One round: poll the quiet tasks, then fail the steps of the dead ones."""
        cluster = self.core.cluster
        quiet = [t for t in cluster.tasks
                 if (age := cluster.heartbeat_age(t)) is None or age >= self.interval]
        for task in cluster.tasks:
            if task not in quiet:  # heard from since the last round: no refusal "in a row"
                self._refused.pop(task, None)
        await asyncio.gather(*(self._poll(t) for t in quiet))
        for task in cluster.tasks:
            state = cluster.state(task)
            if state != self._states.get(task):
                log.info("task %s is %s", task, state)
                self._states[task] = state
            if state == "dead":
                self.core.fail_steps_on(task, errors.UnavailableError(
                    f"Task {task} ({cluster.task(task).address}) is dead: "
                    f"{cluster.death_reason(task)}"))

    async def _poll(self, task: str) -> None:
        try:
            status = await self.core.client(task).get_status(self.timeout)
        except errors.UnavailableError:
            n = self._refused[task] = self._refused.get(task, 0) + 1
            if n >= self.unreachable_after:
                self.core.cluster.mark_unreachable(task)
            return
        except errors.OpError:
            return  # a slow answer is silence: the heartbeat age grows
        self._refused.pop(task, None)
        self.core.heartbeat(task, int(status["incarnation"]), host_id=status.get("host_id", ""))
        device_types = [d["type"] for d in status.get("devices", [])]
        if device_types:
            self.core.cluster.observe(task, int(status["incarnation"]), device_types=device_types)
