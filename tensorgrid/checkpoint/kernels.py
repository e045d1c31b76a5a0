"""Kernels of the checkpoint ops (see ``ops.py``): async kernels that talk to Redis with
``redis.asyncio`` on their task's event loop, with a connection of their own per run (a step
may run on any thread's loop; checkpoints are rare, so the connection costs nothing that counts).

Each runs on the device of the variables it saves or restores, so tensor bytes go between that
task and Redis only. The store (and with it redis) is imported on the first run, so importing this
module, which registers the kernels, pulls in no network library.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.checkpoint import manifest as mf
from tensorgrid.checkpoint.ops import COMMIT, RESTORE_SHARD, SAVE_SHARD
from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import AsyncKernel, KernelContext, register_kernel
from tensorgrid.core.shapes import as_shape


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


def _store(url: Any) -> Any:
    from tensorgrid.checkpoint.store import CheckpointStore

    return CheckpointStore.connect(_text(url))


@register_kernel(SAVE_SHARD)
def _save_shard(ctx: KernelContext) -> AsyncKernel:
    names = [_text(n) for n in ctx.attr("tensor_names")]
    device = ctx.device
    to_host = _to_host(ctx.xp)

    async def run(step: Any, path: Any, url: Any, *values: Any) -> np.ndarray:
        directory, name = mf.split_path(_text(path))
        tensors = {n: to_host(v) for n, v in zip(names, values)}
        async with _store(url) as store:
            fragment = await store.write_shard(directory, name, tensors, device)
        return _string_scalar(json.dumps(fragment, separators=(",", ":")))

    return AsyncKernel(run)


@register_kernel(COMMIT)
def _commit(ctx: KernelContext) -> AsyncKernel:
    max_to_keep = int(ctx.attr("max_to_keep"))

    async def run(step: Any, path: Any, url: Any, global_step: Any, *fragments: Any) -> np.ndarray:
        directory, name = mf.split_path(_text(path))
        try:
            parsed = [json.loads(_text(f)) for f in fragments]
        except ValueError as exc:
            raise errors.InvalidArgumentError(
                f"A save shard's fragment for checkpoint {mf.join_path(directory, name)} is not "
                f"JSON: {exc}") from None
        gs = int(np.asarray(global_step))
        async with _store(url) as store:
            await store.commit(directory, name, parsed, None if gs < 0 else gs, max_to_keep)
        return _string_scalar(mf.join_path(directory, name))

    return AsyncKernel(run)


@register_kernel(RESTORE_SHARD)
def _restore_shard(ctx: KernelContext) -> AsyncKernel:
    names = [_text(n) for n in ctx.attr("tensor_names")]
    wanted = {n: (dtypes.as_dtype(t), as_shape(s))
              for n, t, s in zip(names, ctx.attr("dtypes"), ctx.attr("shapes"))}
    to_device = (lambda v: v) if ctx.xp is np else ctx.xp.asarray

    async def run(step: Any, path: Any, url: Any) -> Any:
        directory, name = mf.split_path(_text(path))
        async with _store(url) as store:
            values = await store.read_tensors(directory, name, wanted)
        outs = tuple(to_device(values[n]) for n in names)
        return outs[0] if len(outs) == 1 else outs

    return AsyncKernel(run)
