"""The processes a local cluster supervises, and a record of their pids.

``ManagedProcess`` knows how to start one process (in a session of its own, its output appended to
a log file) and holds its current incarnation; ``RedisManagedProcess`` starts the cluster's Redis
with ``start_redis``. ``PidRecord`` keeps the pid and start time of each in a JSON file, so a
supervisor that was killed before it could stop its processes leaves a record that the next one on
the same state directory uses to end them (the start time guards against a recycled pid).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tensorgrid.checkpoint.redis_server import RedisProcess, pid_alive, start_redis

log = logging.getLogger("tensorgrid.local")


@dataclass(frozen=True)
class ProcessInfo:
    """One process of a LocalCluster, as it is now.

    Attributes:
        name: 'redis', 'master', 'ps0', 'worker1', ...
        role: 'redis', 'master', 'ps' or 'worker'.
        index: the task index (0 for redis and the master).
        address: 'host:port' (the master's HTTP address; the Redis URL for redis).
        pid: its process id (0 when it is not running).
        restarts: how many times the supervisor started it again.
        task: the task's full name ('/job:worker/replica:0/task:1'), None for redis and master.
    """

    name: str
    role: str
    index: int
    address: str
    pid: int
    restarts: int
    task: str | None = None


class ManagedProcess:
    """One supervised process: how to start it, and its current incarnation."""

    def __init__(self, name: str, role: str, index: int, address: str, argv: list[str],
                 env: dict[str, str], log_path: Path, task: str | None = None) -> None:
        self.name = name
        self.role = role
        self.index = index
        self.address = address
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.task = task
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.started_at = 0.0
        self.quick_exits = 0
        self.restart_at: float | None = None  # when a restart is due after an exit

    def _log_file(self, what: str) -> IO[bytes]:
        fh = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed by spawn
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        fh.write(f"--- {stamp} {what} {self.name}: {shlex.join(self.argv)}\n".encode())
        fh.flush()
        return fh

    def spawn(self) -> None:
        """Start the process (in its own session, output appended to its log)."""
        fh = self._log_file("starting")
        try:
            self.process = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL,
                                            stdout=fh, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        finally:
            fh.close()  # the child holds its own descriptor
        self.started_at = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def exit_code(self) -> int | None:
        """Its exit status once it exited (reaped here), None while it runs."""
        return None if self.process is None else self.process.poll()

    def signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)

    def wait(self, timeout: float) -> bool:
        if self.process is None:
            return True
        try:
            self.process.wait(max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return False
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def info(self) -> ProcessInfo:
        running = self.exit_code() is None and self.process is not None
        return ProcessInfo(self.name, self.role, self.index, self.address,
                           self.pid if running else 0, self.restarts, self.task)


class RedisManagedProcess(ManagedProcess):
    """The cluster's own Redis: started with ``start_redis`` (which waits until it answers)."""

    def __init__(self, directory: Path, log_path: Path) -> None:
        super().__init__("redis", "redis", 0, "", [], {}, log_path)
        self.directory = directory
        self.server: RedisProcess | None = None

    def spawn(self) -> None:
        self.server = start_redis(self.directory)
        self.process = self.server.process
        self.address = self.server.url
        self.argv = [f"redis-server ({self.server.directory / 'redis.conf'})"]
        self._log_file("started").close()
        self.started_at = time.monotonic()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = (self.directory / "redis.log").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def start_time(pid: int) -> int | None:
    """When the process of ``pid`` started (clock ticks since boot), or None when it is gone or
    there is no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[19]) if len(fields) > 19 else None  # field 22 of proc(5)


class PidRecord:
    """``{name: [pid, start time]}`` of the running processes, in a JSON file.

    Args:
        path: the file (written atomically: a temporary file renamed over it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, processes: list[ManagedProcess]) -> None:
        entries = {p.name: [p.pid, start_time(p.pid)] for p in processes
                   if p.process is not None and p.exit_code() is None}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries))
        os.replace(tmp, self.path)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def reap(self, grace: float) -> list[str]:
        """End the processes of the record that still run (same pid *and* start time): SIGTERM,
        then SIGKILL after ``grace``. Returns their names. Clears the record."""
        try:
            entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return []
        leftovers: dict[str, int] = {}
        for name, (pid, started) in dict(entries).items():
            if started is not None and pid_alive(int(pid)) and start_time(int(pid)) == started:
                leftovers[name] = int(pid)
        for name, pid in leftovers.items():
            log.warning("ending %s (pid %d), left running by a local cluster that did not stop",
                        name, pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for pid in leftovers.values():
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.clear()
        return list(leftovers)
