"""Reductions, arg-reductions and cumulative ops (TensorFlow's ``Sum``/``Mean``/``Max``/``Min``/
``Prod``/``Any``/``All``, ``ArgMax``/``ArgMin``, ``Cumsum``/``Cumprod``) and their TF1 python API.

Every reduction takes the axes as input 1 (any integer vector or scalar; negative axes count from
the end; an empty list reduces nothing) and the attr ``keep_dims``. The python API's ``axis=None``
means every axis. ``tensorgrid.ops.math`` re-exports this module's ``__all__``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.ops._infer import const_ints, spec

__all__ = [
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_any",
    "reduce_all", "reduce_logsumexp", "argmax", "argmin", "cumsum", "cumprod",
]

_REDUCTION_DEFAULTS = {"keep_dims": False, "Tidx": dtypes.int32}


def _reduction(allowed: Callable[[dtypes.DType], bool],
               what: str) -> Callable[[InferContext], Sequence[TensorSpec]]:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(2)
        dt = ctx.dtype(0)
        if not allowed(dt):
            ctx.fail(f"does not support dtype {dt.name}; needs {what}")
        if not ctx.dtype(1).is_integer:
            ctx.fail(f"reduction indices must be int32 or int64, got {ctx.dtype(1).name}")
        if ctx.shape(1).rank not in (None, 0, 1):
            ctx.fail(f"reduction indices must be a scalar or a vector, got shape {ctx.shape(1)}")
        shape = ctx.shape(0)
        keep = bool(ctx.attr("keep_dims"))
        axes = const_ints(ctx, 1)
        if shape.dims is None:
            return [spec(dt, TensorShape(None))]
        rank = len(shape.dims)
        if axes is None:
            # Unknown axes: only a kept rank (or a full reduction of a rank-0 input) is known.
            return [spec(dt, [None] * rank if keep else (() if rank == 0 else None))]
        norm = set()
        for a in axes:
            if not -rank <= a < rank:
                ctx.fail(f"Invalid reduction dimension {a} for input with {rank} dimensions")
            norm.add(a % rank)
        dims = [1 if i in norm else d for i, d in enumerate(shape.dims)] if keep else \
            [d for i, d in enumerate(shape.dims) if i not in norm]
        return [spec(dt, dims)]

    return infer


def _numeric(dt: dtypes.DType) -> bool:
    return dt.is_numeric


def _real(dt: dtypes.DType) -> bool:
    return dt.is_floating or dt.is_integer


def _boolean(dt: dtypes.DType) -> bool:
    return dt.is_bool


for _name in ("Sum", "Mean", "Prod"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_numeric, "a numeric type"))
for _name in ("Max", "Min"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_real, "an integer or floating type"))
for _name in ("Any", "All"):
    op(_name, defaults=_REDUCTION_DEFAULTS)(_reduction(_boolean, "bool"))


def _arg_reduction(ctx: InferContext) -> Sequence[TensorSpec]:
    """ArgMax/ArgMin: input 1 is the scalar dimension; the output drops it."""
    ctx.expect_inputs(2)
    if not _real(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs an integer or floating type")
    if not ctx.dtype(1).is_integer or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"dimension must be an integer scalar, got {ctx.dtype(1).name} of shape "
                 f"{ctx.shape(1)}")
    out = dtypes.as_dtype(ctx.attr("output_type"))
    if out not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"output_type must be int32 or int64, got {out.name}")
    shape = ctx.shape(0)
    if shape.dims is None:
        return [spec(out, TensorShape(None))]
    rank = len(shape.dims)
    if rank == 0:
        ctx.fail("cannot reduce a scalar over a dimension")
    axis = const_ints(ctx, 1)
    if axis is None:
        return [spec(out, [None] * (rank - 1))]
    a = axis[0]
    if not -rank <= a < rank:
        ctx.fail(f"Expected dimension in the range [{-rank}, {rank}), but got {a}")
    a %= rank
    return [spec(out, [d for i, d in enumerate(shape.dims) if i != a])]


for _name in ("ArgMax", "ArgMin"):
    op(_name, defaults={"output_type": dtypes.int64, "Tidx": dtypes.int32})(_arg_reduction)


def _scan(ctx: InferContext) -> Sequence[TensorSpec]:
    """Cumsum/Cumprod: input 1 is the scalar axis; the output has the input's spec."""
    ctx.expect_inputs(2)
    if not ctx.dtype(0).is_numeric:
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a numeric type")
    if not ctx.dtype(1).is_integer or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"axis must be an integer scalar, got {ctx.dtype(1).name} of shape {ctx.shape(1)}")
    rank = ctx.shape(0).rank
    axis = const_ints(ctx, 1)
    if rank is not None and axis is not None and not -rank <= axis[0] < rank:
        ctx.fail(f"axis {axis[0]} is out of range for a tensor of rank {rank}")
    return [ctx.input(0)]


for _name in ("Cumsum", "Cumprod"):
    op(_name, defaults={"exclusive": False, "reverse": False, "Tidx": dtypes.int32})(_scan)

# ------------------------------------------------------------------------------ python API


def _axes(x: Tensor, axis: Any) -> Tensor:
    """The axes tensor of a reduction: every axis of x when ``axis`` is None."""
    if axis is None:
        rank = x.shape.rank
        if rank is not None:
            return convert_to_tensor(np.arange(rank, dtype=np.int32), name="reduction_indices")
        from tensorgrid.ops.array import range as range_
        from tensorgrid.ops.array import rank as rank_

        return range_(0, rank_(x))  # type: ignore[no-any-return]
    return int_tensor(axis, "reduction_indices")


def int_tensor(value: Any, name: str) -> Tensor:
    """An integer tensor (axes, a dimension) from a Tensor or python/numpy ints (int32 unless the
    value says otherwise)."""
    if isinstance(value, list | tuple) and not value:
        value = np.zeros(0, np.int32)  # an empty list alone would become float32
    elif isinstance(value, np.ndarray) and value.size == 0:
        value = value.astype(np.int32)
    return convert_to_tensor(value, dtype_hint=dtypes.int32, name=name)


def _pick(new: Any, old: Any, new_name: str, old_name: str) -> Any:
    if new is not None and old is not None:
        raise ValueError(f"Cannot specify both '{new_name}' and '{old_name}'.")
    return new if new is not None else old


def _reduce(op_type: str, input_tensor: Any, axis: Any, keepdims: bool | None, name: str | None,
            reduction_indices: Any, keep_dims: bool | None) -> Tensor:
    x = convert_to_tensor(input_tensor)
    keep = bool(_pick(keepdims, keep_dims, "keepdims", "keep_dims"))
    with x.graph.as_default():
        ax = _axes(x, _pick(axis, reduction_indices, "axis", "reduction_indices"))
    return make_op(op_type, [x, ax], {"T": x.dtype, "Tidx": ax.dtype,  # type: ignore[no-any-return]
                                      "keep_dims": keep}, name=name or op_type)


def reduce_sum(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """The sum over ``axis`` (every axis when None), keeping reduced dims as 1 when ``keepdims``.

    Raises:
        ValueError: both ``axis`` and ``reduction_indices`` (or both keepdims spellings) given.
        InvalidArgumentError: an axis is out of range, or the dtype is not numeric (names the node).
    """
    return _reduce("Sum", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_mean(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: Any = None,
                keep_dims: bool | None = None) -> Tensor:
    """The mean over ``axis``; integer inputs give an integer mean (the sum divided, truncating,
    by the count), as in TensorFlow. Arguments as ``reduce_sum``."""
    return _reduce("Mean", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_max(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """The maximum over ``axis`` (the dtype's lowest value over an empty axis). Arguments as
    ``reduce_sum``."""
    return _reduce("Max", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_min(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """The minimum over ``axis`` (the dtype's highest value over an empty axis). Arguments as
    ``reduce_sum``."""
    return _reduce("Min", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_prod(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                name: str | None = None, reduction_indices: Any = None,
                keep_dims: bool | None = None) -> Tensor:
    """The product over ``axis``. Arguments as ``reduce_sum``."""
    return _reduce("Prod", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_any(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """Logical or over ``axis`` of a bool tensor. Arguments as ``reduce_sum``."""
    return _reduce("Any", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_all(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
               name: str | None = None, reduction_indices: Any = None,
               keep_dims: bool | None = None) -> Tensor:
    """Logical and over ``axis`` of a bool tensor. Arguments as ``reduce_sum``."""
    return _reduce("All", input_tensor, axis, keepdims, name, reduction_indices, keep_dims)


def reduce_logsumexp(input_tensor: Any, axis: Any = None, keepdims: bool | None = None,
                     name: str | None = None, reduction_indices: Any = None,
                     keep_dims: bool | None = None) -> Tensor:
    """log(sum(exp(x))) over ``axis``, computed stably: the (finite) maximum is subtracted before
    exponentiating and added back after. Arguments as ``reduce_sum``."""
    from tensorgrid.ops import math as m
    from tensorgrid.ops.array import reshape, shape, zeros_like
    from tensorgrid.ops.core_ops import stop_gradient

    keep = bool(_pick(keepdims, keep_dims, "keepdims", "keep_dims"))
    ax = _pick(axis, reduction_indices, "axis", "reduction_indices")
    x = convert_to_tensor(input_tensor)
    with x.graph.as_default(), x.graph.name_scope(name or "ReduceLogSumExp"):
        raw_max = reduce_max(x, ax, keepdims=True)
        # an all -inf (or inf) slice would give nan from inf - inf: shift by 0 there instead
        my_max = stop_gradient(m.where_v2(m.is_finite(raw_max), raw_max, zeros_like(raw_max)))
        total = reduce_sum(m.exp(m.subtract(x, my_max)), ax, keepdims=keep)
        result = m.log(total)
        if not keep:
            my_max = reshape(my_max, shape(result)) if not result.shape.is_fully_defined() \
                else reshape(my_max, result.shape.as_list())
        return m.add(result, my_max)


def _dimension(axis: Any, dimension: Any) -> Tensor:
    d = _pick(axis, dimension, "axis", "dimension")
    return int_tensor(0 if d is None else d, "dimension")


def argmax(input: Any, axis: Any = None, name: str | None = None,
           dimension: Any = None, output_type: Any = dtypes.int64) -> Tensor:
    """The index of the largest value along ``axis`` (0 when None); ties give the first index.

    Raises:
        ValueError: both ``axis`` and ``dimension`` given.
    """
    x = convert_to_tensor(input)
    with x.graph.as_default():
        d = _dimension(axis, dimension)
    return make_op("ArgMax", [x, d], {"T": x.dtype, "Tidx": d.dtype,  # type: ignore[no-any-return]
                                      "output_type": dtypes.as_dtype(output_type)},
                   name=name or "ArgMax")


def argmin(input: Any, axis: Any = None, name: str | None = None,
           dimension: Any = None, output_type: Any = dtypes.int64) -> Tensor:
    """The index of the smallest value along ``axis`` (0 when None); ties give the first index.

    Raises:
        ValueError: both ``axis`` and ``dimension`` given.
    """
    x = convert_to_tensor(input)
    with x.graph.as_default():
        d = _dimension(axis, dimension)
    return make_op("ArgMin", [x, d], {"T": x.dtype, "Tidx": d.dtype,  # type: ignore[no-any-return]
                                      "output_type": dtypes.as_dtype(output_type)},
                   name=name or "ArgMin")


def _cumulative(op_type: str, x: Any, axis: Any, exclusive: bool, reverse: bool,
                name: str | None) -> Tensor:
    t = convert_to_tensor(x)
    with t.graph.as_default():
        a = int_tensor(axis, "axis")
    return make_op(op_type, [t, a], {"T": t.dtype, "Tidx": a.dtype,  # type: ignore[no-any-return]
                                     "exclusive": bool(exclusive), "reverse": bool(reverse)},
                   name=name or op_type)


def cumsum(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
           name: str | None = None) -> Tensor:
    """Running sums along ``axis``; ``exclusive`` leaves each element out of its own sum (the first
    is 0), ``reverse`` runs from the end."""
    return _cumulative("Cumsum", x, axis, exclusive, reverse, name)


def cumprod(x: Any, axis: Any = 0, exclusive: bool = False, reverse: bool = False,
            name: str | None = None) -> Tensor:
    """Running products along ``axis``; ``exclusive`` and ``reverse`` as in ``cumsum`` (the first
    exclusive product is 1)."""
    return _cumulative("Cumprod", x, axis, exclusive, reverse, name)
