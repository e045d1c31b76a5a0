"""A self-healing cluster on this machine (``tensorgrid local``).

``LocalCluster`` starts, each as a separate process listening on 127.0.0.1 (free ports, except the
master's HTTP port): a Redis of its own for checkpoints (unless ``redis_url`` names one), the HTTP
master together with its gRPC MasterService (where the tasks push heartbeats), the ps tasks and the
worker tasks. Every process gets ``REDIS_URL`` and the cluster spec; every task gets the master's
gRPC address. ``start()`` returns once each process is healthy (the master's ``/healthz``, each
task's gRPC health service) and the master hears every task, or fails within ``start_timeout``.

With ``tls=True`` every port speaks TLS: ``start()`` makes a CA and a certificate per process in
``state_dir/tls`` (``tensorgrid certs``), hands each process its own, and talks to the master over
``https`` with the ``client`` certificate; gRPC and the data plane are mutual TLS.

Then a supervisor thread watches the processes: one that exits or is killed is started again on the
same address (a task comes back with a new incarnation, which the master notices from its first
heartbeat), after a backoff that doubles while it keeps dying within ``QUICK_EXIT_S`` of starting.
``stop()`` ends everything it started, by pid: SIGTERM, then SIGKILL after ``stop_grace`` seconds;
the workers first, then the ps tasks, the master, and the Redis last.

Each process runs in a session of its own, so a Ctrl-C meant for the supervisor reaches only the
supervisor, which then stops the rest in order. Their output goes to ``state_dir/logs/NAME.log``,
and their pids to ``state_dir/pids.json``: when a supervisor is killed before it can stop them, the
next LocalCluster on that state directory ends them first.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import logging
import shlex
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import httpx
from pydantic import SecretStr

from tensorgrid.client.train.server import free_port
from tensorgrid.cluster.probes import grpc_healthy, http_healthy
from tensorgrid.cluster.process import ManagedProcess, PidRecord, ProcessInfo, RedisManagedProcess
from tensorgrid.core import errors
from tensorgrid.master.cluster import task_name
from tensorgrid.runtime.threads import fair_share
from tensorgrid.settings import ClientSettings, child_environment, ensure_token
from tensorgrid.transport.certs import make_certs

log = logging.getLogger("tensorgrid.local")

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0
QUICK_EXIT_S = 10.0  # a process that dies sooner than this after starting backs off longer
BACKOFF_S = 0.25
MAX_BACKOFF_S = 8.0
SUPERVISE_INTERVAL_S = 0.1


class LocalCluster:
    """Redis, a master, ``ps`` parameter servers and ``workers`` workers as supervised processes.

    Args:
        workers: number of worker tasks.
        ps: number of parameter-server tasks.
        port: the master's HTTP port (0 picks a free one).
        host: the address the master listens on (HTTP and gRPC); tasks listen on 127.0.0.1.
        redis_url: a Redis to use; None starts one of the cluster's own in ``state_dir/redis``
            (unix socket only, append-only persistence).
        heartbeat_interval: seconds between a task's heartbeats (and the master's poll period).
        heartbeat_timeout: seconds of silence after which the master declares a task dead.
        restart: restart processes that exit (the point of a local cluster); False leaves them.
        state_dir: where the Redis data, the logs and the lock go (default
            ``settings.home/local``, ``$TENSORGRID_HOME/local``); one LocalCluster at a time may
            use it.
        start_timeout: seconds ``start()`` waits for everything to be healthy.
        stop_grace: seconds between SIGTERM and SIGKILL when stopping.
        log_level: the log level of the master and task processes.
        settings: the settings of this process (``ClientSettings()`` when None): its home, its
            bearer token (handed to every process), its BLAS threads and its data plane.
        tls: TLS on every port, with certificates made in ``state_dir/tls`` at each start.

    ``with LocalCluster(...) as cluster:`` starts it and stops it at the end of the block.
    """

    def __init__(self, workers: int = 2, ps: int = 1, port: int = 8000, host: str = "127.0.0.1",
                 redis_url: str | None = None, heartbeat_interval: float = 0.5,
                 heartbeat_timeout: float = 3.0, restart: bool = True,
                 state_dir: str | Path | None = None, start_timeout: float = START_TIMEOUT_S,
                 stop_grace: float = STOP_GRACE_S, log_level: str = "info",
                 settings: ClientSettings | None = None, tls: bool = False) -> None:
        if workers < 1 or ps < 0:
            raise errors.InvalidArgumentError(
                f"A local cluster needs at least one worker and no negative ps count "
                f"(got workers={workers}, ps={ps})")
        self.settings = settings if settings is not None else ClientSettings()
        self.workers = workers
        self.ps = ps
        self.host = host
        self.port = port
        self.heartbeat_interval = heartbeat_interval
        self.heartbeat_timeout = heartbeat_timeout
        self.restart = restart
        self.tls = tls
        self._verify: Any = True  # how the master's HTTPS is verified (the cluster's CA)
        self._grpc_credentials: Any = None
        self.state_dir = Path(state_dir or self.settings.home_dir / "local").expanduser().resolve()
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.log_level = log_level
        self.redis_url: str = redis_url or ""
        self.spec: dict[str, list[str]] = {}
        self.grpc_address = ""
        self._own_redis = redis_url is None
        self._children: list[ManagedProcess] = []
        self._pids = PidRecord(self.state_dir / "pids.json")
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._lock_file: IO[bytes] | None = None
        self._started = False

    # ------------------------------------------------------------------ what tests and the CLI see
    @property
    def url(self) -> str:
        """The master's HTTP URL, for ``tf.Session(url)``."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    @property
    def grpc_target(self) -> str:
        """The master's gRPC MasterService, for ``tf.Session('grpc://...')``."""
        return f"grpc://{self.grpc_address}"

    @property
    def tls_dir(self) -> Path:
        """Where ``tls=True`` keeps the CA, the certificates and the keys."""
        return self.state_dir / "tls"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    def processes(self) -> list[ProcessInfo]:
        """Every process of the cluster as it is now (redis, master, ps tasks, workers)."""
        return [c.info() for c in self._children]

    def process(self, name: str) -> ProcessInfo:
        """The process named 'redis', 'master', 'ps0', 'worker1', ... or by its task's name
        ('/job:worker/task:1' or '/job:worker/replica:0/task:1').

        Raises:
            NotFoundError: no such process.
        """
        for c in self._children:
            if name in (c.name, c.task) or (c.task and name == c.task.replace("/replica:0", "")):
                return c.info()
        raise errors.NotFoundError(f"No process {name!r} in this local cluster (processes: "
                                   f"{', '.join(c.name for c in self._children)})")

    def task(self, job: str, index: int) -> ProcessInfo:
        """The process of task ``index`` of ``job`` ('ps' or 'worker')."""
        return self.process(f"{job}{index}")

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> LocalCluster:
        """Start every process and wait until all are healthy, then supervise them.

        Raises:
            FailedPreconditionError: another LocalCluster uses ``state_dir``.
            UnavailableError: a process exited or was not healthy within ``start_timeout``
                (everything started is stopped again; the message has the end of its log).
        """
        if self._started:
            return self
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_state_dir()
        self._pids.reap(self.stop_grace)
        self._started = True
        self._stopping.clear()
        self._children = []
        try:
            self._ensure_secret()
            self._plan()
            for child in self._children:
                if child.process is None:  # the cluster's Redis already runs
                    log.info("starting %s", child.name)
                    child.spawn()
            self._pids.write(self._children)
            self.wait_healthy(self.start_timeout)
        except BaseException:
            self.stop()
            raise
        log.info("local cluster up: master %s (gRPC %s), %d ps, %d workers, Redis %s, logs in %s",
                 self.url, self.grpc_address, self.ps, self.workers, self.redis_url, self.log_dir)
        self._supervisor = threading.Thread(target=self._supervise, name="local-cluster-supervisor",
                                            daemon=True)
        self._supervisor.start()
        return self

    def _lock_state_dir(self) -> None:
        fh = open(self.state_dir / "local.lock", "a+b")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise errors.FailedPreconditionError(
                f"Another tensorgrid local cluster uses {self.state_dir}; stop it or pass another "
                "state directory") from None
        self._lock_file = fh

    def _ensure_secret(self) -> None:
        """Give the cluster a bearer token from its first start: the configured one, else the
        home's token file, made (random, mode 0600) when there is none; every process gets it,
        and clients of the same home read the same file."""
        if self.settings.token_value is None:
            try:
                token = ensure_token(self.settings.token_path)
            except ValueError as exc:
                raise errors.FailedPreconditionError(str(exc)) from None
            self.settings = self.settings.model_copy(update={"token": SecretStr(token)})
            log.info("the cluster's bearer token is in %s (`tensorgrid token` prints it)",
                     self.settings.token_path)

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers that authenticate a request to this cluster's master."""
        return self._auth()

    def _plan(self) -> None:
        """Choose the ports and build the command line of every process."""
        if self.port == 0:
            self.port = free_port()
        self.grpc_address = f"127.0.0.1:{free_port()}"
        grpc_port = self.grpc_address.rsplit(":", 1)[1]
        self.spec = {"ps": [f"127.0.0.1:{free_port()}" for _ in range(self.ps)],
                     "worker": [f"127.0.0.1:{free_port()}" for _ in range(self.workers)]}
        if not self.ps:
            del self.spec["ps"]
        if self._own_redis:
            redis = RedisManagedProcess(self.state_dir / "redis", self.log_dir / "redis.log")
            # Redis first: the others get its URL
            redis.spawn()
            self._children.append(redis)
            self.redis_url = redis.address
        # the children read these once at their start-up (each into its own settings)
        settings = self.settings
        blas = settings.blas_threads
        overrides = {
            "REDIS_URL": self.redis_url,
            "TENSORGRID_CLUSTER": json.dumps(self.spec),
            "TENSORGRID_HEARTBEAT_INTERVAL_S": repr(self.heartbeat_interval),
            "TENSORGRID_HEARTBEAT_TIMEOUT_S": repr(self.heartbeat_timeout),
            "TENSORGRID_DATA_PLANE": settings.data_plane,
            "TENSORGRID_SHM_POOL_BYTES": str(settings.shm_pool_bytes),
            "TENSORGRID_HOME": str(settings.home_dir),
            # every task gets its share of the cores for numpy's BLAS (unless the user chose)
            "TENSORGRID_BLAS_THREADS": str(blas if blas is not None
                                           else fair_share(self.workers + self.ps)),
            "PYTHONUNBUFFERED": "1",
        }
        if settings.token_value is not None:
            overrides["TENSORGRID_TOKEN"] = settings.token_value
        # each task binds its own address; the Redis is REDIS_URL, which wins over this one
        env = child_environment(overrides, drop=("TENSORGRID_BIND", "TENSORGRID_REDIS_URL"))
        env_of = self._plan_tls(env)
        py = [sys.executable, "-m"]
        master_argv = [*py, "services.master", "--host", self.host, "--port", str(self.port),
                       "--grpc-port", grpc_port, "--log-level", self.log_level]
        self._children.append(ManagedProcess("master", "master", 0, f"{self.host}:{self.port}",
                                             master_argv, env_of("master"),
                                             self.log_dir / "master.log"))
        for job in ("ps", "worker"):
            for index, address in enumerate(self.spec.get(job, [])):
                argv = [*py, f"services.{job}", "--job", job, "--task", str(index),
                        "--bind", address, "--master", self.grpc_address,
                        "--heartbeat-interval", repr(self.heartbeat_interval),
                        "--log-level", self.log_level]
                self._children.append(ManagedProcess(
                    f"{job}{index}", job, index, address, argv, env_of(f"{job}-{index}"),
                    self.log_dir / f"{job}{index}.log", task_name(job, index)))

    def _plan_tls(self, env: dict[str, str]) -> Any:
        """With ``tls``: make the cluster's certificates, point this process's settings at the
        client's, and return each process's environment by certificate name ('master',
        'ps-0', ...) with its own files; without, every process gets ``env``."""
        if not self.tls:
            return lambda name: env
        master_hosts = [] if self.host in ("0.0.0.0", "", "::") else [self.host]
        files = make_certs(self.spec, self.tls_dir, master_hosts)
        client = files["client"]
        self.settings = self.settings.model_copy(update={
            "tls_cert": client.cert, "tls_key": client.key, "tls_ca": client.ca})
        self._verify = self.settings.http_verify()
        self._grpc_credentials = self.settings.channel_credentials()

        def env_of(name: str) -> dict[str, str]:
            own = files[name]
            return {**env, "TENSORGRID_TLS_CERT": str(own.cert),
                    "TENSORGRID_TLS_KEY": str(own.key), "TENSORGRID_TLS_CA": str(own.ca)}

        return env_of

    # ------------------------------------------------------------------ health
    def _healthy(self, child: ManagedProcess) -> bool:
        if isinstance(child, RedisManagedProcess):
            return child.server is not None and child.server.ping()
        if child.role == "master":
            return http_healthy(self.url, timeout=1.0, verify=self._verify)
        return grpc_healthy(child.address, timeout=1.0, credentials=self._grpc_credentials)

    def _master_hears_all(self) -> bool:
        try:
            doc = httpx.get(f"{self.url}/v1/cluster", timeout=2.0, headers=self._auth(),
                            verify=self._verify).json()
        except (httpx.HTTPError, ValueError):
            return False
        tasks = doc.get("tasks", []) if isinstance(doc, dict) else []
        return len(tasks) == self.ps + self.workers and all(
            t.get("state") == "alive" for t in tasks)

    def _auth(self) -> dict[str, str]:
        token = self.settings.token_value
        return {"Authorization": f"Bearer {token}"} if token else {}

    def wait_healthy(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until every process is healthy and the master
        counts every task alive.

        Raises:
            UnavailableError: a process exited, or the wait timed out; names it, with its log.
        """
        deadline = time.monotonic() + timeout
        pending = list(self._children)
        while pending or not self._master_hears_all():
            for child in list(pending):
                code = child.exit_code()
                if code is not None:
                    raise errors.UnavailableError(
                        f"{child.name} ({shlex.join(child.argv)}) exited with status {code} "
                        f"while starting; its log ({child.log_path}) ends:\n{child.log_tail()}")
                if self._healthy(child):
                    log.info("%s is healthy (pid %d, %s)", child.name, child.pid, child.address)
                    pending.remove(child)
            if time.monotonic() >= deadline:
                waiting = ", ".join(c.name for c in pending) or "the master to hear every task"
                last = pending[0] if pending else next(c for c in self._children
                                                       if c.role == "master")
                raise errors.UnavailableError(
                    f"The local cluster was not healthy within {timeout:g}s (waiting for "
                    f"{waiting}); the log of {last.name} ({last.log_path}) ends:\n"
                    f"{last.log_tail()}")
            time.sleep(0.1)

    # ------------------------------------------------------------------ supervision
    def _supervise(self) -> None:
        while not self._stopping.wait(SUPERVISE_INTERVAL_S):
            for child in self._children:
                if self._stopping.is_set():
                    return
                try:
                    self._check(child)
                except Exception:  # the supervisor must outlive any one failure
                    log.exception("supervising %s failed", child.name)

    def _check(self, child: ManagedProcess) -> None:
        now = time.monotonic()
        if child.restart_at is None:
            code = child.exit_code()
            if code is None or not self.restart:
                return
            lived = now - child.started_at
            child.quick_exits = child.quick_exits + 1 if lived < QUICK_EXIT_S else 1
            backoff = min(BACKOFF_S * 2 ** (child.quick_exits - 1), MAX_BACKOFF_S)
            log.warning("%s (pid %d) exited with status %s after %.1fs; restarting it in %.2fs",
                        child.name, child.pid, code, lived, backoff)
            child.restart_at = now + backoff
            return
        if now < child.restart_at:
            return
        child.restart_at = None
        child.restarts += 1
        try:
            child.spawn()
        except Exception as exc:  # noqa: BLE001 - retried after the next backoff
            log.error("restarting %s failed: %s", child.name, exc)
            child.started_at = now
            child.restart_at = now + min(BACKOFF_S * 2 ** child.quick_exits, MAX_BACKOFF_S)
            child.quick_exits += 1
            return
        self._pids.write(self._children)
        log.warning("restarted %s as pid %d on %s (restart %d)", child.name, child.pid,
                    child.address, child.restarts)

    # ------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Stop supervising, then end every process by pid: SIGTERM, SIGKILL after
        ``stop_grace``; workers, then ps tasks, then the master, Redis last. Idempotent."""
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(60.0)
            self._supervisor = None
        order = {"worker": 0, "ps": 1, "master": 2}
        tasks = sorted((c for c in self._children if c.role != "redis"),
                       key=lambda c: order[c.role])
        self._terminate(tasks)
        self._terminate([c for c in self._children if c.role == "redis"])
        if not [c for c in self._children if c.exit_code() is None and c.process is not None]:
            self._pids.clear()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
        if self._started:
            log.info("local cluster stopped")
        self._started = False

    def _terminate(self, children: list[ManagedProcess]) -> None:
        running = [c for c in children if c.exit_code() is None and c.process is not None]
        for c in running:
            log.info("stopping %s (pid %d)", c.name, c.pid)
            c.signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace
        for c in running:
            if not c.wait(deadline - time.monotonic()):
                log.warning("%s (pid %d) ignored SIGTERM for %.1fs: killing it", c.name, c.pid,
                            self.stop_grace)
                c.signal(signal.SIGKILL)
                c.wait(self.stop_grace)

    def describe(self) -> dict[str, Any]:
        """The cluster as JSON: URLs, the spec, and each process."""
        return {"url": self.url, "grpc": self.grpc_target, "redis_url": self.redis_url,
                "tls_dir": str(self.tls_dir) if self.tls else None,
                "state_dir": str(self.state_dir), "cluster": self.spec,
                "processes": [dataclasses.asdict(c.info()) for c in self._children]}
