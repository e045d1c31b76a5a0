"""Numpy kernels of the reductions (Sum, Prod, Mean, Max, Min, Any, All, ArgMax, ArgMin) and the
scans (Cumsum, Cumprod), written against ``ctx.xp``.

Each returns the dtype its op's inference promised: half-precision sums, products and means
accumulate in float32 and are cast back; an integer mean divides truncating, in the dtype; Max and
Min over an empty axis give the reduction's identity, as TensorFlow's kernels do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.arguments import ints, rememberable
from tensorgrid.kernels.math import HALF, node_dtype, truncate_div
from tensorgrid.kernels.parallel import quiet_matmul


def _axes_reader(ctx: KernelContext) -> Callable[[Any, int], tuple[int, ...]]:
    """Reads a reduction's axes input as sorted, distinct, non-negative python ints.

    The axes are nearly always the same constant array every step, so the last conversion is kept
    and reused while the same (read-only) object comes back.
    """
    last: list[tuple[Any, int, tuple[int, ...]]] = [(None, -1, ())]

    def read(axes: Any, ndim: int) -> tuple[int, ...]:
        obj, nd, val = last[0]
        if axes is obj and nd == ndim:
            return val
        norm = set()
        for a in ints(axes):
            if not -ndim <= a < ndim:
                raise ctx.error(errors.InvalidArgumentError,
                                f"Invalid reduction dimension ({a} for input with {ndim} "
                                f"dimension(s)")
            norm.add(a % ndim)
        val = tuple(sorted(norm))
        if rememberable(axes):
            last[0] = (axes, ndim, val)  # one assignment: concurrent steps see a consistent pair
        return val

    return read


def _accumulator(dt: dtypes.DType) -> Any:
    """The numpy dtype to sum or multiply in: float32 for half types, else the dtype itself."""
    return np.float32 if dt in HALF else dt.np


# a float sum over the leading axes of at least this many elements is a matrix-vector product
GEMV_SUM_ELEMENTS = 1 << 16
_ONES: dict[tuple[int, Any], np.ndarray] = {}


def _leading_sum(x: Any, axes: tuple[int, ...], keep: bool) -> Any:
    """The sum of C-contiguous float ``x`` over its leading ``axes`` as ``ones @ x2d``, or None
    where that does not apply. A bias gradient is such a sum; numpy adds the rows one after the
    other on one thread, BLAS's matrix-vector product reads them once, vectorized (6x faster for
    a (64, 28, 28, 32) float32 gradient), accumulating in the same dtype."""
    k = len(axes)
    if (k == 0 or k == x.ndim or axes != tuple(range(k)) or x.size < GEMV_SUM_ELEMENTS
            or x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous):
        return None
    rest = x.shape[k:]
    rows = int(np.prod(x.shape[:k]))
    ones = _ONES.get((rows, x.dtype))
    if ones is None:
        ones = np.ones(rows, x.dtype)
        ones.flags.writeable = False
        if len(_ONES) < 64:
            _ONES[(rows, x.dtype)] = ones
    out = quiet_matmul(ones, x.reshape(rows, -1))
    return out.reshape((1,) * k + rest if keep else rest)


def _sum_like(reduce_name: str) -> Callable[[KernelContext], Callable[[Any, Any], Any]]:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        keep = bool(ctx.attr("keep_dims"))
        xp = ctx.xp
        fn = getattr(xp, reduce_name)
        axes_of = _axes_reader(ctx)
        dt = node_dtype(ctx)
        acc = _accumulator(dt)
        if acc is dt.np and reduce_name == "sum" and xp is np and acc in (np.float32, np.float64):

            def float_sum(x: Any, axes: Any) -> Any:
                ax = axes_of(axes, x.ndim)
                got = _leading_sum(x, ax, keep) if isinstance(x, np.ndarray) else None
                return got if got is not None else fn(x, axis=ax, keepdims=keep, dtype=acc)

            return float_sum
        if acc is dt.np:
            return lambda x, axes: fn(x, axis=axes_of(axes, x.ndim), keepdims=keep, dtype=acc)
        out = dt.np
        return lambda x, axes: fn(x, axis=axes_of(axes, x.ndim), keepdims=keep,
                                  dtype=acc).astype(out)

    return build


kernel("Sum")(_sum_like("sum"))
kernel("Prod")(_sum_like("prod"))


@kernel("Mean")
def _mean(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    keep = bool(ctx.attr("keep_dims"))
    xp = ctx.xp
    axes_of = _axes_reader(ctx)
    dt = node_dtype(ctx)
    acc, out = _accumulator(dt), dt.np

    def run(x: Any, axes: Any) -> Any:
        ax = axes_of(axes, x.ndim)
        count = 1
        for a in ax:
            count *= x.shape[a]
        s = xp.sum(x, axis=ax, keepdims=keep, dtype=acc)
        if dt.is_integer:  # TensorFlow's integer mean: the sum divided truncating, in the dtype
            n = xp.asarray(max(count, 1), dtype=out)
            return xp.floor_divide(s, n) if dt.is_unsigned else truncate_div(xp, s, n)
        return xp.true_divide(s, count).astype(out, copy=False)

    return run


def _extremum(reduce_name: str, lowest: bool) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        keep = bool(ctx.attr("keep_dims"))
        xp = ctx.xp
        fn = getattr(xp, reduce_name)
        axes_of = _axes_reader(ctx)
        dt = node_dtype(ctx)
        # the identity of the reduction, which TensorFlow returns over an empty axis
        if dt.is_floating:
            identity: Any = -np.inf if lowest else np.inf
        else:
            identity = dt.min if lowest else dt.max

        def run(x: Any, axes: Any) -> Any:
            ax = axes_of(axes, x.ndim)
            if x.size == 0 and any(x.shape[a] == 0 for a in ax):
                shape = tuple(1 if i in ax else d for i, d in enumerate(x.shape)) if keep else \
                    tuple(d for i, d in enumerate(x.shape) if i not in ax)
                return xp.full(shape, identity, dtype=dt.np)
            return fn(x, axis=ax, keepdims=keep)

        return run

    return build


kernel("Max")(_extremum("max", lowest=True))
kernel("Min")(_extremum("min", lowest=False))


def _logical_reduction(reduce_name: str) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        keep = bool(ctx.attr("keep_dims"))
        fn = getattr(ctx.xp, reduce_name)
        axes_of = _axes_reader(ctx)
        return lambda x, axes: fn(x, axis=axes_of(axes, x.ndim), keepdims=keep)

    return build


kernel("Any")(_logical_reduction("any"))
kernel("All")(_logical_reduction("all"))


def _axis_reader(ctx: KernelContext) -> Callable[[Any, int], int]:
    """Reads a scalar axis input (ArgMax's dimension, Cumsum's axis) as a non-negative int."""
    read = _axes_reader(ctx)

    def axis_of(a: Any, ndim: int) -> int:
        if a.size != 1:
            raise ctx.error(errors.InvalidArgumentError, f"axis must be a scalar, got {a!r}")
        if ndim == 0:
            raise ctx.error(errors.InvalidArgumentError, "the input must have rank >= 1")
        return read(a, ndim)[0]

    return axis_of


def _arg_extremum(reduce_name: str) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        fn = getattr(ctx.xp, reduce_name)
        axis_of = _axis_reader(ctx)
        out = node_dtype(ctx, "output_type").np

        def run(x: Any, dim: Any) -> Any:
            a = axis_of(dim, x.ndim)
            if x.shape[a] == 0:
                raise ctx.error(errors.InvalidArgumentError,
                                f"Reduction axis {a} is empty in shape {list(x.shape)}")
            return fn(x, axis=a).astype(out, copy=False)

        return run

    return build


kernel("ArgMax")(_arg_extremum("argmax"))
kernel("ArgMin")(_arg_extremum("argmin"))


def _scan(scan_name: str, identity: int) -> Callable[[KernelContext], Any]:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        exclusive, reverse = bool(ctx.attr("exclusive")), bool(ctx.attr("reverse"))
        xp = ctx.xp
        fn = getattr(xp, scan_name)
        axis_of = _axis_reader(ctx)
        dt = node_dtype(ctx)
        acc, out = _accumulator(dt), dt.np

        def run(x: Any, axis: Any) -> Any:
            a = axis_of(axis, x.ndim)
            if reverse:
                x = xp.flip(x, a)
            r = fn(x, axis=a, dtype=acc)
            if exclusive and x.shape[a]:
                # shift by one along the axis: the first result is the identity
                shifted = xp.empty_like(r)
                head = (slice(None),) * a
                shifted[(*head, slice(0, 1))] = identity
                shifted[(*head, slice(1, None))] = r[(*head, slice(0, -1))]
                r = shifted
            if reverse:
                r = xp.flip(r, a)
            return r.astype(out, copy=False)

        return run

    return build


kernel("Cumsum")(_scan("cumsum", 0))
kernel("Cumprod")(_scan("cumprod", 1))
