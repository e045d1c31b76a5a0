"""``tf.train.Server``: run one task of a cluster (a ``ClusterSpec``, see ``cluster_spec.py``) in
this process.

A Server serves its task (the WorkerService: a worker's or a parameter server's partitions and
variables) and hosts a master, so ``Session(server.target)`` works as in TensorFlow 1.x between-graph
replication: each worker's client plans its own graph, and the parameter servers' variables are
shared by name. A session in the same process reaches the master without a socket. The gRPC server
and the master run on an event loop in a background thread.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

from tensorgrid.client.local import task_devices
from tensorgrid.client.remote import register_local_master, unregister_local_master
from tensorgrid.client.train.cluster_spec import ClusterSpec
from tensorgrid.core import errors
from tensorgrid.kernels.heap import keep_freed_memory
from tensorgrid.master.cluster import ClusterState, task_name
from tensorgrid.master.core import MasterCore
from tensorgrid.master.health_monitor import HealthMonitor
from tensorgrid.master.inprocess import InProcessTaskClient
from tensorgrid.runtime.threads import fair_share, limit_blas_threads
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.settings import ClientSettings
from tensorgrid.transport import shm
from tensorgrid.transport.channels import ChannelPool
from tensorgrid.transport.heartbeat import HeartbeatSender
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.worker_client import GrpcRemoteRecv, GrpcTaskClient


class Server:
    """One task of a cluster, served from this process.

    Args:
        server_or_cluster_def: a ClusterSpec or its dict.
        job_name, task_index: which task this process is.
        config: a ConfigProto (its ``operation_timeout_in_ms`` bounds steps).
        start: start serving now.
        settings: the process's settings (bearer token, listen address, heartbeat timing, data
            plane, BLAS threads, the task's TLS certificate: with one, its gRPC and data plane
            speak mutual TLS); ``ClientSettings()`` from the environment when None.
    """

    def __init__(self, server_or_cluster_def: Any, job_name: str | None = None,
                 task_index: int | None = None, protocol: str | None = None,
                 config: Any = None, start: bool = True, *,
                 settings: ClientSettings | None = None) -> None:
        self.settings = settings = settings if settings is not None else ClientSettings()
        cluster = ClusterSpec(server_or_cluster_def)
        if job_name is None:
            if len(cluster.jobs) != 1:
                raise ValueError("job_name must be given when the cluster has several jobs")
            job_name = cluster.jobs[0]
        if task_index is None:
            indices = cluster.task_indices(job_name)
            if len(indices) != 1:
                raise ValueError("task_index must be given when the job has several tasks")
            task_index = indices[0]
        threads = getattr(config, "intra_op_parallelism_threads", 0) or settings.blas_threads
        if threads is None:
            # tasks of one machine share its cores: BLAS threads that spin on cores another task
            # needs make everyone slower (a ps and two workers on two cores ran 2.7x slower)
            here = _host_key(cluster.task_address(job_name, int(task_index)))
            colocated = sum(1 for j in cluster.jobs for a in cluster.job_tasks(j)
                            if _host_key(a) == here)
            if colocated > 1:
                threads = fair_share(colocated)
        limit_blas_threads(threads)
        keep_freed_memory(settings.malloc_keep_bytes)  # a step's big tensors cost no page faults
        self.cluster_spec = cluster
        self.job_name = job_name
        self.task_index = int(task_index)
        self.task_name = task_name(job_name, self.task_index)
        self.address = cluster.task_address(job_name, self.task_index)
        settings.check_listen((settings.bind or self.address).rpartition(":")[0],
                              f"tf.train.Server {self.task_name}")
        self.config = config
        self.token = settings.token_value
        self.worker = WorkerCore(self.task_name, task_devices(self.task_name))
        self.worker.cluster.update(ClusterState(cluster.as_dict()).addresses())
        self.loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: Any = None
        self._stopped = threading.Event()
        self.master: MasterCore | None = None
        self._started = False
        if start:
            self.start()

    @property
    def target(self) -> str:
        """What a Session connects to: ``grpc://host:port``."""
        return f"grpc://{self.address}"

    @property
    def server_def(self) -> dict[str, Any]:
        return {"cluster": self.cluster_spec.as_dict(), "job_name": self.job_name,
                "task_index": self.task_index}

    def start(self) -> None:
        """Start serving (idempotent)."""
        if self._started:
            return
        self._thread = threading.Thread(target=self._run_loop, name=f"tensorgrid{self.task_name}",
                                        daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=60)
        except Exception:
            self.stop()
            raise
        register_local_master(self.target, self)
        self._started = True

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def _start(self) -> None:
        settings = self.settings
        credentials = settings.channel_credentials()
        data_ssl = settings.data_plane_ssl()
        pool = ChannelPool(credentials)
        self._pool = pool
        host = shm.host_id()
        shm.remove_dead_segments()  # shared memory left by tasks that were killed
        self.worker.remote = GrpcRemoteRecv(self.worker, pool, self.token,
                                            data_plane=settings.use_data_plane,
                                            ssl_context=data_ssl,
                                            delta_cache_bytes=settings.wire_delta_cache_bytes)
        state = ClusterState(self.cluster_spec.as_dict())
        local_client = InProcessTaskClient(self.worker, host)

        def client_for(ts: Any) -> Any:
            if ts.name == self.task_name:
                return local_client
            return GrpcTaskClient(ts.name, ts.address, pool, self.token,
                                  data_plane=settings.use_data_plane, ssl_context=data_ssl)

        timeout = 300.0
        cfg = self.config
        if cfg is not None and getattr(cfg, "operation_timeout_in_ms", None):
            timeout = cfg.operation_timeout_in_ms / 1000.0
        self.master = MasterCore(state, client_for, client_task=self.task_name,
                                 default_timeout=timeout)
        state.observe(self.task_name, self.worker.incarnation, host,
                      [d.device_type for d in self.worker.devices.values()])
        # a TF1-style cluster has no central master for tasks to report to: this master watches
        # the tasks itself (see tensorgrid/master/health.py)
        interval = settings.heartbeat_interval_s
        state.heartbeat_timeout = settings.heartbeat_timeout_s
        self._monitor = HealthMonitor(self.master, interval)
        self._monitor.start()
        # masters that register graphs here get this task's heartbeats, from a thread of their
        # own; and this master tells the tasks it registers on where to send theirs
        self.master.address = self.address
        self._beats = HeartbeatSender(self.worker, self.address, host, interval, [], self.token,
                                      credentials=credentials)
        self._beats.start()
        self._server = TaskServer(settings.bind or self.address, worker=self.worker,
                                  advertise=self.address, master=self.master, token=self.token,
                                  host_id=host, data_plane=settings.use_data_plane,
                                  shm_pool_bytes=settings.shm_pool_bytes,
                                  delta_cache_bytes=settings.wire_delta_cache_bytes,
                                  tls=settings.tls_files())
        try:
            await self._server.start()
        except OSError as exc:
            raise errors.UnavailableError(
                f"Task {self.task_name} cannot listen on {self.address}: {exc}") from None

    def join(self) -> None:
        """Block until the server stops (``stop()`` from another thread, or the process ends)."""
        self._stopped.wait()

    def stop(self) -> None:
        """Stop serving and release the port."""
        unregister_local_master(self.target)
        if self.loop.is_running():
            async def shutdown() -> None:
                monitor = getattr(self, "_monitor", None)
                if monitor is not None:
                    await monitor.stop()
                beats = getattr(self, "_beats", None)
                if beats is not None:
                    beats.stop()
                if self.master is not None:
                    self.master.close_clients()
                remote = self.worker.remote
                if remote is not None and hasattr(remote, "close"):
                    remote.close()
                await asyncio.sleep(0)  # let the closed streams' readers finish
                if self._server is not None:
                    await self._server.stop(1.0)
                pool = getattr(self, "_pool", None)
                if pool is not None:
                    await pool.close()

            try:
                asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=10)
            except Exception:  # noqa: BLE001 - stopping must not fail
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._started = False
        self._stopped.set()

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True, *,
                            settings: ClientSettings | None = None) -> Server:
        """A one-task cluster on a free loopback port."""
        return Server({"localhost": [f"127.0.0.1:{free_port()}"]}, "localhost", 0,
                      config=config, start=start, settings=settings)


def _host_key(address: str) -> str:
    host = address.rpartition(":")[0].strip("[]").lower()
    return "loopback" if host in ("localhost", "::1") or host.startswith("127.") else host


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
