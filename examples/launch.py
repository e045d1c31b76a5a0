"""Start and stop the processes of a loopback cluster: what the examples' launcher modes (and the
process-level integration tests, through ``tests/integration/procs.py``) use.

Every process is a child of this one, started on free 127.0.0.1 ports, with its output in a log
file (or in this process's output), stopped by its PID: SIGTERM first, SIGKILL if it lingers. Every
wait is bounded and a failure shows the end of the process's log.

    with LocalCluster(workers=2, master=True) as cluster:
        tf.Session(cluster.master_url) ...

This module is not an example: it is the plumbing that stands in for a real deployment (one task
per machine, started by a scheduler). ``tensorgrid local`` (``tensorgrid/cluster/local.py``) is the
supervised cluster for real use on one machine: it restarts processes that die, which tests that
stop processes on purpose must not have.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
POLL_S = 0.05
LOG_TAIL_CHARS = 4000


def exit_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit``, so a launcher stopped by its PID still runs its
    ``finally`` blocks and stops the processes it started (by default SIGTERM ends Python at
    once and orphans them)."""
    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (another process may take it before we bind it: rare)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def loopback_cluster(ps: int = 1, workers: int = 2) -> dict[str, list[str]]:
    """A cluster spec ``{"ps": [...], "worker": [...]}`` on free 127.0.0.1 ports."""
    return {"ps": [f"127.0.0.1:{free_port()}" for _ in range(ps)],
            "worker": [f"127.0.0.1:{free_port()}" for _ in range(workers)]}


class Process:
    """A child process whose output goes to a log file (``log_dir`` given) or to ours.

    Args:
        name: a short name for messages and the log file ('ps0', 'worker1', 'master').
        argv: the command line.
        log_dir: where ``<name>.log`` is written; None lets the output through to this process's.
        env: extra environment variables.
    """

    def __init__(self, name: str, argv: Sequence[str], log_dir: str | Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_dir) / f"{name}.log" if log_dir is not None else None
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        # the checkout first, so ``python -m services.worker`` works from anywhere
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), full_env.get("PYTHONPATH", "")) if p)
        out: Any = None
        if self.log_path is not None:
            out = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._out = out
        try:
            self.popen = subprocess.Popen(self.argv, cwd=ROOT, env=full_env,
                                          stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT if out else None)
        except BaseException:
            if out is not None:
                out.close()
            raise

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log(self) -> str:
        """Everything the process wrote so far ('' when its output is not captured)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return self.log()[-chars:]

    def _fail(self, what: str) -> RuntimeError:
        state = "running" if self.alive() else f"exited with status {self.popen.returncode}"
        return RuntimeError(f"{self.name} (pid {self.pid}, {state}): {what}\n"
                            f"--- end of its log ---\n{self.log_tail()}")

    def wait_for_output(self, text: str, timeout: float = START_TIMEOUT_S) -> str:
        """Wait until the log holds ``text``; returns the line that holds it.

        Raises:
            RuntimeError: the process exited first, or ``timeout`` seconds passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            for line in self.log().splitlines():
                if text in line:
                    return line
            if not self.alive():
                raise self._fail(f"exited before printing {text!r}")
            if time.monotonic() > deadline:
                raise self._fail(f"did not print {text!r} within {timeout:.0f}s")
            time.sleep(POLL_S)

    def wait_for_http(self, url: str, timeout: float = START_TIMEOUT_S) -> None:
        """Wait until ``GET url`` answers 200.

        Raises:
            RuntimeError: the process exited first, or ``timeout`` seconds passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2.0) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if not self.alive():
                raise self._fail(f"exited before {url} answered")
            if time.monotonic() > deadline:
                raise self._fail(f"{url} did not answer within {timeout:.0f}s")
            time.sleep(POLL_S * 4)

    def wait(self, timeout: float) -> int:
        """Wait for the process to exit; returns its status.

        Raises:
            RuntimeError: it still runs after ``timeout`` seconds (it is left running).
        """
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise self._fail(f"still running after {timeout:.0f}s") from None

    def terminate(self) -> None:
        """Send SIGTERM to the process by its PID, without waiting (``stop`` waits)."""
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """Stop the process by its PID (SIGTERM, then SIGKILL after ``timeout``); returns its
        exit status. Stopping a process that already exited only collects its status."""
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGTERM)
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(timeout)
            except ProcessLookupError:
                pass
        if self._out is not None and not self._out.closed:
            self._out.close()
        return self.popen.poll()


def python_module(module: str, *args: str) -> list[str]:
    """The command line of ``python -m module args`` with this interpreter."""
    return [sys.executable, "-m", module, *args]


TASK_READY = "serving on"  # what ``python -m services.worker|ps`` prints once it listens


def task_process(cluster: dict[str, Any], job: str, index: int, log_dir: str | Path) -> Process:
    """Start ``python -m services.ps|worker`` for one task (wait for ``TASK_READY`` in its log
    before using it)."""
    module = "services.ps" if job == "ps" else "services.worker"
    return Process(f"{job}{index}", python_module(module, "--cluster", json.dumps(cluster),
                                                   "--job", job, "--task", str(index)), log_dir)


def start_task(cluster: dict[str, Any], job: str, index: int, log_dir: str | Path,
               timeout: float = START_TIMEOUT_S) -> Process:
    """``python -m services.ps|worker`` for one task; returns once it serves.

    Raises:
        RuntimeError: it exited or did not serve within ``timeout`` seconds (it is stopped).
    """
    proc = task_process(cluster, job, index, log_dir)
    try:
        proc.wait_for_output(TASK_READY, timeout)
    except BaseException:
        proc.stop()
        raise
    return proc


def start_master(cluster: dict[str, Any], log_dir: str | Path, port: int | None = None,
                 timeout: float = START_TIMEOUT_S, env: dict[str, str] | None = None
                 ) -> tuple[Process, str]:
    """``python -m services.master`` over ``cluster``; returns it and its URL once
    ``/healthz`` answers.

    Raises:
        RuntimeError: it exited or did not answer within ``timeout`` seconds (it is stopped).
    """
    port = port or free_port()
    proc = Process("master", python_module("services.master", "--host", "127.0.0.1", "--port",
                                           str(port), "--log-level", "warning"), log_dir,
                   env={"TENSORGRID_CLUSTER": json.dumps(cluster), **(env or {})})
    url = f"http://127.0.0.1:{port}"
    try:
        proc.wait_for_http(f"{url}/healthz", timeout)
    except BaseException:
        proc.stop()
        raise
    return proc, url


class LocalCluster:
    """``ps`` parameter servers and ``workers`` workers as ``services.*`` processes on loopback,
    and the HTTP master when ``master`` is true. Stops everything it started on exit.

    Attributes:
        spec: the cluster spec, ``{"ps": [...], "worker": [...]}``.
        master_url: 'http://127.0.0.1:PORT' (None without a master).
        processes: every process started, in start order.
        log_dir: where their logs are.
    """

    def __init__(self, ps: int = 1, workers: int = 2, master: bool = True,
                 log_dir: str | Path | None = None,
                 master_env: dict[str, str] | None = None) -> None:
        self.spec = loopback_cluster(ps, workers)
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="tensorgrid-cluster-"))
        self.processes: list[Process] = []
        self.master_url: str | None = None
        try:
            # the tasks start side by side; the master once they all serve
            for job in ("ps", "worker"):
                for i in range(len(self.spec[job])):
                    self.processes.append(task_process(self.spec, job, i, self.log_dir))
            for proc in self.processes:
                proc.wait_for_output(TASK_READY)
            if master:
                proc, self.master_url = start_master(self.spec, self.log_dir, env=master_env)
                self.processes.append(proc)
        except BaseException:
            self.stop()
            raise

    def process(self, name: str) -> Process:
        """The process named 'ps0', 'worker1' or 'master'."""
        return next(p for p in self.processes if p.name == name)

    def logs(self) -> str:
        """Every process's log tail, for a failure message."""
        return "\n".join(f"=== {p.name} (pid {p.pid}) ===\n{p.log_tail()}" for p in self.processes)

    def stop(self) -> None:
        """Stop every process: the master first, then the tasks all at once (each waits out its
        grace period while a peer still holds a stream into it, so one at a time is slower)."""
        for proc in reversed(self.processes):
            if proc.name == "master":
                proc.stop()
        for proc in self.processes:
            proc.terminate()
        for proc in reversed(self.processes):
            proc.stop()

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def run_on_cluster(target: str, run: Callable[[str], None], ps: int = 1, workers: int = 2) -> None:
    """``run(target)`` on the master at ``target``, or, when ``target`` is '', on the HTTP master
    of a ``LocalCluster`` started for the purpose (and stopped after, also on SIGTERM)."""
    if target:
        run(target)
        return
    exit_on_sigterm()
    with LocalCluster(ps=ps, workers=workers, master=True) as cluster:
        print(f"cluster {cluster.spec} master {cluster.master_url} (logs in {cluster.log_dir})",
              flush=True)
        run(cluster.master_url)
