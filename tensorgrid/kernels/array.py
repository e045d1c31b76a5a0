"""Numpy kernels of the array ops (one builder per op, written against ``ctx.xp``).

Shape-like inputs (shapes, axes, perms, paddings) are converted to python ints once per distinct
input (``kernels.arguments.memo``). The indexing kernels are in ``kernels.array_index``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.arguments import ints, invalid, memo
from tensorgrid.ops.array_create import range_size

kernel("ZerosLike")(lambda ctx: ctx.xp.zeros_like)
kernel("OnesLike")(lambda ctx: ctx.xp.ones_like)


# ------------------------------------------------------------------------------ shapes


@kernel("Shape")
def _shape(ctx: KernelContext) -> Callable[[Any], Any]:
    dt, xp = ctx.attr("out_type").np, ctx.xp
    return lambda x: xp.asarray(x.shape, dtype=dt)


@kernel("ShapeN")
def _shape_n(ctx: KernelContext) -> Callable[..., Any]:
    dt, xp = ctx.attr("out_type").np, ctx.xp

    def run(*xs: Any) -> Any:
        out = tuple(xp.asarray(x.shape, dtype=dt) for x in xs)
        return out if len(out) > 1 else out[0]

    return run


@kernel("Size")
def _size(ctx: KernelContext) -> Callable[[Any], Any]:
    dt, xp = ctx.attr("out_type").np, ctx.xp
    return lambda x: xp.asarray(x.size, dtype=dt)


@kernel("Rank")
def _rank(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    return lambda x: xp.asarray(x.ndim, dtype=np.int32)


@kernel("Reshape")
def _reshape(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    target = memo(ints)

    def run(x: Any, shape: Any) -> Any:
        dims = target(shape)
        try:
            return x.reshape(dims)
        except ValueError:
            known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
            raise invalid(f"Input to reshape is a tensor with {x.size} values, but the requested "
                          f"shape {list(dims)} has {known}") from None

    return run


@kernel("ExpandDims")
def _expand_dims(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    axis = memo(lambda a: ints(a)[0])

    def run(x: Any, dim: Any) -> Any:
        a = axis(dim)
        if not -x.ndim - 1 <= a <= x.ndim:
            raise invalid(f"Tried to expand dim index {a} for tensor with {x.ndim} dimensions")
        return xp.expand_dims(x, a)

    return run


@kernel("Squeeze")
def _squeeze(ctx: KernelContext) -> Callable[[Any], Any]:
    axes = tuple(int(a) for a in ctx.attr("squeeze_dims"))
    xp = ctx.xp

    def run(x: Any) -> Any:
        for a in axes:
            if not -x.ndim <= a < x.ndim or x.shape[a] != 1:
                raise invalid(f"Can not squeeze dim[{a}] of a tensor of shape {list(x.shape)}, "
                              "expected a dimension of 1")
        return xp.squeeze(x, axis=axes) if axes else xp.squeeze(x)

    return run


# ------------------------------------------------------------------------------ permuting


def _check_perm(p: tuple[int, ...]) -> tuple[int, ...]:
    if sorted(p) != list(range(len(p))):
        raise invalid(f"perm {list(p)} is not a permutation of 0..{len(p) - 1}")
    return p


@kernel("Transpose")
def _transpose(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    perm = memo(lambda p: _check_perm(ints(p)))

    def run(x: Any, p: Any) -> Any:
        axes = perm(p)
        if len(axes) != x.ndim:
            raise invalid(f"transpose expects a vector of size {x.ndim}, but perm has size "
                          f"{len(axes)}")
        return xp.transpose(x, axes)

    return run


@kernel("ConjugateTranspose")
def _conjugate_transpose(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    plain = _transpose(ctx)
    if ctx.attr("T").is_complex:
        xp = ctx.xp
        return lambda x, p: xp.conj(plain(x, p))
    return plain


@kernel("InvertPermutation")
def _invert_permutation(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp

    def run(x: Any) -> Any:
        n = x.shape[0]
        out = xp.full(n, -1, dtype=x.dtype)
        if n and (int(x.min()) < 0 or int(x.max()) >= n):
            raise invalid(f"x is not a valid permutation: values must be in [0, {n})")
        out[x] = xp.arange(n, dtype=x.dtype)
        if n and int(out.min()) < 0:
            raise invalid("x is not a valid permutation: it has duplicate values")
        return out

    return run


@kernel("ReverseV2")
def _reverse(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    axes = memo(ints)

    def run(x: Any, axis: Any) -> Any:
        ax = axes(axis)
        for a in ax:
            if not -x.ndim <= a < x.ndim:
                raise invalid(f"axis {a} is out of range for a tensor of rank {x.ndim}")
        if len({a % x.ndim for a in ax}) != len(ax):
            raise invalid(f"axis {list(ax)} names a dimension more than once")
        return xp.flip(x, axis=ax) if ax else x

    return run


# ------------------------------------------------------------------------------ join / split


@kernel("ConcatV2")
def _concat_v2(ctx: KernelContext) -> Callable[..., Any]:
    xp = ctx.xp
    return lambda *xs: xp.concatenate(xs[:-1], axis=int(xs[-1]))


@kernel("Concat")
def _concat_v1(ctx: KernelContext) -> Callable[..., Any]:
    xp = ctx.xp
    return lambda axis, *xs: xp.concatenate(xs, axis=int(axis))


@kernel("Pack")
def _pack(ctx: KernelContext) -> Callable[..., Any]:
    axis = int(ctx.attr("axis"))
    xp = ctx.xp
    return lambda *xs: xp.stack(xs, axis=axis)


@kernel("Unpack")
def _unpack(ctx: KernelContext) -> Callable[[Any], Any]:
    axis, num = int(ctx.attr("axis")), int(ctx.attr("num"))
    xp = ctx.xp

    def run(x: Any) -> Any:
        if x.shape[axis] != num:
            raise invalid(f"Dimension {axis} of the input has size {x.shape[axis]}, but num = "
                          f"{num}")
        m = xp.moveaxis(x, axis, 0) if axis else x
        out = tuple(m[i, ...] for i in range(num))  # m[i, ...] is a 0-d array, not a scalar
        return out if num != 1 else out[0]

    return run


@kernel("Split")
def _split(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    num = int(ctx.attr("num_split"))
    xp = ctx.xp

    def run(axis: Any, x: Any) -> Any:
        a = int(axis)
        if not -x.ndim <= a < x.ndim:
            raise invalid(f"split_dim {a} is out of range for an input of rank {x.ndim}")
        if x.shape[a] % num:
            raise invalid(f"Number of ways to split should evenly divide the split dimension, "
                          f"but got split_dim {a} (size = {x.shape[a]}) and num_split {num}")
        out = tuple(xp.split(x, num, axis=a))
        return out if num != 1 else out[0]

    return run


def _split_points(sizes: tuple[int, ...], dim: int) -> list[int]:
    known = sum(s for s in sizes if s != -1)
    if -1 in sizes:
        if known > dim:
            raise invalid(f"size_splits {list(sizes)} add up to more than the dimension ({dim})")
        sizes = tuple(dim - known if s == -1 else s for s in sizes)
    elif known != dim:
        raise invalid(f"Determined shape must either match input shape along split_dim exactly "
                      f"if fully specified, or be less than the size of the input along "
                      f"split_dim if not fully specified. Got: {known} vs. {dim}")
    return np.cumsum(sizes[:-1]).tolist()  # type: ignore[no-any-return]


@kernel("SplitV")
def _split_v(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    num = int(ctx.attr("num_split"))
    sizes = memo(ints)

    def run(x: Any, size_splits: Any, axis: Any) -> Any:
        a = int(axis)
        if not -x.ndim <= a < x.ndim:
            raise invalid(f"split_dim {a} is out of range for an input of rank {x.ndim}")
        s = sizes(size_splits)
        if len(s) != num:
            raise invalid(f"size_splits has {len(s)} entries but num_split is {num}")
        out = tuple(xp.split(x, _split_points(s, x.shape[a]), axis=a))
        return out if num != 1 else out[0]

    return run


# ------------------------------------------------------------------------------ tile / pad / fill


@kernel("Tile")
def _tile(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    reps = memo(ints)

    def run(x: Any, multiples: Any) -> Any:
        m = reps(multiples)
        if len(m) != x.ndim or min(m, default=0) < 0:
            raise invalid(f"Expected multiples argument to be a non-negative vector of length "
                          f"{x.ndim}, got {list(m)}")
        return xp.tile(x, m)

    return run


def _pairs(p: Any) -> tuple[tuple[int, int], ...]:
    flat = ints(p)
    out = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2))
    if any(a < 0 or b < 0 for a, b in out):
        raise invalid(f"paddings must be non-negative, got {[list(x) for x in out]}")
    return out


def _check_pads(x: Any, pads: tuple[tuple[int, int], ...], limit: int = 0) -> None:
    if len(pads) != x.ndim:
        raise invalid(f"The first dimension of paddings must be the rank of inputs ({x.ndim}), "
                      f"got {len(pads)} rows")
    if limit:
        for i, ((lo, hi), d) in enumerate(zip(pads, x.shape)):
            if lo > d - (limit == 1) or hi > d - (limit == 1):
                raise invalid(f"paddings {lo}, {hi} too large for dimension {i} of size {d} in "
                              f"mode {'REFLECT' if limit == 1 else 'SYMMETRIC'}")


def _padder(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    pairs = memo(_pairs)

    def run(x: Any, paddings: Any, value: Any) -> Any:
        pads = pairs(paddings)
        _check_pads(x, pads)
        out = xp.full(tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, pads)), value,
                      dtype=x.dtype)
        # ``...`` keeps a rank-0 input's element an element (``out[()] = x`` would store a 0-d
        # object array inside a string tensor)
        out[(*(slice(lo, lo + d) for d, (lo, _) in zip(x.shape, pads)), ...)] = x
        return out

    return run


@kernel("Pad")
def _pad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    run = _padder(ctx)
    fill_value = b"" if ctx.attr("T").np == np.object_ else 0
    return lambda x, paddings: run(x, paddings, fill_value)


@kernel("PadV2")
def _pad_v2(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    return _padder(ctx)


def _mirror_mode(ctx: KernelContext) -> str:
    mode = ctx.attr("mode")
    return mode.decode() if isinstance(mode, bytes) else str(mode)


@kernel("MirrorPad")
def _mirror_pad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    mode = _mirror_mode(ctx)
    np_mode, limit = ("reflect", 1) if mode == "REFLECT" else ("symmetric", 2)
    pairs = memo(_pairs)

    def run(x: Any, paddings: Any) -> Any:
        pads = pairs(paddings)
        _check_pads(x, pads, limit)
        return xp.pad(x, pads, mode=np_mode)

    return run


@kernel("MirrorPadGrad")
def _mirror_pad_grad(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    """Fold each padded border back onto the entries it mirrored, one dim at a time."""
    xp = ctx.xp
    shift = 1 if _mirror_mode(ctx) == "REFLECT" else 0  # REFLECT skips the edge entry
    pairs = memo(_pairs)

    def run(g: Any, paddings: Any) -> Any:
        pads = pairs(paddings)
        if len(pads) != g.ndim:
            raise invalid(f"paddings has {len(pads)} rows but the gradient has rank {g.ndim}")
        out = g
        for axis, (lo, hi) in enumerate(pads):
            n = out.shape[axis] - lo - hi
            if n < 0 or max(lo, hi) > n - shift:
                raise invalid(f"paddings {lo}, {hi} do not fit dimension {axis} of size "
                              f"{out.shape[axis]}")
            lead = (slice(None),) * axis
            core = out[(*lead, slice(lo, lo + n))].copy()
            if lo:
                core[(*lead, slice(shift, shift + lo))] += xp.flip(
                    out[(*lead, slice(0, lo))], axis=axis)
            if hi:
                core[(*lead, slice(n - shift - hi, n - shift))] += xp.flip(
                    out[(*lead, slice(lo + n, lo + n + hi))], axis=axis)
            out = core
        return out

    return run


@kernel("BroadcastTo")
def _broadcast_to(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    target = memo(ints)

    def run(x: Any, shape: Any) -> Any:
        dims = target(shape)
        try:
            return xp.broadcast_to(x, dims)
        except ValueError:
            raise invalid(f"Incompatible shapes: {list(x.shape)} cannot be broadcast to "
                          f"{list(dims)}") from None

    return run


@kernel("Fill")
def _fill(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    target = memo(ints)

    def run(dims: Any, value: Any) -> Any:
        d = target(dims)
        if min(d, default=0) < 0:
            raise invalid(f"dims must be non-negative, got {list(d)}")
        if getattr(value, "ndim", 0) != 0:
            raise invalid(f"value must be a scalar, got shape {list(value.shape)}")
        return xp.full(d, value, dtype=value.dtype)

    return run


@kernel("Range")
def _range(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    dt = ctx.attr("Tidx").np
    conv = int if np.dtype(dt).kind in "iu" else float

    def run(start: Any, limit: Any, delta: Any) -> Any:
        s, lim, d = conv(start), conv(limit), conv(delta)
        try:
            n = range_size(s, lim, d)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        return (xp.arange(n, dtype=dt) * dt.type(d) + dt.type(s)).astype(dt, copy=False)

    return run


@kernel("OneHot")
def _one_hot(ctx: KernelContext) -> Callable[[Any, Any, Any, Any], Any]:
    xp = ctx.xp
    axis = int(ctx.attr("axis"))

    def run(indices: Any, depth: Any, on: Any, off: Any) -> Any:
        n = int(depth)
        if n < 0:
            raise invalid(f"depth must be non-negative, got {n}")
        a = indices.ndim if axis == -1 else axis
        # compare each index with 0..depth-1 laid along the new axis
        positions = xp.arange(n).reshape((n,) + (1,) * (indices.ndim - a))
        hot = xp.expand_dims(indices, a) == positions
        return xp.where(hot, on, off)

    return run
