"""Redis tracking checkpoints: per cluster and absolute directory, the manifest of every committed
checkpoint, the index (history) and ``latest``, over ``redis.asyncio``, plus a small synchronous
facade (``SyncCheckpointStore``) for the SDK, the CLI and tests. The tensors are in files (a
tensor bundle per checkpoint, ``bundle.py``); Redis holds no tensor bytes.

The protocol (keys in ``manifest.py``):

* **commit** (after the files of a save are complete): WATCH the index and ``latest``; then in
  one MULTI/EXEC write the manifest, ZADD the index, SET ``latest`` and add the directory to the
  cluster's set. A change to a watched key in between makes EXEC fail and the commit start over.
  Then checkpoints beyond ``max_to_keep`` are removed, oldest first: from Redis, then their files.
* **restore** (``check_files``, then the reader): the manifest is read (checked against its own
  sha256) and the files against it (sizes, the index's CRC-32C); each tensor's CRC-32C is checked
  as it is read. ``DataLossError`` names the checkpoint and what is wrong; a checkpoint whose index
  file is gone counts as removed (``NotFoundError``), not as damaged.

Redis being down gives ``UnavailableError`` (retryable) naming the Redis and what was being done.
Listings for people and tools are in ``listing.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import redis.asyncio as aioredis
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from tenacity import (
    AsyncRetrying,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_incrementing,
)

from tensorgrid.checkpoint import files as cf
from tensorgrid.checkpoint import fs
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint import state_file as sf
from tensorgrid.checkpoint.aio import run_sync
from tensorgrid.checkpoint.bundle_reader import BundleReader
from tensorgrid.checkpoint.files import all_damaged, check_manifest_files, read_bundle, skip_damaged
from tensorgrid.checkpoint.redis_errors import redact, translate
from tensorgrid.checkpoint.redis_server import redis_url
from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape

log = logging.getLogger("tensorgrid.checkpoint")

COMMIT_ATTEMPTS = 20


def _on_watch_error() -> AsyncRetrying:
    """Retries of a transaction whose watched keys changed (another saver wrote meanwhile):
    ``COMMIT_ATTEMPTS`` attempts, 5 ms more wait after each; ``RetryError`` when used up.
    (The checkpoint layer sits below ``tensorgrid.client.retry``: the policy is stated here.)"""
    return AsyncRetrying(retry=retry_if_exception_type(rexc.WatchError),
                         stop=stop_after_attempt(COMMIT_ATTEMPTS),
                         wait=wait_incrementing(start=0.005, increment=0.005))

CONNECT_TIMEOUT_S = 5.0
SOCKET_TIMEOUT_S = 60.0

T = TypeVar("T")


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class CheckpointStore:
    """The checkpoints one Redis tracks for one cluster. Use
    ``async with CheckpointStore.connect(url) as store``.

    Args:
        client: a ``redis.asyncio.Redis`` (bytes responses).
        url: its URL, for messages.
        cluster: the namespace of the checkpoints (one per cluster sharing the Redis).
    """

    def __init__(self, client: aioredis.Redis, url: str = "", *,
                 cluster: str = mf.DEFAULT_CLUSTER) -> None:
        self._r = client
        self.url = url
        self.cluster = cluster

    @classmethod
    def connect(cls, url: str, *, cluster: str = mf.DEFAULT_CLUSTER,
                connect_timeout_s: float = CONNECT_TIMEOUT_S,
                socket_timeout_s: float = SOCKET_TIMEOUT_S) -> CheckpointStore:
        """A store on a new client of ``url`` (no I/O until the first call).

        Raises:
            InvalidArgumentError: the URL is malformed.
        """
        try:
            client = aioredis.Redis.from_url(
                url, socket_connect_timeout=connect_timeout_s, socket_timeout=socket_timeout_s,
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))
        except ValueError as exc:
            raise errors.InvalidArgumentError(f"Bad Redis URL {redact(url)!r}: {exc}") from None
        return cls(client, url, cluster=cluster)

    async def aclose(self) -> None:
        await self._r.aclose()

    async def __aenter__(self) -> CheckpointStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _keys(self, directory: str) -> mf.Keys:
        return mf.Keys(mf.normalize_directory(directory), self.cluster)

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Redis errors as OpErrors naming the Redis and ``what`` was being done."""
        try:
            yield
        except rexc.RedisError as exc:
            raise translate(exc, self.url, what) from None

    # ------------------------------------------------------------------------------ saving

    async def commit(self, directory: str, name: str, files: Sequence[Mapping[str, Any]],
                     tensors: Mapping[str, Any], global_step: int | None = None,
                     max_to_keep: int | None = 5,
                     state_file: str | None = sf.STATE_FILENAME) -> dict[str, Any]:
        """Track the checkpoint ``name`` (its files written and complete): manifest, index and
        ``latest`` in one transaction; then keep the newest ``max_to_keep`` (None or 0: all),
        removing older ones with their files, and rewrite the directory's state file
        ``state_file`` (None: leave it) to name what Redis tracks.

        Returns:
            The committed manifest.

        Raises:
            UnavailableError: Redis is unreachable; nothing was committed, unless the connection
                broke after EXEC (then the checkpoint is tracked).
        """
        keys = self._keys(directory)
        mf.check_name(name)
        path = mf.join_path(keys.directory, name)
        manifest = mf.build_manifest(keys.directory, name, files, tensors, global_step,
                                     time.time())
        with self._errors(f"saving checkpoint {path}"):
            try:
                async for attempt in _on_watch_error():
                    with attempt:
                        await self._commit_once(keys, name, manifest)
            except RetryError:
                raise errors.AbortedError(
                    f"Checkpoint {path} was not committed: its keys kept changing under "
                    f"{COMMIT_ATTEMPTS} attempts (another saver on the same directory?)") from None
        log.info("committed checkpoint %s (%d tensors)", path, len(tensors))
        try:
            await self._retire(keys, max_to_keep)
        except errors.OpError as exc:
            log.warning("Checkpoint %s is committed, but removing old checkpoints failed (a later "
                        "commit retries): %s", path, exc)
        await self._write_state(keys, state_file, create=True)
        return manifest

    async def _write_state(self, keys: mf.Keys, filename: str | None, create: bool) -> None:
        """Make the directory's state file name the checkpoints Redis tracks (oldest first, the
        latest as the model checkpoint); without ``create``, only a state file already there."""
        if filename is None:
            return
        path = f"{keys.directory}/{filename}"
        if not create and not await asyncio.to_thread(fs.filesystem(path).exists, path):
            return
        with self._errors(f"reading the checkpoints of {keys.directory}"):
            rows = await self._r.zrange(keys.index, 0, -1, withscores=True)
            latest = await self._r.get(keys.latest)
        # (withscores gives (member, score) pairs; the stubs' union also lists bare members)
        kept = [(_text(n), float(score) / 1000.0) for n, score in rows]  # type: ignore[str-unpack]
        await asyncio.to_thread(sf.mirror_state, keys.directory,
                                None if latest is None else _text(latest), kept, filename)

    async def _commit_once(self, keys: mf.Keys, name: str, manifest: dict[str, Any]) -> None:
        async with self._r.pipeline(transaction=True) as pipe:
            await pipe.watch(keys.index, keys.latest)
            last = await pipe.zrange(keys.index, -1, -1, withscores=True)
            score = max(time.time() * 1000.0, (float(last[0][1]) + 1.0) if last else 0.0)
            pipe.multi()
            pipe.set(keys.manifest(name), mf.encode_manifest(manifest))
            pipe.zadd(keys.index, {name: score})
            pipe.set(keys.latest, name)
            pipe.sadd(keys.dirs, keys.directory)
            await pipe.execute()

    async def _retire(self, keys: mf.Keys, max_to_keep: int | None) -> None:
        if not max_to_keep or max_to_keep <= 0:
            return
        with self._errors(f"removing old checkpoints of {keys.directory}"):
            names = [_text(n) for n in await self._r.zrange(keys.index, 0, -1)]
        for old in names[:-max_to_keep]:
            if await self.remove(keys.directory, old):
                log.info("removed checkpoint %s (max_to_keep=%d)",
                         mf.join_path(keys.directory, old), max_to_keep)

    async def remove(self, directory: str, name: str, *, files: bool = True) -> bool:
        """Stop tracking a checkpoint (index entry and manifest at once; ``latest`` moves to the
        newest one left) and, with ``files``, remove its files and rewrite the directory's
        ``checkpoint`` state file when there is one. Returns whether there was anything to
        remove."""
        keys = self._keys(directory)
        tracked = False
        with self._errors(f"removing checkpoint {mf.join_path(keys.directory, name)}"):
            try:
                async for attempt in _on_watch_error():
                    with attempt:
                        tracked = await self._remove_once(keys, name)
            except RetryError:
                raise errors.AbortedError(f"Could not remove checkpoint "
                                          f"{mf.join_path(keys.directory, name)}: its keys kept "
                                          "changing") from None
        removed = 0
        if files:
            removed = await asyncio.to_thread(cf.remove_files, mf.join_path(keys.directory, name))
            await self._write_state(keys, sf.STATE_FILENAME, create=False)
        return tracked or removed > 0

    async def _remove_once(self, keys: mf.Keys, name: str) -> bool:
        async with self._r.pipeline(transaction=True) as pipe:
            await pipe.watch(keys.index, keys.latest, keys.manifest(name))
            in_index = await pipe.zscore(keys.index, name) is not None
            has_manifest = bool(await pipe.exists(keys.manifest(name)))
            latest = await pipe.get(keys.latest)
            rest = [n for n in (_text(x) for x in await pipe.zrange(keys.index, 0, -1))
                    if n != name]
            pointed = latest is not None and _text(latest) == name
            if not (in_index or has_manifest or pointed):
                return False
            pipe.multi()
            pipe.zrem(keys.index, name)
            pipe.delete(keys.manifest(name))
            if pointed:
                if rest:
                    pipe.set(keys.latest, rest[-1])
                else:
                    pipe.delete(keys.latest)
            if not rest:
                pipe.srem(keys.dirs, keys.directory)
            await pipe.execute()
            return True

    # ------------------------------------------------------------------------------ reading

    async def directories(self) -> list[str]:
        """Every directory of the cluster that has (or had) a committed checkpoint, sorted."""
        with self._errors("listing checkpoint directories"):
            return sorted(_text(d) for d in await self._r.smembers(mf.dirs_key(self.cluster)))

    async def latest(self, directory: str) -> str | None:
        """The name ``latest`` points at, or None (not checked)."""
        keys = self._keys(directory)
        with self._errors(f"reading the latest checkpoint of {keys.directory}"):
            found = await self._r.get(keys.latest)
        return None if found is None else _text(found)

    async def names(self, directory: str) -> list[str]:
        """The committed names, oldest first."""
        keys = self._keys(directory)
        with self._errors(f"listing the checkpoints of {keys.directory}"):
            return [_text(n) for n in await self._r.zrange(keys.index, 0, -1)]

    async def committed(self, directory: str) -> tuple[list[str], str | None, list[Any]]:
        """The committed names (oldest first), what ``latest`` names, and each name's raw
        manifest (None where it is missing), read at once."""
        keys = self._keys(directory)
        with self._errors(f"listing the checkpoints of {keys.directory}"):
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.zrange(keys.index, 0, -1)
                pipe.get(keys.latest)
                names_raw, latest = await pipe.execute()
            names = [_text(n) for n in names_raw]
            raws = await self._r.mget([keys.manifest(n) for n in names]) if names else []
        return names, None if latest is None else _text(latest), list(raws)

    async def restore_candidates(self, directory: str) -> list[str]:
        """The names to try when restoring the latest checkpoint, in order: ``latest``, then the
        committed ones newest first."""
        keys = self._keys(directory)
        with self._errors(f"listing the checkpoints of {keys.directory}"):
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.get(keys.latest)
                pipe.zrevrange(keys.index, 0, -1)
                latest, newest_first = await pipe.execute()
        out = [_text(latest)] if latest is not None else []
        out += [n for n in (_text(x) for x in newest_first) if n not in out]
        return out

    async def read_manifest(self, directory: str, name: str) -> dict[str, Any]:
        """The checked manifest of a checkpoint.

        Raises:
            NotFoundError: Redis tracks no such checkpoint.
            DataLossError: it is committed (or ``latest``) but its manifest is missing, or the
                manifest is unreadable.
        """
        keys = self._keys(directory)
        path = mf.join_path(keys.directory, name)
        with self._errors(f"reading the manifest of checkpoint {path}"):
            raw = await self._r.get(keys.manifest(name))
            if raw is None:
                committed = await self._r.zscore(keys.index, name) is not None
                latest = await self._r.get(keys.latest)
        if raw is not None:
            return mf.decode_manifest(raw, path)
        pointed = latest is not None and _text(latest) == name
        if committed or pointed:
            how = "committed" if committed else "named by 'latest'"
            raise errors.DataLossError(f"Checkpoint {path} is damaged: it is {how}, but its "
                                       "manifest is missing")
        raise errors.NotFoundError(f"Checkpoint {path} not found: directory {keys.directory} "
                                   f"has no checkpoint named {name}")

    async def check_files(self, directory: str, name: str) -> dict[str, Any]:
        """The manifest of a checkpoint, its files checked against it (cheap: sizes and the
        index's checksum).

        Raises:
            NotFoundError: not tracked, or its index file is gone.
            DataLossError: as ``read_manifest`` and ``check_manifest_files``.
        """
        manifest = await self.read_manifest(directory, name)
        await asyncio.to_thread(check_manifest_files, manifest)
        return manifest

    async def latest_readable(self, directory: str) -> str | None:
        """The first restore candidate whose manifest reads back and whose files are there and
        intact by size and index checksum, or None; damaged ones on the way are logged."""
        for name in await self.restore_candidates(directory):
            try:
                await self.check_files(directory, name)
                return name
            except errors.NotFoundError:
                continue  # removed (its files are gone)
            except errors.DataLossError as exc:
                log.warning("skipping checkpoint %s: %s", mf.join_path(directory, name), exc)
        return None

    async def read_tensors(self, directory: str, name: str,
                           wanted: Mapping[str, tuple[dtypes.DType, TensorShape]] | None = None
                           ) -> dict[str, np.ndarray]:
        """Read and verify tensors of a tracked checkpoint (``wanted``: name -> the graph's dtype
        and shape; None: every tensor as saved).

        Raises:
            NotFoundError, InvalidArgumentError, DataLossError: as ``check_files`` and
                ``read_bundle``.
        """
        manifest = await self.check_files(directory, name)
        return await asyncio.to_thread(read_bundle, manifest["prefix"], wanted)

    async def restore_latest(self, directory: str) -> tuple[str, dict[str, np.ndarray]] | None:
        """Read and verify the newest intact checkpoint: ``latest``, then older committed ones,
        skipping (and logging) each damaged one.

        Returns:
            (its name, its tensors), or None when the directory has no checkpoint.

        Raises:
            DataLossError: every checkpoint is damaged (naming each and why).
        """
        directory = mf.normalize_directory(directory)
        skipped: list[str] = []
        for name in await self.restore_candidates(directory):
            try:
                return name, await self.read_tensors(directory, name)
            except errors.NotFoundError:
                continue  # removed since it was listed
            except errors.DataLossError as exc:
                skip_damaged(mf.join_path(directory, name), exc, skipped)
        if skipped:
            raise all_damaged(directory, skipped)
        return None

    async def verify(self, directory: str, name: str) -> dict[str, Any]:
        """Check a checkpoint's files and read every tensor, checking its CRC-32C.

        Returns:
            ``{"path", "tensors", "bytes", "files", "global_step", "time"}`` when it is intact.

        Raises:
            NotFoundError, DataLossError: as ``read_tensors``.
        """
        manifest = await self.check_files(directory, name)

        def read_each() -> None:
            with BundleReader(manifest["prefix"]) as reader:
                for tensor in reader.names():
                    reader.get_tensor(tensor)  # one tensor in memory at a time

        await asyncio.to_thread(read_each)
        return {"path": manifest["prefix"], **mf.summary(manifest)}

    async def files_ok(self, manifest: Mapping[str, Any]) -> str | None:
        """None when every file of a manifest is there with its size and the index with its
        checksum, else what is wrong (no tensor is read)."""
        problem = await asyncio.to_thread(cf.file_problem, manifest)
        return "its index file is gone" if problem == cf.MISSING else problem


# ------------------------------------------------------------------------------ sync facade


class SyncCheckpointStore:
    """Blocking calls on a ``CheckpointStore`` (a new connection per call).

    Args:
        url: the Redis URL; None: the embedded server under the default home.
        cluster: see ``CheckpointStore``.
    """

    def __init__(self, url: str | None = None, *, cluster: str = mf.DEFAULT_CLUSTER) -> None:
        self._url = url
        self.cluster = cluster

    @property
    def url(self) -> str:
        if self._url is not None:
            return self._url
        return redis_url()

    def call(self, fn: Callable[[CheckpointStore], Awaitable[T]]) -> T:
        """``await fn(store)`` on a fresh connection, from synchronous code."""
        url = self.url

        async def go() -> T:
            async with CheckpointStore.connect(url, cluster=self.cluster) as s:
                return await fn(s)

        return run_sync(go)

    def directories(self) -> list[str]:
        return self.call(lambda s: s.directories())

    def latest(self, directory: str) -> str | None:
        return self.call(lambda s: s.latest(directory))

    def latest_readable(self, directory: str) -> str | None:
        return self.call(lambda s: s.latest_readable(directory))

    def names(self, directory: str) -> list[str]:
        return self.call(lambda s: s.names(directory))

    def restore_candidates(self, directory: str) -> list[str]:
        return self.call(lambda s: s.restore_candidates(directory))

    def read_manifest(self, directory: str, name: str) -> dict[str, Any]:
        return self.call(lambda s: s.read_manifest(directory, name))

    def check_files(self, directory: str, name: str) -> dict[str, Any]:
        return self.call(lambda s: s.check_files(directory, name))

    def read_tensors(self, directory: str, name: str,
                     wanted: Mapping[str, tuple[dtypes.DType, TensorShape]] | None = None
                     ) -> dict[str, np.ndarray]:
        return self.call(lambda s: s.read_tensors(directory, name, wanted))

    def verify(self, directory: str, name: str) -> dict[str, Any]:
        return self.call(lambda s: s.verify(directory, name))

    def commit(self, directory: str, name: str, files: Sequence[Mapping[str, Any]],
               tensors: Mapping[str, Any], global_step: int | None = None,
               max_to_keep: int | None = 5,
               state_file: str | None = sf.STATE_FILENAME) -> dict[str, Any]:
        return self.call(lambda s: s.commit(directory, name, files, tensors, global_step,
                                            max_to_keep, state_file))

    def remove(self, directory: str, name: str, *, files: bool = True) -> bool:
        return self.call(lambda s: s.remove(directory, name, files=files))
