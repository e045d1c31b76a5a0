"""Array ops that make tensors: filled with a value (``Fill``, ``zeros``, ``ones``, ``*_like``),
counted (``Range``), one-hot encoded (``OneHot``), or enlarged from another (``Tile``, ``Pad``,
``MirrorPad``, ``BroadcastTo``), with TensorFlow's op names, inputs and attrs.

The python API is ``tensorgrid.framework.array_create_ops``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import (
    const_ints,
    const_scalar,
    int_input,
    scalar_input,
    spec,
    vector_len,
)

# ------------------------------------------------------------------------------ definitions


@op("ZerosLike")
def _zeros_like(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if ctx.dtype(0) in (dtypes.string, dtypes.resource):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}")
    return [ctx.input(0)]


op("OnesLike")(_zeros_like)


@op("Tile", defaults={"Tmultiples": dtypes.int32})
def _tile(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "multiples")
    n = vector_len(ctx, 1, "multiples")
    dims = ctx.shape(0).dims
    if dims is not None and n is not None and n != len(dims):
        ctx.fail(f"Expected multiples argument to be a vector of length {len(dims)} but got "
                 f"length {n}")
    reps = const_ints(ctx, 1)
    rank = len(dims) if dims is not None else n
    if reps is None:
        return [spec(ctx.dtype(0), None if rank is None else [None] * rank)]
    if any(m < 0 for m in reps):
        ctx.fail(f"Expected multiples to be non-negative, got {reps}")
    if dims is None:
        return [spec(ctx.dtype(0), [None if m != 0 else 0 for m in reps])]
    return [spec(ctx.dtype(0), [None if d is None and m != 0 else (d or 0) * m
                                for d, m in zip(dims, reps)])]


def _pad_like(ctx: InferContext, mode: str | None = None) -> TensorSpec:
    """The spec of padding input 0 by the [rank, 2] paddings of input 1."""
    int_input(ctx, 1, "paddings")
    ps = ctx.shape(1)
    dims = ctx.shape(0).dims
    if ps.dims is not None and (len(ps.dims) != 2 or ps.dims[1] not in (None, 2)):
        ctx.fail(f"paddings must be a matrix with 2 columns, got shape {ps}")
    n = ps.dims[0] if ps.dims is not None else None
    if dims is not None and n is not None and n != len(dims):
        ctx.fail(f"The first dimension of paddings must be the rank of inputs ({len(dims)}), "
                 f"got paddings of shape {ps}")
    pads = ctx.const(1)
    rank = len(dims) if dims is not None else n
    if pads is None:
        return spec(ctx.dtype(0), None if rank is None else [None] * rank)
    pairs = pads.reshape(-1, 2).astype(np.int64).tolist()
    if any(p < 0 for pair in pairs for p in pair):
        ctx.fail(f"paddings must be non-negative, got {pairs}")
    if dims is None:
        return spec(ctx.dtype(0), [None] * len(pairs))
    out = []
    for i, (d, (lo, hi)) in enumerate(zip(dims, pairs)):
        if mode is not None and d is not None:
            limit = d - 1 if mode == "REFLECT" else d
            if lo > limit or hi > limit:
                ctx.fail(f"paddings must be no greater than the dimension size "
                         f"{'minus 1 ' if mode == 'REFLECT' else ''}for mode {mode}: "
                         f"{lo}, {hi} greater than {limit} in dimension {i}")
        out.append(None if d is None else d + lo + hi)
    return spec(ctx.dtype(0), out)


@op("Pad", defaults={"Tpaddings": dtypes.int32})
def _pad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    return [_pad_like(ctx)]


@op("PadV2", defaults={"Tpaddings": dtypes.int32})
def _pad_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    ctx.same_dtype(0, 2)
    scalar_input(ctx, 2, "constant_values")
    return [_pad_like(ctx)]


def _mirror_mode(ctx: InferContext) -> str:
    mode = ctx.attr("mode")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("REFLECT", "SYMMETRIC"):
        ctx.fail(f"mode must be REFLECT or SYMMETRIC, got {mode!r}")
    return mode


@op("MirrorPad", defaults={"Tpaddings": dtypes.int32})
def _mirror_pad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    return [_pad_like(ctx, _mirror_mode(ctx))]


@op("MirrorPadGrad", defaults={"Tpaddings": dtypes.int32})
def _mirror_pad_grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    shift = 1 if _mirror_mode(ctx) == "REFLECT" else 0  # REFLECT never mirrors the edge
    int_input(ctx, 1, "paddings")
    dims, pads = ctx.shape(0).dims, ctx.const(1)
    if dims is None or pads is None:
        return [spec(ctx.dtype(0), None if dims is None else [None] * len(dims))]
    pairs = pads.reshape(-1, 2).astype(np.int64).tolist()
    if len(pairs) != len(dims):
        ctx.fail(f"paddings has {len(pairs)} rows but the input has rank {len(dims)}")
    out = []
    for d, (lo, hi) in zip(dims, pairs):
        if d is not None and max(lo, hi) > d - lo - hi - shift:
            ctx.fail(f"paddings {lo}, {hi} are too large for a padded dimension of size {d}")
        out.append(None if d is None else d - lo - hi)
    return [spec(ctx.dtype(0), out)]


@op("BroadcastTo", defaults={"Tidx": dtypes.int32})
def _broadcast_to(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 1, "shape")
    n = vector_len(ctx, 1, "shape")
    src = ctx.shape(0).dims
    target = const_ints(ctx, 1)
    if target is None:
        if n is None:
            return [spec(ctx.dtype(0), None)]
        out: list[int | None] = [None] * n
        if src is not None:  # a known non-1 input dim is what the output has there
            for k, d in enumerate(reversed(src)):
                if k < n and d is not None and d != 1:
                    out[n - 1 - k] = d
        return [spec(ctx.dtype(0), out)]
    if any(d < 0 for d in target):
        ctx.fail(f"shape must be non-negative, got {target}")
    if src is not None:
        if len(src) > len(target):
            ctx.fail(f"Rank of input ({len(src)}) must be no greater than rank of output shape "
                     f"({len(target)})")
        for d, t in zip(reversed(src), reversed(target)):
            if d is not None and d != 1 and d != t:
                ctx.fail(f"Incompatible shapes: input {ctx.shape(0)} cannot be broadcast to "
                         f"{target}")
    return [spec(ctx.dtype(0), target)]


@op("Fill", defaults={"index_type": dtypes.int32})
def _fill(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    int_input(ctx, 0, "dims")
    n = vector_len(ctx, 0, "dims")
    if ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"value must be a scalar, got shape {ctx.shape(1)}")
    dims = const_ints(ctx, 0)
    if dims is None:
        return [spec(ctx.dtype(1), None if n is None else [None] * n)]
    if any(d < 0 for d in dims):
        ctx.fail(f"dims must be non-negative, got {dims}")
    return [spec(ctx.dtype(1), dims)]


RANGE_TYPES = (dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64)


def range_size(start: Any, limit: Any, delta: Any) -> int:
    """The number of elements of ``range(start, limit, delta)``, as TensorFlow computes it.

    Raises:
        ValueError: delta is 0, or points away from limit.
    """
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if isinstance(start, int) and isinstance(limit, int) and isinstance(delta, int):
        return (abs(limit - start) + abs(delta) - 1) // abs(delta)
    return int(np.ceil(abs((limit - start) / delta)))


@op("Range", defaults={"Tidx": dtypes.int32})
def _range(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    dt = ctx.same_dtype()
    if dt not in RANGE_TYPES:
        ctx.fail(f"Range does not support dtype {dt.name}")
    for i, what in enumerate(("start", "limit", "delta")):
        scalar_input(ctx, i, what)
    vals = [ctx.const(i) for i in builtins.range(3)]
    known = [v for v in vals if v is not None]
    if len(known) != 3:
        return [spec(dt, [None])]
    conv = int if dt.is_integer else float
    try:
        n = range_size(*(conv(v.reshape(())) for v in known))
    except ValueError as exc:
        ctx.fail(str(exc))
    return [spec(dt, [n])]


@op("OneHot", defaults={"axis": -1, "TI": dtypes.int64})
def _one_hot(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    if ctx.dtype(0) not in (dtypes.uint8, dtypes.int32, dtypes.int64):
        ctx.fail(f"indices must be uint8, int32 or int64, got {ctx.dtype(0).name}")
    if ctx.dtype(1) is not dtypes.int32:
        ctx.fail(f"depth must be int32, got {ctx.dtype(1).name}")
    dt = ctx.same_dtype(2, 3)
    for i, what in ((1, "depth"), (2, "on_value"), (3, "off_value")):
        scalar_input(ctx, i, what)
    axis = int(ctx.attr("axis"))
    depth = const_scalar(ctx, 1, "depth")
    if depth is not None and depth < 0:
        ctx.fail(f"depth must be non-negative, got {depth}")
    dims = ctx.shape(0).dims
    if dims is None:
        return [spec(dt, None)]
    if not -1 <= axis <= len(dims):
        ctx.fail(f"Expected axis to be -1 or between [0, {len(dims)}], but received {axis}")
    out = list(dims)
    out.insert(len(dims) if axis == -1 else axis, depth)
    return [spec(dt, out)]


declare_attrs({
    "BroadcastTo": "T Tidx",
    "Fill": "T index_type",
    "MirrorPad": "T Tpaddings mode",
    "MirrorPadGrad": "T Tpaddings mode",
    "OneHot": "T TI axis",
    "OnesLike": "T",
    "Pad": "T Tpaddings",
    "PadV2": "T Tpaddings",
    "Range": "Tidx",
    "Tile": "T Tmultiples",
    "ZerosLike": "T",
})
