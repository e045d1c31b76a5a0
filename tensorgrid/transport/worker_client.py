"""Clients of the WorkerService: the master's TaskClient, and the RemoteRecv through which a task
pulls tensors from its peers (batched: every key a step needs from one peer, requested within one
turn of the event loop, travels in one RecvTensor call)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from tensorgrid.core import errors, serde
from tensorgrid.core.ir import GraphDef, NodeDef
from tensorgrid.pb import worker_pb2
from tensorgrid.runtime.step_stats import FULL_TRACE
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport import delta, shm, tensors
from tensorgrid.transport.channels import ChannelPool
from tensorgrid.transport.recvbuf import ReceiveBuffers
from tensorgrid.transport.status import from_rpc_error, metadata_token
from tensorgrid.transport.streams import RecvTensorStreamClient, RunGraphStreamClient


class DataAddresses:
    """Where peers' framed data planes listen (from their GetStatus), cached per address.

    Off when ``TENSORGRID_DATA_PLANE=grpc``: every stream then goes over gRPC. With an
    ``ssl_context`` (the task's TLS client context) every connection to a data plane is TLS.
    """

    def __init__(self, pool: ChannelPool, token: str | None = None,
                 timeout: float = 10.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self._pool = pool
        self.token = token
        self.ssl_context = ssl_context
        self._meta = metadata_token(token)
        self._timeout = timeout
        self._cache: dict[str, str] = {}

    async def get(self, address: str) -> str:
        found = self._cache.get(address)
        if found is not None:
            return found
        try:
            r = await self._pool.worker(address).GetStatus(
                worker_pb2.GetStatusRequest(), timeout=self._timeout, metadata=self._meta,
                wait_for_ready=True)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, "", address, "GetStatus") from None
        self._cache[address] = r.data_address
        return str(r.data_address)

    def forget(self, address: str) -> None:
        self._cache.pop(address, None)


def data_plane_for(pool: ChannelPool, token: str | None, data_plane: bool = True,
                   ssl_context: ssl.SSLContext | None = None) -> DataAddresses | None:
    """The data-plane addresses of peers (dialled with TLS when ``ssl_context`` is given), or
    None when tensors go over gRPC streams only."""
    return DataAddresses(pool, token, ssl_context=ssl_context) if data_plane else None


class GrpcTaskClient:
    """The master's handle on one remote task."""

    def __init__(self, task: str, address: str, pool: ChannelPool, token: str | None = None,
                 *, data_plane: bool = True, ssl_context: ssl.SSLContext | None = None) -> None:
        self.task = task
        self.address = address
        self._pool = pool
        self._meta = metadata_token(token)
        self._data_plane = data_plane_for(pool, token, data_plane, ssl_context)
        self._run_stream: RunGraphStreamClient | None = None
        self._recv_stream: RecvTensorStreamClient | None = None
        self._host_id = shm.host_id()

    def _stub(self) -> Any:
        return self._pool.worker(self.address)

    async def _call(self, what: str, method: str, request: Any, timeout: float,
                    wait_for_ready: bool = False) -> Any:
        try:
            return await getattr(self._stub(), method)(request, timeout=timeout,
                                                       metadata=self._meta,
                                                       wait_for_ready=wait_for_ready)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, self.task, self.address, what) from None

    async def get_status(self, timeout: float, wait_for_ready: bool = False) -> dict[str, Any]:
        r = await self._call("GetStatus", "GetStatus", worker_pb2.GetStatusRequest(), timeout,
                             wait_for_ready)
        return {"task": r.task, "incarnation": r.incarnation, "host_id": r.host_id,
                "devices": [{"name": d.name, "type": d.device_type} for d in r.devices],
                "graphs": r.graphs, "live_steps": r.live_steps, "steps_run": r.steps_run,
                "uptime_s": r.uptime_s}

    async def metrics(self, timeout: float) -> str:
        r = await self._call("GetStatus", "GetStatus",
                             worker_pb2.GetStatusRequest(include_metrics=True), timeout)
        return str(r.metrics)

    async def register_graph(self, nodes: Sequence[NodeDef], session: str,
                             cluster: Mapping[str, str], expected_incarnation: int,
                             timeout: float, master_address: str = "") -> tuple[str, int]:
        req = worker_pb2.RegisterGraphRequest(
            session_handle=session, graph_def=serde.graph_to_proto(GraphDef(tuple(nodes))),
            cluster=dict(cluster), expected_incarnation=expected_incarnation,
            master_address=master_address)
        r = await self._call("RegisterGraph", "RegisterGraph", req, timeout)
        return r.graph_handle, r.incarnation

    async def deregister_graph(self, handle: str, session: str, timeout: float) -> None:
        await self._call("DeregisterGraph", "DeregisterGraph", worker_pb2.DeregisterGraphRequest(
            graph_handle=handle, session_handle=session), timeout)

    async def run_graph(self, handle: str, step_id: int, args: Sequence[Any],
                        timeout: float, stats: list[Any] | None = None) -> list[Any]:
        req = worker_pb2.RunGraphRequest(graph_handle=handle, step_id=step_id,
                                         args=[tensors.to_proto(a) for a in args],
                                         timeout_ms=int(timeout * 1000),
                                         trace_level=0 if stats is None else FULL_TRACE)
        if self._run_stream is None:
            self._run_stream = RunGraphStreamClient(self._stub, self.task, self.address,
                                                    self._meta, self._data_plane)
        # the task enforces the step deadline itself; waiting here adds a margin so the task's
        # DeadlineExceeded (naming where it stood) arrives first
        r = await self._run_stream.run_graph(req, timeout + 5.0)
        if stats is not None:
            stats.extend(r.step_stats.dev_stats)
        keys = list(r.ret_keys) or [""] * len(r.rets)
        rets: list[Any] = [None if k else tensors.from_proto(t) for t, k in zip(r.rets, keys)]
        held = [i for i, k in enumerate(keys) if k]
        if held:  # big results wait on the task: pull them over the data plane
            loop = asyncio.get_running_loop()
            futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in held]
            if self._recv_stream is None:
                self._recv_stream = RecvTensorStreamClient(self._stub, self.task, self.address,
                                                           self._meta, self._data_plane)
            await self._recv_stream.request(worker_pb2.RecvTensorRequest(
                step_id=step_id, keys=[keys[i] for i in held], host_id=self._host_id), futures)
            values = await asyncio.wait_for(asyncio.gather(*futures), timeout + 5.0)
            for i, v in zip(held, values):
                rets[i] = v
        return rets

    def close(self) -> None:
        """Close this client's streams (their readers stop)."""
        for stream in (self._run_stream, self._recv_stream):
            if stream is not None:
                stream.close()
        self._run_stream = self._recv_stream = None

    async def abort(self, step_id: int, code: int, message: str, timeout: float) -> None:
        await self._call("Abort", "Abort", worker_pb2.AbortRequest(
            step_id=step_id, code=code, message=message), timeout)

    async def reset(self, containers: Sequence[str], timeout: float) -> None:
        await self._call("Reset", "Reset", worker_pb2.ResetRequest(containers=list(containers)),
                         timeout)


class _Batch:
    __slots__ = ("deltas", "futures", "keys")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.futures: list[asyncio.Future[Any]] = []
        self.deltas: list[Any] = []  # DeltaWant of the delta keys


class GrpcRemoteRecv:
    """RemoteRecv over gRPC, with per-(peer, step) batching and the shared-memory fast path.

    Args:
        worker: the local task (its ``cluster`` map gives peers' addresses).
        pool: channels to peers.
        timeout: bound on one RecvTensor call (the step's own deadline and aborts end it sooner).
        addresses: peers' addresses known up front (the cluster spec).
        data_plane: pull tensors over the framed data plane (else gRPC streams only).
        ssl_context: dial peers' data planes with TLS (the task's client context).
        delta_cache_bytes: bounds the values kept to receive delta keys as deltas.
    """

    def __init__(self, worker: WorkerCore, pool: ChannelPool, token: str | None = None,
                 timeout: float = 3600.0, addresses: Mapping[str, str] | None = None, *,
                 data_plane: bool = True, ssl_context: ssl.SSLContext | None = None,
                 delta_cache_bytes: int = delta.DEFAULT_CACHE_BYTES) -> None:
        self.worker = worker
        # the delta keys of the graphs registered here, and the values last received on them
        self.deltas = delta.DeltaReceiver(delta_cache_bytes)
        self._pool = pool
        self._meta = metadata_token(token)
        self._timeout = timeout
        self._batches: dict[tuple[str, int], _Batch] = {}
        self._static = dict(addresses or {})
        self.host_id = shm.host_id()
        self.calls = 0
        self._streams: dict[str, RecvTensorStreamClient] = {}
        # one pool for the pulls from every peer: a tensor's memory is reused by the next pull
        # of its size, whoever sends it
        self.buffers = ReceiveBuffers()
        self._data_plane = data_plane_for(pool, token, data_plane, ssl_context)
        self._fetching: set[asyncio.Future[None]] = set()

    def _address(self, task: str) -> str:
        addr = self.worker.cluster.get(task) or self._static.get(task)
        if addr is None:
            raise errors.UnavailableError(f"Task {self.worker.task} does not know the address of "
                                          f"{task}")
        return addr

    async def recv(self, src_task: str, step_id: int, key: str) -> Any:
        loop = asyncio.get_running_loop()
        bkey = (src_task, step_id)
        batch = self._batches.get(bkey)
        if batch is None:
            batch = self._batches[bkey] = _Batch()
            loop.call_soon(self._flush, bkey)
        fut: asyncio.Future[Any] = loop.create_future()
        self.deltas.sync(self.worker.graphs.graphs)
        want = self.deltas.wants(key)
        # the version named is pinned here: the answer decodes against exactly this value
        base = self.deltas.held(src_task, key) if want is not None else None
        if want is not None:
            batch.deltas.append(worker_pb2.DeltaWant(
                index=len(batch.keys), have_version=base[0] if base is not None else 0,
                codec=want[0], level=want[1]))
        batch.keys.append(key)
        batch.futures.append(fut)
        value = await fut
        if not isinstance(value, tensors.Versioned):
            return value
        if want is None:
            raise errors.DataLossError(f"Task {src_task} answered key {key}, which this task "
                                       "did not ask as a delta key, with a versioned tensor")
        return await loop.run_in_executor(None, self.deltas.accept, src_task, key,
                                          value.version, value.value, value.delta, base)

    def _flush(self, bkey: tuple[str, int]) -> None:
        batch = self._batches.pop(bkey, None)
        if batch is not None:
            task = asyncio.ensure_future(self._fetch(bkey[0], bkey[1], batch))
            self._fetching.add(task)
            task.add_done_callback(self._fetching.discard)

    async def _fetch(self, src_task: str, step_id: int, batch: _Batch) -> None:
        self.calls += 1
        try:
            address = self._address(src_task)
        except errors.OpError as exc:
            self._fail(batch.futures, exc)
            return
        client = self._streams.get(address)
        if client is None:
            client = self._streams[address] = RecvTensorStreamClient(
                lambda: self._pool.worker(address), src_task, address, self._meta,
                self._data_plane, self.buffers)
        await client.request(worker_pb2.RecvTensorRequest(step_id=step_id, keys=batch.keys,
                                                          host_id=self.host_id,
                                                          deltas=batch.deltas), batch.futures)

    def close(self) -> None:
        """Close the streams to every peer."""
        for client in self._streams.values():
            client.close()
        self._streams.clear()

    @staticmethod
    def _fail(futures: Sequence[asyncio.Future[Any]], err: errors.OpError) -> None:
        for f in futures:
            if not f.done():
                f.set_exception(err)
