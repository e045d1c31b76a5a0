"""Serve one task of a cluster: a ``TaskServer`` over a ``WorkerCore`` whose ``_Recv`` ops pull
tensors from peer tasks with ``GrpcRemoteRecv``.

``serve`` runs until SIGTERM or SIGINT (or its ``stop`` event), then stops gracefully: the task's
live steps are aborted, in-flight calls get a grace period, and the channels to peers close. With a
``master`` address it also sends heartbeats to that master's gRPC MasterService (a master that
cannot receive them, like the HTTP master, polls the task's status instead).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

import tensorgrid.checkpoint  # noqa: F401 - registers the checkpoint kernels this task runs
from tensorgrid.client.local import task_devices
from tensorgrid.core import errors
from tensorgrid.kernels.heap import keep_freed_memory
from tensorgrid.master.cluster import ClusterState
from tensorgrid.runtime.threads import limit_blas_threads
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.settings import TaskSettings
from tensorgrid.transport import shm
from tensorgrid.transport.channels import ChannelPool, target_address
from tensorgrid.transport.heartbeat import HeartbeatSender
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.worker_client import GrpcRemoteRecv

log = logging.getLogger("tensorgrid.task")


def _on_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> list[signal.Signals]:
    """Set ``stop`` on SIGTERM/SIGINT; returns the signals handled (none off the main thread)."""
    handled = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (ValueError, RuntimeError, NotImplementedError):
            continue  # not the main thread, or no signals here: the caller stops us
        handled.append(sig)
    return handled


async def serve(settings: TaskSettings, *, stop: asyncio.Event | None = None,
                ready: Callable[[int], None] | None = None) -> None:
    """Serve the task of ``settings`` until SIGTERM/SIGINT or ``stop`` is set.

    Args:
        settings: the task (cluster spec, job, index, listen address), the master to send
            heartbeats to, the bearer token callers must present (and this task presents to
            its peers), the grace period of in-flight calls when stopping, the data plane and
            the BLAS threads.
        stop: an event that stops the server when set (made here when None).
        ready: called with the bound port once the server listens.

    Raises:
        ValueError: no cluster spec; or a non-loopback listen address without a token (and
            without ``insecure``).
        NotFoundError: the cluster has no such task.
        UnavailableError: the address cannot be bound.
    """
    limit_blas_threads(settings.blas_threads)  # tasks sharing cores must not fight
    keep_freed_memory(settings.malloc_keep_bytes)  # a step's big tensors cost no page faults
    shm.remove_dead_segments()  # shared memory left by tasks that were killed
    state = ClusterState(settings.cluster_spec())
    name = state.task(settings.task_name).name
    bind = settings.bind_address()
    settings.check_listen(bind.rpartition(":")[0], f"task {name}")
    token = settings.token_value
    master = settings.master
    addresses = state.addresses()
    worker = WorkerCore(name, task_devices(name),
                        step_memory_bytes=settings.step_memory_budget())
    worker.cluster.update(addresses)
    pool = ChannelPool(settings.channel_credentials())
    worker.remote = GrpcRemoteRecv(worker, pool, token, addresses=addresses,
                                   data_plane=settings.use_data_plane,
                                   ssl_context=settings.data_plane_ssl(),
                                   delta_cache_bytes=settings.wire_delta_cache_bytes)
    host_id = shm.host_id()
    server = TaskServer(bind, worker=worker, token=token, host_id=host_id,
                        advertise=addresses[name], data_plane=settings.use_data_plane,
                        shm_pool_bytes=settings.shm_pool_bytes, tls=settings.tls_files(),
                        delta_cache_bytes=settings.wire_delta_cache_bytes)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    handled = _on_signals(loop, stop)
    # heartbeats go from a thread of their own (a busy event loop must not look dead) to the
    # configured master and to every master that registers graphs here
    beats = HeartbeatSender(worker, addresses[name], host_id, settings.heartbeat_interval_s,
                            [target_address(master)] if master else [], token,
                            credentials=settings.channel_credentials())
    try:
        try:
            port = await server.start()
        except (OSError, RuntimeError) as exc:
            raise errors.UnavailableError(f"Task {name} cannot listen on {bind}: {exc}") from None
        log.info("task %s serving on %s (port %d, incarnation %x)", name, bind, port,
                 worker.incarnation)
        if ready is not None:
            ready(port)
        beats.start()
        await stop.wait()
        log.info("task %s stopping", name)
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        beats.stop()
        worker.remote.close()
        worker.abort_all(f"Task {name} is shutting down")
        await server.stop(settings.grace)
        await pool.close()
