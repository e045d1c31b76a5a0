"""The data plane's plain-TCP server connections (``transport.sockstream``): writes sent from the
writer's memory, intact, and owned again once ``drain`` returns; a peer that goes away fails only
its own connection. Real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import struct

import numpy as np
import pytest

from tensorgrid.transport.sockstream import SocketStream, serve_plain

MB = 1 << 20


async def _read_all(reader: asyncio.StreamReader, n: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), 30)


def test_a_big_payload_is_sent_from_the_writers_memory_intact() -> None:
    payload = np.random.default_rng(0).integers(0, 255, 48 * MB, dtype=np.uint8)
    expected = payload.tobytes()

    async def handler(reader: SocketStream, writer: SocketStream) -> None:
        (n,) = struct.unpack("<I", await reader.readexactly(4))
        writer.write(struct.pack("<Q", n * len(payload)))
        for _ in range(n):
            writer.write(memoryview(payload))
        await writer.drain()
        # drained: the kernel has the bytes, so the writer owns its memory again
        payload[:] = 0
        writer.close()

    async def main() -> bytes:
        listener, accepting = await serve_plain("127.0.0.1", handler)
        try:
            reader, w = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
            w.write(struct.pack("<I", 1))
            (size,) = struct.unpack("<Q", await _read_all(reader, 8))
            got = await _read_all(reader, size)
            w.close()
            return got
        finally:
            accepting.cancel()
            listener.close()

    got = asyncio.run(main())
    assert len(got) == len(expected) and got == expected


def test_a_peer_that_goes_away_fails_its_connection_and_the_server_goes_on() -> None:
    failures: list[BaseException] = []
    big = np.ones(64 * MB, dtype=np.uint8)

    async def handler(reader: SocketStream, writer: SocketStream) -> None:
        try:
            await reader.readexactly(1)
            writer.write(memoryview(big))
            await writer.drain()
            await reader.readexactly(1)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            failures.append(exc)
        finally:
            writer.close()

    async def main() -> bytes:
        listener, accepting = await serve_plain("127.0.0.1", handler)
        port = listener.getsockname()[1]
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"x")
            await asyncio.sleep(0.2)
            w.transport.abort()  # gone with 64 MB unread
            deadline = asyncio.get_running_loop().time() + 10
            while not failures and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)  # still serving
            w2.write(b"y")
            got = await _read_all(r2, 4096)
            w2.close()
            return got
        finally:
            accepting.cancel()
            listener.close()

    assert asyncio.run(main()) == b"\x01" * 4096
    assert failures and isinstance(failures[0], (ConnectionError, asyncio.IncompleteReadError))


def test_a_stopped_server_refuses_connections() -> None:
    async def handler(reader: SocketStream, writer: SocketStream) -> None:
        writer.close()

    async def main() -> None:
        listener, accepting = await serve_plain("127.0.0.1", handler)
        port = listener.getsockname()[1]
        accepting.cancel()
        listener.close()
        await asyncio.sleep(0)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(main())


def test_writing_to_a_closed_stream_raises() -> None:
    async def main() -> None:
        a, b = socket.socketpair()
        stream = SocketStream(a)
        stream.close()
        with pytest.raises(ConnectionResetError, match="closed data-plane connection"):
            stream.write(b"late")
        b.close()

    asyncio.run(main())
