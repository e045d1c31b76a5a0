"""The master's sessions in Redis, so that they outlive a master restart.

One hash per session (``tg:master:session:<handle>``): the graph as GraphDef bytes, the session
options as JSON, the graph version, the creation time and the client that opened it. Written when a session is created or
extended (never per step), dropped when it is closed; it expires after ``idle_s`` unused (the
master refreshes the sessions in use at each idle sweep).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

PREFIX = "tg:master:session:"


class RedisSessionStore:
    """A ``tensorgrid.master.core.SessionStore`` over Redis."""

    def __init__(self, url: str, timeout: float = 2.0, idle_s: float | None = None) -> None:
        self.url = url
        # a session nobody used for this long expires in Redis too (refreshed by ``touch``)
        self.idle_s = idle_s
        self._redis = aioredis.Redis.from_url(url, socket_timeout=timeout,
                                              socket_connect_timeout=timeout)

    async def put(self, handle: str, record: dict[str, Any]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(PREFIX + handle, mapping={
                "graph": record["graph"], "options": json.dumps(record["options"]),
                "version": str(record["version"]), "created": str(record["created"]),
                "client": record.get("client", "")})
            if self.idle_s is not None:
                pipe.expire(PREFIX + handle, max(1, int(self.idle_s)))
            await pipe.execute()

    async def touch(self, handles: Sequence[str]) -> None:
        """The sessions were used: they stay for another ``idle_s``."""
        if self.idle_s is None or not handles:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for handle in handles:
                pipe.expire(PREFIX + handle, max(1, int(self.idle_s)))
            await pipe.execute()

    async def get(self, handle: str) -> dict[str, Any] | None:
        fields = await self._redis.hgetall(PREFIX + handle)
        if not fields or b"graph" not in fields:
            return None
        client = fields.get(b"client", b"")  # absent in sessions stored before clients were named
        return {"graph": fields[b"graph"], "options": json.loads(fields[b"options"]),
                "version": int(fields[b"version"]), "created": float(fields[b"created"]),
                "client": client.decode() if isinstance(client, bytes) else str(client)}

    async def delete(self, handle: str) -> None:
        await self._redis.delete(PREFIX + handle)

    async def close(self) -> None:
        await self._redis.aclose()
