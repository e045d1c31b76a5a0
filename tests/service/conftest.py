"""Service-tier fixtures: real task servers and the HTTP master on free 127.0.0.1 ports.

Task servers run ``services.worker.main.serve`` on an event loop in a background thread (or as
``python -m services.worker`` subprocesses, see ``start_task_process``); the master runs under
``uvicorn.Server`` in a background thread. Every wait is bounded, and every server is stopped in
the fixture's teardown.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
# The venv's editable install may predate services/: make the checkout's copy importable.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from services.master.cli import tls_options  # noqa: E402
from services.master.main import create_app  # noqa: E402
from services.worker.main import serve  # noqa: E402
from tensorgrid.client.train.server import free_port  # noqa: E402
from tensorgrid.settings import MasterSettings as Settings  # noqa: E402
from tensorgrid.settings import TaskSettings  # noqa: E402

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


class LoopThread:
    """An asyncio event loop in a daemon thread, for servers that tests drive synchronously."""

    def __init__(self, name: str = "service-test-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = START_TIMEOUT) -> Any:
        """Run a coroutine on the loop and wait (bounded) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(STOP_TIMEOUT)
        if not self.thread.is_alive():
            self.loop.close()


def task_settings(task: str, address: str, spec: dict[str, Any], **overrides: Any) -> TaskSettings:
    """Settings for the task ``/job:J/task:T`` of ``spec`` listening on ``address``."""
    job, index = task.removeprefix("/job:").split("/task:")
    values: dict[str, Any] = {"cluster": spec, "job": job, "task": int(index), "bind": address,
                              "grace": 0.5}
    values.update(overrides)
    return TaskSettings(**values)


class TaskHandle:
    """One task served by ``services.worker.main.serve`` on a LoopThread."""

    def __init__(self, runner: LoopThread, task: str, address: str, spec: dict[str, Any],
                 **kw: Any) -> None:
        self.runner = runner
        self.task = task
        self.address = address
        self.port = 0
        ready = threading.Event()
        stop: asyncio.Event = runner.call(self._make_event())
        self._stop = stop

        def on_ready(port: int) -> None:
            self.port = port
            ready.set()

        self.future = asyncio.run_coroutine_threadsafe(
            serve(task_settings(task, address, spec, **kw), stop=stop, ready=on_ready),
            runner.loop)
        if not ready.wait(START_TIMEOUT):
            if self.future.done():
                self.future.result()  # raise what stopped it
            raise TimeoutError(f"task {task} did not start within {START_TIMEOUT}s")

    @staticmethod
    async def _make_event() -> asyncio.Event:
        return asyncio.Event()

    def stop(self) -> None:
        """Stop serving (bounded) and wait until the port is released."""
        if self.future.done():
            return
        self.runner.loop.call_soon_threadsafe(self._stop.set)
        self.future.result(STOP_TIMEOUT)


class TaskCluster:
    """Task servers of a cluster spec, all on one LoopThread."""

    def __init__(self, jobs: dict[str, int]) -> None:
        self.spec = {job: [f"127.0.0.1:{free_port()}" for _ in range(n)] for job, n in jobs.items()}
        self.runner = LoopThread()
        self.tasks: dict[str, TaskHandle] = {}
        try:
            for job, addresses in self.spec.items():
                for i, address in enumerate(addresses):
                    self.start(f"/job:{job}/task:{i}")
        except BaseException:
            self.close()
            raise

    def start(self, task: str, **kw: Any) -> TaskHandle:
        """(Re)start one task of the spec on its address."""
        job, index = task.split("/")[1][4:], int(task.split(":")[-1])
        handle = TaskHandle(self.runner, task, self.spec[job][index], self.spec, **kw)
        self.tasks[task] = handle
        return handle

    def close(self) -> None:
        for handle in self.tasks.values():
            try:
                handle.stop()
            except Exception as exc:  # noqa: BLE001 - keep stopping the others
                print(f"stopping {handle.task}: {exc}", file=sys.stderr)
        self.runner.close()


class MasterServer:
    """The HTTP master app under uvicorn on a free 127.0.0.1 port, in a background thread
    (HTTPS when the settings name TLS files)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.port = free_port()
        tls = tls_options(settings)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="on", **tls))
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-master", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"master did not start on {self.url}")
            time.sleep(0.02)
        self.http = httpx.Client(base_url=self.url, timeout=30.0, verify=settings.http_verify())

    def counts(self) -> dict[str, int]:
        """Sessions and graphs the master holds, as ``/v1/cluster`` reports them."""
        master = self.http.get("/v1/cluster").json()["master"]
        return {"sessions": master["sessions"], "graphs": master["graphs"]}

    def stop(self) -> None:
        if hasattr(self, "http"):
            self.http.close()
        self.server.should_exit = True
        self.thread.join(STOP_TIMEOUT)


def master_settings(spec: dict[str, Any], **overrides: Any) -> Settings:
    """Settings for a test master: small limits and a quick heartbeat, unless overridden."""
    values: dict[str, Any] = {
        "cluster": spec, "max_nodes": 500, "max_request_bytes": 1024 * 1024,
        "max_tensor_bytes": 4 * 1024 * 1024, "heartbeat_timeout_s": 2.0, "rpc_timeout_s": 5.0,
        "step_timeout_s": 30.0,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
def tasks() -> Iterator[TaskCluster]:
    """A ps task and a worker task, serving for the whole module."""
    cluster = TaskCluster({"ps": 1, "worker": 1})
    yield cluster
    cluster.close()


@pytest.fixture(scope="module")
def master(tasks: TaskCluster) -> Iterator[MasterServer]:
    """The HTTP master over ``tasks`` with test limits (500 nodes, 1 MiB bodies, 4 MiB tensors)."""
    server = MasterServer(master_settings(tasks.spec))
    yield server
    server.stop()


@pytest.fixture
def make_master() -> Iterator[Callable[..., MasterServer]]:
    """Start extra masters (own settings); all are stopped at teardown."""
    started: list[MasterServer] = []

    def make(spec: dict[str, Any], **overrides: Any) -> MasterServer:
        server = MasterServer(master_settings(spec, **overrides))
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def make_cluster() -> Iterator[Callable[[dict[str, int]], TaskCluster]]:
    """Start extra task clusters (for tests that stop or restart tasks)."""
    started: list[TaskCluster] = []

    def make(jobs: dict[str, int]) -> TaskCluster:
        cluster = TaskCluster(jobs)
        started.append(cluster)
        return cluster

    yield make
    for cluster in started:
        cluster.close()


def start_task_process(module: str, spec: dict[str, Any], job: str, index: int,
                       *extra: str) -> tuple[subprocess.Popen[str], str]:
    """``python -m <module> --cluster SPEC --job J --task I``; returns it once it serves, with its
    ready line. The caller stops it (by PID)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--cluster", json.dumps(spec), "--job", job,
         "--task", str(index), *extra],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT)
    if not line or "serving" not in line[0]:
        proc.kill()
        _, err = proc.communicate(timeout=STOP_TIMEOUT)
        raise RuntimeError(f"{module} did not start: {line} {err[-2000:]}")
    return proc, line[0]


def stop_process(proc: subprocess.Popen[str]) -> None:
    """Kill a process we started if it is still running (teardown safety net)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(STOP_TIMEOUT)
