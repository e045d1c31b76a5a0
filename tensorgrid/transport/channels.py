"""gRPC channels, one per (address, event loop), with no message-size caps (tensors stream in
chunks anyway) and keepalives so a dead peer is noticed."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from tensorgrid.pb import master_pb2_grpc, worker_pb2_grpc

CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
    # reconnect quickly after a peer restarts, instead of backing off for a minute
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


def target_address(target: str) -> str:
    """'grpc://host:port' or 'host:port' -> 'host:port'."""
    return target[len("grpc://"):] if target.startswith("grpc://") else target


class ChannelPool:
    """aio channels and stubs by address, for the event loop they were made on."""

    def __init__(self, credentials: grpc.ChannelCredentials | None = None) -> None:
        self._channels: dict[tuple[str, int], grpc.aio.Channel] = {}
        self._credentials = credentials
        self._closing: set[asyncio.Future[None]] = set()

    def channel(self, address: str) -> grpc.aio.Channel:
        key = (address, id(asyncio.get_running_loop()))
        ch = self._channels.get(key)
        if ch is None:
            if self._credentials is not None:
                ch = grpc.aio.secure_channel(address, self._credentials, options=CHANNEL_OPTIONS)
            else:
                ch = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
            self._channels[key] = ch
        return ch

    def worker(self, address: str) -> Any:
        return worker_pb2_grpc.WorkerServiceStub(self.channel(address))

    def master(self, address: str) -> Any:
        return master_pb2_grpc.MasterServiceStub(self.channel(address))

    def drop(self, address: str) -> None:
        """Forget the channel of an address (its peer restarted or moved)."""
        for key in [k for k in self._channels if k[0] == address]:
            ch = self._channels.pop(key)
            self._closing.add(asyncio.ensure_future(ch.close()))

    async def close(self) -> None:
        chans = list(self._channels.values())
        self._channels.clear()
        for ch in chans:
            await ch.close()
