"""Numpy/cupy kernels of the array ops."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
