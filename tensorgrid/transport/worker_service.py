"""The WorkerService servicer: decodes requests, calls the WorkerCore, encodes answers, maps errors."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from tensorgrid.core import errors, serde
from tensorgrid.pb import worker_pb2, worker_pb2_grpc
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport import shm, tensors
from tensorgrid.transport.status import abort_with


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Serves one task's WorkerCore (workers and parameter servers alike)."""

    def __init__(self, core: WorkerCore, host_id: str = "") -> None:
        self.core = core
        self.host_id = host_id or shm.host_id()
        self._shm = shm.available() and bool(self.host_id)

    async def GetStatus(self, request: Any, context: Any) -> Any:
        st = self.core.status()
        return worker_pb2.GetStatusResponse(
            task=st["task"], incarnation=st["incarnation"], host_id=self.host_id,
            devices=[worker_pb2.DeviceAttributes(name=d["name"], device_type=d["type"])
                     for d in st["devices"]],
            graphs=st["graphs"], live_steps=st["live_steps"], steps_run=st["steps_run"],
            uptime_s=st["uptime_s"])

    async def RegisterGraph(self, request: Any, context: Any) -> Any:
        try:
            inc = request.expected_incarnation
            if inc and inc != self.core.incarnation:
                raise errors.AbortedError(
                    f"Task {self.core.task} restarted: incarnation is {self.core.incarnation:x}, "
                    f"the master expected {inc:x}")
            graph = serde.graph_from_proto(request.graph_def)
            handle = self.core.register_graph(graph.nodes, request.session_handle,
                                              dict(request.cluster))
        except Exception as exc:  # noqa: BLE001 - every failure becomes a status
            await abort_with(context, exc)
            raise  # unreachable: abort raises
        return worker_pb2.RegisterGraphResponse(graph_handle=handle,
                                                incarnation=self.core.incarnation)

    async def DeregisterGraph(self, request: Any, context: Any) -> Any:
        try:
            if request.graph_handle:
                self.core.deregister_graph(request.graph_handle)
            elif request.session_handle:
                self.core.deregister_session(request.session_handle)
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        return worker_pb2.DeregisterGraphResponse()

    async def RunGraph(self, request: Any, context: Any) -> Any:
        try:
            args = [tensors.from_proto(a) for a in request.args]
            timeout = request.timeout_ms / 1000.0 if request.timeout_ms else None
            rets = await self.core.run_graph(request.graph_handle, request.step_id, args, timeout)
            return worker_pb2.RunGraphResponse(rets=[tensors.to_proto(r) for r in rets])
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
            raise

    async def RecvTensor(self, request: Any, context: Any) -> AsyncIterator[Any]:
        use_shm = self._shm and request.host_id == self.host_id
        step_id = request.step_id

        async def one(i: int, key: str) -> tuple[int, Any]:
            return i, await self.core.recv_tensor(step_id, key)

        pending = [asyncio.ensure_future(one(i, k)) for i, k in enumerate(request.keys)]
        try:
            for fut in asyncio.as_completed(pending):
                i, value = await fut
                for chunk in tensors.encode(i, value, use_shm):
                    yield chunk
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        finally:
            for p in pending:
                p.cancel()

    async def CleanupGraph(self, request: Any, context: Any) -> Any:
        self.core.rendezvous.step_done(request.step_id)
        return worker_pb2.CleanupGraphResponse()

    async def Abort(self, request: Any, context: Any) -> Any:
        self.core.abort_step(request.step_id, request.message, request.code or errors.ABORTED)
        return worker_pb2.AbortResponse()

    async def Reset(self, request: Any, context: Any) -> Any:
        self.core.reset(list(request.containers))
        return worker_pb2.ResetResponse()
