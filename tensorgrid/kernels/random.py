"""Kernels of the random ops: one generator per node, keyed by its (seed, seed2) attrs.

The generator is numpy's ``Generator`` over ``Philox`` with the 128-bit key (seed, seed2); both
zero means fresh entropy.
The executor caches a stateful node's kernel per device, so the stream continues across runs and
fetch signatures, and starts over in a new session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.arguments import ints, memo

_MASK64 = 2**64 - 1


class _Stream:
    """The draws the random kernels need, over numpy's Generator."""

    __slots__ = ("gen",)

    def __init__(self, ctx: KernelContext) -> None:
        seed, seed2 = int(ctx.attr("seed")) & _MASK64, int(ctx.attr("seed2")) & _MASK64
        fresh = seed == 0 and seed2 == 0
        bits = np.random.Philox() if fresh else \
            np.random.Philox(key=np.array([seed, seed2], dtype=np.uint64))
        self.gen = np.random.Generator(bits)

    def normal(self, size: Any, dtype: Any) -> Any:
        return self.gen.standard_normal(size, dtype=dtype)

    def uniform(self, size: Any, dtype: Any) -> Any:
        return self.gen.random(size, dtype=dtype)

    def integers(self, lo: int, hi: int, size: Any, dtype: Any) -> Any:
        return self.gen.integers(lo, hi, size, dtype=dtype)

    def permutation(self, n: int) -> Any:
        return self.gen.permutation(n)


def _dims_reader() -> Callable[[Any], tuple[int, ...]]:
    """Reads a shape input as a tuple of ints, remembered while the same (read-only) array comes
    back: the shape is usually the same constant array every step."""

    def dims(shape: Any) -> tuple[int, ...]:
        out = ints(shape)
        if any(d < 0 for d in out):
            raise errors.InvalidArgumentError(f"shape must not have negative dimensions: {out}")
        return out

    return memo(dims)


def _float_out(ctx: KernelContext) -> tuple[Any, Any]:
    """(dtype to draw in, dtype to return): the generators draw float32/float64 only."""
    out = np.dtype(ctx.attr("dtype").np)
    return (out if out in (np.float32, np.float64) else np.dtype(np.float32)), out


@kernel("RandomStandardNormal")
def _random_normal(ctx: KernelContext) -> Callable[[Any], Any]:
    stream, dims = _Stream(ctx), _dims_reader()
    draw, out = _float_out(ctx)
    if draw == out:
        return lambda shape: stream.normal(dims(shape), draw)
    return lambda shape: stream.normal(dims(shape), draw).astype(out)


@kernel("RandomUniform")
def _random_uniform(ctx: KernelContext) -> Callable[[Any], Any]:
    stream, dims = _Stream(ctx), _dims_reader()
    draw, out = _float_out(ctx)
    if draw == out:
        return lambda shape: stream.uniform(dims(shape), draw)

    def run(shape: Any) -> Any:
        # rounding to a narrower type may reach 1.0: keep the result inside [0, 1)
        r = stream.uniform(dims(shape), draw).astype(out)
        r[r >= 1] = np.nextafter(out.type(1), out.type(0))
        return r

    return run


@kernel("TruncatedNormal")
def _truncated_normal(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    stream, dims = _Stream(ctx), _dims_reader()
    draw, out = _float_out(ctx)

    def run(shape: Any) -> Any:
        values = stream.normal(dims(shape), draw)
        flat = values.reshape(-1)
        redo = xp.flatnonzero(xp.abs(flat) > 2)
        # rejection sampling: about 4.6% of the draws fall outside two standard deviations, so the
        # loop runs a handful of rounds, each over the remaining outliers only
        while redo.size:
            fresh = stream.normal(int(redo.size), draw)
            flat[redo] = fresh
            redo = redo[xp.abs(fresh) > 2]
        return values if draw == out else values.astype(out)

    return run


@kernel("RandomUniformInt")
def _random_uniform_int(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    stream, dims = _Stream(ctx), _dims_reader()
    out = np.dtype(ctx.attr("Tout").np)

    def run(shape: Any, minval: Any, maxval: Any) -> Any:
        lo, hi = int(minval), int(maxval)
        size = dims(shape)
        if lo >= hi and int(np.prod(size)) > 0:
            raise errors.InvalidArgumentError(f"Need minval < maxval: {lo} >= {hi}")
        return stream.integers(lo, max(hi, lo + 1), size, out)

    return run


@kernel("RandomShuffle")
def _random_shuffle(ctx: KernelContext) -> Callable[[Any], Any]:
    stream = _Stream(ctx)

    def run(value: Any) -> Any:
        if value.ndim == 0 or value.shape[0] <= 1:
            return value
        return value[stream.permutation(value.shape[0])]

    return run


@kernel("Multinomial")
def _multinomial(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    stream = _Stream(ctx)
    out = np.dtype(ctx.attr("output_dtype").np)

    def run(logits: Any, num_samples: Any) -> Any:
        batch, classes = logits.shape
        n = int(num_samples)
        if n < 0:
            raise errors.InvalidArgumentError(f"num_samples should be nonnegative, got {n}")
        if batch == 0 or n == 0:
            return xp.zeros((batch, n), dtype=out)
        if classes == 0:
            raise errors.InvalidArgumentError("num_classes should be positive, got 0")
        # inverse CDF, all rows in one searchsorted: row r's CDF is shifted into [r, r + 1]
        x = logits.astype(np.float64)
        cdf = xp.exp(x - x.max(axis=1, keepdims=True)).cumsum(axis=1)
        cdf /= cdf[:, -1:].copy()
        offsets = xp.arange(batch, dtype=np.float64)[:, None]
        cdf += offsets
        u = stream.uniform((batch, n), np.float64)
        u += offsets
        pos = xp.searchsorted(cdf.reshape(-1), u.reshape(-1), side="right").reshape(batch, n)
        pos -= (xp.arange(batch) * classes)[:, None]
        return xp.minimum(pos, classes - 1).astype(out)

    return run
