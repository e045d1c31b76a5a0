"""The WorkerService servicer: decodes requests, calls the WorkerCore, encodes answers, maps errors."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tensorgrid.core import errors, serde
from tensorgrid.pb import worker_pb2, worker_pb2_grpc
from tensorgrid.runtime.rendezvous import make_key
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport import shm, tensors
from tensorgrid.transport.status import abort_with


def stream_status(exc: BaseException) -> Any:
    """The StreamStatus of a failed request."""
    if not isinstance(exc, errors.OpError):
        exc = errors.InternalError(f"{type(exc).__name__}: {exc}")
    return worker_pb2.StreamStatus(code=exc.error_code, message=exc.message,
                                   node=exc.node_name or "", op=exc.op_type or "",
                                   device=exc.device or "")


def _forget(running: dict[int, Any], rid: int, _task: Any) -> None:
    running.pop(rid, None)


async def _serve_stream(request_iterator: Any, out: asyncio.Queue[Any],
                        handle: Callable[[Any], Awaitable[None]],
                        cancellable: bool = False,
                        consume: Callable[[Any], bool] | None = None) -> AsyncIterator[Any]:
    """Run ``handle`` for every request of a bidirectional stream and yield what it queues.

    The stream ends when the client closes its side and every request is answered; if the client
    goes away, the requests still running are cancelled.
    """
    running: dict[int, asyncio.Task[None]] = {}
    done_reading = asyncio.Event()

    async def reader() -> None:
        try:
            async for msg in request_iterator:
                if consume is not None and consume(msg):
                    continue
                if cancellable and msg.cancel:
                    task = running.get(msg.request_id)
                    if task is not None:
                        task.cancel()
                    continue
                rid = msg.request_id
                task = asyncio.ensure_future(handle(msg))
                running[rid] = task
                task.add_done_callback(functools.partial(_forget, running, rid))
        finally:
            done_reading.set()

    read_task = asyncio.ensure_future(reader())
    getter: asyncio.Future[Any] | None = None
    try:
        while True:
            if done_reading.is_set() and not running and out.empty():
                break
            getter = asyncio.ensure_future(out.get())
            # keep draining the queue while waiting: handlers may block on a full queue
            other: asyncio.Future[Any] = asyncio.ensure_future(
                done_reading.wait() if not done_reading.is_set()
                else asyncio.wait(list(running.values())) if running else asyncio.sleep(0))
            done, _ = await asyncio.wait({getter, other}, return_when=asyncio.FIRST_COMPLETED)
            if other not in done:
                other.cancel()
            if getter in done:
                yield getter.result()
            else:
                getter.cancel()
    finally:
        read_task.cancel()
        if getter is not None:
            getter.cancel()
        for task in list(running.values()):
            task.cancel()


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Serves one task's WorkerCore (workers and parameter servers alike)."""

    def __init__(self, core: WorkerCore, host_id: str = "") -> None:
        self.core = core
        self.host_id = host_id or shm.host_id()
        self._shm = shm.available() and bool(self.host_id)
        self.data_address = ""  # set when the framed data plane listens
        # segments lent to same-host consumers over the RecvTensor stream
        self.pool: shm.SegmentPool | None = shm.SegmentPool() if self._shm else None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()

    async def GetStatus(self, request: Any, context: Any) -> Any:
        st = self.core.status()
        return worker_pb2.GetStatusResponse(
            task=st["task"], incarnation=st["incarnation"], host_id=self.host_id,
            devices=[worker_pb2.DeviceAttributes(name=d["name"], device_type=d["type"])
                     for d in st["devices"]],
            graphs=st["graphs"], live_steps=st["live_steps"], steps_run=st["steps_run"],
            uptime_s=st["uptime_s"], data_address=self.data_address)

    async def RegisterGraph(self, request: Any, context: Any) -> Any:
        try:
            inc = request.expected_incarnation
            if inc and inc != self.core.incarnation:
                raise errors.AbortedError(
                    f"Task {self.core.task} restarted: incarnation is {self.core.incarnation:x}, "
                    f"the master expected {inc:x}")
            graph = serde.graph_from_proto(request.graph_def)
            handle = self.core.register_graph(graph.nodes, request.session_handle,
                                              dict(request.cluster), request.master_address)
        except Exception as exc:
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
            return self._response(request.step_id, rets)
        except Exception as exc:
            await abort_with(context, exc)
            raise

    def _response(self, step_id: int, rets: list[Any]) -> Any:
        """The RunGraph answer: small results inline, big ones held for RecvTensor."""
        protos, keys = [], []
        for i, value in enumerate(rets):
            if tensors.is_big(value):
                key = make_key(self.core.default_device, self.core.incarnation, "client",
                               f"_retval:{i}")
                self.core.hold_result(step_id, key, value)
                protos.append(tensors.EMPTY)
                keys.append(key)
            else:
                protos.append(tensors.to_proto(value))
                keys.append("")
        return worker_pb2.RunGraphResponse(rets=protos, ret_keys=keys if any(keys) else [])

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

    # ------------------------------------------------------------------ the streamed hot path
    async def RunGraphStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Many RunGraph calls over one stream; answers may come back out of order."""
        out: asyncio.Queue[Any] = asyncio.Queue()

        async def one(msg: Any) -> None:
            req = msg.request
            try:
                args = [tensors.from_proto(a) for a in req.args]
                timeout = req.timeout_ms / 1000.0 if req.timeout_ms else None
                rets = await self.core.run_graph(req.graph_handle, req.step_id, args, timeout)
                answer = worker_pb2.RunGraphStreamResponse(
                    request_id=msg.request_id, response=self._response(req.step_id, rets))
            except Exception as exc:  # noqa: BLE001 - every failure goes back as a status
                answer = worker_pb2.RunGraphStreamResponse(request_id=msg.request_id,
                                                           status=stream_status(exc))
            out.put_nowait(answer)

        async for answer in _serve_stream(request_iterator, out, lambda msg: one(msg)):
            yield answer

    async def RecvTensorStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Many RecvTensor calls over one stream; chunks carry their request's id."""
        # bounded, so a big tensor streams at the pace of the socket instead of piling up
        out: asyncio.Queue[Any] = asyncio.Queue(maxsize=8)

        async def one(msg: Any) -> None:
            req, rid = msg.request, msg.request_id
            use_shm = self._shm and req.host_id == self.host_id
            pending: set[asyncio.Future[tuple[int, Any]]] = {
                asyncio.ensure_future(self._recv_one(req.step_id, i, k))
                for i, k in enumerate(req.keys)}
            try:
                while pending:
                    done, pending = await asyncio.wait(pending,
                                                       return_when=asyncio.FIRST_COMPLETED)
                    # every tensor ready now goes in one message (a message costs more than its
                    # bytes); raw-byte streams of big tensors are cut at BATCH_BYTES
                    batch: list[Any] = []
                    size = 0
                    for fut in done:
                        i, value = fut.result()
                        for chunk in tensors.encode(i, value, use_shm, self.pool):
                            batch.append(chunk)
                            size += len(chunk.data) + chunk.inline.ByteSize()
                            if size >= tensors.CHUNK_BYTES:
                                await out.put(worker_pb2.RecvTensorStreamResponse(
                                    request_id=rid, chunks=batch))
                                batch, size = [], 0
                    if batch:
                        await out.put(worker_pb2.RecvTensorStreamResponse(request_id=rid,
                                                                          chunks=batch))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                await out.put(worker_pb2.RecvTensorStreamResponse(request_id=rid,
                                                                  status=stream_status(exc)))
            finally:
                for p in pending:
                    p.cancel()

        def releases(msg: Any) -> bool:
            """Give back the segments a message returns; True when that is all it carries."""
            if self.pool is not None:
                for r in msg.releases:
                    self.pool.release(r.name, r.lease)
            return not msg.HasField("request") and not msg.cancel

        async for answer in _serve_stream(request_iterator, out, one, cancellable=True,
                                          consume=releases):
            yield answer

    async def _recv_one(self, step_id: int, i: int, key: str) -> tuple[int, Any]:
        return i, await self.core.recv_tensor(step_id, key)

    async def CleanupGraph(self, request: Any, context: Any) -> Any:
        self.core.rendezvous.step_done(request.step_id)
        return worker_pb2.CleanupGraphResponse()

    async def Abort(self, request: Any, context: Any) -> Any:
        self.core.abort_step(request.step_id, request.message, request.code or errors.ABORTED)
        return worker_pb2.AbortResponse()

    async def Reset(self, request: Any, context: Any) -> Any:
        self.core.reset(list(request.containers))
        return worker_pb2.ResetResponse()
