"""Numpy/cupy kernels of the math ops (one builder per op, written against ``ctx.xp``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel

BOTH = ("CPU", "GPU")

kernel("AddV2", BOTH)(lambda ctx: ctx.xp.add)
kernel("Sub", BOTH)(lambda ctx: ctx.xp.subtract)
kernel("Mul", BOTH)(lambda ctx: ctx.xp.multiply)


@kernel("MatMul", BOTH)
def _matmul(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    xp = ctx.xp
    if not ta and not tb:
        return xp.matmul
    return lambda a, b: xp.matmul(a.T if ta else a, b.T if tb else b)


@kernel("AddN", BOTH)
def _add_n(ctx: KernelContext) -> Callable[..., Any]:
    def run(*xs: Any) -> Any:
        out = xs[0] + xs[1] if len(xs) > 1 else xs[0].copy()
        for x in xs[2:]:
            out += x
        return out

    return run


@kernel("Sum", BOTH)
def _sum(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    keep = bool(ctx.attr("keep_dims"))
    xp = ctx.xp

    def run(x: Any, axes: Any) -> Any:
        ax = tuple(int(a) for a in xp.asarray(axes).reshape(-1).tolist())
        return xp.sum(x, axis=ax, keepdims=keep, dtype=x.dtype)

    return run


@kernel("Cast", BOTH)
def _cast(ctx: KernelContext) -> Callable[[Any], Any]:
    dt = ctx.attr("DstT").np
    return lambda x: ctx.xp.asarray(x).astype(dt)
