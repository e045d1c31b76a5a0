"""A plain-TCP server whose connections send from the caller's memory.

asyncio's socket transport sends what the kernel takes at once and copies the rest of every
write into a buffer of its own; a tensor's RAW payload is far bigger than a socket's send
buffer, so almost all of it was copied once by Python before the kernel copied it again (a
third of the sending host's CPU for a big pull). Here the event loop's ``sock_sendall`` sends
straight from the memoryview it is given, resuming from where the kernel stopped each time the
socket can take more: the only copy is the kernel's.

``SocketStream`` gives a handler the part of the ``StreamReader``/``StreamWriter`` interface the
data plane's server uses (``readexactly``, ``write``, ``drain``, ``get_extra_info``, ``close``), so
one handler serves these connections and TLS ones (whose transport must encrypt, i.e. copy,
anyway). A written buffer must stay unchanged until ``drain`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from typing import Any

# bytes taken from the socket per read of requests (they are small)
READ_BYTES = 64 * 1024
BACKLOG = 128


class SocketStream:
    """Reads and writes one connected socket through the running loop (no transport)."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes | memoryview] = []
        self._in = bytearray()
        self._scratch = bytearray(READ_BYTES)
        self._closed = False
        try:
            self._peer: Any = sock.getpeername()
        except OSError:
            self._peer = None

    async def readexactly(self, n: int) -> bytes:
        """``n`` bytes; ``IncompleteReadError`` when the peer closes first."""
        view = memoryview(self._scratch)
        while len(self._in) < n:
            got = await self._loop.sock_recv_into(self._sock, view)
            if not got:
                partial = bytes(self._in)
                self._in.clear()
                raise asyncio.IncompleteReadError(partial, n)
            self._in += view[:got]
        out = bytes(self._in[:n])
        del self._in[:n]
        return out

    def write(self, data: bytes | memoryview) -> None:
        """Queue ``data`` (not copied: it must stay unchanged until ``drain`` returns)."""
        if self._closed:
            raise ConnectionResetError("write on a closed data-plane connection")
        if len(data):
            self._out.append(data)

    async def drain(self) -> None:
        """Send everything written so far; raises ``ConnectionError`` when the peer is gone."""
        out, self._out = self._out, []
        for data in out:
            await self._loop.sock_sendall(self._sock, data)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        if name == "socket":
            return self._sock
        return default

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._out.clear()
            self._sock.close()


async def serve_plain(host: str, handler: Callable[[SocketStream, SocketStream], Awaitable[None]],
                      on_conn: Callable[[socket.socket], None] | None = None
                      ) -> tuple[socket.socket, asyncio.Task[None]]:
    """Listen on ``host`` (any free port) and run ``handler(stream, stream)`` for every
    connection (after ``on_conn(sock)``, to set its options).

    Returns:
        the listening socket (its port: ``getsockname()[1]``) and the accepting task; cancel the
        task and close the socket to stop.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    family, kind, proto, _, addr = infos[0]
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(addr)
        listener.listen(BACKLOG)
        listener.setblocking(False)
    except OSError:
        listener.close()
        raise

    async def accept() -> None:
        handlers: set[asyncio.Task[None]] = set()
        try:
            while True:
                try:
                    conn, _ = await loop.sock_accept(listener)
                except OSError:
                    # too many open files, a connection reset before it was taken: the next
                    # one may do; a closed listener ends the loop
                    if listener.fileno() < 0:
                        return
                    await asyncio.sleep(0.05)
                    continue
                if on_conn is not None:
                    with contextlib.suppress(OSError):
                        on_conn(conn)
                stream = SocketStream(conn)
                task = asyncio.ensure_future(handler(stream, stream))
                handlers.add(task)
                task.add_done_callback(handlers.discard)
        finally:
            for task in list(handlers):
                task.cancel()

    return listener, asyncio.ensure_future(accept())
