"""The max-pool gradients on NHWC data: MaxPoolGrad, _FusedMaxPoolGrad (MaxPoolGrad then ReluGrad)
and MaxPoolGradGrad.

Each window's gradient goes to one input element, the one TensorFlow's CPU kernels pick: the
window's elements inside the input are scanned in row-major order, the first is taken, and a later
one replaces it only when strictly greater. Without NaNs that is the window's first maximum; a NaN
met first keeps the window, a NaN met later is never taken. Every other element of the window gets
0, so a NaN or an infinity in the incoming gradient lands on that one element only.
MaxPoolGradGrad, as TensorFlow's, takes each window's first maximum with the input's NaNs passed
over (its kernel matches the elements against the max pool, whose maxima skip NaNs).

Three ways compute it, the fastest that applies:

- 2x2 windows of stride 2 tiling the input (the usual pool), no NaN in the input and a finite
  gradient: ``_pairs_block`` compares the two columns of each window within its rows, then the
  rows' maxima, each a comparison of whole rows or pairs of pixels, and writes the gradient in
  two passes (CNN of bench/local.py, first pool, relu fused: 3.8 -> 1.6 ms on one thread);
- otherwise without NaN or infinity: a mask per tap of the outputs whose first maximum the tap
  holds (``first_max_masks``, or ``_tiled_block`` when the windows tile the input);
- otherwise: the scan itself, tap by tap (``_scan_winners``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.parallel import split_batch
from tensorgrid.kernels.pool import BOTH, check_rank4, ksize_of, lowest, taps, window_max
from tensorgrid.kernels.windows import Geometry, crop, geometry_cache, pad, tap_view, window_of
from tensorgrid.ops.nn import Window, text_attr


def _has_nan(xp: Any, a: Any) -> bool:
    """Whether ``a`` holds a NaN (integers and bools never do)."""
    return a.dtype.kind not in "iub" and bool(xp.isnan(a).any())


def _finite(xp: Any, a: Any) -> bool:
    """Whether every value of ``a`` is finite (integers and bools always are)."""
    return a.dtype.kind in "iub" or bool(xp.isfinite(a).all())


def _overlapping(win: Window, kh: int, kw: int) -> bool:
    """Whether an input pixel can fall in more than one window."""
    return win.strides[0] < kh or win.strides[1] < kw


def first_max_masks(xp: Any, x: Any, win: Window, geo: Geometry, kh: int, kw: int,
                    skip_nan: bool = False) -> Iterator[tuple[int, int, Any]] | None:
    """(row, column, mask) per tap: the mask marks the outputs whose first maximum is that tap;
    None when some window's maximum is a NaN (``_scan_winners`` decides those). With
    ``skip_nan`` the maximum is the one of the window's other elements (a window of NaNs has
    none: no mask marks it), and the result is never None.

    Comparing each tap with the window's max and clearing the outputs already claimed by an
    earlier tap costs a few boolean passes; tracking an argmax index instead needs masked writes,
    several times slower in numpy.
    """
    xpad = pad(xp, x, geo, lowest(x.dtype))
    best = window_max(xp, xpad, win, geo, kh, kw, skip_nan)
    if not skip_nan and _has_nan(xp, best):
        return None

    def masks() -> Iterator[tuple[int, int, Any]]:
        free = None  # outputs whose max no earlier tap held
        for _, i, j in taps(kh, kw):
            mine = xp.equal(tap_view(xpad, win, geo, i, j), best)
            if free is None:
                free = xp.logical_not(mine)
            else:
                xp.logical_and(mine, free, out=mine)
                xp.logical_xor(free, mine, out=free)  # mine is a subset of free: this clears it
            yield i, j, mine

    return masks()


def _scan_winners(xp: Any, x: Any, win: Window, geo: Geometry, kh: int, kw: int) -> Any:
    """The index (in row-major tap order) of the element each window's gradient goes to, by
    TensorFlow's scan: the first element inside the input, replaced by each later one strictly
    greater (a comparison with a NaN is false). -1 for a window with no element inside the input.
    """
    xpad = pad(xp, x, geo)
    inside = pad(xp, xp.ones((1, geo.h, geo.w, 1), dtype=bool), geo, False)
    shape = (x.shape[0], geo.oh, geo.ow, x.shape[3])
    best = xp.zeros(shape, dtype=x.dtype)
    idx = xp.full(shape, -1, dtype=np.int32)
    for t, i, j in taps(kh, kw):
        v = tap_view(xpad, win, geo, i, j)
        take = xp.logical_or(idx < 0, v > best)
        xp.logical_and(take, tap_view(inside, win, geo, i, j), out=take)
        best = xp.where(take, v, best)
        idx = xp.where(take, np.int32(t), idx)
    return idx


def _scan_max_pool_grad(xp: Any, x: Any, g: Any, win: Window, geo: Geometry, kh: int,
                        kw: int) -> Any:
    """MaxPoolGrad by ``_scan_winners``: each window's gradient on its element, 0 elsewhere."""
    idx = _scan_winners(xp, x, win, geo, kh, kw)
    n, _, _, c = x.shape
    hp, wp = geo.padded
    dxpad = xp.zeros((n, hp, wp, c), dtype=g.dtype)
    zero = xp.zeros((), dtype=g.dtype)
    for t, i, j in taps(kh, kw):
        view = tap_view(dxpad, win, geo, i, j)
        xp.add(view, xp.where(idx == t, g, zero), out=view)
    return crop(xp, dxpad, geo)


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
    kh, kw = ksize_of(ctx)
    geometry = geometry_cache(win)
    overlapping = _overlapping(win, kh, kw)

    def run(x: Any, y: Any, g: Any) -> Any:
        check_rank4(x, "orig_input")
        n, h, w, c = x.shape
        geo = geometry(h, w, kh, kw)
        if g.shape != (n, geo.oh, geo.ow, c):
            raise errors.InvalidArgumentError(
                f"grad has shape {list(g.shape)}, expected {[n, geo.oh, geo.ow, c]}")
        dx = fast(x, g, geo) if g.size and _finite(xp, g) else None
        if dx is None:
            dx = _scan_max_pool_grad(xp, x, g, win, geo, kh, kw)
            if relu:  # as ReluGrad: a NaN gradient stays NaN where the input is not positive
                xp.multiply(dx, x > 0, out=dx)
        return dx

    def fast(x: Any, g: Any, geo: Geometry) -> Any:
        """The gradient by masks, or None when a window's maximum is a NaN."""
        if tiled(geo):
            return _tiled_max_pool_grad(xp, x, g, win, geo, kh, kw, relu)
        masks = first_max_masks(xp, x, win, geo, kh, kw)
        if masks is None:
            return None
        n, _, _, c = x.shape
        hp, wp = geo.padded
        dxpad = xp.zeros((n, hp, wp, c), dtype=g.dtype)
        for i, j, mine in masks:
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
    """The max-pool gradient when the windows tile the input, for a finite ``g``; None when some
    window's maximum is a NaN. A large batch is split into a few blocks of images run on the
    block runner's threads (numpy releases the GIL in each pass)."""
    dx = xp.empty(x.shape, dtype=g.dtype)

    def block(b0: int, b1: int) -> bool:
        if kh == kw == 2:
            return _pairs_block(xp, x[b0:b1], g[b0:b1], dx[b0:b1], relu)
        return _tiled_block(xp, x[b0:b1], g[b0:b1], dx[b0:b1], win, geo, kh, kw, relu)

    done = split_batch(block, x.shape[0], x.nbytes) if xp is np else [block(0, x.shape[0])]
    return dx if all(done) else None


def _pairs_block(xp: Any, x: Any, g: Any, dx: Any, relu: bool) -> bool:
    """``_tiled_max_pool_grad`` of 2x2 windows for one block of images, written into ``dx``;
    False when a window's maximum is a NaN.

    Row-major first maximum in two steps: within each row of a window the right element wins
    when strictly greater than the left; then the bottom row wins when its maximum is strictly
    greater than the top row's, so every tie goes to the earlier element. Each step compares whole
    rows of pixels or pairs of them, where a per-tap pass walks runs of one pixel's channels.
    The gradient is split the same way: each window's between its rows, each row's between its
    two elements, a multiply by the winner mask and a subtraction each (exact: one share is 0).
    With ``relu``, the gradient is first masked by ``max > 0``: the relu's mask at the winner.
    """
    n, h, w, c = x.shape
    oh, ow = h // 2, w // 2
    pairs = x.reshape(n * h, ow, 2, c)
    right = xp.greater(pairs[:, :, 1], pairs[:, :, 0])
    row_max = xp.maximum(pairs[:, :, 0], pairs[:, :, 1]).reshape(n * oh, 2, ow * c)
    bottom = xp.greater(row_max[:, 1], row_max[:, 0])
    best = xp.maximum(row_max[:, 0], row_max[:, 1])
    if _has_nan(xp, best):
        return False
    gw = g.reshape(n * oh, ow * c)
    if relu:
        gw = gw * (best > 0)
    rows = xp.empty((n * oh, 2, ow * c), dtype=dx.dtype)  # each window row's share
    xp.multiply(gw, bottom, out=rows[:, 1])
    xp.subtract(gw, rows[:, 1], out=rows[:, 0])
    d = dx.reshape(n * h, ow, 2, c)
    r = rows.reshape(n * h, ow, c)
    xp.multiply(r, right, out=d[:, :, 1])
    xp.subtract(r, d[:, :, 1], out=d[:, :, 0])
    return True


def _tiled_block(xp: Any, x: Any, g: Any, dx: Any, win: Window, geo: Geometry, kh: int,
                 kw: int, relu: bool) -> bool:
    """``_tiled_max_pool_grad`` for one block of images, written into ``dx``; False when a
    window's maximum is a NaN. The input seen as (n, oh, kh, ow, kw, c) is a plain reshape; one
    broadcast comparison with the window maxima marks the winners and one broadcast multiply
    writes the whole gradient. Where one count of the marks shows a window with several (every
    window has at least one), the first in tap order keeps its mark. With ``relu``, times
    ``x > 0``: the only nonzero of a window's gradient sits on its maximum, so the mask is the
    maxima's, applied to ``g``."""
    n, _, _, c = x.shape
    best = window_max(xp, x, win, geo, kh, kw)
    if _has_nan(xp, best):
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
    the bools.
    """
    words = marks
    ones: Any = True
    if xp is np and marks.flags.c_contiguous and marks.shape[-1] % 8 == 0 and marks.size:
        words, ones = marks.view(np.uint64), np.uint64(_ONES)
    free = None
    for _, i, j in taps(kh, kw):
        mine = words[:, :, i, :, j, :]
        if free is None:
            free = xp.bitwise_xor(mine, ones)  # not: every window is free of earlier taps but these
        else:
            xp.bitwise_and(mine, free, out=mine)
            xp.bitwise_xor(free, mine, out=free)  # mine is a subset of free: this clears it


@kernel("MaxPoolGradGrad", BOTH)
def _max_pool_grad_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """The gradient of MaxPoolGrad by its ``grad``: each output takes ``gg`` at its window's
    first maximum. As TensorFlow's CPU kernel (which matches the window's elements against its
    max pool, whose maxima skip NaNs), a NaN of the input is never that maximum, and a window of
    NaNs takes 0; a NaN or infinity of ``gg`` reaches only the output whose maximum it sits on."""
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = ksize_of(ctx)
    geometry = geometry_cache(win)

    def run(x: Any, y: Any, gg: Any) -> Any:
        check_rank4(x, "orig_input")
        if gg.shape != x.shape:
            raise errors.InvalidArgumentError(
                f"grad has shape {list(gg.shape)}, expected the input's {list(x.shape)}")
        n, h, w, c = x.shape
        geo = geometry(h, w, kh, kw)
        out = xp.zeros((n, geo.oh, geo.ow, c), dtype=gg.dtype)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return out
        ggpad = pad(xp, gg, geo)
        masks = first_max_masks(xp, x, win, geo, kh, kw, skip_nan=True)
        finite = _finite(xp, gg)
        zero = xp.zeros((), dtype=gg.dtype)
        for i, j, mine in masks or ():
            tap = tap_view(ggpad, win, geo, i, j)
            # a multiply by the mask, unless 0 * inf or 0 * NaN would spread a NaN
            out += tap * mine if finite else xp.where(mine, tap, zero)
        return out

    return run
