"""Kernels of the checkpoint ops (see ``ops.py``): file I/O on the task they run on, off its event
loop (``asyncio.to_thread``: a save or restore of a large model takes seconds, and the task keeps
serving meanwhile). No kernel talks to Redis: the client commits what the merge returns.

Each save and restore shard runs on the device of the variables it covers, so tensor bytes go
between that task and the (shared) filesystem only.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.checkpoint import bundle, fs
from tensorgrid.checkpoint.files import read_bundle
from tensorgrid.checkpoint.ops import ASSIGN, MERGE, RESTORE_SHARD, SAVE_SHARD
from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import AsyncKernel, KernelContext, register_kernel
from tensorgrid.core.shapes import as_shape
from tensorgrid.core.variable import VarRef
from tensorgrid.kernels.core import freeze


def _text(value: Any) -> str:
    """A string scalar (a 0-d object array of bytes, bytes or str) as str."""
    item = value.item() if isinstance(value, np.ndarray) else value
    return item.decode("utf-8") if isinstance(item, bytes) else str(item)


def _string_scalar(text: str) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = text.encode("utf-8")
    return out


def _to_host(xp: Any) -> Callable[[Any], np.ndarray]:
    if xp is np:
        return np.asarray
    return lambda v: v if isinstance(v, np.ndarray) else xp.asnumpy(v)


class _Slice:
    """A parsed slice spec: ``"<full dims> <start>,<length>:..."`` (``-`` for a whole dim)."""

    def __init__(self, name: str, spec: str) -> None:
        parts = spec.split()
        try:
            self.full = [int(d) for d in parts[:-1]]
            extents = parts[-1].split(":")
            self.starts: list[int] = []
            self.lengths: list[int | None] = []
            for e in extents:
                if e == "-":
                    self.starts.append(0)
                    self.lengths.append(None)
                else:
                    start, length = e.split(",")
                    self.starts.append(int(start))
                    self.lengths.append(int(length))
        except (ValueError, IndexError):
            raise errors.InvalidArgumentError(
                f"Bad slice spec {spec!r} for tensor {name!r}") from None
        if len(self.full) != len(self.starts):
            raise errors.InvalidArgumentError(
                f"Slice spec {spec!r} of {name!r} has {len(self.full)} dims but "
                f"{len(self.starts)} extents")

    def cut(self, full: np.ndarray) -> np.ndarray:
        return full[tuple(slice(s, None if n is None else s + n)
                          for s, n in zip(self.starts, self.lengths, strict=True))]


def _slices(names: list[str], specs: list[str]) -> list[_Slice | None]:
    return [_Slice(n, s) if s else None for n, s in zip(names, specs or [""] * len(names),
                                                        strict=True)]


def _absolute(prefix: str) -> str:
    if not (os.path.isabs(prefix) or fs.is_remote(prefix)):
        raise errors.InvalidArgumentError(
            f"Checkpoint path {prefix!r} reached a task relative; the Saver makes it absolute")
    return prefix


@register_kernel(SAVE_SHARD)
def _save_shard(ctx: KernelContext) -> AsyncKernel:
    names = [_text(n) for n in ctx.attr("tensor_names")]
    slices = _slices(names, [_text(s) for s in ctx.attr("slice_specs")])
    shard, num_shards = int(ctx.attr("shard")), int(ctx.attr("num_shards"))
    sync = bool(ctx.attr("sync", False))
    device = ctx.device
    to_host = _to_host(ctx.xp)

    def write(prefix: str, token: str, values: tuple[Any, ...]) -> dict[str, Any]:
        part = bundle.shard_prefix(prefix, shard, num_shards, token)
        expected = sum(int(getattr(v, "nbytes", 0)) for v in values)
        # the data files that earlier saves retired lie in the checkpoint's directory
        with bundle.BundleWriter(part, expected_bytes=expected, sync=sync,
                                 spare_dir=os.path.dirname(prefix)) as writer:
            for name, sl, value in zip(names, slices, values, strict=True):
                if sl is None:
                    writer.add(name, to_host(value))
                else:
                    writer.add_slice(name, sl.full, sl.starts, sl.lengths, to_host(value))
            writer.finish()
        return {"shard": shard, "part": part, "device": device,
                "tensors": sorted(set(names))}

    async def run(step: Any, prefix: Any, token: Any, *values: Any) -> np.ndarray:
        fragment = await asyncio.to_thread(write, _absolute(_text(prefix)), _text(token), values)
        return _string_scalar(json.dumps(fragment, separators=(",", ":")))

    return AsyncKernel(run)


def merge(prefix: str, fragments: list[dict[str, Any]], sync: bool = False) -> dict[str, Any]:
    """Merge the shards that ``fragments`` describe into the checkpoint ``prefix`` (``sync``:
    durably, see ``bundle.merge_bundles``).

    Returns:
        ``{"prefix", "files": [record], "tensors": {name: entry}}`` for the manifest.

    Raises:
        InvalidArgumentError: the fragments do not make one save (shards missing or repeated).
    """
    by_shard = {int(f["shard"]): f for f in fragments}
    if sorted(by_shard) != list(range(len(fragments))):
        raise errors.InvalidArgumentError(
            f"The save shards of checkpoint {prefix} are {sorted(by_shard)}, not 0..."
            f"{len(fragments) - 1}")
    ordered = [by_shard[i] for i in range(len(fragments))]
    entries, records = bundle.merge_bundles([f["part"] for f in ordered], prefix, sync)
    tensors: dict[str, Any] = {}
    for key, entry in entries.items():
        if key.startswith(b"\x00"):
            continue  # a slice: its tensor's entry covers it
        name = key.decode("utf-8")
        shard = int(entry.shard_id)
        tensors[name] = {"dtype": dtypes.as_dtype(int(entry.dtype)).name,
                         "shape": [int(d.size) for d in entry.shape.dim],
                         "nbytes": int(entry.size), "crc32c": int(entry.crc32c), "shard": shard,
                         "device": ordered[shard]["device"]}
    return {"prefix": prefix, "files": [r.as_dict() for r in records], "tensors": tensors}


@register_kernel(MERGE)
def _merge(ctx: KernelContext) -> AsyncKernel:
    sync = bool(ctx.attr("sync", False))

    async def run(step: Any, prefix: Any, *fragments: Any) -> np.ndarray:
        path = _absolute(_text(prefix))
        try:
            parsed = [json.loads(_text(f)) for f in fragments]
        except ValueError as exc:
            raise errors.InvalidArgumentError(
                f"A save shard's fragment for checkpoint {path} is not JSON: {exc}") from None
        result = await asyncio.to_thread(merge, path, parsed, sync)
        return _string_scalar(json.dumps(result, separators=(",", ":")))

    return AsyncKernel(run)


@register_kernel(RESTORE_SHARD)
def _restore_shard(ctx: KernelContext) -> AsyncKernel:
    names = [_text(n) for n in ctx.attr("tensor_names")]
    slices = _slices(names, [_text(s) for s in ctx.attr("slice_specs")])
    # a sliced tensor is read whole (checked against its full shape) and its part cut out
    wanted = {n: (dtypes.as_dtype(t), as_shape(s) if sl is None else as_shape(sl.full))
              for n, t, s, sl in zip(names, ctx.attr("dtypes"), ctx.attr("shapes"), slices,
                                     strict=True)}
    to_device = (lambda v: v) if ctx.xp is np else ctx.xp.asarray

    async def run(step: Any, prefix: Any) -> Any:
        values = await asyncio.to_thread(read_bundle, _absolute(_text(prefix)), wanted)
        outs = tuple(to_device(values[n] if sl is None else np.ascontiguousarray(sl.cut(values[n])))
                     for n, sl in zip(names, slices, strict=True))
        return outs[0] if len(outs) == 1 else outs

    return AsyncKernel(run)


@register_kernel(ASSIGN)
def _assign(ctx: KernelContext) -> Callable[[VarRef, Any], VarRef]:
    xp = ctx.xp

    def run(ref: VarRef, value: Any) -> VarRef:
        var = ref.var
        value = xp.asarray(value)
        if value.dtype != var.dtype.np or (var.shape.dims is not None
                                           and not var.shape.is_compatible_with(value.shape)):
            raise errors.InvalidArgumentError(
                f"Cannot restore a {value.dtype}{list(value.shape)} value into variable "
                f"{var.name} ({var.dtype.name}{var.shape})")
        var.write(freeze(value))  # the restore shard's fresh array: no copy
        return ref

    return run
