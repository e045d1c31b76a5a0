"""The WorkerService servicer: decodes requests, calls the WorkerCore, encodes answers, maps errors."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors, serde
from tensorgrid.core.rendezvous_key import make_key
from tensorgrid.core.shapes import TensorShape
from tensorgrid.pb import worker_pb2, worker_pb2_grpc
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport import delta, shm, tensors
from tensorgrid.transport.status import abort_with
from tensorgrid.transport.wire import RawFrame


def stream_status(exc: BaseException) -> Any:
    """The StreamStatus of a failed request."""
    if not isinstance(exc, errors.OpError):
        exc = errors.InternalError(f"{type(exc).__name__}: {exc}")
    return worker_pb2.StreamStatus(code=exc.error_code, message=exc.message,
                                   node=exc.node_name or "", op=exc.op_type or "",
                                   device=exc.device or "", derived=exc.derived)


class _Outbox:
    """The answers of a stream's requests, in the order they are put, for the stream's writer.

    A deque and one waiter, so that an answer costs the writer one wake-up (an asyncio.Queue read
    raced against the end of the stream costs several tasks a message). ``put`` waits while
    ``maxsize`` answers are queued, so a big tensor streams at the pace of the socket.
    """

    def __init__(self, maxsize: int = 0) -> None:
        self._items: deque[Any] = deque()
        self._maxsize = maxsize
        self._putters: deque[asyncio.Future[None]] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        self.wake()

    async def put(self, item: Any) -> None:
        while self._maxsize and len(self._items) >= self._maxsize:
            fut = asyncio.get_running_loop().create_future()
            self._putters.append(fut)
            await fut
        self.put_nowait(item)

    def wake(self) -> None:
        """Wake the writer (an answer came, or the stream's state changed)."""
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def take(self) -> Any:
        item = self._items.popleft()
        while self._putters:
            fut = self._putters.popleft()
            if not fut.done():
                fut.set_result(None)
                break
        return item

    def __len__(self) -> int:
        return len(self._items)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


async def _serve_stream(request_iterator: Any, out: _Outbox,
                        handle: Callable[[Any], Awaitable[None]],
                        cancellable: bool = False,
                        consume: Callable[[Any], bool] | None = None) -> AsyncIterator[Any]:
    """Run ``handle`` for every request of a bidirectional stream and yield what it queues.

    The stream ends when the client closes its side and every request is answered; if the client
    goes away, the requests still running are cancelled.
    """
    running: dict[int, asyncio.Task[None]] = {}
    done_reading = False

    def finished(rid: int, task: asyncio.Task[None]) -> None:
        if running.get(rid) is task:
            del running[rid]
        out.wake()

    async def reader() -> None:
        nonlocal done_reading
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
                task.add_done_callback(functools.partial(finished, rid))
        finally:
            done_reading = True
            out.wake()

    read_task = asyncio.ensure_future(reader())
    try:
        while True:
            if len(out):
                yield out.take()
                continue
            if done_reading and not running:
                break
            await out.wait()
    finally:
        read_task.cancel()
        for task in list(running.values()):
            task.cancel()


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Serves one task's WorkerCore (workers and parameter servers alike).

    ``delta_cache_bytes`` bounds the values kept to answer delta keys with deltas
    (``transport/delta.py``)."""

    def __init__(self, core: WorkerCore, host_id: str = "", *,
                 pool_bytes: int | None = None,
                 delta_cache_bytes: int | None = None) -> None:
        self.core = core
        self.deltas = delta.DeltaSender(delta.DEFAULT_CACHE_BYTES if delta_cache_bytes is None
                                        else delta_cache_bytes)
        sender = self.deltas
        core.metrics.watch_bytes("tensorgrid_task_wire_delta_raw_bytes",
                                 "Bytes of the tensors the task answered delta keys with, as "
                                 "they are", lambda: sender.bytes_raw)
        core.metrics.watch_bytes("tensorgrid_task_wire_delta_sent_bytes",
                                 "Bytes the task sent to answer delta keys (deltas where they "
                                 "were smaller, else the tensors)", lambda: sender.bytes_sent)
        self.host_id = host_id or shm.host_id()
        self._shm = shm.available() and bool(self.host_id)
        self.data_address = ""  # set when the framed data plane listens
        # segments lent to same-host consumers over the RecvTensor stream
        self.pool: shm.SegmentPool | None = shm.SegmentPool(pool_bytes) if self._shm else None
        if self.pool is not None:
            pool = self.pool
            core.metrics.watch_bytes("tensorgrid_task_shm_pool_bytes",
                                     "Bytes of the task's shared-memory segments for tensors "
                                     "sent to tasks on its host", lambda: pool.total)

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
            uptime_s=st["uptime_s"], data_address=self.data_address,
            metrics=self.core.metrics.text() if request.include_metrics else "")

    async def RegisterGraph(self, request: Any, context: Any) -> Any:
        try:
            graph = serde.graph_from_proto(request.graph_def)
            handle = self.core.register_graph(graph.nodes, request.session_handle,
                                              dict(request.cluster), request.master_address,
                                              expected_incarnation=request.expected_incarnation)
        except Exception as exc:
            await abort_with(context, exc)
            raise  # unreachable: abort raises
        return worker_pb2.RegisterGraphResponse(graph_handle=handle,
                                                incarnation=self.core.incarnation)

    async def DeregisterGraph(self, request: Any, context: Any) -> Any:
        try:
            self.core.deregister_graph(request.graph_handle, request.session_handle)
        except Exception as exc:  # noqa: BLE001
            await abort_with(context, exc)
        self.deltas.sync(self.core.graphs.graphs)  # what the gone graphs sent goes too
        return worker_pb2.DeregisterGraphResponse()

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

    # ------------------------------------------------------------------ the streamed hot path
    async def RunGraphStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Many RunGraph calls over one stream; answers may come back out of order."""
        out = _Outbox()

        async def one(msg: Any) -> None:
            req = msg.request
            try:
                args = [tensors.from_proto(a) for a in req.args]
                timeout = req.timeout_ms / 1000.0 if req.timeout_ms else None
                stats: list[Any] | None = [] if req.trace_level else None
                rets = await self.core.run_graph(req.graph_handle, req.step_id, args, timeout,
                                                 stats)
                response = self._response(req.step_id, rets)
                if stats is not None:
                    response.step_stats.dev_stats.extend(stats)
                answer = worker_pb2.RunGraphStreamResponse(request_id=msg.request_id,
                                                           response=response)
            except Exception as exc:  # noqa: BLE001 - every failure goes back as a status
                answer = worker_pb2.RunGraphStreamResponse(request_id=msg.request_id,
                                                           status=stream_status(exc))
            out.put_nowait(answer)

        async for answer in _serve_stream(request_iterator, out, lambda msg: one(msg)):
            yield answer

    @staticmethod
    async def _send_blocks(out: _Outbox, rid: int, index: int, value: Any,
                           stream: delta.DeltaStream, raw: bool) -> None:
        """Put a delta answer on the wire block by block: one worker thread encodes the blocks
        and hands them to the loop as they are made (a message's worth at a time), so encoding
        overlaps the link (the blocks' bytes go beside their messages when ``raw``, else inside
        them)."""
        loop = asyncio.get_running_loop()
        dtype: Any = serde.dtype_to_enum(value.dtype)
        shape = serde.shape_to_proto(TensorShape(value.shape))
        made: asyncio.Queue[Any] = asyncio.Queue()

        def encode() -> None:
            try:
                # consecutive blocks go in one message until they hold FLUSH_BYTES: a delta
                # that packs to little is not cut into messages that cost more than its bytes
                frames: list[Any] = []
                size = 0
                for k in range(stream.count):
                    frames.append(stream.next_block())
                    size += frames[-1].nbytes
                    last = k + 1 == stream.count
                    if size >= delta.FLUSH_BYTES or last:
                        piece = frames[0] if len(frames) == 1 else np.concatenate(frames)
                        loop.call_soon_threadsafe(made.put_nowait, (piece, last))
                        frames, size = [], 0
            except Exception as exc:  # noqa: BLE001 - handed to the loop, which raises it
                loop.call_soon_threadsafe(made.put_nowait, exc)

        work = loop.run_in_executor(None, encode)
        try:
            last = False
            while not last:
                got = await made.get()
                if isinstance(got, Exception):
                    raise got
                block, last = got
                meta = worker_pb2.RecvTensorChunk(
                    index=index, dtype=dtype, shape=shape, delta=True, delta_block=True,
                    version=stream.version, delta_last=last)
                if raw:
                    await out.put(RawFrame(worker_pb2.RecvTensorStreamResponse(
                        request_id=rid, chunk=meta), memoryview(block)))
                else:
                    meta.data = block.tobytes()
                    await out.put(worker_pb2.RecvTensorStreamResponse(request_id=rid,
                                                                      chunks=[meta]))
        finally:
            # a request that went away mid-answer leaves the encoder to finish on its own
            if not work.done():
                work.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def RecvTensorStream(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        """Many RecvTensor calls over one stream; chunks carry their request's id."""
        # bounded, so a big tensor streams at the pace of the socket instead of piling up
        out = _Outbox(maxsize=8)
        # the framed data plane takes raw payloads beside their messages; gRPC does not
        raw = bool(getattr(context, "raw_payloads", False))

        loop = asyncio.get_running_loop()

        async def one(msg: Any) -> None:
            req, rid = msg.request, msg.request_id
            use_shm = self._shm and req.host_id == self.host_id
            # keys the consumer holds a version of: answered by a delta of it (off the loop)
            wants = {d.index: d for d in req.deltas}
            if wants:
                self.deltas.sync(self.core.graphs.graphs)
            # the rendezvous' own futures, no task a key: a value sent already is answered at
            # once, a later one from its send's callback (every wake-up costs here)
            rdv: Any = None
            futs: list[asyncio.Future[Any]] = []
            callbacks: list[Callable[[asyncio.Future[Any]], None]] = []
            ready: list[int] = []
            wake: list[asyncio.Future[None] | None] = [None]

            def arrived(i: int, _f: asyncio.Future[Any]) -> None:
                ready.append(i)
                w = wake[0]
                if w is not None and not w.done():
                    w.set_result(None)

            try:
                for i, key in enumerate(req.keys):
                    rdv, fut = self.core.recv_tensor_future(req.step_id, key)
                    futs.append(fut)
                    callbacks.append(functools.partial(arrived, i))
                    if fut.done():
                        ready.append(i)
                    else:
                        fut.add_done_callback(callbacks[i])
                remaining = len(futs)
                while remaining:
                    if not ready:
                        woken = wake[0] = asyncio.get_running_loop().create_future()
                        try:
                            await woken
                        finally:
                            wake[0] = None
                    # every tensor ready now goes in one message (a message costs more than its
                    # bytes); raw-byte streams of big tensors are cut at CHUNK_BYTES
                    now = list(ready)
                    ready.clear()
                    remaining -= len(now)
                    batch: list[Any] = []
                    size = 0
                    for i in now:
                        value = futs[i].result()
                        self.core.rendezvous.consumed(req.step_id)
                        want = wants.get(i)
                        version, is_delta = 0, False
                        if want is not None and delta.deltable(value):
                            answer = await loop.run_in_executor(
                                None, self.deltas.begin, req.keys[i], value,
                                want.have_version, want.codec, want.level)
                            if isinstance(answer, delta.DeltaStream):
                                await self._send_blocks(out, rid, i, value, answer, raw)
                                continue
                            value, version, is_delta = answer.payload, answer.version, False
                        for chunk in tensors.encode(i, value, use_shm, self.pool, raw, version,
                                                    is_delta):
                            if isinstance(chunk, tensors.RawChunk):
                                # bytes beside the message, from the array's memory; the
                                # messages queued before it go first, to keep the order
                                if batch:
                                    await out.put(worker_pb2.RecvTensorStreamResponse(
                                        request_id=rid, chunks=batch))
                                    batch, size = [], 0
                                await out.put(RawFrame(worker_pb2.RecvTensorStreamResponse(
                                    request_id=rid, chunk=chunk.meta), chunk.payload))
                                continue
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
                for i, fut in enumerate(futs):
                    if not fut.done():
                        fut.remove_done_callback(callbacks[i])
                        rdv.forget(req.keys[i], fut)
                    elif not fut.cancelled():
                        fut.exception()  # seen: the answer carried the first failure

        def releases(msg: Any) -> bool:
            """Give back the segments a message returns; True when that is all it carries."""
            if self.pool is not None:
                for r in msg.releases:
                    self.pool.release(r.name, r.lease)
            return not msg.HasField("request") and not msg.cancel

        async for answer in _serve_stream(request_iterator, out, one, cancellable=True,
                                          consume=releases):
            yield answer

    async def CleanupGraph(self, request: Any, context: Any) -> Any:
        self.core.rendezvous.step_done(request.step_id)
        return worker_pb2.CleanupGraphResponse()

    async def Abort(self, request: Any, context: Any) -> Any:
        self.core.abort_step(request.step_id, request.message, request.code or errors.ABORTED)
        return worker_pb2.AbortResponse()

    async def Reset(self, request: Any, context: Any) -> Any:
        self.core.reset(list(request.containers))
        return worker_pb2.ResetResponse()
