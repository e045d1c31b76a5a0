"""The master's state for one app: the core over gRPC task clients, metrics and the health
monitor. Created in the app's lifespan and closed when it ends."""

from __future__ import annotations

import asyncio
import logging

from services.master.graph_store import GraphStore
from services.master.metrics import MasterMetrics
from services.master.monitor import HealthMonitor
from services.master.parsing import off_loop_large
from services.master.persistence import RedisSessionStore
from tensorgrid.master.cluster import ClusterState, TaskState
from tensorgrid.master.core import Limits, MasterCore
from tensorgrid.master.master_session import MasterSession
from tensorgrid.settings import MasterSettings
from tensorgrid.transport.channels import ChannelPool
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.worker_client import GrpcTaskClient

log = logging.getLogger("tensorgrid.master")


class MasterState:
    """Everything one HTTP master holds.

    Attributes:
        settings: its configuration.
        core: sessions, plans and steps over the cluster.
        metrics: Prometheus metrics.
        graphs: the graphs kept by ``POST /v1/graphs`` and their reports, by id.
    """

    def __init__(self, settings: MasterSettings) -> None:
        settings.check_listen(settings.host, "the master")
        self.settings = settings
        self.pool = ChannelPool(settings.channel_credentials())
        token = settings.token_value
        # under TLS the master's RunGraph streams reach the tasks' data planes over TLS too
        data_ssl = settings.data_plane_ssl()

        def client_for(task: TaskState) -> GrpcTaskClient:
            return GrpcTaskClient(task.name, task.address, self.pool, token,
                                  data_plane=settings.use_data_plane, ssl_context=data_ssl)

        cluster = ClusterState(settings.cluster, heartbeat_timeout=settings.heartbeat_timeout_s)
        self.core = MasterCore(
            cluster, client_for, default_timeout=settings.step_timeout_s,
            limits=Limits(max_nodes=settings.max_nodes, max_sessions=settings.max_sessions,
                          max_declared_tensor_bytes=settings.max_declared_tensor_bytes,
                          max_live_steps=settings.max_live_steps,
                          max_sessions_per_client=settings.max_sessions_per_client,
                          max_live_steps_per_client=settings.max_live_steps_per_client),
            logger=log.info, rpc_timeout=settings.rpc_timeout_s)
        self.core.trace_every_n_steps = settings.trace_every_n_steps
        self.core.run_large = off_loop_large
        self.store: RedisSessionStore | None = None
        if settings.redis_url and settings.persist_sessions:
            self.store = RedisSessionStore(settings.redis_url, idle_s=settings.session_idle_s)
            self.core.store = self.store
        self.metrics = MasterMetrics(self.core)
        self.graphs = GraphStore(self.core.graphs, settings.max_graphs,
                                 settings.max_graph_store_bytes, settings.graph_idle_s,
                                 max_graphs_per_client=settings.max_graphs_per_client,
                                 max_bytes_per_client=settings.max_graph_store_bytes_per_client)
        self.monitor = HealthMonitor(self.core, settings.poll_interval_s, settings.rpc_timeout_s)
        # the MasterService over gRPC (heartbeats from the tasks), when a port is configured
        self.grpc: TaskServer | None = None
        self._sweeper: asyncio.Task[None] | None = None
        if settings.grpc_port is not None:
            self.grpc = TaskServer(f"{settings.host}:{settings.grpc_port}", master=self.core,
                                   token=token, tls=settings.tls_files())
            host = "127.0.0.1" if settings.host in ("0.0.0.0", "", "::") else settings.host
            self.core.address = f"{host}:{settings.grpc_port}"

    async def start(self) -> None:
        """Start watching the cluster's health, and serve the MasterService over gRPC when a
        port is configured."""
        self.monitor.start()
        self._sweeper = asyncio.create_task(self._sweep(), name="master-idle-sweep")
        if self.grpc is not None:
            port = await self.grpc.start()
            log.info("MasterService (gRPC) serving on %s:%d", self.settings.host, port)

    async def _sweep(self) -> None:
        """Drop idle sessions and stored graphs, every quarter of the shorter idle period (at
        most a minute apart)."""
        settings = self.settings
        period = min(max(min(settings.session_idle_s, settings.graph_idle_s) / 4, 0.05), 60.0)
        while True:
            await asyncio.sleep(period)
            try:
                self.graphs.expire()
                await self.core.expire_idle_sessions(settings.session_idle_s, self.close_session)
            except Exception:  # the sweep must outlive one bad round
                log.exception("idle sweep failed")

    async def close_session(self, handle: str) -> None:
        """Close a session (its plan-cache counts stay in the metrics)."""
        session: MasterSession = (await self.core.find_session(handle))
        self.metrics.retire(session)
        await self.core.close_session(handle)

    async def close(self, grace: float = 5.0) -> None:
        """Stop the monitor and the gRPC MasterService, release every session's partitions on
        the tasks, close channels."""
        await self.monitor.stop()
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self.grpc is not None:
            await self.grpc.stop(min(grace, 1.0))
        # sessions kept in Redis stay there for the next master; the others are closed, which
        # releases their partitions on the tasks
        handles = [] if self.store is not None else list(self.core.sessions)
        if handles:
            closing = asyncio.gather(*(self.close_session(h) for h in handles),
                                     return_exceptions=True)
            try:
                await asyncio.wait_for(closing, grace)
            except TimeoutError:
                log.warning("sessions did not close within %.1fs", grace)
        self.core.close_clients()
        await self.pool.close()
        if self.store is not None:
            await self.store.close()
