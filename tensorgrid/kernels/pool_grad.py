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

- windows tiling the input (the usual 2x2 pool of stride 2 on even sizes), no window starting
  with a NaN and a finite gradient: ``_tiled_block`` compares the input with the pooled output
  row by row and writes the gradient in one multiply, settling ties only where the marks
  outnumber the windows (CNN of bench/local.py, first pool, relu fused: 4.3-4.9 -> 2.0 ms on one
  thread, where comparing the two columns of each window, then its rows' maxima, took more
  passes over runs of one pixel's channels);
- otherwise without NaN or infinity: a mask per tap of the outputs whose first maximum the tap
  holds (``first_max_masks``);
- otherwise: the scan itself, tap by tap (``_scan_winners``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

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
        dx = fast(x, y, g, geo) if g.size and _finite(xp, g) else None
        if dx is None:
            dx = _scan_max_pool_grad(xp, x, g, win, geo, kh, kw)
            if relu:  # as ReluGrad: a NaN gradient stays NaN where the input is not positive
                xp.multiply(dx, x > 0, out=dx)
        return dx

    def fast(x: Any, y: Any, g: Any, geo: Geometry) -> Any:
        """The gradient by masks, or None when the scan must decide (a window's maximum is a
        NaN; for tiling windows, a NaN anywhere in the input)."""
        if tiled(geo):
            return _tiled_max_pool_grad(xp, x, y, g, win, geo, kh, kw, relu)
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


def _tiled_max_pool_grad(xp: Any, x: Any, y: Any, g: Any, win: Window, geo: Geometry, kh: int,
                         kw: int, relu: bool = False) -> Any:
    """The max-pool gradient when the windows tile the input, for a finite ``g``; None when a
    window's first element is a NaN, or when ``y`` is not each window's maximum (``_tiled_block``:
    the scan decides then). Without a usable ``y`` each block takes the maxima itself. A large
    batch is split into a few blocks of images run on the block runner's threads (numpy releases
    the GIL in each pass)."""
    dx = xp.empty(x.shape, dtype=g.dtype)
    if y is None or y.shape != g.shape or y.dtype != x.dtype:
        y = None  # not the pooled output: each block takes its windows' maxima itself

    def block(b0: int, b1: int) -> bool:
        yb = window_max(xp, x[b0:b1], win, geo, kh, kw) if y is None else y[b0:b1]
        return _tiled_block(xp, x[b0:b1], yb, g[b0:b1], dx[b0:b1], kh, kw, relu)

    done = split_batch(block, x.shape[0], x.nbytes) if xp is np else [block(0, x.shape[0])]
    return dx if all(done) else None


def _tiled_block(xp: Any, x: Any, y: Any, g: Any, dx: Any, kh: int, kw: int, relu: bool) -> bool:
    """``_tiled_max_pool_grad`` for one block of images, written into ``dx``, given ``y``, the
    maximum of each window (the MaxPool the gradient's graph holds); False when a window's first
    element is a NaN (the scan decides its windows) or when a window holds no element equal to
    its ``y`` (a window of NaNs among them).

    One comparison of the input with ``y`` marks each window's maxima and one multiply writes the
    whole gradient. Both run on rows of the input: seen as (n * oh, kh, w * c), a plain reshape,
    against ``y`` and ``g`` repeated kw times along their rows ((n * oh, 1, w * c), a quarter of
    the input's size for a 2x2 pool), so numpy's inner loops run over whole rows; broadcasting
    ``y`` over the window's columns instead made them c values long, 2-3x slower. When the marks
    outnumber the windows, some window holds its maximum twice (a tie): only the first in
    row-major tap order keeps its mark. With ``relu``, windows whose maximum is not positive are
    compared with NaN (no mark: their gradient is 0, the relu's mask at their maximum), so the
    all-zero windows a relu leaves are no ties to settle (integers: ``g`` is masked instead).
    """
    n, _, w, c = x.shape
    if x.size == 0:
        return True
    # the scan differs from the marks only where a window's first element is a NaN (it then
    # keeps the window; a NaN met later is never taken, and y, the max pool, passes over NaNs):
    # one reduction over those elements, a quarter of the input for a 2x2 pool
    if _has_nan(xp, x[:, ::kh, ::kw].max()):
        return False
    oh = y.shape[1]
    windows = y.size
    if relu and y.dtype.kind == "f":
        positive = y > 0
        windows = int(xp.count_nonzero(positive))
        if bool((y < 0).any()):
            y = xp.where(positive, y, xp.asarray(np.nan, dtype=y.dtype))
        else:  # after a relu: 0 / False is NaN, a positive / True itself (where runs 4x slower)
            with np.errstate(invalid="ignore"):
                y = y / positive
    elif relu:  # integers have no NaN: the mask goes on the gradient, ties are settled
        g = g * (y > 0)
    rows = x.reshape(n * oh, kh, w * c)
    marks = xp.equal(rows, _repeat_columns(xp, y, kw))
    if int(xp.count_nonzero(marks)) != windows:
        _keep_first_marks(xp, marks, kw, c)
        if int(xp.count_nonzero(marks)) != windows:  # a window holds no element equal to y
            return False
    xp.multiply(marks, _repeat_columns(xp, g, kw), out=dx.reshape(rows.shape))
    return True


def _repeat_columns(xp: Any, a: Any, kw: int) -> Any:
    """(n, oh, ow, c) data as (n * oh, 1, ow * kw * c): each value repeated for the kw columns
    of its window, so it lines up with a row of the input."""
    n, oh, ow, c = a.shape
    return xp.repeat(a.reshape(n * oh, ow, 1, c), kw, axis=2).reshape(n * oh, 1, ow * kw * c)


_ONES = 0x0101010101010101  # a true bool in each byte of a 64-bit word


def _keep_first_marks(xp: Any, marks: Any, kw: int, c: int) -> None:
    """Where windows tie, keep only the first mark of each in row-major tap order, in place:
    ``marks`` are (n * oh, kh, ow * kw * c) rows of tiling windows.

    The passes run over the whole array at once: a mark's neighbour d columns to its left in the
    same window sits d * c values earlier, so "is there an earlier mark in this window row" is
    the array shifted by d * c, masked to the values at least d columns into their window (a
    pattern repeated every window, ``_column_masks``). Per-tap views instead walk runs of c
    values, and row by row runs of a row: 4-8x slower. Bools are bytes of 0 or 1, so with
    channels in multiples of 8 the passes run on 64-bit words of 8 marks each (and, or, and xor
    with all-ones bytes for not): 8x fewer elements.
    """
    words, ones, unit = marks, cast(Any, True), c
    if xp is np and c % 8 == 0 and marks.flags.c_contiguous:
        words, ones, unit = marks.view(np.uint64), np.uint64(_ONES), c // 8
    flat = words.reshape(-1)
    masks = [xp.asarray(m) for m in _column_masks(flat.size, unit, kw, words.dtype.str)]
    part = xp.empty_like(flat)

    def left_of(d: int) -> Any:
        """Each value's neighbour d columns to its left in its window, else 0 (in ``part``)."""
        s = d * unit
        part[:s] = 0
        xp.bitwise_and(flat[:-s], masks[2 * d - 2][s:], out=part[s:])
        return part

    def right_of(d: int) -> Any:
        """Each value's neighbour d columns to its right in its window, else 0 (in ``part``)."""
        s = d * unit
        part[-s:] = 0
        xp.bitwise_and(flat[s:], masks[2 * d - 1][:-s], out=part[:-s])
        return part

    for d in range(1, kw):  # within each window row, the first mark only
        xp.bitwise_and(flat, xp.bitwise_xor(left_of(d), ones), out=flat)
    if words.shape[1] == 1:
        return
    taken = flat.copy()  # whether its window row holds a mark, at every column of it
    for d in range(1, kw):
        xp.bitwise_or(taken, left_of(d), out=taken)
        xp.bitwise_or(taken, right_of(d), out=taken)
    taken = taken.reshape(words.shape)
    above = taken[:, 0].copy()  # whether the window rows above hold a mark
    for i in range(1, words.shape[1]):
        xp.bitwise_and(words[:, i], xp.bitwise_xor(above, ones), out=words[:, i])
        xp.bitwise_or(above, taken[:, i], out=above)


@functools.lru_cache(maxsize=8)
def _column_masks(size: int, unit: int, kw: int, dtype: str) -> list[Any]:
    """For d = 1 .. kw-1: all-ones where a value sits at least d columns into its window, then
    where it sits at least d columns before its window's end; 0 elsewhere. Flat arrays of
    ``size`` values of ``dtype`` (windows of kw columns of ``unit`` values each), read-only."""
    column = np.arange(kw * unit) // unit
    ones = np.uint64(_ONES) if np.dtype(dtype) == np.uint64 else True
    out = []
    for d in range(1, kw):
        for keep in (column >= d, column <= kw - 1 - d):
            m = np.tile(np.where(keep, ones, 0).astype(dtype), size // (kw * unit))
            m.flags.writeable = False
            out.append(m)
    return out


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
