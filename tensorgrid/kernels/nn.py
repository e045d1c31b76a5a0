"""Numpy/cupy kernels of the nn ops (one builder per op, written against ``ctx.xp``).

These sit on the training hot path: each is a few whole-array passes, keeps the input dtype (float32
stays float32) and never writes into its inputs; scratch arrays it allocated itself are updated in
place. Convolutions use an im2col view (``as_strided``) and one matmul; the backward passes loop
over the kernel's taps (kh * kw iterations), never over pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.ops.nn import Window, parse_window, text_attr

BOTH = ("CPU", "GPU")

# ------------------------------------------------------------------------------ activations


def _zero_rows(xp: Any) -> Callable[[Any], Any]:
    """A cached zero row (last dim, dtype) to compare against: numpy's maximum runs its fast
    vectorized loop on a broadcast row but a slow one on a python scalar (about 5x slower)."""
    cache: dict[tuple[int, Any], Any] = {}

    def get(x: Any) -> Any:
        if x.ndim == 0:
            return x.dtype.type(0)
        key = (x.shape[-1], x.dtype)
        row = cache.get(key)
        if row is None:
            row = cache[key] = xp.zeros(x.shape[-1:], dtype=x.dtype)
        return row

    return get


@kernel("Relu")
def _relu(ctx: KernelContext) -> Callable[[Any], Any]:
    maximum, zeros = ctx.xp.maximum, _zero_rows(ctx.xp)
    return lambda x: maximum(x, zeros(x))


@kernel("ReluGrad")
def _relu_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    # a multiply by the mask is several times faster than a select (np.where branches per element)
    multiply = ctx.xp.multiply
    return lambda g, f: multiply(g, f > 0)


@kernel("Relu6")
def _relu6(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp

    def run(x: Any) -> Any:
        y = xp.maximum(x, 0)
        return xp.minimum(y, 6, out=y)

    return run


@kernel("Relu6Grad")
def _relu6_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    where = ctx.xp.where
    return lambda g, f: where((f > 0) & (f < 6), g, 0)


@kernel("Elu")
def _elu(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    return lambda x: xp.where(x > 0, x, xp.expm1(x))


@kernel("EluGrad")
def _elu_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    where = ctx.xp.where
    return lambda g, y: where(y < 0, g * (y + 1), g)


@kernel("LeakyRelu")
def _leaky_relu(ctx: KernelContext) -> Callable[[Any], Any]:
    alpha = float(ctx.attr("alpha"))
    where = ctx.xp.where
    return lambda x: where(x > 0, x, x * alpha)


@kernel("LeakyReluGrad")
def _leaky_relu_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    alpha = float(ctx.attr("alpha"))
    where = ctx.xp.where
    return lambda g, f: where(f > 0, g, g * alpha)


@kernel("Softplus")
def _softplus(ctx: KernelContext) -> Callable[[Any], Any]:
    logaddexp = ctx.xp.logaddexp  # log(exp(0) + exp(x)) without overflow
    return lambda x: logaddexp(0, x)


@kernel("SoftplusGrad")
def _softplus_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp

    def run(g: Any, f: Any) -> Any:
        d = xp.exp(-f)  # exp overflowing to inf gives the right limit: g / inf = 0
        d += 1
        return xp.divide(g, d, out=d)

    return run


@kernel("Softsign")
def _softsign(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp

    def run(x: Any) -> Any:
        d = xp.abs(x)
        d += 1
        return xp.divide(x, d, out=d)

    return run


@kernel("SoftsignGrad")
def _softsign_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp

    def run(g: Any, f: Any) -> Any:
        d = xp.abs(f)
        d += 1
        d *= d
        return xp.divide(g, d, out=d)

    return run


# ------------------------------------------------------------------------------ softmax family


class _ExpNormalizer:
    """exp(x - shift) and its sum over the last axis, without overflow, for the softmax family.

    The shift is the global max (one fast reduction) rather than each row's max: numpy's
    reductions along a short last axis (10 classes) cost several times an elementwise pass. A row
    far below the global max would underflow, so when any row's sum falls under ``floor`` (or is
    NaN) the pass is redone with per-row maxima. Row sums of float32/float64 use a matmul with a
    ones column (BLAS), faster than ``sum(axis=-1)`` on narrow rows.
    """

    __slots__ = ("_floor", "_ones", "xp")

    def __init__(self, xp: Any) -> None:
        self.xp = xp
        self._ones: dict[tuple[int, Any], Any] = {}
        self._floor: dict[Any, float] = {}

    def row_sum(self, e: Any) -> Any:
        """Sum over the last axis, keeping it as size 1."""
        if e.dtype not in (np.float32, np.float64):
            return e.sum(axis=-1, keepdims=True)
        key = (e.shape[-1], e.dtype)
        ones = self._ones.get(key)
        if ones is None:
            ones = self._ones[key] = self.xp.ones((e.shape[-1], 1), dtype=e.dtype)
        return self.xp.matmul(e, ones)

    def __call__(self, x: Any) -> tuple[Any, Any, Any]:
        """(x - shift, exp(x - shift), row sums of the exp) for non-empty x."""
        xp = self.xp
        shifted = x - x.max()
        e = xp.exp(shifted)
        total = self.row_sum(e)
        floor = self._floor.get(x.dtype)
        if floor is None:
            # sqrt(tiny): every row keeps a term far above the underflow range of its dtype
            floor = self._floor[x.dtype] = float(np.sqrt(float(ml_dtypes.finfo(x.dtype).tiny)))
        if not total.min() >= floor:
            shifted = x - x.max(axis=-1, keepdims=True)
            e = xp.exp(shifted)
            total = self.row_sum(e)
        return shifted, e, total


@kernel("Softmax")
def _softmax(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    normalizer = _ExpNormalizer(xp)

    def run(x: Any) -> Any:
        if x.size == 0:
            return xp.empty_like(x)
        _, e, total = normalizer(x)
        e /= total
        return e

    return run


@kernel("LogSoftmax")
def _log_softmax(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    normalizer = _ExpNormalizer(xp)

    def run(x: Any) -> Any:
        if x.size == 0:
            return xp.empty_like(x)
        shifted, _, total = normalizer(x)
        shifted -= xp.log(total)
        return shifted

    return run


@kernel("L2Loss")
def _l2_loss(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp

    def run(x: Any) -> Any:
        v = x.reshape(-1)
        return xp.asarray(xp.dot(v, v) * 0.5, dtype=x.dtype)

    return run


@kernel("SoftmaxCrossEntropyWithLogits")
def _xent(ctx: KernelContext) -> Callable[[Any, Any], tuple[Any, Any]]:
    xp = ctx.xp
    normalizer = _ExpNormalizer(xp)

    def run(logits: Any, labels: Any) -> tuple[Any, Any]:
        if logits.shape != labels.shape:
            raise errors.InvalidArgumentError(
                f"logits and labels must be the same size: logits_size={list(logits.shape)} "
                f"labels_size={list(labels.shape)}")
        if logits.size == 0:
            return xp.zeros(logits.shape[0], logits.dtype), xp.zeros_like(logits)
        shifted, e, total = normalizer(logits)
        # loss = -sum(labels * log_softmax), log_softmax = shifted - log(total)
        shifted -= xp.log(total)
        shifted *= labels
        loss = normalizer.row_sum(shifted).reshape(-1)
        xp.negative(loss, out=loss)
        e /= total
        e -= labels
        return loss, e

    return run


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent(ctx: KernelContext) -> Callable[[Any, Any], tuple[Any, Any]]:
    xp = ctx.xp
    normalizer = _ExpNormalizer(xp)
    row_starts: dict[tuple[int, int], Any] = {}  # flat offset of each row, per (batch, classes)

    def run(logits: Any, labels: Any) -> tuple[Any, Any]:
        n, c = logits.shape
        if labels.shape != (n,):
            raise errors.InvalidArgumentError(
                f"logits and labels must have the same first dimension, got logits shape "
                f"{list(logits.shape)} and labels shape {list(labels.shape)}")
        if n == 0:
            return xp.zeros(0, logits.dtype), xp.zeros_like(logits)
        # one reduction checks both ends: as unsigned, a negative label is larger than any class
        unsigned = labels.view(np.uint32 if labels.dtype == np.int32 else np.uint64)
        if int(unsigned.max()) >= c:
            bad = labels[unsigned >= c][0]
            raise errors.InvalidArgumentError(
                f"Received a label value of {int(bad)} which is outside the valid range of "
                f"[0, {c}).")
        starts = row_starts.get((n, c))
        if starts is None:
            starts = row_starts[(n, c)] = xp.arange(0, n * c, c)
        picked = starts + labels
        shifted, e, total = normalizer(logits)
        loss = xp.log(total).reshape(n)
        loss -= shifted.reshape(-1).take(picked)
        e /= total
        e.reshape(-1)[picked] -= 1
        return loss, e

    return run


@kernel("InTopKV2")
def _in_top_k(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp

    def run(predictions: Any, targets: Any, k: Any) -> Any:
        n, c = predictions.shape
        if targets.shape != (n,):
            raise errors.InvalidArgumentError(
                f"targets must have shape [{n}], got {list(targets.shape)}")
        valid = (targets >= 0) & (targets < c)
        picked = xp.arange(0, n * c, c) + xp.where(valid, targets, 0)
        target = predictions.reshape(-1).take(picked)
        # TensorFlow's rule: in the top k when fewer than k predictions are strictly larger; a
        # target out of range or a row with a non-finite prediction is never in the top k
        larger = (predictions > target[:, None]).sum(axis=1)
        valid &= xp.isfinite(predictions).all(axis=1)
        return valid & (larger < int(k))

    return run


# ------------------------------------------------------------------------------ bias


def _nchw(ctx: KernelContext) -> bool:
    return text_attr(ctx.attr("data_format")) == "NCHW"


@kernel("BiasAdd")
def _bias_add(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    if not _nchw(ctx):
        return xp.add  # type: ignore[no-any-return]

    def run(value: Any, bias: Any) -> Any:
        return value + bias.reshape((-1,) + (1,) * (value.ndim - 2))

    return run


@kernel("BiasAddGrad")
def _bias_add_grad(ctx: KernelContext) -> Callable[[Any], Any]:
    nchw = _nchw(ctx)

    def run(g: Any) -> Any:
        if g.ndim == 2:
            return g.sum(axis=0, dtype=g.dtype)
        axes = (0, *range(2, g.ndim)) if nchw else tuple(range(g.ndim - 1))
        return g.sum(axis=axes, dtype=g.dtype)

    return run


# ------------------------------------------------------------------------------ conv and pools


def _window_of(ctx: KernelContext, dilated: bool) -> Window:
    try:
        return parse_window(ctx.attr, dilated)
    except ValueError as exc:
        raise ctx.error(errors.InvalidArgumentError, str(exc)) from None


class _Geometry:
    """What one input shape needs: output size, padding and the padded shape."""

    __slots__ = ("h", "oh", "ow", "padded", "pads", "w")

    def __init__(self, win: Window, h: int, w: int, kh: int, kw: int) -> None:
        try:
            self.oh, self.ow, self.pads = win.output(h, w, kh, kw)
        except ValueError as exc:
            raise errors.InvalidArgumentError(str(exc)) from None
        pt, pb, pl, pr = self.pads
        self.h, self.w = h, w
        self.padded = (h + pt + pb, w + pl + pr)


def _geometry_cache(win: Window) -> Callable[[int, int, int, int], _Geometry]:
    cache: dict[tuple[int, int, int, int], _Geometry] = {}

    def get(h: int, w: int, kh: int, kw: int) -> _Geometry:
        key = (h, w, kh, kw)
        found = cache.get(key)
        if found is None:
            found = cache[key] = _Geometry(win, h, w, kh, kw)
        return found

    return get


def _pad(xp: Any, x: Any, geo: _Geometry, fill: Any = 0) -> Any:
    """x with the geometry's padding around H and W (x itself when there is none)."""
    pt, pb, pl, pr = geo.pads
    if not (pt or pb or pl or pr):
        return x
    n, h, w, c = x.shape
    out = xp.full((n, h + pt + pb, w + pl + pr, c), fill, dtype=x.dtype)
    out[:, pt:pt + h, pl:pl + w, :] = x
    return out


def _windows(xp: Any, xpad: Any, win: Window, geo: _Geometry, kh: int, kw: int) -> Any:
    """A read-only (n, oh, ow, kh, kw, c) view of the windows of padded NHWC data (no copy)."""
    sn, sh, sw, sc = xpad.strides
    shape = (xpad.shape[0], geo.oh, geo.ow, kh, kw, xpad.shape[3])
    strides = (sn, sh * win.strides[0], sw * win.strides[1], sh * win.dilations[0],
               sw * win.dilations[1], sc)
    if xp is np:
        return np.lib.stride_tricks.as_strided(xpad, shape, strides, writeable=False)
    return xp.lib.stride_tricks.as_strided(xpad, shape, strides)


def _scatter_taps(xp: Any, parts: Callable[[int, int], Any], n: int, c: int, dtype: Any,
                  win: Window, geo: _Geometry, kh: int, kw: int) -> Any:
    """Sum each tap's (n, oh, ow, c) contribution into the padded input, then crop the padding:
    the adjoint of ``_windows`` (col2im)."""
    hp, wp = geo.padded
    out = xp.zeros((n, hp, wp, c), dtype=dtype)
    sh, sw = win.strides
    dh, dw = win.dilations
    hi, wi = sh * (geo.oh - 1) + 1, sw * (geo.ow - 1) + 1
    for i in range(kh):
        for j in range(kw):
            out[:, i * dh:i * dh + hi:sh, j * dw:j * dw + wi:sw, :] += parts(i, j)
    pt, pb, pl, pr = geo.pads
    if pt or pb or pl or pr:
        out = xp.ascontiguousarray(out[:, pt:pt + geo.h, pl:pl + geo.w, :])
    return out


def _matmul(xp: Any, a: Any, b: Any) -> Any:
    """a @ b in a's dtype; half types multiply in float32 (numpy has no BLAS for them, and
    ml_dtypes' bfloat16 matmul returns float32)."""
    if a.dtype in (np.float32, np.float64):
        return xp.matmul(a, b)
    return xp.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)


def _int_sizes(v: Any, what: str) -> tuple[int, ...]:
    sizes = tuple(int(d) for d in v.reshape(-1).tolist())
    if len(sizes) != 4:
        raise errors.InvalidArgumentError(f"{what} must hold 4 sizes, got {list(sizes)}")
    return sizes


@kernel("Conv2D", BOTH)
def _conv2d(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=True)
    geometry = _geometry_cache(win)

    def run(x: Any, f: Any) -> Any:
        n, h, w, c = x.shape
        kh, kw, fc, oc = f.shape
        if fc != c:
            raise errors.InvalidArgumentError(
                f"input depth {c} must equal the filter's in_channels {fc}")
        geo = geometry(h, w, kh, kw)
        cols = _windows(xp, _pad(xp, x, geo), win, geo, kh, kw)
        out = _matmul(xp, cols.reshape(n * geo.oh * geo.ow, kh * kw * c), f.reshape(-1, oc))
        return out.reshape(n, geo.oh, geo.ow, oc)

    return run


@kernel("Conv2DBackpropInput", BOTH)
def _conv2d_backprop_input(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=True)
    geometry = _geometry_cache(win)

    def run(sizes: Any, f: Any, dy: Any) -> Any:
        n, h, w, c = _int_sizes(sizes, "input_sizes")
        kh, kw, _, oc = f.shape
        geo = geometry(h, w, kh, kw)
        if dy.shape != (n, geo.oh, geo.ow, oc):
            raise errors.InvalidArgumentError(
                f"out_backprop has shape {list(dy.shape)}, expected {[n, geo.oh, geo.ow, oc]}")
        dcols = _matmul(xp, dy.reshape(-1, oc), f.reshape(-1, oc).T)
        dcols = dcols.reshape(n, geo.oh, geo.ow, kh, kw, c)
        return _scatter_taps(xp, lambda i, j: dcols[:, :, :, i, j, :], n, c, dy.dtype, win, geo,
                             kh, kw)

    return run


@kernel("Conv2DBackpropFilter", BOTH)
def _conv2d_backprop_filter(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=True)
    geometry = _geometry_cache(win)

    def run(x: Any, sizes: Any, dy: Any) -> Any:
        kh, kw, c, oc = _int_sizes(sizes, "filter_sizes")
        n, h, w, _ = x.shape
        geo = geometry(h, w, kh, kw)
        if dy.shape != (n, geo.oh, geo.ow, oc):
            raise errors.InvalidArgumentError(
                f"out_backprop has shape {list(dy.shape)}, expected {[n, geo.oh, geo.ow, oc]}")
        cols = _windows(xp, _pad(xp, x, geo), win, geo, kh, kw)
        cols = cols.reshape(n * geo.oh * geo.ow, kh * kw * c)
        return _matmul(xp, cols.T, dy.reshape(-1, oc)).reshape(kh, kw, c, oc)

    return run


def _ksize(ctx: KernelContext) -> tuple[int, int]:
    k = [int(v) for v in ctx.attr("ksize")]
    return k[1], k[2]


def _lowest(dtype: Any) -> Any:
    """The padding value that never wins a max."""
    return np.iinfo(dtype).min if np.dtype(dtype).kind in "iu" else -np.inf


@kernel("MaxPool", BOTH)
def _max_pool(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = _geometry_cache(win)

    def run(x: Any) -> Any:
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        return _windows(xp, _pad(xp, x, geo, _lowest(x.dtype)), win, geo, kh, kw).max(axis=(3, 4))

    return run


def _argmax_taps(xp: Any, x: Any, win: Window, geo: _Geometry, kh: int, kw: int) -> Any:
    """For each pooled output, the tap (i * kw + j) holding the first maximum of its window."""
    n, c = x.shape[0], x.shape[3]
    cols = _windows(xp, _pad(xp, x, geo, _lowest(x.dtype)), win, geo, kh, kw)
    return cols.reshape(n, geo.oh, geo.ow, kh * kw, c).argmax(axis=3)


@kernel("MaxPoolGrad", BOTH)
def _max_pool_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = _geometry_cache(win)

    def run(x: Any, y: Any, g: Any) -> Any:
        n, h, w, c = x.shape
        geo = geometry(h, w, kh, kw)
        if g.shape != (n, geo.oh, geo.ow, c):
            raise errors.InvalidArgumentError(
                f"grad has shape {list(g.shape)}, expected {[n, geo.oh, geo.ow, c]}")
        arg = _argmax_taps(xp, x, win, geo, kh, kw)
        return _scatter_taps(xp, lambda i, j: xp.where(arg == i * kw + j, g, 0), n, c, g.dtype,
                             win, geo, kh, kw)

    return run


@kernel("MaxPoolGradGrad", BOTH)
def _max_pool_grad_grad(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = _geometry_cache(win)

    def run(x: Any, y: Any, gg: Any) -> Any:
        n, h, w, c = x.shape
        if gg.shape != x.shape:
            raise errors.InvalidArgumentError(
                f"grad has shape {list(gg.shape)}, expected the input's {list(x.shape)}")
        geo = geometry(h, w, kh, kw)
        arg = _argmax_taps(xp, x, win, geo, kh, kw)
        cols = _windows(xp, _pad(xp, gg, geo), win, geo, kh, kw)
        cols = cols.reshape(n, geo.oh, geo.ow, kh * kw, c)
        return xp.take_along_axis(cols, arg[:, :, :, None, :], axis=3)[:, :, :, 0, :]

    return run


def _avg_counts(xp: Any, win: Window, kh: int, kw: int) -> Callable[[_Geometry, Any], Any]:
    """The number of input elements in each output's window, shaped (1, oh, ow, 1): padding does
    not count (TensorFlow's AvgPool averages the elements inside the input only)."""
    cache: dict[tuple[int, int, Any], Any] = {}

    def axis_counts(size: int, out: int, pad: int, k: int, stride: int) -> Any:
        start = np.arange(out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)

    def get(geo: _Geometry, dtype: Any) -> Any:
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
    win = _window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = _geometry_cache(win)
    counts = _avg_counts(xp, win, kh, kw)

    def run(x: Any) -> Any:
        geo = geometry(x.shape[1], x.shape[2], kh, kw)
        total = _windows(xp, _pad(xp, x, geo), win, geo, kh, kw).sum(axis=(3, 4), dtype=x.dtype)
        total /= counts(geo, x.dtype)
        return total

    return run


@kernel("AvgPoolGrad", BOTH)
def _avg_pool_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    win = _window_of(ctx, dilated=False)
    kh, kw = _ksize(ctx)
    geometry = _geometry_cache(win)
    counts = _avg_counts(xp, win, kh, kw)

    def run(sizes: Any, g: Any) -> Any:
        n, h, w, c = _int_sizes(sizes, "orig_input_shape")
        geo = geometry(h, w, kh, kw)
        if g.shape != (n, geo.oh, geo.ow, c):
            raise errors.InvalidArgumentError(
                f"grad has shape {list(g.shape)}, expected {[n, geo.oh, geo.ow, c]}")
        share = g / counts(geo, g.dtype)
        return _scatter_taps(xp, lambda i, j: share, n, c, g.dtype, win, geo, kh, kw)

    return run
