"""Checkpoints described for people and tools (the CLI, ``/v1/checkpoints``, the SDK's
``get_checkpoint_state``): directories, the checkpoints of one with their status (what Redis
tracks, and checkpoint files in the directory that it does not), one checkpoint in detail. Plain
data (dicts and lists of JSON types); nothing here changes the store or the files."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tensorgrid.checkpoint import files as cf
from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.bundle_reader import BundleReader, bundle_exists
from tensorgrid.checkpoint.store import CheckpointStore
from tensorgrid.core import errors

UNTRACKED = "untracked: files only (not in Redis)"
NOT_ALLOWED = "checkpoint_directory_not_allowed"  # the reason of a refused directory


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies under it, symbolic links resolved in both (so a link
    inside the root cannot lead out of it)."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, base]) == base


async def confine(store: CheckpointStore, directory: str, root: str | None = None) -> str:
    """The directory a listing may read on this machine's filesystem: one that the store tracks
    for its cluster (a save there committed a checkpoint), or one under ``root`` (a configured
    checkpoint root; None: none). A request naming any other directory must not make the caller
    scan it: the listing globs for files and reads indexes.

    Returns:
        The directory in its one spelling (``manifest.normalize_directory``).

    Raises:
        PermissionDeniedError: the directory is neither tracked nor under ``root``.
        UnavailableError: Redis is down.
    """
    directory = mf.normalize_directory(directory)
    if root is not None and _within(directory, mf.normalize_directory(root)):
        return directory
    if directory in await store.directories():
        return directory
    where = "" if root is None else f" nor under the checkpoint root {root}"
    raise errors.PermissionDeniedError(
        f"Checkpoint directory {directory} is not one this cluster's checkpoints are tracked "
        f"in{where}; only those are listed")


def _damage(exc: errors.DataLossError) -> str:
    """What is wrong, from a DataLossError's message ("Checkpoint P is damaged: <what>")."""
    return exc.message.split(" is damaged: ", 1)[-1]


def _row(name: str, path: str, latest: bool) -> dict[str, Any]:
    return {"name": name, "path": path, "latest": latest, "tracked": True, "global_step": None,
            "time": None, "tensors": 0, "files": 0, "bytes": 0}


async def describe(store: CheckpointStore, directory: str) -> list[dict[str, Any]]:
    """Every checkpoint of a directory, oldest first: name, path, global step, time, tensor
    count, file count, bytes, whether ``latest`` names it, whether Redis tracks it, and
    ``status`` ("ok", or "damaged: why" from the manifest and the files' sizes and the index's
    checksum; tensors are not read). Checkpoint files that Redis does not track follow, with
    status ``UNTRACKED``."""
    directory = mf.normalize_directory(directory)
    names, latest, raws = await store.committed(directory)
    out = []
    for name, raw in zip(names, raws):
        row = _row(name, mf.join_path(directory, name), name == latest)
        out.append(row)
        if raw is None:
            row["status"] = "damaged: its manifest is missing"
            continue
        try:
            manifest = mf.decode_manifest(raw, row["path"])
        except errors.DataLossError as exc:
            row["status"] = "damaged: " + _damage(exc)
            continue
        row.update(mf.summary(manifest))
        problem = await store.files_ok(manifest)
        row["status"] = "ok" if problem is None else f"damaged: {problem}"
    if latest is not None and latest not in names:
        out.append({**_row(latest, mf.join_path(directory, latest), True),
                    "status": "damaged: 'latest' names a checkpoint that is not committed"})
    known = {r["name"] for r in out}
    for found in await asyncio.to_thread(cf.scan, directory):
        if found["name"] not in known:
            out.append({**_row(found["name"], found["path"], False), "tracked": False,
                        "time": found["time"], "bytes": found["bytes"], "status": UNTRACKED})
    return out


async def summarize(store: CheckpointStore) -> list[dict[str, Any]]:
    """One row per directory Redis tracks for the store's cluster: ``{"directory",
    "checkpoints", "latest", "global_step", "time", "bytes"}`` (``latest`` the newest intact
    path, or None)."""
    out = []
    for directory in await store.directories():
        rows = [r for r in await describe(store, directory) if r["tracked"]]
        good = [r for r in rows if r["status"] == "ok"]
        newest = next((r for r in reversed(good) if r["latest"]), good[-1] if good else None)
        out.append({"directory": directory, "checkpoints": len(rows),
                    "latest": newest["path"] if newest else None,
                    "global_step": newest["global_step"] if newest else None,
                    "time": newest["time"] if newest else None,
                    "bytes": sum(int(r["bytes"]) for r in rows)})
    return out


def _untracked(path: str) -> dict[str, Any]:
    with BundleReader(path) as reader:
        tensors = [{"name": n, "dtype": reader.dtype(n).name, "shape": reader.shape(n),
                    "nbytes": int(reader.entry(n).size), "crc32c": int(reader.entry(n).crc32c),
                    "device": None, "shard": int(reader.entry(n).shard_id)}
                   for n in reader.names()]
        files = reader.data_files()
    return {"tensors": tensors, "files": len(files) + 1, "status": UNTRACKED}


async def show(store: CheckpointStore, directory: str, name: str,
               verify: bool = False) -> dict[str, Any]:
    """A checkpoint in detail: ``{"path", "directory", "name", "latest", "tracked",
    "global_step", "time", "tensors": [{"name", "dtype", "shape", "nbytes", "crc32c", "device",
    "shard"}], "files", "bytes", "status"}``. ``status`` is "ok" or "damaged: why", from the
    files' sizes and the index's checksum, or with ``verify`` from reading every tensor and
    checking its CRC-32C.

    Raises:
        NotFoundError: no such checkpoint (neither tracked nor on disk).
    """
    directory = mf.normalize_directory(directory)
    path = mf.join_path(directory, name)
    info: dict[str, Any] = {"path": path, "directory": directory, "name": name,
                            "latest": await store.latest(directory) == name, "tracked": True,
                            "global_step": None, "time": None, "tensors": [], "files": 0,
                            "bytes": 0}
    try:
        manifest = await store.read_manifest(directory, name)
    except errors.DataLossError as exc:
        info["status"] = "damaged: " + _damage(exc)
        return info
    except errors.NotFoundError:
        if not await asyncio.to_thread(bundle_exists, path):
            raise
        info.update(await asyncio.to_thread(_untracked, path), tracked=False)
        return info
    info.update({k: v for k, v in mf.summary(manifest).items() if k != "tensors"})
    info["tensors"] = [{"name": t, **{k: e.get(k) for k in
                                      ("dtype", "shape", "nbytes", "crc32c", "device", "shard")}}
                       for t, e in manifest["tensors"].items()]
    try:
        if verify:
            await store.verify(directory, name)
            problem = None
        else:
            problem = await store.files_ok(manifest)
    except errors.DataLossError as exc:
        problem = _damage(exc)
    except errors.NotFoundError:
        problem = "its index file is gone"
    info["status"] = "ok" if problem is None else f"damaged: {problem}"
    return info
