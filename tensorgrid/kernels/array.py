"""Numpy/cupy kernels of the array ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel

BOTH = ("CPU", "GPU")

kernel("ZerosLike", BOTH)(lambda ctx: ctx.xp.zeros_like)
kernel("OnesLike", BOTH)(lambda ctx: ctx.xp.ones_like)


@kernel("Pack", BOTH)
def _pack(ctx: KernelContext) -> Callable[..., Any]:
    axis = int(ctx.attr("axis"))
    xp = ctx.xp
    return lambda *xs: xp.stack(xs, axis=axis)


@kernel("Reshape", BOTH)
def _reshape(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp

    def run(x: Any, shape: Any) -> Any:
        return xp.reshape(x, tuple(int(d) for d in shape.reshape(-1).tolist()))

    return run


@kernel("Shape", BOTH)
def _shape(ctx: KernelContext) -> Callable[[Any], Any]:
    dt = ctx.attr("out_type").np
    return lambda x: np.array(np.shape(x), dtype=dt)


@kernel("Size", BOTH)
def _size(ctx: KernelContext) -> Callable[[Any], Any]:
    dt = ctx.attr("out_type").np
    return lambda x: np.array(np.size(x), dtype=dt)


@kernel("Rank", BOTH)
def _rank(ctx: KernelContext) -> Callable[[Any], Any]:
    return lambda x: np.array(np.ndim(x), dtype=np.int32)
