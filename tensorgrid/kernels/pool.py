"""MaxPool, AvgPool and AvgPool's gradient on NHWC data, and the window helpers the max-pool
gradients (``kernels.pool_grad``) share with them.

Every kernel loops over the window's taps (kh * kw iterations, 4 for the usual 2x2 pool), never
over pixels: each tap is one strided view of the (padded) input, and one whole-array pass per tap
takes a maximum, adds, or scatters. Reducing a 6-D window view over its two tap axes instead would
walk memory with the tap axes innermost, several times slower.

"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.windows import (
    Geometry,
    crop,
    geometry_cache,
    int_sizes,
    pad,
    tap_view,
    window_of,
)
from tensorgrid.ops.nn import Window

BOTH = ("CPU", "GPU")


def ksize_of(ctx: KernelContext) -> tuple[int, int]:
    """The window's (height, width) from the node's NHWC ``ksize``."""
    k = [int(v) for v in ctx.attr("ksize")]
    return k[1], k[2]


def taps(kh: int, kw: int) -> list[tuple[int, int, int]]:
    """(index, row, column) of each tap in row-major order."""
    return [(i * kw + j, i, j) for i in range(kh) for j in range(kw)]


def lowest(dtype: Any) -> Any:
    """The padding value that never wins a max."""
    dt = np.dtype(dtype)
    return np.iinfo(dt).min if dt.kind in "iu" else -np.inf


def check_rank4(x: Any, what: str) -> None:
    """Raises InvalidArgumentError naming ``what`` unless ``x`` is 4-dimensional."""
    if x.ndim != 4:
        raise errors.InvalidArgumentError(f"{what} must be 4-dimensional, got shape "
                                          f"{list(x.shape)}")


def window_max(xp: Any, xpad: Any, win: Window, geo: Geometry, kh: int, kw: int,
               skip_nan: bool = False) -> Any:
    """The max of each window of padded data: one ``maximum`` pass per tap (``fmax`` with
    ``skip_nan``: a NaN counts only in a window of NaNs)."""
    larger = xp.fmax if skip_nan else xp.maximum
    best = xp.array(tap_view(xpad, win, geo, 0, 0))  # a contiguous copy
    for _, i, j in taps(kh, kw)[1:]:
        larger(best, tap_view(xpad, win, geo, i, j), out=best)
    return best


@kernel("MaxPool", BOTH)
def _max_pool(ctx: KernelContext) -> Callable[[Any], Any]:
    """The max of each window; for floating types NaNs are passed over (TensorFlow's CPU
    kernel), so a NaN input does not spread to the pooled output."""
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = ksize_of(ctx)
    geometry = geometry_cache(win)

    def run(x: Any) -> Any:
        check_rank4(x, "input")
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return xp.empty((x.shape[0], geo.oh, geo.ow, x.shape[3]), dtype=x.dtype)
        dt = dtypes.as_dtype(x.dtype)
        if not dt.is_floating:
            return window_max(xp, pad(xp, x, geo, lowest(x.dtype)), win, geo, kh, kw)
        # as TensorFlow's CPU kernel: NaNs never win a window (a window of NaNs, or of NaNs and
        # padding, gives the type's lowest finite value); padding with NaN keeps a real -inf
        # input apart from the border
        best = window_max(xp, pad(xp, x, geo, xp.nan), win, geo, kh, kw, skip_nan=True)
        nan = xp.isnan(best)
        if nan.any():
            best[nan] = dt.min
        return best

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
    kh, kw = ksize_of(ctx)
    geometry = geometry_cache(win)
    counts = _avg_counts(xp, win, kh, kw)

    def run(x: Any) -> Any:
        check_rank4(x, "input")
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        if x.size == 0 or geo.oh * geo.ow == 0:
            return xp.zeros((x.shape[0], geo.oh, geo.ow, x.shape[3]), dtype=x.dtype)
        xpad = pad(xp, x, geo)
        total = xp.array(tap_view(xpad, win, geo, 0, 0))
        for _, i, j in taps(kh, kw)[1:]:
            xp.add(total, tap_view(xpad, win, geo, i, j), out=total)
        total /= counts(geo, x.dtype)
        return total

    return run


@kernel("AvgPoolGrad", BOTH)
def _avg_pool_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=False)
    kh, kw = ksize_of(ctx)
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
            for _, i, j in taps(kh, kw):
                view = tap_view(dxpad, win, geo, i, j)
                xp.add(view, share, out=view)
        return crop(xp, dxpad, geo)

    return run
