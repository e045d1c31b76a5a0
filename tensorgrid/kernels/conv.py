"""Conv2D and its two gradients on NHWC data: im2col into one BLAS matmul per block of images.

A convolution is a matmul of its input's windows, laid out as rows (im2col: one row of kh*kw*c
values per output pixel), with the filter seen as a (kh*kw*c, out_channels) matrix. The windows
are a strided view of the padded input (no copy); each block of images is copied out of that view
into one reused scratch matrix that BLAS reads, so the scratch stays around ``BLOCK_BYTES`` per
thread however large the batch (the whole batch's im2col matrix is kh*kw times the input). The
blocks run on threads, BLAS single-threaded meanwhile (``kernels.parallel``).

- ``Conv2DBackpropFilter`` is cols^T @ out_backprop, summed over the blocks.
- ``Conv2DBackpropInput`` with stride 1 is itself a convolution: the output gradient, padded by
  the filter's extent less the forward padding, convolved with the filter rotated by 180 degrees
  and with its channel axes swapped (run by ``conv_by_filter_rows``: one matmul per filter row
  over a copy of the horizontal taps only); with strides > 1 (or explicit padding wider than the
  filter) it is out_backprop @ filter^T scattered back onto the input's pixels tap by tap
  (col2im).

Every kernel keeps its input's dtype: float32 stays float32 (scratch included); float16 and
bfloat16 multiply in float32 (numpy has no BLAS for them) and are cast back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.parallel import run_blocks
from tensorgrid.kernels.windows import (
    Geometry,
    crop,
    geometry_cache,
    int_sizes,
    row_windows,
    tap_view,
    window_of,
    windows,
)
from tensorgrid.ops.nn import Window
from tensorgrid.ops.nn_fused import FUSED_CONV_OPS, fused_ops_of

BOTH = ("CPU", "GPU")
# bytes of im2col scratch per block of images: small enough to stay in a core's cache while BLAS
# reads it (1-2 MB measured fastest for the CNN of bench/local.py; 16 MB and more ran 1.3-1.5x
# slower) ...
BLOCK_BYTES = 2 << 20
# ... but at least this many rows, so that each matmul stays efficient when rows are long: with
# 1600 values per row and 32 columns, 784 rows ran at 72 GFLOP/s and 196 rows at 48
MIN_ROWS = 768
_BLAS_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _compute_dtype(dtype: Any) -> Any:
    """The dtype the matmuls run in: the data's own for float32/float64, else float32."""
    return dtype if np.dtype(dtype) in _BLAS_TYPES else np.dtype(np.float32)


class _Scratch:
    """Reusable scratch matrices of one kernel instance (one node), one set per thread, so a
    training loop allocates them once and blocks running on different threads never share one.
    Results handed out are always fresh arrays, never scratch."""

    __slots__ = ("_local", "xp")

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self._local = threading.local()

    def get(self, rows: int, cols: int, dtype: Any, slot: int = 0) -> Any:
        """A (rows, cols) matrix of this thread's, contents undefined; a user that needs two at
        once asks for them in different ``slot``s (the same shape would be the same buffer)."""
        return self._buffer((rows, cols), dtype, self.xp.empty, slot)

    def zeroed(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """An array of this thread's, zero when first made: its user writes only parts that it
        overwrites on every use (a padded block's interior), so the rest stays zero."""
        return self._buffer(shape, dtype, self.xp.zeros)

    def _buffer(self, shape: tuple[int, ...], dtype: Any, make: Callable[..., Any],
                slot: int = 0) -> Any:
        bufs: dict[tuple[Any, ...], Any] | None = getattr(self._local, "bufs", None)
        if bufs is None:
            bufs = self._local.bufs = {}
        key = (make, slot, *shape, np.dtype(dtype))
        buf = bufs.get(key)
        if buf is None:
            if len(bufs) > 8:  # shapes that keep changing: keep memory bounded
                bufs.clear()
            buf = bufs[key] = make(shape, dtype=dtype)
        return buf


def _padded_block(x: Any, geo: Geometry, b0: int, b1: int, scratch: _Scratch, dtype: Any) -> Any:
    """Images b0..b1 of ``x`` with the geometry's zero padding, in a scratch array of the calling
    thread (``x``'s own slice when there is no padding and no cast): each block pads its own
    images, in parallel with the others and just before its im2col reads them."""
    if not geo.has_padding and x.dtype == dtype:
        return x[b0:b1]
    _, h, w, c = x.shape
    hp, wp = geo.padded
    pt, _, pl, _ = geo.pads
    out = scratch.zeroed((b1 - b0, hp, wp, c), dtype)
    out[:, pt:pt + h, pl:pl + w, :] = x[b0:b1]
    return out


def _im2col(xp: Any, x: Any, win: Window, geo: Geometry, kh: int, kw: int, b0: int, b1: int,
            scratch: _Scratch, dtype: Any) -> Any:
    """The (images b0..b1) x oh x ow rows of kh*kw*c window values of unpadded ``x``, as a
    matrix BLAS reads directly: contiguous, or the transpose of a contiguous one.

    A 1x1 window with unit strides and no padding is the input itself (no copy). With one input
    channel, each window tap's values over the block's pixels are a 2-D slice of the input with
    rows of ow contiguous values, so the matrix is built transposed, one row per tap: that copy
    ran 4x faster than the row-per-pixel one, whose runs are kw values long, and BLAS multiplies
    the transpose as fast.
    """
    nb, c = b1 - b0, x.shape[3]
    rows = nb * geo.oh * geo.ow
    if kh == kw == 1 and win.strides == (1, 1) and not geo.has_padding and x.dtype == dtype:
        return x[b0:b1].reshape(rows, c)
    xpad = _padded_block(x, geo, b0, b1, scratch, dtype)
    view = windows(xp, xpad, win, geo, kh, kw)
    if c == 1:
        cols_t = scratch.get(kh * kw, rows, dtype)
        xp.copyto(cols_t.reshape(kh, kw, 1, nb, geo.oh, geo.ow), view.transpose(3, 4, 5, 0, 1, 2),
                  casting="unsafe")
        return cols_t.T
    cols = scratch.get(rows, kh * kw * c, dtype)
    xp.copyto(cols.reshape(nb, geo.oh, geo.ow, kh, kw, c), view, casting="unsafe")
    return cols


def _block_images(n: int, pixels: int, row_bytes: int) -> int:
    """Images per block: ``BLOCK_BYTES`` of scratch, or ``MIN_ROWS`` rows if that is more;
    then evened out into an even number of blocks of equal size, so that two threads get equal
    shares (the CNN of bench/local.py's first convolution: blocks of 26, 26 and 12 images
    became four of 16, and its forward ran 1.42 -> 1.28 ms)."""
    by_bytes = BLOCK_BYTES // max(pixels * row_bytes, 1)
    by_rows = -(-MIN_ROWS // max(pixels, 1))
    block = max(1, min(n, max(by_bytes, by_rows)))
    blocks = -(-n // block)
    if blocks > 1:
        block = -(-n // (blocks + blocks % 2))
    return block


def _matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """out[...] = a @ b; ``out`` is a contiguous 2-D array (a block of the result)."""
    if out.dtype in _BLAS_TYPES and a.dtype == out.dtype and b.dtype == out.dtype:
        xp.matmul(a, b, out=out)
    else:
        out[...] = xp.matmul(a, b)


def conv_forward(xp: Any, x: Any, f: Any, win: Window, geo: Geometry, scratch: _Scratch,
                 bias: Any = None, relu: bool = False) -> Any:
    """conv2d(x, f) for NHWC ``x`` and a (kh, kw, c, oc) filter, block by block over the batch;
    then, each block while its rows are still in cache, ``+ bias`` (oc values) and ``relu``."""
    n, _, _, c = x.shape
    kh, kw, _, oc = f.shape
    ct = _compute_dtype(x.dtype)
    pixels = geo.oh * geo.ow
    out = xp.empty((n, geo.oh, geo.ow, oc), dtype=x.dtype)
    if out.size == 0:
        return out
    out2 = out.reshape(n * pixels, oc)
    if c == 0 or kh * kw == 0:
        out[...] = 0
        _epilogue(xp, out2, bias, relu)
        return out
    f2 = f.reshape(kh * kw * c, oc).astype(ct, copy=False)

    def block(b0: int, b1: int) -> None:
        cols = _im2col(xp, x, win, geo, kh, kw, b0, b1, scratch, ct)
        rows = out2[b0 * pixels:b1 * pixels]
        _matmul_into(xp, cols, f2, rows)
        _epilogue(xp, rows, bias, relu)

    run_blocks(block, n, _block_images(n, pixels, kh * kw * c * ct.itemsize))
    return out


def conv_by_filter_rows(xp: Any, x: Any, f: Any, win: Window, geo: Geometry,
                        scratch: _Scratch) -> Any:
    """conv2d(x, f) for a window of unit vertical stride, as kh matmuls per block of images.

    Each block copies out only the kw horizontal taps of every padded row (kw*c values per
    pixel: 1/kh of im2col's copy); filter row i then reads the rows i (dilated) further down,
    a view of that copy, so the block's output is the sum of kh matmuls of (pixels, kw*c) by
    (kw*c, oc), one per image. With oc small (an input gradient's 32 channels) the copy is
    what im2col spends beyond the matmuls: CNN of bench/local.py, conv2's input gradient,
    16.5 -> 15.3 ms of CPU; with oc = 64 the kh-1 sums of the output cost what the copy saves.
    """
    n, _, _, c = x.shape
    kh, kw, _, oc = f.shape
    ct = _compute_dtype(x.dtype)
    oh, ow = geo.oh, geo.ow
    pixels, k = oh * ow, kw * c
    out = xp.empty((n, oh, ow, oc), dtype=x.dtype)
    if out.size == 0:
        return out
    if k == 0 or kh == 0:
        out[...] = 0
        return out
    fr = f.reshape(kh, k, oc).astype(ct, copy=False)
    out3 = out.reshape(n, pixels, oc)
    hp, dh = geo.padded[0], win.dilations[0]

    def block(b0: int, b1: int) -> None:
        nb = b1 - b0
        xpad = _padded_block(x, geo, b0, b1, scratch, ct)
        rows = scratch.get(nb * hp * ow, k, ct)
        xp.copyto(rows.reshape(nb, hp, ow, kw, c), row_windows(xp, xpad, win, ow, kw),
                  casting="unsafe")
        rows4 = rows.reshape(nb, hp, ow, k)
        direct = out.dtype == ct  # else sum in the compute dtype, cast at the end
        acc = out3[b0:b1] if direct else \
            scratch.get(nb * pixels, oc, ct, slot=1).reshape(nb, pixels, oc)
        part = scratch.get(nb * pixels, oc, ct, slot=2).reshape(nb, pixels, oc)
        for i in range(kh):
            a = rows4[:, i * dh:i * dh + oh].reshape(nb, pixels, k)  # a view: rows are whole
            xp.matmul(a, fr[i], out=part if i else acc)
            if i:
                xp.add(acc, part, out=acc)
        if not direct:
            out3[b0:b1] = acc

    run_blocks(block, n, _block_images(n, pixels, kh * k * ct.itemsize))
    return out


def _epilogue(xp: Any, rows: Any, bias: Any, relu: bool) -> None:
    """rows += bias, then relu, in place (the rows of a fused convolution's output)."""
    if bias is not None:
        xp.add(rows, bias, out=rows)
    if relu:  # against a zero row: numpy's fast loop (a scalar takes a slower one)
        xp.maximum(rows, xp.zeros(rows.shape[1:], dtype=rows.dtype), out=rows)


@kernel("Conv2D", BOTH)
def _conv2d(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=True)
    geometry = geometry_cache(win)
    scratch = _Scratch(xp)

    def run(x: Any, f: Any) -> Any:
        _check_conv_inputs(x, f)
        _, h, w, _ = x.shape
        return conv_forward(xp, x, f, win, geometry(h, w, f.shape[0], f.shape[1]), scratch)

    return run


def _check_conv_inputs(x: Any, f: Any) -> None:
    if x.ndim != 4 or f.ndim != 4:
        raise errors.InvalidArgumentError(
            f"input and filter must be 4-dimensional, got shapes {list(x.shape)} and "
            f"{list(f.shape)}")
    if f.shape[2] != x.shape[3]:
        raise errors.InvalidArgumentError(
            f"input depth {x.shape[3]} must equal the filter's in_channels {f.shape[2]}")


@kernel("_FusedConv2D", BOTH)
def _fused_conv2d(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    """Conv2D + bias (+ relu), as ``compiler.remap`` fuses them: the same results as the three
    ops, with the bias and relu applied to each block of output rows while they are in cache."""
    xp = ctx.xp
    win = window_of(ctx, dilated=True)
    geometry = geometry_cache(win)
    scratch = _Scratch(xp)
    fused = fused_ops_of(ctx.attr("fused_ops"))
    if fused not in FUSED_CONV_OPS:
        raise ctx.error(errors.InvalidArgumentError, f"unsupported fused_ops {list(fused)}")
    relu = fused == ("BiasAdd", "Relu")

    def run(x: Any, f: Any, bias: Any) -> Any:
        _check_conv_inputs(x, f)
        if bias.shape != (f.shape[3],):
            raise errors.InvalidArgumentError(
                f"bias has shape {list(bias.shape)}; it must hold the filter's {f.shape[3]} "
                "out_channels values")
        _, h, w, _ = x.shape
        geo = geometry(h, w, f.shape[0], f.shape[1])
        return conv_forward(xp, x, f, win, geo, scratch, bias.astype(x.dtype, copy=False), relu)

    return run


def _check_out_backprop(dy: Any, want: tuple[int, ...]) -> None:
    if tuple(dy.shape) != want:
        raise errors.InvalidArgumentError(
            f"out_backprop has shape {list(dy.shape)}, expected {list(want)}")


def _transposed_window(win: Window, geo: Geometry, kh: int, kw: int, c: int,
                       oc: int) -> Window | None:
    """For a stride-1 forward window: the window under which convolving the padded output
    gradient with the rotated filter gives the input gradient; None when col2im is the better
    (or only) way: strides > 1, padding wider than the filter's extent, or few input channels.

    The transposed convolution copies kh*kw*oc values per input pixel into its im2col scratch and
    its matmul produces c columns; col2im's matmul writes kh*kw*c values per pixel, which its tap
    adds then read and add again (about 3 passes). With c = 1 and oc = 32 (a first layer) col2im
    ran 2x faster; with c = 32 and oc = 64 the transposed convolution ran 1.2x faster.
    """
    if win.strides != (1, 1) or c < 8 or oc > 4 * c:
        return None
    eh, ew = (kh - 1) * win.dilations[0], (kw - 1) * win.dilations[1]
    pt, pb, pl, pr = geo.pads
    pads = (eh - pt, eh - pb, ew - pl, ew - pr)
    if min(pads) < 0:
        return None
    return Window((1, 1), win.dilations, "EXPLICIT", pads)


def _backprop_input_as_conv(xp: Any, f: Any, dy: Any, tw: Window, h: int, w: int,
                            scratch: _Scratch) -> Any:
    """dx = conv(dy padded by ``tw``, f rotated 180 degrees with in/out channels swapped)."""
    kh, kw = f.shape[0], f.shape[1]
    rotated = xp.ascontiguousarray(f[::-1, ::-1].transpose(0, 1, 3, 2))
    geo = Geometry(tw, dy.shape[1], dy.shape[2], kh, kw)
    if (geo.oh, geo.ow) != (h, w):  # cannot happen for a stride-1 window; kept as a guard
        raise errors.InternalError(f"transposed convolution gave {geo.oh}x{geo.ow}, not {h}x{w}")
    return conv_by_filter_rows(xp, dy, rotated, tw, geo, scratch)


def _backprop_input_col2im(xp: Any, f: Any, dy: Any, win: Window, geo: Geometry, n: int, c: int,
                           scratch: _Scratch) -> Any:
    """dx by col2im: each block's (pixels, kh*kw*c) rows of dy @ f^T summed onto the padded input
    tap by tap (kh*kw strided adds per block, none per pixel)."""
    kh, kw, _, oc = f.shape
    ct = _compute_dtype(dy.dtype)
    hp, wp = geo.padded
    dxpad = xp.zeros((n, hp, wp, c), dtype=ct)
    pixels = geo.oh * geo.ow
    if dxpad.size and pixels and oc:
        ft = f.reshape(kh * kw * c, oc).astype(ct, copy=False).T
        dy2 = dy.reshape(n * pixels, oc).astype(ct, copy=False)

        def block(b0: int, b1: int) -> None:  # writes only its own images of dxpad
            dcols = scratch.get((b1 - b0) * pixels, kh * kw * c, ct)
            xp.matmul(dy2[b0 * pixels:b1 * pixels], ft, out=dcols)
            d6 = dcols.reshape(b1 - b0, geo.oh, geo.ow, kh, kw, c)
            images = dxpad[b0:b1]
            for i in range(kh):
                for j in range(kw):
                    view = tap_view(images, win, geo, i, j)
                    xp.add(view, d6[:, :, :, i, j, :], out=view)

        run_blocks(block, n, _block_images(n, pixels, kh * kw * c * ct.itemsize))
    return crop(xp, dxpad, geo).astype(dy.dtype, copy=False)


@kernel("Conv2DBackpropInput", BOTH)
def _conv2d_backprop_input(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=True)
    geometry = geometry_cache(win)
    scratch = _Scratch(xp)

    def run(sizes: Any, f: Any, dy: Any) -> Any:
        n, h, w, c = int_sizes(sizes, "input_sizes")
        if f.ndim != 4 or f.shape[2] != c:
            raise errors.InvalidArgumentError(
                f"filter has shape {list(f.shape)}; it must be 4-dimensional with in_channels "
                f"equal to the input depth {c}")
        kh, kw, _, oc = f.shape
        geo = geometry(h, w, kh, kw)
        _check_out_backprop(dy, (n, geo.oh, geo.ow, oc))
        tw = _transposed_window(win, geo, kh, kw, c, oc)
        if tw is not None and oc and dy.size:
            return _backprop_input_as_conv(xp, f, dy, tw, h, w, scratch)
        return _backprop_input_col2im(xp, f, dy, win, geo, n, c, scratch)

    return run


@kernel("Conv2DBackpropFilter", BOTH)
def _conv2d_backprop_filter(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = window_of(ctx, dilated=True)
    geometry = geometry_cache(win)
    scratch = _Scratch(xp)

    def run(x: Any, sizes: Any, dy: Any) -> Any:
        kh, kw, c, oc = int_sizes(sizes, "filter_sizes")
        if x.ndim != 4 or x.shape[3] != c:
            raise errors.InvalidArgumentError(
                f"input has shape {list(x.shape)}; it must be 4-dimensional with depth equal to "
                f"the filter's in_channels {c}")
        n, h, w, _ = x.shape
        geo = geometry(h, w, kh, kw)
        _check_out_backprop(dy, (n, geo.oh, geo.ow, oc))
        ct = _compute_dtype(x.dtype)
        k = kh * kw * c
        pixels = geo.oh * geo.ow
        if n * pixels == 0 or k * oc == 0:
            return xp.zeros((kh, kw, c, oc), dtype=x.dtype)
        dy2 = dy.reshape(n * pixels, oc).astype(ct, copy=False)

        def block(b0: int, b1: int) -> Any:  # this block's share of the sum over pixels
            cols = _im2col(xp, x, win, geo, kh, kw, b0, b1, scratch, ct)
            return xp.matmul(cols.T, dy2[b0 * pixels:b1 * pixels])

        parts = run_blocks(block, n, _block_images(n, pixels, k * ct.itemsize))
        total = parts[0]
        for part in parts[1:]:
            total += part
        return total.reshape(kh, kw, c, oc).astype(x.dtype, copy=False)

    return run
