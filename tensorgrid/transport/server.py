"""A task's gRPC server: the WorkerService (workers and parameter servers), the MasterService (when
the task hosts a master, as a ``train.Server`` does), and gRPC health checking. An optional bearer
token guards every call but the health check."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from tensorgrid.master.core import MasterCore
from tensorgrid.pb import master_pb2_grpc, worker_pb2_grpc
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport.channels import CHANNEL_OPTIONS
from tensorgrid.transport.frames import DataPlaneServer
from tensorgrid.transport.master_service import MasterServicer
from tensorgrid.transport.tls import MASTER_CERT_NAME, TlsFiles
from tensorgrid.transport.worker_service import WorkerServicer

SERVICE_WORKER = "tensorgrid.WorkerService"
SERVICE_MASTER = "tensorgrid.MasterService"


_DENIED = "Missing or wrong bearer token (set TENSORGRID_TOKEN, or run `tensorgrid token`)"


async def _deny(request: Any, context: Any) -> Any:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, _DENIED)


async def _deny_stream(request: Any, context: Any) -> Any:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED, _DENIED)
    yield  # pragma: no cover - a generator, so a streaming method answers with a status


class _TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every call without the bearer token in its metadata but the health check's;
    the call is answered with UNAUTHENTICATED before its handler reads a request."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: Any) -> Any:
        if details.method.startswith("/grpc.health.v1.Health/"):
            return await continuation(details)
        given = str(dict(details.invocation_metadata or ()).get("authorization", ""))
        if hmac.compare_digest(given.encode(), self._expected):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:  # no such method: refused all the same, nothing is told
            return grpc.unary_unary_rpc_method_handler(_deny)
        # a denial of the method's own kind, so a stream is refused as a stream
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(_deny_stream)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(_deny)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(_deny_stream)
        return grpc.unary_unary_rpc_method_handler(_deny)


class TaskServer:
    """The gRPC server of one task.

    Args:
        bind: the address to listen on ('127.0.0.1:0' picks a free port).
        worker: the task's WorkerCore, served as WorkerService.
        master: a MasterCore to serve as MasterService, if this task hosts one.
        token: a bearer token every caller must present.
        data_plane: serve tensors over the framed data plane too (else gRPC streams only).
        shm_pool_bytes: shared memory kept mapped for same-host consumers (None: the default).
        delta_cache_bytes: values kept to answer delta keys with deltas (None: the default).
        tls: serve over TLS with this certificate, requiring callers to present one of the
            same CA (mutual TLS); the framed data plane then speaks TLS too, and serves only
            certificates that name a task of the cluster or the master.
    """

    def __init__(self, bind: str, worker: WorkerCore | None = None,
                 master: MasterCore | None = None, token: str | None = None,
                 host_id: str = "", advertise: str = "", *, data_plane: bool = True,
                 shm_pool_bytes: int | None = None, tls: TlsFiles | None = None,
                 delta_cache_bytes: int | None = None) -> None:
        self.bind = bind
        self.tls = tls
        self.use_data_plane = data_plane
        self.shm_pool_bytes = shm_pool_bytes
        self.delta_cache_bytes = delta_cache_bytes
        # the address peers know this task by (its host names the data plane too)
        self.advertise = advertise or bind
        self.data_plane: DataPlaneServer | None = None
        self.worker = worker
        self.master = master
        self.token = token
        self.host_id = host_id
        self.port = 0
        self.health = HealthServicer()
        self.worker_servicer: WorkerServicer | None = None
        self._server: grpc.aio.Server | None = None

    async def start(self) -> int:
        """Start serving; returns the bound port."""
        interceptors = [_TokenInterceptor(self.token)] if self.token else []
        server = grpc.aio.server(options=CHANNEL_OPTIONS, interceptors=interceptors)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        if self.worker is not None:
            self.worker_servicer = WorkerServicer(self.worker, self.host_id,
                                                  pool_bytes=self.shm_pool_bytes,
                                                  delta_cache_bytes=self.delta_cache_bytes)
            worker_pb2_grpc.add_WorkerServiceServicer_to_server(self.worker_servicer, server)
        if self.master is not None:
            master_pb2_grpc.add_MasterServiceServicer_to_server(MasterServicer(self.master), server)
        if self.tls is not None:
            self.port = server.add_secure_port(self.bind, self.tls.server_credentials())
        else:
            self.port = server.add_insecure_port(self.bind)
        if self.port == 0:
            raise OSError(f"Cannot listen on {self.bind}")
        await server.start()
        self._server = server
        if self.worker_servicer is not None and self.use_data_plane:
            bind_host = self.bind.rpartition(":")[0].strip("[]") or "127.0.0.1"
            self.data_plane = DataPlaneServer(
                self.worker_servicer, bind_host, self.token,
                ssl_context=self.tls.server_ssl_context() if self.tls is not None else None,
                peers=self._is_peer)
            port = await self.data_plane.start()
            self.worker_servicer.data_address = f"{self.advertise.rpartition(':')[0]}:{port}"
        serving = health_pb2.HealthCheckResponse.SERVING
        await self.health.set("", serving)
        if self.worker is not None:
            await self.health.set(SERVICE_WORKER, serving)
        if self.master is not None:
            await self.health.set(SERVICE_MASTER, serving)
        return self.port

    def _is_peer(self, common_name: str) -> bool:
        """Whether a TLS certificate's common name may use this task's data plane: the master
        (it runs steps) or a task this task knows (they pull tensors); not a client's."""
        if common_name == MASTER_CERT_NAME:
            return True
        if self.worker is None:
            return False
        return common_name == self.worker.task or common_name in self.worker.cluster

    async def stop(self, grace: float = 2.0) -> None:
        """Stop gracefully: report NOT_SERVING, let in-flight calls finish within ``grace``."""
        if self._server is None:
            return
        await self.health.enter_graceful_shutdown()
        if self.data_plane is not None:
            await self.data_plane.stop()
        await self._server.stop(grace)
        self._server = None
        if self.worker_servicer is not None:
            self.worker_servicer.close()

    async def wait(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()
