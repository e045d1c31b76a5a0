"""Cluster health: the master polls every task's status; each answer is a heartbeat.

A task silent for longer than the heartbeat timeout is dead: the steps that involve it fail at
once with a retryable ``UnavailableError`` instead of waiting for their deadline. A task that
answers with a new incarnation restarted: its registrations are void and its live steps are
aborted (the core's ``heartbeat`` does both).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tensorgrid.core import errors
from tensorgrid.master.core import MasterCore

log = logging.getLogger("tensorgrid.master")


class HealthMonitor:
    """Polls the tasks of a master's cluster.

    Args:
        core: the master.
        interval: seconds between polls.
        timeout: deadline of one status call (at most ``interval``).
    """

    def __init__(self, core: MasterCore, interval: float, timeout: float) -> None:
        self.core = core
        self.interval = interval
        self.timeout = min(timeout, interval)
        self._task: asyncio.Task[None] | None = None
        self._states: dict[str, str] = {}

    def start(self) -> None:
        """Start polling on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="health-monitor")

    async def stop(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                await self.poll_once()
            except Exception:  # the monitor must outlive any one failure
                log.exception("health poll failed")
            await asyncio.sleep(self.interval)

    async def poll_once(self) -> None:
        """Ask every task for its status once, then fail the steps of tasks found dead."""
        cluster = self.core.cluster
        await asyncio.gather(*(self._poll(t) for t in list(cluster.tasks)))
        for task in cluster.tasks:
            state = cluster.state(task)
            if state != self._states.get(task):
                log.info("task %s is %s", task, state)
                self._states[task] = state
            if state == "dead":
                age = cluster.heartbeat_age(task) or 0.0
                self.core.fail_steps_on(task, errors.UnavailableError(
                    f"Task {task} ({cluster.task(task).address}) has not answered for {age:.1f}s "
                    f"(heartbeat timeout {cluster.heartbeat_timeout:g}s)"))

    async def _poll(self, task: str) -> None:
        try:
            status = await self.core.client(task).get_status(self.timeout)
        except errors.OpError:
            return  # silence: the task's heartbeat age grows
        incarnation = int(status["incarnation"])
        host_id = status.get("host_id", "")
        self.core.heartbeat(task, incarnation, host_id=host_id)
        device_types = [d["type"] for d in status.get("devices", [])]
        if device_types:
            self.core.cluster.observe(task, incarnation, host_id, device_types)
