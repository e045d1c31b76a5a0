"""MaxPool, AvgPool and their gradients on NHWC data.

Every kernel loops over the window's taps (kh * kw iterations, 4 for the usual 2x2 pool), never
over pixels: each tap is one strided view of the (padded) input, and one whole-array pass per tap
takes a maximum, adds, or scatters. Reducing a 6-D window view over its two tap axes instead would
walk memory with the tap axes innermost, several times slower.

The max-pool gradient goes to the first maximum of each window in row-major tap order (as in
TensorFlow): per tap, a mask of the outputs it wins, and the gradient times that mask written onto
the tap's pixels (added where windows overlap).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.parallel import split_batch
from tensorgrid.kernels.windows import (
    Geometry,
    crop,
    geometry_cache,
    int_sizes,
    pad,
    tap_view,
    window_of,
)
from tensorgrid.ops.nn import Window, text_attr

BOTH = ("CPU", "GPU")


def _ksize(ctx: KernelContext) -> tuple[int, int]:
    k = [int(v) for v in ctx.attr("ksize")]
    return k[1], k[2]


def _taps(kh: int, kw: int) -> list[tuple[int, int, int]]:
    """(index, row, column) of each tap in row-major order."""
    return [(i * kw + j, i, j) for i in range(kh) for j in range(kw)]


def _lowest(dtype: Any) -> Any:
    """The padding value that never wins a max."""
    dt = np.dtype(dtype)
    return np.iinfo(dt).min if dt.kind in "iu" else -np.inf


def _overlapping(win: Window, kh: int, kw: int) -> bool:
    """Whether an input pixel can fall in more than one window."""
    return win.strides[0] < kh or win.strides[1] < kw


def _check_rank4(x: Any, what: str) -> None:
    if x.ndim != 4:
        raise errors.InvalidArgumentError(f"{what} must be 4-dimensional, got shape "
                                          f"{list(x.shape)}")


def _window_max(xp: Any, xpad: Any, win: Window, geo: Geometry, kh: int, kw: int) -> Any:
    """The max of each window of padded data: one ``maximum`` pass per tap."""
    best = xp.array(tap_view(xpad, win, geo, 0, 0))  # a contiguous copy
    for _, i, j in _taps(kh, kw)[1:]:
        xp.maximum(best, tap_view(xpad, win, geo, i, j), out=best)
    return best


def _first_max_masks(xp: Any, x: Any, win: Window, geo: Geometry, kh: int,
                     kw: int) -> Iterator[tuple[int, int, Any]]:
    """(row, column, mask) per tap: the mask marks the outputs whose first maximum is that tap.

    Comparing each tap with the window's max and clearing the outputs already claimed by an
    earlier tap costs a few boolean passes; tracking an argmax index instead needs masked writes,
    several times slower in numpy.
    """
    xpad = pad(xp, x, geo, _lowest(x.dtype))
    best = _window_max(xp, xpad, win, geo, kh, kw)
    free = None  # outputs whose max no earlier tap held
    for _, i, j in _taps(kh, kw):
        mine = xp.equal(tap_view(xpad, win, geo, i, j), best)
        if free is None:
            free = xp.logical_not(mine)
        else:
            xp.logical_and(mine, free, out=mine)
            xp.logical_xor(free, mine, out=free)  # mine is a subset of free: this clears it
        yield i, j, mine


@kernel("MaxPool", BOTH)
def _max_pool(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = geometry_cache(win)

    def run(x: Any) -> Any:
        _check_rank4(x, "input")
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return xp.empty((x.shape[0], geo.oh, geo.ow, x.shape[3]), dtype=x.dtype)
        return _window_max(xp, pad(xp, x, geo, _lowest(x.dtype)), win, geo, kh, kw)

    return run


@kernel("MaxPoolGrad", BOTH)
def _max_pool_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    return _max_pool_grad_kernel(ctx, relu=False)


@kernel("_FusedMaxPoolGrad", BOTH)
def _fused_max_pool_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """MaxPoolGrad then ReluGrad by the pool's input, as ``compiler.remap`` fuses them: the
    relu's mask is applied to the window maxima's gradient (a quarter of the input for a 2x2
    pool) instead of in a pass of its own over the input-sized result."""
    fused = tuple(text_attr(v) for v in ctx.attr("fused_ops"))
    if fused != ("ReluGrad",):
        raise ctx.error(errors.InvalidArgumentError, f"unsupported fused_ops {list(fused)}")
    return _max_pool_grad_kernel(ctx, relu=True)


def _max_pool_grad_kernel(ctx: KernelContext, relu: bool) -> Callable[[Any, Any, Any], Any]:
    """MaxPoolGrad, times ``orig_input > 0`` when ``relu`` (the gradient through the relu whose
    output the pool read)."""
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = geometry_cache(win)
    overlapping = _overlapping(win, kh, kw)

    def run(x: Any, y: Any, g: Any) -> Any:
        _check_rank4(x, "orig_input")
        n, h, w, c = x.shape
        geo = geometry(h, w, kh, kw)
        if g.shape != (n, geo.oh, geo.ow, c):
            raise errors.InvalidArgumentError(
                f"grad has shape {list(g.shape)}, expected {[n, geo.oh, geo.ow, c]}")
        if g.size and tiled(geo):
            dx = _tiled_max_pool_grad(xp, x, g, win, geo, kh, kw, relu)
            if dx is not None:
                return dx
        hp, wp = geo.padded
        dxpad = xp.zeros((n, hp, wp, c), dtype=g.dtype)
        if g.size == 0:
            return crop(xp, dxpad, geo)
        for i, j, mine in _first_max_masks(xp, x, win, geo, kh, kw):
            view = tap_view(dxpad, win, geo, i, j)
            if overlapping:
                view += g * mine
            else:  # each input pixel is in one window at most: a plain write
                xp.multiply(g, mine, out=view)
        dx = crop(xp, dxpad, geo)
        if relu:
            xp.multiply(dx, x > 0, out=dx)
        return dx

    def tiled(geo: Geometry) -> bool:
        """Whether the windows tile the input exactly: no padding, no overlap, no leftover."""
        return (win.strides == (kh, kw) and not geo.has_padding and geo.h == geo.oh * kh
                and geo.w == geo.ow * kw)

    return run


def _tiled_max_pool_grad(xp: Any, x: Any, g: Any, win: Window, geo: Geometry, kh: int,
                         kw: int, relu: bool = False) -> Any:
    """The max-pool gradient when the windows tile the input (the usual 2x2 pool of stride 2 on
    an even size), or None when some window's maximum is a NaN.

    The input seen as (n, oh, kh, ow, kw, c) is a plain reshape; one broadcast comparison with
    the window maxima marks the winners and one broadcast multiply writes the whole gradient: two
    passes over the input instead of a few per tap. Where one count of the marks shows a window
    with several (every window has at least one), the first in tap order keeps its mark. A large
    batch is split into a few blocks of images run on the block runner's threads (numpy releases
    the GIL in each pass).
    """
    dx = xp.empty(x.shape, dtype=g.dtype)

    def block(b0: int, b1: int) -> bool:
        return _tiled_block(xp, x[b0:b1], g[b0:b1], dx[b0:b1], win, geo, kh, kw, relu)

    return dx if all(_split(xp, block, x)) else None


def _split(xp: Any, fn: Callable[[int, int], Any], x: Any) -> list[Any]:
    """``fn`` over blocks of ``x``'s batch (numpy: ``split_batch``; other array modules whole)."""
    if xp is np:
        return split_batch(fn, x.shape[0], x.nbytes)
    return [fn(0, x.shape[0])]


def _tiled_block(xp: Any, x: Any, g: Any, dx: Any, win: Window, geo: Geometry, kh: int,
                 kw: int, relu: bool) -> bool:
    """``_tiled_max_pool_grad`` for one block of images, written into ``dx``; False when a
    window's maximum is a NaN. With ``relu``, times ``x > 0``: the only nonzero of a window's
    gradient sits on its maximum, so the mask is the maxima's, applied to ``g``."""
    n, _, _, c = x.shape
    best = _window_max(xp, x, win, geo, kh, kw)
    if best.dtype.kind == "f" and bool(xp.isnan(best).any()):
        return False
    if relu:
        g = g * (best > 0)
    shape6 = (n, geo.oh, kh, geo.ow, kw, c)
    marks = xp.equal(x.reshape(shape6), best[:, :, None, :, None, :])
    if int(xp.count_nonzero(marks)) != best.size:
        _keep_first_marks(xp, marks, kh, kw)
    xp.multiply(marks, g[:, :, None, :, None, :], out=dx.reshape(shape6))
    return True


_ONES = 0x0101010101010101  # a true bool in each byte of a 64-bit word


def _keep_first_marks(xp: Any, marks: Any, kh: int, kw: int) -> None:
    """Where windows tie (after a relu, every all-zero window), keep only the first maximum's
    mark: each tap in turn keeps the marks of windows no earlier tap has won.

    Bools are bytes of 0 or 1, so with channels in multiples of 8 the passes run on 64-bit words
    of 8 marks each (and, xor, and xor with all-ones bytes for not): 8x fewer elements than on
    the bools (CNN first pool: 0.7 -> 0.2 ms).
    """
    words = marks
    ones: Any = True
    if xp is np and marks.flags.c_contiguous and marks.shape[-1] % 8 == 0 and marks.size:
        words, ones = marks.view(np.uint64), np.uint64(_ONES)
    free = None
    for _, i, j in _taps(kh, kw):
        mine = words[:, :, i, :, j, :]
        if free is None:
            free = xp.bitwise_xor(mine, ones)  # not: every window is free of earlier taps but these
        else:
            xp.bitwise_and(mine, free, out=mine)
            xp.bitwise_xor(free, mine, out=free)  # mine is a subset of free: this clears it


@kernel("MaxPoolGradGrad", BOTH)
def _max_pool_grad_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = geometry_cache(win)

    def run(x: Any, y: Any, gg: Any) -> Any:
        _check_rank4(x, "orig_input")
        if gg.shape != x.shape:
            raise errors.InvalidArgumentError(
                f"grad has shape {list(gg.shape)}, expected the input's {list(x.shape)}")
        n, h, w, c = x.shape
        geo = geometry(h, w, kh, kw)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return xp.zeros((n, geo.oh, geo.ow, c), dtype=gg.dtype)
        ggpad = pad(xp, gg, geo)
        out = xp.zeros((n, geo.oh, geo.ow, c), dtype=gg.dtype)
        for i, j, mine in _first_max_masks(xp, x, win, geo, kh, kw):
            out += tap_view(ggpad, win, geo, i, j) * mine
        return out

    return run


def _avg_counts(xp: Any, win: Window, kh: int, kw: int) -> Callable[[Geometry, Any], Any]:
    """The number of input elements in each output's window, shaped (1, oh, ow, 1): padding does
    not count (TensorFlow's AvgPool averages the elements inside the input only)."""
    cache: dict[tuple[int, int, Any], Any] = {}

    def axis_counts(size: int, out: int, pad_before: int, k: int, stride: int) -> Any:
        start = np.arange(out) * stride - pad_before
        return np.minimum(start + k, size) - np.maximum(start, 0)

    def get(geo: Geometry, dtype: Any) -> Any:
        key = (geo.h, geo.w, dtype)
        found = cache.get(key)
        if found is None:
            ch = axis_counts(geo.h, geo.oh, geo.pads[0], kh, win.strides[0])
            cw = axis_counts(geo.w, geo.ow, geo.pads[2], kw, win.strides[1])
            found = cache[key] = xp.asarray(np.outer(ch, cw).astype(dtype)[None, :, :, None])
        return found

    return get


@kernel("AvgPool", BOTH)
def _avg_pool(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = geometry_cache(win)
    counts = _avg_counts(xp, win, kh, kw)

    def run(x: Any) -> Any:
        _check_rank4(x, "input")
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return xp.zeros((x.shape[0], geo.oh, geo.ow, x.shape[3]), dtype=x.dtype)
        xpad = pad(xp, x, geo)
        total = xp.array(tap_view(xpad, win, geo, 0, 0))
        for _, i, j in _taps(kh, kw)[1:]:
            xp.add(total, tap_view(xpad, win, geo, i, j), out=total)
        total /= counts(geo, x.dtype)
        return total

    return run


@kernel("AvgPoolGrad", BOTH)
def _avg_pool_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = geometry_cache(win)
    counts = _avg_counts(xp, win, kh, kw)

    def run(sizes: Any, g: Any) -> Any:
        n, h, w, c = int_sizes(sizes, "orig_input_shape")
        geo = geometry(h, w, kh, kw)
        if g.shape != (n, geo.oh, geo.ow, c):
            raise errors.InvalidArgumentError(
                f"grad has shape {list(g.shape)}, expected {[n, geo.oh, geo.ow, c]}")
        hp, wp = geo.padded
        dxpad = xp.zeros((n, hp, wp, c), dtype=g.dtype)
        if g.size:
            share = g / counts(geo, g.dtype)
            for _, i, j in _taps(kh, kw):
                view = tap_view(dxpad, win, geo, i, j)
                xp.add(view, share, out=view)
        return crop(xp, dxpad, geo)

    return run
