"""What Redis records of a checkpoint, without the network: its keys, its paths, and its manifest
(built, encoded, decoded and checked here; ``store.py`` does the I/O).

A checkpoint is files (TensorFlow's tensor bundle: ``<prefix>.index`` and
``<prefix>.data-NNNNN-of-MMMMM``; ``bundle.py``); Redis tracks them. A checkpoint path is
TensorFlow-style: ``"/runs/exp1/model.ckpt-1200"`` is the checkpoint ``model.ckpt-1200`` of the
directory ``/runs/exp1``; Redis knows directories by their absolute path, within a cluster's
namespace (``K`` the cluster, ``D`` the directory, ``C`` the name)::

    tg:ckpt:K:D:manifest:C      JSON: name, prefix, global step, time, the files (name, bytes, and
                                the index's CRC-32C), per tensor dtype, shape, bytes, CRC-32C,
                                data file and device; and the manifest's own sha256
    tg:ckpt:K:D:index           sorted set of committed names, by commit order
    tg:ckpt:K:D:latest          the newest committed name
    tg:ckpt:K:dirs              set of every directory of the cluster

The index's CRC-32C covers every tensor's CRC-32C, so checking the index against the manifest and
each tensor against the index checks every byte of a checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tensorgrid.checkpoint import fs
from tensorgrid.core import errors
from tensorgrid.core.shapes import TensorShape

FORMAT = "tensorgrid-checkpoint/2"
PREFIX = "tg:ckpt:"
DEFAULT_CLUSTER = "default"


# ------------------------------------------------------------------------------ paths and keys


def local_path(path: str) -> str:
    """A checkpoint path in the form the filesystem layer takes: a ``file://`` URL
    (``file:///abs/dir``, ``file://localhost/abs/dir``) is its local path; a URL of another
    scheme (``sftp://``, ``s3://``... any that fsspec knows: ``fs.py``) is kept, normalized;
    anything else is a local (or mounted) path.

    Raises:
        InvalidArgumentError: a ``file://`` URL naming another host.
    """
    text = path.decode("utf-8") if isinstance(path, bytes) else str(path)
    kind = fs.scheme(text)
    if kind is None:
        return text
    if kind != "file":
        return fs.normalize_url(text) + ("/" if text.endswith("/") else "")
    host, slash, rest_path = text.split("://", 1)[1].partition("/")
    if host not in ("", "localhost"):
        raise errors.InvalidArgumentError(
            f"Checkpoint path {text!r} names host {host!r}; a file:// URL must be local "
            "(file:///abs/path)")
    return slash + rest_path


def split_path(path: str) -> tuple[str, str]:
    """``"/runs/exp1/model.ckpt-12"`` -> ``("/runs/exp1", "model.ckpt-12")``; a relative path is
    taken relative to the working directory, as TensorFlow does; a ``file://`` URL is its path;
    a URL of another scheme (an fsspec filesystem) is kept whole.

    Raises:
        InvalidArgumentError: the path is empty, ends with ``/`` or its name is not a name.
    """
    text = local_path(path)
    if not text or text.endswith("/"):
        raise errors.InvalidArgumentError(
            f"A checkpoint path must end with a name, like 'runs/exp1/model.ckpt' (got {text!r})")
    head, name = posixpath.split(text)
    check_name(name)
    return normalize_directory(head), name


def normalize_directory(directory: str) -> str:
    """A checkpoint directory in its one spelling: absolute (relative to the working directory)
    and normalized (a ``file://`` URL: its path; another URL: normalized; see ``local_path``)."""
    text = local_path(directory)
    if fs.is_remote(text):
        return fs.normalize_url(text)
    return os.path.abspath(text or ".")


def check_name(name: str) -> None:
    """Raises InvalidArgumentError when ``name`` cannot name a checkpoint."""
    if not name or "/" in name or name in (".", ".."):
        raise errors.InvalidArgumentError(
            f"{name!r} cannot name a checkpoint: it must be non-empty, without '/'")


def join_path(directory: str, name: str) -> str:
    """The path of checkpoint ``name`` in ``directory`` (the inverse of ``split_path``)."""
    return posixpath.join(directory, name)


@dataclass(frozen=True)
class Keys:
    """The Redis keys of one checkpoint directory of one cluster."""

    directory: str
    cluster: str = DEFAULT_CLUSTER

    @property
    def base(self) -> str:
        return f"{PREFIX}{self.cluster}:{self.directory}:"

    @property
    def dirs(self) -> str:
        return dirs_key(self.cluster)

    @property
    def index(self) -> str:
        return self.base + "index"

    @property
    def latest(self) -> str:
        return self.base + "latest"

    def manifest(self, name: str) -> str:
        return f"{self.base}manifest:{name}"


def dirs_key(cluster: str) -> str:
    """The set of every checkpoint directory of ``cluster``."""
    return f"{PREFIX}{cluster}:dirs"


# ------------------------------------------------------------------------------ manifests


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest(manifest: Mapping[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return sha256_hex(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def build_manifest(directory: str, name: str, files: Sequence[Mapping[str, Any]],
                   tensors: Mapping[str, Any], global_step: int | None,
                   time_s: float) -> dict[str, Any]:
    """The manifest of a checkpoint, sealed with the sha256 of its own canonical JSON.

    Args:
        files: per file ``{"name", "bytes", "crc32c"}`` (names relative to the directory).
        tensors: per tensor ``{"dtype", "shape", "nbytes", "crc32c", "shard", "device"}``.
    """
    manifest: dict[str, Any] = {
        "format": FORMAT, "directory": directory, "name": name,
        "prefix": join_path(directory, name),
        "global_step": None if global_step is None else int(global_step), "time": time_s,
        "files": [dict(f) for f in files],
        "tensors": {k: dict(tensors[k]) for k in sorted(tensors)},
    }
    manifest["manifest_sha256"] = _digest(manifest)
    return manifest


def encode_manifest(manifest: Mapping[str, Any]) -> bytes:
    return json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode("utf-8")


def decode_manifest(raw: bytes | str, path: str) -> dict[str, Any]:
    """A manifest read back, checked: it parses, has every field, and matches its own sha256.

    Raises:
        DataLossError: naming the checkpoint and what is wrong.
    """
    def damaged(why: str) -> errors.DataLossError:
        return errors.DataLossError(f"Checkpoint {path} is damaged: its manifest {why}")

    try:
        manifest = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise damaged(f"is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise damaged(f"is not a {FORMAT} manifest")
    if manifest.get("manifest_sha256") != _digest(manifest):
        raise damaged("does not match its own sha256 (it was changed or garbled)")
    files, tensors = manifest.get("files"), manifest.get("tensors")
    if not isinstance(files, list) or not isinstance(tensors, dict):
        raise damaged("has no file list or no tensor table")
    for f in files:
        if not (isinstance(f, dict) and isinstance(f.get("name"), str)
                and isinstance(f.get("bytes"), int)):
            raise damaged(f"has a malformed file record {f!r:.100}")
    for tname, entry in tensors.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("nbytes"), int) \
            and isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)
        if not ok:
            raise damaged(f"has a malformed entry for tensor {tname!r}")
    return manifest


def check_tensor(path: str, held: Mapping[str, tuple[str, list[int]]], tensor: str,
                 dtype_name: str, shape: TensorShape) -> None:
    """Check that checkpoint ``path``, holding ``held`` (name -> dtype name and shape), has
    ``tensor`` with the graph's dtype and shape.

    Raises:
        NotFoundError: the checkpoint has no such tensor.
        InvalidArgumentError: its dtype or shape differs from the graph's.
    """
    found = held.get(tensor)
    if found is None:
        raise errors.NotFoundError(
            f"Key {tensor} not found in checkpoint {path} (it holds "
            f"{', '.join(sorted(held)) or 'no tensors'})")
    dt, dims = found
    if dt != dtype_name:
        raise errors.InvalidArgumentError(
            f"Tensor {tensor} in checkpoint {path} has dtype {dt}, but the graph's variable has "
            f"dtype {dtype_name}")
    if not shape.is_compatible_with(TensorShape(dims)):
        raise errors.InvalidArgumentError(
            f"Tensor {tensor} in checkpoint {path} has shape {dims}, but the graph's variable "
            f"has shape {shape}")


def summary(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What listings show of a checkpoint: step, time, tensor count, bytes and file count."""
    tensors = manifest.get("tensors") or {}
    files = manifest.get("files") or []
    return {"global_step": manifest.get("global_step"), "time": manifest.get("time"),
            "tensors": len(tensors), "files": len(files),
            "bytes": sum(int(f.get("bytes", 0)) for f in files)}
