"""Client ends of the streamed hot path: one long-lived bidirectional call per peer, shared by many
requests that are matched to their answers by id.

If the stream breaks (the peer died or restarted), every request waiting on it fails at once with
``UnavailableError`` naming the peer, and the next request opens a new stream.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
from collections.abc import Callable
from typing import Any

import grpc

from tensorgrid.core import errors
from tensorgrid.pb import worker_pb2
from tensorgrid.transport import shm, tensors
from tensorgrid.transport.frames import FramedCall
from tensorgrid.transport.recvbuf import ReceiveBuffers
from tensorgrid.transport.status import from_rpc_error
from tensorgrid.transport.wire import Landed, Sink

# how long a given-back segment may wait for a request to ride on before it is sent alone
RELEASE_DELAY_S = 0.05


def error_of(status: Any) -> errors.OpError:
    """The OpError a StreamStatus describes."""
    return errors.make_error(status.code, status.message, node_name=status.node or None,
                             op_type=status.op or None, device=status.device or None,
                             derived=status.derived)


def _opener(grpc_call: Callable[[], Any], data_plane: Any, stream: str, task: str,
            address: str, sink: Sink | None = None) -> Callable[[], Any]:
    """Opens the stream over the peer's framed data plane when it has one (raw payloads going
    to ``sink``), else over gRPC."""
    if data_plane is None:
        return grpc_call

    async def open_call() -> Any:
        data_address = await data_plane.get(address)
        if not data_address:
            return grpc_call()
        return FramedCall(data_address, stream, data_plane.token, task,
                          on_broken=lambda: data_plane.forget(address), sink=sink,
                          ssl_context=data_plane.ssl_context)

    return open_call


class _Stream:
    """One bidirectional call; ``dispatch`` is called with every message read."""

    def __init__(self, open_call: Callable[[], Any], dispatch: Callable[[Any], None],
                 on_broken: Callable[[errors.OpError], None], peer: str, address: str,
                 what: str) -> None:
        self._open_call = open_call
        self._dispatch = dispatch
        self._on_broken = on_broken
        self._peer = peer
        self._address = address
        self._what = what
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Future[None]] = set()

    async def write(self, msg: Any) -> None:
        async with self._lock:  # writes on one call must not overlap
            if self._call is None:
                call = self._open_call()
                if inspect.isawaitable(call):
                    call = await call
                self._call = call
                self._reader = asyncio.ensure_future(self._read(self._call))
            try:
                await self._call.write(msg)
            except (grpc.RpcError, asyncio.InvalidStateError, errors.OpError) as exc:
                err = self._write_error(exc)
                self._broken(err)
                raise err from None

    async def _read(self, call: Any) -> None:
        try:
            async for msg in call:
                self._dispatch(msg)
            exc: BaseException | None = None
        except (grpc.RpcError, errors.OpError) as e:
            exc = e
        except asyncio.CancelledError:
            return
        if self._call is call:
            self._broken(self._error(exc))

    def _error(self, exc: BaseException | None) -> errors.OpError:
        if isinstance(exc, errors.OpError):
            return exc if exc.error_code != errors.CANCELLED else errors.UnavailableError(
                f"Task {self._peer} ({self._address}) is unavailable: {exc.message}")
        if isinstance(exc, grpc.RpcError):
            return from_rpc_error(exc, self._peer, self._address, self._what)
        return errors.UnavailableError(
            f"Task {self._peer} ({self._address}) is unavailable: its {self._what} stream ended")

    def _write_error(self, exc: BaseException) -> errors.OpError:
        """A write fails when the call ended under it (the peer died or restarted), before the
        reader saw the end. gRPC's aio then raises INTERNAL "Internal error from Core" instead
        of the call's status (grpc/grpc#36066): the stream broke, which is retryable."""
        err = self._error(exc)
        if err.error_code != errors.INTERNAL:
            return err
        return errors.UnavailableError(
            f"Task {self._peer} ({self._address}) is unavailable: its {self._what} stream broke "
            f"while writing to it ({err.message})")

    def _broken(self, err: errors.OpError) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        self._on_broken(err)

    def close(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.cancel()
        if self._reader is not None:
            self._reader.cancel()

    def send_later(self, msg: Any) -> None:
        """Send a message without waiting (a cancellation, released segments); failures are
        ignored."""
        async def send() -> None:
            try:
                await self.write(msg)
            except errors.OpError:
                pass

        task = asyncio.ensure_future(send())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


class RunGraphStreamClient:
    """RunGraph to one task over a shared stream."""

    def __init__(self, stub_for: Callable[[], Any], task: str, address: str,
                 metadata: Any = None, data_plane: Any = None) -> None:
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count(1)
        self._task = task
        # a peer still starting is waited for (the master's health monitor fails the step if it
        # is dead instead), so a cluster whose tasks start in any order needs no retries
        opener = _opener(lambda: stub_for().RunGraphStream(metadata=metadata,
                                                           wait_for_ready=True),
                         data_plane, "run", task, address)
        self._stream = _Stream(opener, self._on_message, self._fail_all, task, address,
                               "RunGraph")

    def _on_message(self, msg: Any) -> None:
        fut = self._pending.pop(msg.request_id, None)
        if fut is None or fut.done():
            return
        if msg.HasField("status") and msg.status.code:
            fut.set_exception(error_of(msg.status))
        else:
            fut.set_result(msg.response)

    def _fail_all(self, err: errors.OpError) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)

    async def run_graph(self, request: Any, timeout: float) -> Any:
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        try:
            await self._stream.write(worker_pb2.RunGraphStreamRequest(request_id=rid,
                                                                      request=request))
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise errors.DeadlineExceededError(
                f"RunGraph on task {self._task} exceeded its deadline ({timeout:.3g}s)") from None
        finally:
            self._pending.pop(rid, None)

    def close(self) -> None:
        self._stream.close()


class _Recv:
    __slots__ = ("assembler", "futures", "remaining")

    def __init__(self, futures: list[asyncio.Future[Any]], assembler: tensors.Assembler) -> None:
        self.futures = futures
        self.assembler = assembler
        self.remaining = len(futures)


class RecvTensorStreamClient:
    """RecvTensor from one peer over a shared stream; a request may carry many keys. Streamed
    tensors land in memory from ``buffers`` (shared by a task's streams; None: a pool of its
    own)."""

    def __init__(self, stub_for: Callable[[], Any], task: str, address: str,
                 metadata: Any = None, data_plane: Any = None,
                 buffers: ReceiveBuffers | None = None) -> None:
        self._pending: dict[int, _Recv] = {}
        self._buffers = buffers if buffers is not None else ReceiveBuffers()
        self._ids = itertools.count(1)
        # segments the producer lends us (same host): mapped in place, given back when the
        # arrays that view them are collected (from any thread: sent from the loop, batched)
        self._mappings = shm.MappingCache()
        self._loop = asyncio.get_running_loop()
        self._to_release: list[Any] = []
        self._task = task
        opener = _opener(lambda: stub_for().RecvTensorStream(metadata=metadata,
                                                             wait_for_ready=True),
                         data_plane, "recv", task, address, sink=self._raw_target)
        self._stream = _Stream(opener, self._on_message, self._fail_all, task, address,
                               "RecvTensor")

    def _raw_target(self, msg: Any, nbytes: int) -> memoryview | None:
        """Where a raw piece's bytes are received: straight into its tensor's buffer (None, to
        drop them, when the request is gone or the piece is bad; the latter fails the request)."""
        entry = self._pending.get(msg.request_id)
        if entry is None:
            return None
        try:
            return entry.assembler.target(msg.chunk, nbytes)
        except errors.OpError as exc:
            self._fail(msg.request_id, entry, exc)
            return None

    def _fail(self, rid: int, entry: _Recv, exc: errors.OpError) -> None:
        self._pending.pop(rid, None)
        for f in entry.futures:
            if not f.done():
                f.set_exception(exc)

    def _on_landed(self, landed: Landed) -> None:
        msg = landed.message
        entry = self._pending.get(msg.request_id)
        if entry is None:
            return
        try:
            done = entry.assembler.landed(msg.chunk, landed.nbytes)
        except errors.OpError as exc:
            self._fail(msg.request_id, entry, exc)
            return
        if done is not None:
            self._resolve(msg.request_id, entry, *done)

    def _resolve(self, rid: int, entry: _Recv, i: int, value: Any) -> None:
        if not entry.futures[i].done():
            entry.futures[i].set_result(value)
        entry.remaining -= 1
        if entry.remaining == 0:
            self._pending.pop(rid, None)

    def _on_message(self, msg: Any) -> None:
        if isinstance(msg, Landed):
            self._on_landed(msg)
            return
        entry = self._pending.get(msg.request_id)
        if entry is None:
            return
        if msg.HasField("status") and msg.status.code:
            self._pending.pop(msg.request_id, None)
            err = error_of(msg.status)
            for f in entry.futures:
                if not f.done():
                    f.set_exception(err)
            return
        for chunk in (msg.chunks if len(msg.chunks) else (msg.chunk,)):
            try:
                done = entry.assembler.add(chunk)
            except errors.OpError as exc:
                self._fail(msg.request_id, entry, exc)
                return
            if done is not None:
                self._resolve(msg.request_id, entry, *done)
                if entry.remaining == 0:
                    return

    def _fail_all(self, err: errors.OpError) -> None:
        pending, self._pending = self._pending, {}
        for entry in pending.values():
            for f in entry.futures:
                if not f.done():
                    f.set_exception(err)

    def _release(self, name: str, lease: int) -> None:
        """A lent segment's array was collected (any thread): give the lease back with the next
        request, or after ``RELEASE_DELAY_S`` when none comes."""
        self._to_release.append(worker_pb2.ShmRelease(name=name, lease=lease))
        if len(self._to_release) == 1:
            try:
                self._loop.call_soon_threadsafe(self._loop.call_later, RELEASE_DELAY_S,
                                                self._flush_releases)
            except RuntimeError:
                pass  # the loop is gone: the producer reclaims its lease after a while

    def _take_releases(self) -> list[Any]:
        batch, self._to_release = self._to_release, []
        return batch

    def _flush_releases(self) -> None:
        batch = self._take_releases()
        if batch:
            self._stream.send_later(worker_pb2.RecvTensorStreamRequest(releases=batch))

    async def request(self, request: Any, futures: list[asyncio.Future[Any]]) -> None:
        """Ask for ``request.keys``; each future gets its tensor (or the failure)."""
        rid = next(self._ids)
        self._pending[rid] = _Recv(futures, tensors.Assembler(self._mappings, self._release,
                                                              peer=self._task,
                                                              buffers=self._buffers))

        def abandoned(_f: asyncio.Future[Any]) -> None:
            entry = self._pending.get(rid)
            if entry is not None and all(f.done() for f in entry.futures):
                self._pending.pop(rid, None)
                if any(f.cancelled() for f in entry.futures):
                    self._stream.send_later(worker_pb2.RecvTensorStreamRequest(
                        request_id=rid, cancel=True))

        for f in futures:
            f.add_done_callback(abandoned)
        try:
            await self._stream.write(worker_pb2.RecvTensorStreamRequest(
                request_id=rid, request=request, releases=self._take_releases()))
        except errors.OpError as exc:
            self._pending.pop(rid, None)
            for f in futures:
                if not f.done():
                    f.set_exception(exc)

    def close(self) -> None:
        self._stream.close()
