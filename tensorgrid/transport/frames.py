"""The framed data plane: the hot-path streams (RunGraph and RecvTensor) over TCP (or TLS).

The messages are the WorkerService's own (``RunGraphStreamRequest`` ... from worker.proto); only
the framing is lighter than gRPC's. A round trip of such a message costs about half of a gRPC
stream message's, and a third of its CPU, which is what a training step is made of. gRPC stays the
control plane (registration, status, aborts, health, the master) and the data plane's fallback
when a peer advertises no ``data_address``.

A connection carries one stream. Its first frame says which and presents the bearer token; then
every frame is ``<u32 length><u8 kind><protobuf>``, little-endian, except RAW frames, whose tensor
bytes follow their message (``wire``): the server writes them from the producer's array and the
client (a ``BufferedProtocol`` over ``wire.FrameReader``) receives them straight into the
consumer's tensor.

Given ``ssl`` contexts (``TlsFiles.server_ssl_context``/``client_ssl_context``) the plane speaks
TLS: the server asks every peer for a certificate of the cluster's CA, and accepts a connection
only from a certificate that names one of the cluster's tasks or the master (``peers``); a
plaintext client fails the handshake before any frame is read.
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import json
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

from tensorgrid.core import errors
from tensorgrid.transport.sockstream import SocketStream, serve_plain
from tensorgrid.transport.tls import peer_common_name
from tensorgrid.transport.wire import (
    HEAD,
    HELLO,
    MAX_FRAME,
    RAW,
    RECV_REQ,
    RECV_RESP,
    RUN_REQ,
    RUN_RESP,
    TYPES,
    FrameReader,
    Landed,
    RawFrame,
    Sink,
    frame,
    raw_head,
)

__all__ = ["HELLO", "RAW", "DataPlaneServer", "FramedCall", "Landed", "RawFrame", "frame",
           "read_frame"]

log = logging.getLogger("tensorgrid.transport")

_TYPES = TYPES
_STREAMS = {"run": (RUN_REQ, RUN_RESP), "recv": (RECV_REQ, RECV_RESP)}
_HEAD = HEAD
MAX_HELLO = 4096  # a hello is a stream name and a token: nothing a peer declares is read first
HANDSHAKE_S = 10.0  # a TLS handshake that takes longer is dropped
# a connection of the server: asyncio's streams under TLS, the socket itself on plain TCP
Reader = asyncio.StreamReader | SocketStream
Writer = asyncio.StreamWriter | SocketStream


async def read_frame(reader: Reader, peer: str = "") -> tuple[int, bytes]:
    """One ordinary frame (kind, body); a length over ``MAX_FRAME`` is refused unread."""
    head = await reader.readexactly(_HEAD.size)
    length, kind = _HEAD.unpack(head)
    if length > MAX_FRAME:
        raise errors.InvalidArgumentError(
            f"Data-plane frame of {length} bytes{f' from {peer}' if peer else ''} is over the "
            f"limit of {MAX_FRAME}")
    return kind, await reader.readexactly(length)


class _FramedContext:
    """The context a stream handler gets on this plane: its answers may be ``RawFrame``s."""

    raw_payloads = True


_FRAMED = _FramedContext()


def _write_answer(writer: Writer, answer: Any) -> None:
    if isinstance(answer, RawFrame):
        # the header is small; the payload goes from the array's memory (on plain TCP the
        # kernel copies it straight from there: ``sockstream``)
        writer.write(raw_head(answer.message, len(answer.payload)))
        writer.write(answer.payload)
    else:
        writer.write(frame(answer))


TLS_SLICE = 256 * 1024  # a TLS transport encrypts what it is given at once: hand it slices


async def _write_sliced(writer: Writer, answer: RawFrame) -> None:
    """A RAW frame over TLS, its payload in slices with a drain after each: the peer decrypts
    one slice while this side encrypts the next, and the encrypted copy the TLS transport keeps
    is a slice, not the whole piece."""
    payload = answer.payload
    writer.write(raw_head(answer.message, len(payload)))
    for offset in range(0, len(payload), TLS_SLICE):
        writer.write(payload[offset:offset + TLS_SLICE])
        await writer.drain()


def _nodelay(writer: Writer) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


# ------------------------------------------------------------------------------------- server


class DataPlaneServer:
    """Serves a WorkerServicer's two stream handlers on a TCP port of their own.

    Args:
        servicer: the task's WorkerServicer (its ``RunGraphStream``/``RecvTensorStream``).
        host: the interface to listen on (the task's own).
        token: the bearer token every connection must present.
        ssl_context: serve TLS with this server context (None: plain TCP).
        peers: under TLS, whether a certificate's common name may use this plane (None: any
            certificate the context accepts).

    Attributes:
        streams: connections accepted (past the TLS handshake, the peer check and the hello).
        raw_bytes: tensor bytes sent in RAW frames.
    """

    def __init__(self, servicer: Any, host: str, token: str | None = None, *,
                 ssl_context: ssl.SSLContext | None = None,
                 peers: Callable[[str], bool] | None = None) -> None:
        self.servicer = servicer
        self.host = host
        self.token = token or ""
        self.ssl_context = ssl_context
        self.peers = peers
        self.port = 0
        self.streams = 0
        self.raw_bytes = 0
        self._server: asyncio.base_events.Server | None = None
        self._plain: tuple[socket.socket, asyncio.Task[None]] | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        if self.ssl_context is None:
            self._plain = await serve_plain(self.host, self._serve)
            self.port = int(self._plain[0].getsockname()[1])
            return self.port
        self._server = await asyncio.start_server(
            self._serve, self.host, 0, ssl=self.ssl_context,
            ssl_handshake_timeout=HANDSHAKE_S if self.ssl_context is not None else None)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._plain is not None:
            listener, accepting = self._plain
            self._plain = None
            accepting.cancel()
            listener.close()
        for task in list(self._connections):
            task.cancel()

    async def _serve(self, reader: Reader, writer: Writer) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        _nodelay(writer)
        try:
            if not self._peer_allowed(writer):
                return
            # the hello is checked before anything the peer declares is read or allocated
            hello = await asyncio.wait_for(_read_hello(reader), 10.0)
            stream = _STREAMS.get(str(hello.get("stream", "")))
            # as on the gRPC side: a task without a token accepts any caller
            if stream is None or (self.token and not hmac.compare_digest(
                    str(hello.get("token", "")).encode(), self.token.encode())):
                log.warning("data plane: refused a connection (bad hello or token)")
                return
            req_kind, _ = stream
            handler = self.servicer.RunGraphStream if req_kind == RUN_REQ else \
                self.servicer.RecvTensorStream
            peer = "{}:{}".format(*(writer.get_extra_info("peername") or ("?", "?"))[:2])
            self.streams += 1
            async for answer in handler(_requests(reader, req_kind, peer), _FRAMED):
                if isinstance(answer, RawFrame):
                    self.raw_bytes += len(answer.payload)
                    if self.ssl_context is not None:
                        await _write_sliced(writer, answer)
                        continue
                _write_answer(writer, answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass  # the peer went away: its requests were cancelled by the handler
        except asyncio.CancelledError:
            pass
        finally:
            writer.close()
            if task is not None:
                self._connections.discard(task)

    def _peer_allowed(self, writer: Writer) -> bool:
        """Under TLS, whether the peer's certificate (verified by the handshake) names one of
        the peers this plane serves; always True on plain TCP."""
        if self.ssl_context is None or self.peers is None:
            return True
        name = peer_common_name(writer.get_extra_info("peercert"))
        if name is None or not self.peers(name):
            log.warning("data plane: refused a TLS connection from %r (not a task of the "
                        "cluster)", name)
            return False
        return True


async def _read_hello(reader: Reader) -> dict[str, Any]:
    """The connection's first frame as a JSON object; ``{}`` (refused) when it is not a hello
    of at most ``MAX_HELLO`` bytes, without reading a longer body."""
    length, kind = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    if kind != HELLO or length > MAX_HELLO:
        return {}
    try:
        hello = json.loads(await reader.readexactly(length))
    except ValueError:
        return {}
    return hello if isinstance(hello, dict) else {}


async def _requests(reader: Reader, want: int, peer: str) -> AsyncIterator[Any]:
    cls = _TYPES[want]
    while True:
        try:
            kind, body = await read_frame(reader, peer)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        if kind != want:
            raise errors.InvalidArgumentError(
                f"Unexpected data-plane frame kind {kind} from {peer}")
        yield cls.FromString(body)


# ------------------------------------------------------------------------------------- client


class _ClientProtocol(asyncio.BufferedProtocol):
    """Feeds a FrameReader straight from the socket (``recv_into`` its buffers) and queues what it
    parses for the call's reader; pauses writing when the transport asks."""

    def __init__(self, reader: FrameReader) -> None:
        self.frames = reader
        self.transport: asyncio.Transport | None = None
        self.queue: collections.deque[Any] = collections.deque()
        self.failure: BaseException | None = None
        self.closed = False
        self._waiter: asyncio.Future[None] | None = None
        self._can_write: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self.frames.received(nbytes)
        except errors.OpError as exc:
            self._end(exc)
            if self.transport is not None:
                self.transport.abort()
            return
        ready = self.frames.take()
        if ready:
            self.queue.extend(ready)
            self._wake()

    def eof_received(self) -> bool:
        self._end(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    def pause_writing(self) -> None:
        if self._can_write is None or self._can_write.done():
            self._can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            self._can_write.set_result(None)

    async def drain(self) -> None:
        if self._can_write is not None and not self._can_write.done():
            await self._can_write

    def _end(self, exc: BaseException | None) -> None:
        if not self.closed:
            self.closed, self.failure = True, exc
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


class FramedCall:
    """A client stream with the part of a gRPC stream call's interface that ``streams._Stream``
    uses (``write``, ``async for``, ``cancel``); it connects on the first write.

    Args:
        address: the peer's data address ('host:port').
        stream: 'run' or 'recv'.
        token: the bearer token the hello presents.
        peer: the peer task's name, for errors.
        on_broken: called when the connection fails or closes (the address may be stale).
        sink: where the payloads of RAW frames go (see ``wire.Sink``); the messages of those
            frames then come out of the iteration as ``Landed``.
        ssl_context: connect with TLS (verifying the peer's host) with this client context.
    """

    def __init__(self, address: str, stream: str, token: str | None, peer: str,
                 on_broken: Callable[[], None] | None = None, sink: Sink | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self._address = address
        self._ssl = ssl_context
        self._on_broken = on_broken
        self._stream = stream
        self._token = token or ""
        self._peer = peer
        self._protocol = _ClientProtocol(FrameReader(_STREAMS[stream][1], peer, sink))
        self._connected = asyncio.get_running_loop().create_future()
        self._connecting = False
        self._closed = False

    async def _connect(self) -> None:
        self._connecting = True
        try:
            host, _, port = self._address.rpartition(":")
            host = host.strip("[]")
            secure = self._ssl is not None
            transport, _ = await asyncio.get_running_loop().create_connection(
                lambda: self._protocol, host, int(port), ssl=self._ssl,
                server_hostname=host if secure else None,
                ssl_handshake_timeout=HANDSHAKE_S if secure else None)
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            hello = json.dumps({"stream": self._stream, "token": self._token}).encode()
            transport.write(_HEAD.pack(len(hello), HELLO) + hello)
            self._connected.set_result(None)
        except (OSError, ValueError) as exc:
            self._broken()
            self._connected.set_exception(errors.UnavailableError(
                f"Task {self._peer} is unavailable: its data plane refused a connection: {exc}"))

    def _broken(self) -> None:
        if self._on_broken is not None:
            self._on_broken()

    async def write(self, msg: Any) -> None:
        if self._closed:
            raise errors.UnavailableError(f"Stream to task {self._peer} is closed")
        if not self._connecting:
            await self._connect()
        await asyncio.shield(self._connected)
        proto = self._protocol
        if proto.closed or proto.transport is None or proto.transport.is_closing():
            self._broken()
            raise errors.UnavailableError(
                f"Task {self._peer} is unavailable: its data-plane connection broke")
        proto.transport.write(frame(msg))
        await proto.drain()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        await asyncio.shield(self._connected)
        proto = self._protocol
        while True:
            while proto.queue:
                yield proto.queue.popleft()
            if proto.closed:
                break
            await proto.wait()
        if self._closed:
            return
        self._broken()
        if isinstance(proto.failure, errors.OpError):
            raise proto.failure
        raise errors.UnavailableError(
            f"Task {self._peer} is unavailable: its data-plane connection closed"
            + (f" ({proto.failure})" if proto.failure else ""))

    def cancel(self) -> None:
        self._closed = True
        transport = self._protocol.transport
        if transport is not None:
            transport.close()
        if not self._connected.done():
            self._connected.set_exception(errors.CancelledError("stream cancelled"))
