"""Numpy kernels of the math ops (one builder per op, written against ``ctx.xp``).

Each kernel returns exactly the dtype its op's inference promised. Where numpy would promote (a
python float times a bfloat16 array gives float32; ``mean`` of integers gives float64) the builder
prepares constants of the node's dtype, or accumulates half-precision values in float32 and casts
the result back, as TensorFlow's kernels do. The reductions and scans are in ``math_reduce``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import dtypes, errors
from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels import parallel
from tensorgrid.kernels.arguments import ints

HALF = (dtypes.float16, dtypes.bfloat16)  # accumulated in float32


def node_dtype(ctx: KernelContext, attr: str = "T") -> dtypes.DType:
    """The dtype in the node's attr ``attr`` (its ``T`` by default)."""
    return dtypes.as_dtype(ctx.attr(attr))


def _scalar(ctx: KernelContext, value: float) -> Any:
    """``value`` as a 0-d array of the node's dtype T, so arithmetic with it keeps that dtype."""
    return ctx.xp.asarray(value, dtype=node_dtype(ctx).np)


# ---------------------------------------------------------------------------- elementwise

kernel("AddV2")(lambda ctx: ctx.xp.add)
kernel("Add")(lambda ctx: ctx.xp.add)  # also concatenates strings (object arrays)
kernel("Sub")(lambda ctx: ctx.xp.subtract)
kernel("Mul")(lambda ctx: ctx.xp.multiply)
kernel("Maximum")(lambda ctx: ctx.xp.maximum)
kernel("Minimum")(lambda ctx: ctx.xp.minimum)
kernel("Neg")(lambda ctx: ctx.xp.negative)
kernel("Abs")(lambda ctx: ctx.xp.absolute)
kernel("Sign")(lambda ctx: ctx.xp.sign)
kernel("Square")(lambda ctx: ctx.xp.square)
kernel("Sqrt")(lambda ctx: ctx.xp.sqrt)
kernel("Exp")(lambda ctx: ctx.xp.exp)
kernel("Log")(lambda ctx: ctx.xp.log)
kernel("Log1p")(lambda ctx: ctx.xp.log1p)
kernel("Sin")(lambda ctx: ctx.xp.sin)
kernel("Cos")(lambda ctx: ctx.xp.cos)
kernel("Tanh")(lambda ctx: ctx.xp.tanh)
kernel("Reciprocal")(lambda ctx: ctx.xp.reciprocal)
kernel("Floor")(lambda ctx: ctx.xp.floor)
kernel("Ceil")(lambda ctx: ctx.xp.ceil)
kernel("Conj")(lambda ctx: ctx.xp.conj)
kernel("IsFinite")(lambda ctx: ctx.xp.isfinite)
kernel("IsNan")(lambda ctx: ctx.xp.isnan)
kernel("IsInf")(lambda ctx: ctx.xp.isinf)
kernel("Equal")(lambda ctx: ctx.xp.equal)
kernel("NotEqual")(lambda ctx: ctx.xp.not_equal)
kernel("Less")(lambda ctx: ctx.xp.less)
kernel("LessEqual")(lambda ctx: ctx.xp.less_equal)
kernel("Greater")(lambda ctx: ctx.xp.greater)
kernel("GreaterEqual")(lambda ctx: ctx.xp.greater_equal)
kernel("LogicalAnd")(lambda ctx: ctx.xp.logical_and)
kernel("LogicalOr")(lambda ctx: ctx.xp.logical_or)
kernel("LogicalNot")(lambda ctx: ctx.xp.logical_not)


@kernel("Round")
def _round(ctx: KernelContext) -> Callable[[Any], Any]:
    if node_dtype(ctx).is_integer:
        return lambda x: x
    return ctx.xp.rint  # type: ignore[no-any-return]  # half to even, as TensorFlow


@kernel("Rsqrt")
def _rsqrt(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    return lambda x: xp.reciprocal(xp.sqrt(x))


@kernel("Sigmoid")
def _sigmoid(ctx: KernelContext) -> Callable[[Any], Any]:
    # 1 / (1 + exp(-x)): exp overflowing to inf gives exactly 0, and tiny results keep their
    # relative precision (a tanh form would cancel). The temporaries are reused in place.
    xp = ctx.xp
    one = _scalar(ctx, 1)

    def run(x: Any) -> Any:
        t = xp.negative(x)
        if not isinstance(t, xp.ndarray):  # a 0-d input gives a scalar, which has no buffer
            return xp.reciprocal(one + xp.exp(t))
        xp.exp(t, out=t)
        xp.add(t, one, out=t)
        return xp.reciprocal(t, out=t)

    return run


@kernel("SquaredDifference")
def _squared_difference(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    if node_dtype(ctx).is_complex:  # TensorFlow: (x - y) * conj(x - y)
        def run_complex(x: Any, y: Any) -> Any:
            d = xp.subtract(x, y)
            return d * xp.conj(d)

        return run_complex
    return lambda x, y: xp.square(xp.subtract(x, y))


@kernel("Pow")
def _pow(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    if not node_dtype(ctx).is_integer:
        return xp.power  # type: ignore[no-any-return]

    def run(x: Any, y: Any) -> Any:
        if xp.any(xp.asarray(y) < 0):
            raise ctx.error(errors.InvalidArgumentError,
                            "Integers to negative integer powers are not allowed")
        return xp.power(x, y)

    return run


# ---------------------------------------------------------------------------- division


def _nonzero_divisor(ctx: KernelContext) -> Callable[[Any], None]:
    xp = ctx.xp

    def check(y: Any) -> None:
        if not xp.all(y):
            raise ctx.error(errors.InvalidArgumentError, "Integer division by zero")

    return check


def truncate_div(xp: Any, x: Any, y: Any) -> Any:
    """Integer division rounding toward zero (C semantics) without going through floats."""
    q = xp.floor_divide(x, y)
    # floor and trunc differ where the division is inexact and the signs differ
    fix = xp.not_equal(xp.multiply(q, y), x) & xp.not_equal(xp.less(x, 0), xp.less(y, 0))
    return xp.add(q, fix.astype(q.dtype))


def _int_divider(ctx: KernelContext, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    check = _nonzero_divisor(ctx)

    def run(x: Any, y: Any) -> Any:
        check(y)
        return fn(x, y)

    return run


def _div_kernel(truncating: Callable[[KernelContext], Callable[[Any, Any], Any]],
                floating: Callable[[KernelContext], Callable[[Any, Any], Any]]) -> Any:
    def build(ctx: KernelContext) -> Callable[[Any, Any], Any]:
        if node_dtype(ctx).is_integer:
            return _int_divider(ctx, truncating(ctx))
        return floating(ctx)

    return build


def _trunc(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    if node_dtype(ctx).is_unsigned:
        return xp.floor_divide  # type: ignore[no-any-return]
    return lambda x, y: truncate_div(xp, x, y)


def _floor_float(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    return lambda x, y: xp.floor(xp.true_divide(x, y))


def _trunc_float(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    return lambda x, y: xp.trunc(xp.true_divide(x, y))


# RealDiv and the legacy Div divide integers truncating (C), as TensorFlow's kernels do.
kernel("RealDiv")(_div_kernel(_trunc, lambda ctx: ctx.xp.true_divide))
kernel("Div")(_div_kernel(_trunc, lambda ctx: ctx.xp.true_divide))
kernel("TruncateDiv")(_div_kernel(_trunc, _trunc_float))
kernel("FloorDiv")(_div_kernel(lambda ctx: ctx.xp.floor_divide, _floor_float))
kernel("FloorMod")(_div_kernel(lambda ctx: ctx.xp.remainder, lambda ctx: ctx.xp.remainder))
kernel("TruncateMod")(_div_kernel(lambda ctx: ctx.xp.fmod, lambda ctx: ctx.xp.fmod))


# ---------------------------------------------------------------------------- gradient helpers


@kernel("SigmoidGrad")
def _sigmoid_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    one = _scalar(ctx, 1)
    return lambda y, dy: dy * y * (one - y)


@kernel("TanhGrad")
def _tanh_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    one = _scalar(ctx, 1)
    return lambda y, dy: dy * (one - y * y)


@kernel("RsqrtGrad")
def _rsqrt_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    c = _scalar(ctx, -0.5)
    return lambda y, dy: dy * (c * y * y * y)


@kernel("SqrtGrad")
def _sqrt_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    half = _scalar(ctx, 0.5)
    return lambda y, dy: dy * half / y


@kernel("ReciprocalGrad")
def _reciprocal_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    return lambda y, dy: -dy * y * y


# ---------------------------------------------------------------------------- n-ary, selection


@kernel("AddN")
def _add_n(ctx: KernelContext) -> Callable[..., Any]:
    xp = ctx.xp

    def run(*xs: Any) -> Any:
        if len(xs) == 1:
            return xs[0]
        out = xp.add(xs[0], xs[1])
        for x in xs[2:]:
            out = xp.add(out, x, out=out) if isinstance(out, xp.ndarray) else out + x
        return out

    return run


@kernel("SelectV2")
def _select_v2(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    return ctx.xp.where  # type: ignore[no-any-return]


@kernel("Select")
def _select(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp

    def run(c: Any, x: Any, y: Any) -> Any:
        if x.shape != y.shape:
            raise ctx.error(errors.InvalidArgumentError,
                            f"'then' and 'else' must have the same size, but received: "
                            f"{list(x.shape)} vs. {list(y.shape)}")
        if c.ndim == 0 or c.shape == x.shape:
            return xp.where(c, x, y)
        if c.ndim == 1 and x.ndim > 1 and c.shape[0] == x.shape[0]:
            return xp.where(c.reshape(c.shape + (1,) * (x.ndim - 1)), x, y)
        raise ctx.error(errors.InvalidArgumentError,
                        f"condition of shape {list(c.shape)} must be a scalar, a vector over the "
                        f"first dimension, or of the shape of 'then' {list(x.shape)}")

    return run


@kernel("Where")
def _where(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    return lambda x: xp.argwhere(x).astype(np.int64, copy=False)


@kernel("ClipByValue")
def _clip_by_value(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    # minimum then maximum (not xp.clip): keeps the dtype for bfloat16 and mirrors TF1's composite
    return lambda t, lo, hi: xp.maximum(xp.minimum(t, hi), lo)


def broadcast_reduction_axes(s0: list[int], s1: list[int]) -> tuple[list[int], list[int]]:
    """For input shapes s0, s1 of a broadcasting op: the output axes to sum over for each input's
    gradient (TensorFlow's rule: an axis where the input is, or is padded to, 1; listed for both
    inputs when both are 1).

    Raises:
        InvalidArgumentError: the shapes do not broadcast.
    """
    n = max(len(s0), len(s1))
    a = [1] * (n - len(s0)) + list(s0)
    b = [1] * (n - len(s1)) + list(s1)
    r0, r1 = [], []
    for i, (p, q) in enumerate(zip(a, b)):
        if p != q and p != 1 and q != 1:
            raise errors.InvalidArgumentError(f"Incompatible shapes: {list(s0)} vs. {list(s1)}")
        if p == 1:
            r0.append(i)
        if q == 1:
            r1.append(i)
    return r0, r1


@kernel("BroadcastGradientArgs")
def _broadcast_gradient_args(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    # Shapes are host values on every device, as Shape's outputs are.
    dt = node_dtype(ctx).np

    def run(s0: Any, s1: Any) -> tuple[Any, Any]:
        try:
            r0, r1 = broadcast_reduction_axes(list(ints(s0)), list(ints(s1)))
        except errors.InvalidArgumentError as exc:
            raise ctx.error(errors.InvalidArgumentError, exc.message) from None
        return np.array(r0, dtype=dt), np.array(r1, dtype=dt)

    return run


# ---------------------------------------------------------------------------- matmul, cast


def _upcast_half(ctx: KernelContext, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Multiply half-precision matrices in float32 (numpy has no half BLAS; TF accumulates in
    float32 too) and round the result back."""
    dt = node_dtype(ctx)
    if dt not in HALF:
        return fn
    f32 = np.float32
    return lambda a, b: fn(a.astype(f32), b.astype(f32)).astype(dt.np)


@kernel("MatMul")
def _matmul(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    # numpy's arrays go through the block runner (see parallel.matmul), others to their own
    mm = parallel.matmul if ctx.xp is np else ctx.xp.matmul
    if not ta and not tb:
        return _upcast_half(ctx, mm)
    return _upcast_half(ctx, lambda a, b: mm(a.T if ta else a, b.T if tb else b))


def _batch_matmul(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    adj_x, adj_y = bool(ctx.attr("adj_x")), bool(ctx.attr("adj_y"))
    xp = ctx.xp
    cplx = node_dtype(ctx).is_complex

    def adjoint(m: Any) -> Any:
        m = xp.swapaxes(m, -1, -2)
        return xp.conj(m) if cplx else m

    if not adj_x and not adj_y:
        return _upcast_half(ctx, xp.matmul)
    return _upcast_half(ctx, lambda a, b: xp.matmul(adjoint(a) if adj_x else a,
                                                    adjoint(b) if adj_y else b))


kernel("BatchMatMulV2")(_batch_matmul)


@kernel("BatchMatMul")
def _batch_matmul_v1(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    run = _batch_matmul(ctx)

    def checked(a: Any, b: Any) -> Any:
        if a.shape[:-2] != b.shape[:-2]:
            raise ctx.error(errors.InvalidArgumentError,
                            f"batch dimensions must match: {list(a.shape)} vs. {list(b.shape)}")
        return run(a, b)

    return checked


@kernel("Cast")
def _cast(ctx: KernelContext) -> Callable[[Any], Any]:
    dst = node_dtype(ctx, "DstT")
    src = ctx.attr("SrcT", None)
    if src is not None and dtypes.as_dtype(src) is dst:
        return lambda x: x
    np_dt = dst.np
    if dst.is_complex:
        return lambda x: x.astype(np_dt)

    def run(x: Any) -> Any:
        if x.dtype.kind == "c":  # the real part, as TensorFlow (numpy would warn)
            x = x.real
        return x.astype(np_dt)

    return run
