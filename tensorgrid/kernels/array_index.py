"""Numpy kernels of the indexing ops: slices, gathers, scatters, segment sums, unique.

Indices are checked before use: numpy wraps negative indices around, where TensorFlow fails with
InvalidArgumentError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core.registry import KernelContext
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.kernels.arguments import ints, invalid, memo
from tensorgrid.ops.array_index import SLICE_MASKS, dense_slice, numpy_index


def _first_bad(bad: Any) -> tuple[int, ...]:
    """The position of the first True of a boolean array."""
    flat = int(bad.reshape(-1).argmax())
    return tuple(int(i) for i in np.unravel_index(flat, bad.shape))


# ------------------------------------------------------------------------------ slices


@kernel("Slice")
def _slice(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    spec = memo(lambda b, s: (ints(b), ints(s)))
    last: list[Any] = [None, None, None]  # spec, input shape -> index

    def index(bs: tuple[int, ...], ss: tuple[int, ...], shape: tuple[int, ...]) -> Any:
        if len(bs) != len(shape) or len(ss) != len(shape):
            raise invalid(f"Expected begin and size arguments to be 1-D tensors of size "
                          f"{len(shape)}, but got {len(bs)} and {len(ss)} values")
        idx = []
        for i, (b, s, d) in enumerate(zip(bs, ss, shape)):
            if not 0 <= b <= d:
                raise invalid(f"Expected begin[{i}] in [0, {d}], but got {b}")
            if s == -1:
                s = d - b
            if not 0 <= s <= d - b:
                raise invalid(f"Expected size[{i}] in [0, {d - b}], but got {s}")
            idx.append(slice(b, b + s))
        return (*idx, Ellipsis)

    def run(x: Any, begin: Any, size: Any) -> Any:
        got = spec(begin, size)
        if got is not last[0] or x.shape != last[1]:
            last[:] = [got, x.shape, index(*got, x.shape)]
        return x[last[2]]

    return run


def _slice_planner(ctx: KernelContext) -> Callable[..., tuple[Any, ...]]:
    """rank, begin, end, strides -> numpy index (remembered: the spec is usually constant)."""
    masks = [int(ctx.attr(m)) for m in SLICE_MASKS]

    def plan(rank: int, begin: Any, end: Any, strides: Any) -> tuple[Any, ...]:
        b, e, s = ints(begin), ints(end), ints(strides)
        if not len(b) == len(e) == len(s):
            raise invalid(f"begin, end and strides must have the same length, got {len(b)}, "
                          f"{len(e)} and {len(s)}")
        try:
            return numpy_index(dense_slice(rank, len(b), b, e, s, masks))
        except ValueError as exc:
            raise invalid(str(exc)) from None

    # The rank is a small int, so identity comparison finds it (CPython caches small ints).
    return memo(plan)


@kernel("StridedSlice")
def _strided_slice(ctx: KernelContext) -> Callable[[Any, Any, Any, Any], Any]:
    plan = _slice_planner(ctx)

    def run(x: Any, begin: Any, end: Any, strides: Any) -> Any:
        idx = plan(x.ndim, begin, end, strides)
        try:
            return x[idx]
        except IndexError as exc:
            raise invalid(f"slice index out of bounds: {exc}") from None

    return run


@kernel("StridedSliceGrad")
def _strided_slice_grad(ctx: KernelContext) -> Callable[..., Any]:
    xp = ctx.xp
    plan = _slice_planner(ctx)
    target = memo(ints)

    def run(shape: Any, begin: Any, end: Any, strides: Any, dy: Any) -> Any:
        dims = target(shape)
        idx = tuple(i for i in plan(len(dims), begin, end, strides) if i is not None)
        out = xp.zeros(dims, dtype=dy.dtype)
        try:
            place = out[idx]
            out[idx] = dy.reshape(place.shape)
        except (IndexError, ValueError) as exc:
            raise invalid(f"dy of shape {list(dy.shape)} does not fit the slice of shape "
                          f"{list(dims)}: {exc}") from None
        return out

    return run


# ------------------------------------------------------------------------------ gather


def _check_indices(indices: Any, n: int, what: str = "indices") -> None:
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):
        pos = _first_bad((indices < 0) | (indices >= n))
        raise invalid(f"{what}{list(pos)} = {int(indices[pos])} is not in [0, {n})")


def _gather(xp: Any, params: Any, indices: Any, axis: int, batch_dims: int) -> Any:
    if not -params.ndim <= axis < params.ndim:
        raise invalid(f"Expected axis in the range [{-params.ndim}, {params.ndim}), but got "
                      f"{axis}")
    axis %= params.ndim
    if batch_dims < 0:
        batch_dims += indices.ndim
    if batch_dims == 0 and indices.ndim and xp is np:
        # numpy's take() fails on indices past the end but wraps negative ones around
        if indices.size and indices.min() < 0:
            _check_indices(indices, params.shape[axis])
        try:
            return np.take(params, indices, axis=axis)
        except IndexError:
            _check_indices(indices, params.shape[axis])
            raise
    _check_indices(indices, params.shape[axis])
    if batch_dims == 0:
        if indices.ndim == 0:  # take() would return a bare scalar
            return params[(slice(None),) * axis + (int(indices), Ellipsis)]
        return xp.take(params, indices, axis=axis)
    if not 0 < batch_dims <= min(axis, indices.ndim) or \
            params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise invalid(f"batch_dims = {batch_dims} does not fit params of shape "
                      f"{list(params.shape)}, indices of shape {list(indices.shape)} and axis "
                      f"{axis}")
    # Gather within each batch row: move the axis right behind the batch dims, flatten the batch
    # and index dims, take, then move the index dims back where the axis was.
    b, n = batch_dims, params.shape[axis]
    batch = params.shape[:b]
    moved = xp.moveaxis(params, axis, b)
    rows = int(np.prod(batch, dtype=np.int64))
    flat = moved.reshape((rows, n, *moved.shape[b + 1:]))
    picked = flat[xp.arange(rows)[:, None], indices.reshape(rows, -1)]
    picked = picked.reshape(batch + indices.shape[b:] + moved.shape[b + 1:])
    li, lm = indices.ndim - b, axis - b
    perm = (list(range(b)) + list(range(b + li, b + li + lm)) + list(range(b, b + li))
            + list(range(b + li + lm, picked.ndim)))
    return xp.transpose(picked, perm)


@kernel("GatherV2")
def _gather_v2(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    batch_dims = int(ctx.attr("batch_dims"))
    return lambda params, indices, axis: _gather(xp, params, indices, int(axis), batch_dims)


@kernel("Gather")
def _gather_v1(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp
    return lambda params, indices: _gather(xp, params, indices, 0, 0)


def _check_nd(xp: Any, indices: Any, dims: tuple[int, ...], what: str) -> None:
    if not indices.size:
        return
    bounds = xp.asarray(dims, dtype=indices.dtype)
    bad = ((indices < 0) | (indices >= bounds)).any(axis=-1)
    if bool(bad.any()):
        pos = _first_bad(bad)
        raise invalid(f"indices{list(pos)} = {ints(indices[pos])} does not index into {what} "
                      f"{list(dims)}")


@kernel("GatherNd")
def _gather_nd(ctx: KernelContext) -> Callable[[Any, Any], Any]:
    xp = ctx.xp

    def run(params: Any, indices: Any) -> Any:
        if indices.ndim == 0:
            raise invalid("indices must be at least a vector")
        m = indices.shape[-1]
        if m > params.ndim:
            raise invalid(f"indices.shape[-1] must be <= params.rank, but saw indices shape "
                          f"{list(indices.shape)} and params shape {list(params.shape)}")
        _check_nd(xp, indices, params.shape[:m], "param shape")
        if m == 0:
            return xp.broadcast_to(params, indices.shape[:-1] + params.shape)
        return params[(*xp.moveaxis(indices, -1, 0), Ellipsis)]

    return run


@kernel("ScatterNd")
def _scatter_nd(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    add_at = np.add.at  # unbuffered: repeated indices add up
    target = memo(ints)

    def run(indices: Any, updates: Any, shape: Any) -> Any:
        dims = target(shape)
        m = indices.shape[-1] if indices.ndim else -1
        if not 0 <= m <= len(dims) or updates.shape != indices.shape[:-1] + dims[m:]:
            raise invalid(f"updates of shape {list(updates.shape)} and indices of shape "
                          f"{list(indices.shape)} do not fit shape {list(dims)}")
        _check_nd(xp, indices, dims[:m], "shape")
        out = xp.zeros(dims, dtype=updates.dtype)
        add_at(out, tuple(indices[..., k] for k in range(m)), updates)
        return out

    return run


@kernel("UnsortedSegmentSum")
def _unsorted_segment_sum(ctx: KernelContext) -> Callable[[Any, Any, Any], Any]:
    xp = ctx.xp
    add_at = np.add.at  # unbuffered: repeated indices add up

    def run(data: Any, ids: Any, num_segments: Any) -> Any:
        n = int(num_segments)
        if n < 0:
            raise invalid(f"num_segments must be non-negative, got {n}")
        if data.shape[:ids.ndim] != ids.shape:
            raise invalid(f"data.shape = {list(data.shape)} does not start with "
                          f"segment_ids.shape = {list(ids.shape)}")
        inner = data.shape[ids.ndim:]
        out = xp.zeros((n, *inner), dtype=data.dtype)
        if not ids.size:
            return out
        flat_ids = ids.reshape(-1)
        flat = data.reshape((-1, *inner))
        if int(flat_ids.max()) >= n:
            pos = _first_bad(ids >= n)
            raise invalid(f"segment_ids{list(pos)} = {int(ids[pos])} is out of range [0, {n})")
        if int(flat_ids.min()) < 0:  # negative ids are dropped, as in TensorFlow
            keep = flat_ids >= 0
            flat_ids, flat = flat_ids[keep], flat[keep]
        add_at(out, flat_ids, flat)
        return out

    return run


@kernel("Unique")
def _unique(ctx: KernelContext) -> Callable[[Any], Any]:
    xp = ctx.xp
    out_idx = ctx.attr("out_idx").np

    def run(x: Any) -> Any:
        values, first, inverse = xp.unique(x, return_index=True, return_inverse=True)
        order = xp.argsort(first, kind="stable")  # sorted order -> order of first appearance
        position = xp.empty_like(order)
        position[order] = xp.arange(order.size)
        return values[order], position[inverse.reshape(-1)].astype(out_idx)

    return run
