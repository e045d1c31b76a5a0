"""Checkpoints described for people and tools (the CLI, ``/v1/checkpoints``, the SDK's
``get_checkpoint_state``): directories, the checkpoints of one with their status, one checkpoint in
detail. Plain data (dicts and lists of JSON types); nothing here changes the store."""

from __future__ import annotations

from typing import Any

from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.store import CheckpointStore
from tensorgrid.core import errors


def _damage(exc: errors.DataLossError) -> str:
    """What is wrong, from a DataLossError's message ("Checkpoint P is damaged: <what>")."""
    return exc.message.split(" is damaged: ", 1)[-1]


async def describe(store: CheckpointStore, directory: str) -> list[dict[str, Any]]:
    """Every committed checkpoint of a directory, oldest first: name, path, global step,
    time, tensor count, bytes, whether ``latest`` names it, and ``status`` ("ok", or
    "damaged: why" from the manifest and the blobs' byte counts; checksums are not read)."""
    directory = mf.normalize_directory(directory)
    names, latest, raws = await store.committed(directory)
    out = []
    for name, raw in zip(names, raws):
        path = mf.join_path(directory, name)
        row: dict[str, Any] = {"name": name, "path": path, "latest": name == latest,
                               "global_step": None, "time": None, "tensors": 0, "bytes": 0}
        out.append(row)
        if raw is None:
            row["status"] = "damaged: its manifest is missing"
            continue
        try:
            manifest = mf.decode_manifest(raw, path)
        except errors.DataLossError as exc:
            row["status"] = "damaged: " + _damage(exc)
            continue
        row.update(mf.summary(manifest))
        problem = await store.blob_lengths_ok(directory, manifest)
        row["status"] = "ok" if problem is None else f"damaged: {problem}"
    if latest is not None and latest not in names:
        out.append({"name": latest, "path": mf.join_path(directory, latest), "latest": True,
                    "global_step": None, "time": None, "tensors": 0, "bytes": 0,
                    "status": "damaged: 'latest' names a checkpoint that is not committed"})
    return out


async def summarize(store: CheckpointStore) -> list[dict[str, Any]]:
    """One row per directory: ``{"directory", "checkpoints", "latest", "global_step",
    "time", "bytes"}`` (``latest`` the newest intact path, or None)."""
    out = []
    for directory in await store.directories():
        rows = await describe(store, directory)
        good = [r for r in rows if r["status"] == "ok"]
        newest = next((r for r in reversed(good) if r["latest"]), good[-1] if good else None)
        out.append({"directory": directory, "checkpoints": len(rows),
                    "latest": newest["path"] if newest else None,
                    "global_step": newest["global_step"] if newest else None,
                    "time": newest["time"] if newest else None,
                    "bytes": sum(int(r["bytes"]) for r in rows)})
    return out

async def show(store: CheckpointStore, directory: str, name: str,
               verify: bool = False) -> dict[str, Any]:
    """A checkpoint in detail: ``{"path", "directory", "name", "latest", "global_step",
    "time", "tensors": [{"name", "dtype", "shape", "nbytes", "sha256", "device"}], "bytes",
    "status"}``. ``status`` is "ok" or "damaged: why", from the blobs' byte counts, or with
    ``verify`` from reading every blob and checking its sha256.

    Raises:
        NotFoundError: no such checkpoint.
    """
    directory = mf.normalize_directory(directory)
    path = mf.join_path(directory, name)
    info: dict[str, Any] = {"path": path, "directory": directory, "name": name,
                            "latest": await store.latest(directory) == name,
                            "global_step": None, "time": None, "tensors": [], "bytes": 0}
    try:
        manifest = await store.read_manifest(directory, name)
    except errors.DataLossError as exc:
        info["status"] = "damaged: " + _damage(exc)
        return info
    info.update({k: v for k, v in mf.summary(manifest).items() if k != "tensors"})
    info["tensors"] = [{"name": t, **{k: e.get(k) for k in
                                      ("dtype", "shape", "nbytes", "sha256", "device")}}
                       for t, e in manifest["tensors"].items()]
    try:
        if verify:
            await store.verify(directory, name)
            problem = None
        else:
            problem = await store.blob_lengths_ok(directory, manifest)
    except errors.DataLossError as exc:
        problem = _damage(exc)
    info["status"] = "ok" if problem is None else f"damaged: {problem}"
    return info
