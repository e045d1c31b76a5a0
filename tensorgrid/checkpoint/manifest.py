"""What a checkpoint is, without the network: its Redis keys, its paths, how a tensor becomes a blob
and back, and its manifest (built, encoded, decoded and checked here; ``store.py`` does the I/O).

A checkpoint path is TensorFlow-style: ``"runs/exp1/model.ckpt-1200"`` is the checkpoint
``model.ckpt-1200`` of the directory ``runs/exp1``. Keys (``D`` the directory, ``C`` the name)::

    tg:ckpt:D:blob:C:<tensor>@<token>   a tensor's raw little-endian bytes
    tg:ckpt:D:manifest:C                JSON: name, global step, time, per tensor dtype, shape,
                                        byte count, sha256 and blob key; and its own sha256
    tg:ckpt:D:index                     sorted set of committed names, by commit order
    tg:ckpt:D:latest                    the newest committed name
    tg:ckpt:D:blobs:C                   set of the blob keys the committed C owns
    tg:ckpt:D:pending                   sorted set: token of each save not yet committed -> last write
    tg:ckpt:D:pending:<token>           set of the blob keys that save wrote
    tg:ckpt:dirs                        set of every directory

A blob key carries its save's random token, so saving a name again never overwrites the blobs
that the committed manifest of that name points at (a crash in between would corrupt it). A blob
is only ever written together with its entry in its save's pending set, so a save that never
commits leaves nothing untracked: the next commit removes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import struct
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.shapes import TensorShape

FORMAT = "tensorgrid-checkpoint/1"
PREFIX = "tg:ckpt:"
DIRS_KEY = PREFIX + "dirs"
_LEN = struct.Struct("<Q")


# ------------------------------------------------------------------------------ paths and keys


def split_path(path: str) -> tuple[str, str]:
    """``"runs/exp1/model.ckpt-12"`` -> ``("runs/exp1", "model.ckpt-12")``.

    The directory is normalized (``"./runs//a/"`` is ``"runs/a"``; no directory is ``"."``).

    Raises:
        InvalidArgumentError: the path is empty, ends with ``/`` or its name contains ``@``.
    """
    text = path.decode("utf-8") if isinstance(path, bytes) else str(path)
    if not text or text.endswith("/"):
        raise errors.InvalidArgumentError(
            f"A checkpoint path must end with a name, like 'runs/exp1/model.ckpt' (got {text!r})")
    head, name = posixpath.split(text)
    check_name(name)
    return normalize_directory(head), name


def normalize_directory(directory: str) -> str:
    """A checkpoint directory in its one spelling: ``posixpath.normpath``, ``"."`` for none."""
    text = directory.decode("utf-8") if isinstance(directory, bytes) else str(directory)
    return posixpath.normpath(text) if text else "."


def check_name(name: str) -> None:
    """Raises InvalidArgumentError when ``name`` cannot name a checkpoint."""
    if not name or "/" in name or "@" in name or name in (".", ".."):
        raise errors.InvalidArgumentError(
            f"{name!r} cannot name a checkpoint: it must be non-empty, without '/' or '@'")


def join_path(directory: str, name: str) -> str:
    """The path of checkpoint ``name`` in ``directory`` (the inverse of ``split_path``)."""
    return name if directory == "." else f"{directory}/{name}"


@dataclass(frozen=True)
class Keys:
    """The Redis keys of one checkpoint directory."""

    directory: str

    @property
    def base(self) -> str:
        return f"{PREFIX}{self.directory}:"

    @property
    def index(self) -> str:
        return self.base + "index"

    @property
    def latest(self) -> str:
        return self.base + "latest"

    @property
    def pending(self) -> str:
        return self.base + "pending"

    def pending_set(self, token: str) -> str:
        return f"{self.base}pending:{token}"

    def manifest(self, name: str) -> str:
        return f"{self.base}manifest:{name}"

    def blobs(self, name: str) -> str:
        return f"{self.base}blobs:{name}"

    def blob(self, name: str, tensor: str, token: str) -> str:
        return f"{self.base}blob:{name}:{tensor}@{token}"


# ------------------------------------------------------------------------------ tensors <-> bytes


def encode_tensor(value: Any) -> tuple[memoryview, dtypes.DType, tuple[int, ...]]:
    """A tensor's blob (raw little-endian bytes, C order), dtype and shape.

    A string tensor's blob is each element as an 8-byte little-endian length and its bytes.

    Raises:
        InvalidArgumentError: the value has no tensorgrid dtype.
    """
    arr = np.asarray(value)
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))  # as this machine stores it
    try:
        dt = dtypes.as_dtype(arr.dtype)
    except TypeError as exc:
        raise errors.InvalidArgumentError(f"Cannot checkpoint a value of dtype {arr.dtype}: "
                                          f"{exc}") from None
    shape = tuple(int(d) for d in arr.shape)
    if dt is dtypes.string:
        parts: list[bytes] = []
        for item in arr.ravel(order="C"):
            data = item if isinstance(item, bytes) else str(item).encode("utf-8")
            parts.append(_LEN.pack(len(data)))
            parts.append(data)
        return memoryview(b"".join(parts)), dt, shape
    if sys.byteorder == "big" and arr.dtype.itemsize > 1:
        arr = arr.byteswap()  # blobs are little-endian
    arr = np.ascontiguousarray(arr)
    return arr.reshape(-1).view(np.uint8).data, dt, shape


def decode_tensor(data: bytes | bytearray | memoryview, dtype: dtypes.DType,
                  shape: Sequence[int]) -> np.ndarray:
    """The array a blob holds.

    Raises:
        ValueError: the bytes do not hold ``shape`` elements of ``dtype``.
    """
    count = math.prod(shape)
    if dtype is dtypes.string:
        out = np.empty(count, dtype=object)
        view = memoryview(data)
        pos = 0
        for i in range(count):
            if pos + _LEN.size > len(view):
                raise ValueError(f"string element {i} is cut off")
            (n,) = _LEN.unpack_from(view, pos)
            pos += _LEN.size
            if pos + n > len(view):
                raise ValueError(f"string element {i} is cut off")
            out[i] = bytes(view[pos:pos + n])
            pos += n
        if pos != len(view):
            raise ValueError(f"{len(view) - pos} bytes follow the last string element")
        return out.reshape(tuple(shape))
    want = count * dtype.np.itemsize
    if len(data) != want:
        raise ValueError(f"{len(data)} bytes cannot hold {count} {dtype.name} values ({want} bytes)")
    arr = np.frombuffer(data, dtype=dtype.np)
    if sys.byteorder == "big" and arr.dtype.itemsize > 1:
        arr = arr.byteswap()  # the blob is little-endian
    return arr.reshape(tuple(shape))


def sha256_hex(data: bytes | bytearray | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------ manifests


def tensor_entry(key: str, dtype: dtypes.DType, shape: Sequence[int], nbytes: int, sha256: str,
                 device: str) -> dict[str, Any]:
    """One tensor's record in a shard fragment and in the manifest."""
    return {"dtype": dtype.name, "shape": list(shape), "nbytes": int(nbytes), "sha256": sha256,
            "key": key, "device": device}


def merge_fragments(fragments: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The tensors of every save shard's fragment, and the shards' tokens.

    Raises:
        InvalidArgumentError: a fragment is malformed, or two shards saved the same tensor name.
    """
    tensors: dict[str, Any] = {}
    tokens: list[str] = []
    for i, frag in enumerate(fragments):
        if not isinstance(frag, Mapping) or not isinstance(frag.get("tensors"), Mapping) \
                or not isinstance(frag.get("token"), str):
            raise errors.InvalidArgumentError(f"Save shard fragment {i} is malformed: {frag!r:.200}")
        for name, entry in frag["tensors"].items():
            if name in tensors:
                raise errors.InvalidArgumentError(
                    f"Tensor {name!r} is saved by two shards ({tensors[name].get('device')!r} and "
                    f"{entry.get('device')!r}); a name may be saved once per checkpoint")
            tensors[name] = dict(entry)
        tokens.append(frag["token"])
    return tensors, tokens


def _digest(manifest: Mapping[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "manifest_sha256"}
    return sha256_hex(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8"))


def build_manifest(directory: str, name: str, tensors: Mapping[str, Any], global_step: int | None,
                   time_s: float) -> dict[str, Any]:
    """The manifest of a checkpoint, sealed with the sha256 of its own canonical JSON."""
    manifest: dict[str, Any] = {
        "format": FORMAT, "directory": directory, "name": name,
        "global_step": None if global_step is None else int(global_step), "time": time_s,
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
    tensors = manifest.get("tensors")
    if not isinstance(tensors, dict):
        raise damaged("has no tensor table")
    for tname, entry in tensors.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("key"), str) \
            and isinstance(entry.get("nbytes"), int) and isinstance(entry.get("sha256"), str) \
            and isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)
        if not ok:
            raise damaged(f"has a malformed entry for tensor {tname!r}")
    return manifest


def check_against(path: str, manifest: Mapping[str, Any], tensor: str, dtype: dtypes.DType,
                  shape: TensorShape) -> dict[str, Any]:
    """The manifest entry of ``tensor``, checked against what the graph expects.

    Raises:
        NotFoundError: the checkpoint has no such tensor.
        InvalidArgumentError: its dtype or shape differs from the graph's.
    """
    entry = manifest["tensors"].get(tensor)
    if entry is None:
        raise errors.NotFoundError(
            f"Key {tensor} not found in checkpoint {path} (it holds "
            f"{', '.join(sorted(manifest['tensors'])) or 'no tensors'})")
    if entry["dtype"] != dtype.name:
        raise errors.InvalidArgumentError(
            f"Tensor {tensor} in checkpoint {path} has dtype {entry['dtype']}, but the graph's "
            f"variable has dtype {dtype.name}")
    if not shape.is_compatible_with(TensorShape(entry["shape"])):
        raise errors.InvalidArgumentError(
            f"Tensor {tensor} in checkpoint {path} has shape {entry['shape']}, but the graph's "
            f"variable has shape {shape}")
    return dict(entry)


def summary(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What listings show of a checkpoint: step, time, tensor count and bytes."""
    tensors = manifest.get("tensors") or {}
    return {"global_step": manifest.get("global_step"), "time": manifest.get("time"),
            "tensors": len(tensors),
            "bytes": sum(int(e.get("nbytes", 0)) for e in tensors.values())}
