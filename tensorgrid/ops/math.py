"""Math ops: elementwise arithmetic, comparisons, logic, selection, casts and matmul (TensorFlow's op
names, input order and attrs), with their TF1 python API and the ``Tensor`` operator overloads.

Reductions, argmax and cumulative sums live in ``ops/math_reduce.py``; this module re-exports them,
so ``from tensorgrid.ops.math import *`` gives the whole math API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, broadcast_shapes
from tensorgrid.framework.convert import binary_inputs, convert_to_tensor, graph_of, make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.ops._infer import (
    binary,
    is_bool,
    is_float_or_complex,
    is_floating,
    is_numeric,
    is_real,
    spec,
    unary,
)

__all__ = [
    # arithmetic
    "add", "subtract", "multiply", "divide", "truediv", "div", "realdiv", "floordiv", "floor_div",
    "mod", "floormod", "truncatediv", "truncatemod", "pow", "maximum", "minimum",
    "squared_difference", "scalar_mul", "add_n", "accumulate_n",
    # unary
    "negative", "abs", "sign", "square", "sqrt", "rsqrt", "exp", "log", "log1p", "sin", "cos",
    "tanh", "sigmoid", "reciprocal", "floor", "ceil", "round", "conj", "is_finite", "is_nan",
    "is_inf",
    # comparisons and logic
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_not", "logical_xor",
    # selection
    "where", "where_v2", "clip_by_value",
    # matrices and casts
    "matmul", "cast", "to_float", "to_double", "to_int32", "to_int64", "to_bfloat16",
]


def _is_numeric_or_string(dt: dtypes.DType) -> bool:
    return dt.is_numeric or dt is dtypes.string


def _not_resource(dt: dtypes.DType) -> bool:
    return dt is not dtypes.resource


_NUMERIC = binary(allowed=is_numeric, what="a numeric type")
_REAL = binary(allowed=is_real, what="an integer or floating type")
_FLOATING = binary(allowed=is_float_or_complex, what="a floating or complex type")

# -------------------------------------------------------------------------- binary arithmetic

op("Add")(binary(allowed=_is_numeric_or_string, what="a numeric type or string"))
op("AddV2")(_NUMERIC)
op("Sub")(_NUMERIC)
op("Mul")(_NUMERIC)
op("RealDiv")(_NUMERIC)
op("Div")(_NUMERIC)
op("FloorDiv")(_REAL)
op("FloorMod")(_REAL)
op("TruncateDiv")(_REAL)
op("TruncateMod")(_REAL)
op("Pow")(_NUMERIC)
op("Maximum")(_REAL)
op("Minimum")(_REAL)
op("SquaredDifference")(_NUMERIC)
# Ops the gradient rules emit: f'(x) expressed through the forward output y and the incoming dy.
for _name in ("SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"):
    op(_name)(_FLOATING)

# -------------------------------------------------------------------------- unary

_unary_numeric = unary(is_numeric, "a numeric type")
_unary_real = unary(is_real, "an integer or floating type")
_unary_floating = unary(is_float_or_complex, "a floating or complex type")
op("Neg")(_unary_numeric)
op("Abs")(_unary_real)
op("Sign")(_unary_numeric)
op("Square")(_unary_numeric)
op("Conj")(_unary_numeric)
op("Round")(_unary_real)
for _name in ("Sqrt", "Rsqrt", "Exp", "Log", "Log1p", "Sin", "Cos", "Tanh", "Sigmoid",
              "Reciprocal"):
    op(_name)(_unary_floating)
op("Floor")(unary(is_floating, "a floating type"))
op("Ceil")(unary(is_floating, "a floating type"))


def _float_predicate(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if not ctx.dtype(0).is_floating:
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a floating type")
    return [spec(dtypes.bool_, ctx.shape(0))]


for _name in ("IsFinite", "IsNan", "IsInf"):
    op(_name)(_float_predicate)

# -------------------------------------------------------------------------- comparisons, logic

for _name in ("Less", "LessEqual", "Greater", "GreaterEqual"):
    op(_name)(binary(dtypes.bool_, is_real, "an integer or floating type"))
for _name in ("Equal", "NotEqual"):
    op(_name, defaults={"incompatible_shape_error": True})(
        binary(dtypes.bool_, _not_resource, "a value type"))
op("LogicalAnd")(binary(dtypes.bool_, is_bool, "bool"))
op("LogicalOr")(binary(dtypes.bool_, is_bool, "bool"))
op("LogicalNot")(unary(is_bool, "bool"))

# -------------------------------------------------------------------------- AddN, selection


@op("AddN")
def _add_n(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("AddN needs at least one input")
    dt = ctx.same_dtype()
    if not dt.is_numeric:
        ctx.fail(f"does not support dtype {dt.name}; needs a numeric type")
    shape = ctx.shape(0)
    for i in range(1, ctx.num_inputs):
        if not shape.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"inputs must all have the same shape: {shape} vs {ctx.shape(i)}")
        shape = shape.merge_with(ctx.shape(i))
    return [spec(dt, shape)]


def _check_condition(ctx: InferContext) -> dtypes.DType:
    ctx.expect_inputs(3)
    if not ctx.dtype(0).is_bool:
        ctx.fail(f"condition must be bool, got {ctx.dtype(0).name}")
    return ctx.same_dtype(1, 2)


@op("Select")
def _select(ctx: InferContext) -> Sequence[TensorSpec]:
    """TF1's select: x and y of one shape; cond is a scalar, of x's shape, or a vector over dim 0."""
    dt = _check_condition(ctx)
    c, x, y = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if not x.is_compatible_with(y):
        ctx.fail(f"'then' and 'else' must have the same shape, got {x} and {y}")
    out = x.merge_with(y)
    if c.rank == 1 and out.rank is not None and out.rank > 1:
        if not TensorShape([out.dims[0]]).is_compatible_with(c):  # type: ignore[index]
            ctx.fail(f"condition of shape {c} must be a vector of size {out.dims[0]} "  # type: ignore[index]
                     f"(the first dimension of {out})")
    elif c.rank not in (None, 0) and not c.is_compatible_with(out):
        ctx.fail(f"condition of shape {c} must be a scalar, a vector over the first dimension, or "
                 f"of the shape of 'then' {out}")
    return [spec(dt, out)]


@op("SelectV2")
def _select_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    """Broadcasting select: the output has the broadcast shape of cond, x and y."""
    dt = _check_condition(ctx)
    try:
        shape = broadcast_shapes(broadcast_shapes(ctx.shape(0), ctx.shape(1)), ctx.shape(2))
    except Exception:  # noqa: BLE001 - re-raised naming the node
        ctx.fail(f"Incompatible shapes for broadcasting: condition {ctx.shape(0)}, then "
                 f"{ctx.shape(1)}, else {ctx.shape(2)}")
    return [spec(dt, shape)]


@op("Where")
def _where(ctx: InferContext) -> Sequence[TensorSpec]:
    """The coordinates of the true (non-zero) elements: int64 of shape [num_true, rank]."""
    ctx.expect_inputs(1)
    dt = ctx.dtype(0)
    if not (dt.is_bool or dt.is_numeric):
        ctx.fail(f"does not support dtype {dt.name}; needs bool or a numeric type")
    return [spec(dtypes.int64, [None, ctx.shape(0).rank])]


@op("ClipByValue")
def _clip_by_value(ctx: InferContext) -> Sequence[TensorSpec]:
    """t clipped to [min, max]; min and max broadcast to t's shape (usually scalars)."""
    ctx.expect_inputs(3)
    dt = ctx.same_dtype()
    if not is_real(dt):
        ctx.fail(f"does not support dtype {dt.name}; needs an integer or floating type")
    t = ctx.shape(0)
    for i in (1, 2):
        try:
            b = broadcast_shapes(t, ctx.shape(i))
        except Exception:  # noqa: BLE001 - re-raised naming the node
            b = None
        if b is None or (t.rank is not None and b.rank is not None and b.rank != t.rank):
            ctx.fail(f"clip bound {i} of shape {ctx.shape(i)} does not broadcast to {t}")
    return [ctx.input(0)]


@op("BroadcastGradientArgs", defaults={"T": dtypes.int32})
def _broadcast_gradient_args(ctx: InferContext) -> Sequence[TensorSpec]:
    """For shapes s0, s1 of a broadcasting binary op: the axes to sum each input's gradient over."""
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    if dt not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"shapes must be int32 or int64, got {dt.name}")
    for i in (0, 1):
        if ctx.shape(i).rank not in (None, 1):
            ctx.fail(f"input {i} must be a vector (a shape), got shape {ctx.shape(i)}")
    return [spec(dt, [None]), spec(dt, [None])]


# -------------------------------------------------------------------------- matmul, cast


@op("MatMul", defaults={"transpose_a": False, "transpose_b": False})
def _matmul(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    dt = ctx.same_dtype(0, 1)
    if not dt.is_numeric:
        ctx.fail(f"does not support dtype {dt.name}; needs a numeric type")
    a, b = ctx.shape(0), ctx.shape(1)
    if a.rank not in (None, 2) or b.rank not in (None, 2):
        ctx.fail(f"MatMul needs rank-2 inputs, got shapes {a} and {b}")
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    a_dims = (list(a.dims)[::-1] if ta else list(a.dims)) if a.dims is not None else [None, None]
    b_dims = (list(b.dims)[::-1] if tb else list(b.dims)) if b.dims is not None else [None, None]
    if a_dims[1] is not None and b_dims[0] is not None and a_dims[1] != b_dims[0]:
        ctx.fail(f"Matrix size-incompatible: In[0]: {a}, In[1]: {b}"
                 f"{' (transpose_a)' if ta else ''}{' (transpose_b)' if tb else ''}")
    return [spec(dt, TensorShape([a_dims[0], b_dims[1]]))]


def _batch_matmul(broadcast: bool) -> Callable[[InferContext], Sequence[TensorSpec]]:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(2)
        dt = ctx.same_dtype(0, 1)
        if not dt.is_numeric:
            ctx.fail(f"does not support dtype {dt.name}; needs a numeric type")
        a, b = ctx.shape(0), ctx.shape(1)
        for s in (a, b):
            if s.rank is not None and s.rank < 2:
                ctx.fail(f"inputs must have rank >= 2, got shapes {a} and {b}")
        if a.dims is None or b.dims is None:
            return [spec(dt, TensorShape(None))]
        adj_x, adj_y = bool(ctx.attr("adj_x")), bool(ctx.attr("adj_y"))
        m, k = (a.dims[-1], a.dims[-2]) if adj_x else (a.dims[-2], a.dims[-1])
        k2, n = (b.dims[-1], b.dims[-2]) if adj_y else (b.dims[-2], b.dims[-1])
        if k is not None and k2 is not None and k != k2:
            ctx.fail(f"Matrix size-incompatible: In[0]: {a}, In[1]: {b}"
                     f"{' (adj_x)' if adj_x else ''}{' (adj_y)' if adj_y else ''}")
        if broadcast:
            try:
                batch = broadcast_shapes(TensorShape(a.dims[:-2]), TensorShape(b.dims[:-2]))
            except Exception:  # noqa: BLE001 - re-raised naming the node
                ctx.fail(f"batch dimensions of {a} and {b} do not broadcast")
        else:
            if len(a.dims) != len(b.dims) or not TensorShape(a.dims[:-2]).is_compatible_with(
                    b.dims[:-2]):
                ctx.fail(f"batch dimensions must match: In[0]: {a}, In[1]: {b}")
            batch = TensorShape(a.dims[:-2]).merge_with(b.dims[:-2])
        return [spec(dt, batch.concatenate([m, n]))]

    return infer


op("BatchMatMul", defaults={"adj_x": False, "adj_y": False})(_batch_matmul(False))
op("BatchMatMulV2", defaults={"adj_x": False, "adj_y": False})(_batch_matmul(True))


@op("Cast", defaults={"Truncate": False})
def _cast(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    src, dst = ctx.dtype(0), dtypes.as_dtype(ctx.attr("DstT"))
    declared = ctx.attr("SrcT", None)
    if declared is not None and dtypes.as_dtype(declared) is not src:
        ctx.fail(f"attr SrcT is {dtypes.as_dtype(declared).name} but the input is {src.name}")
    for dt in (src, dst):
        if not (dt.is_numeric or dt.is_bool):
            ctx.fail(f"Cast from {src.name} to {dst.name} is not supported")
    return [spec(dst, ctx.shape(0))]


# ------------------------------------------------------------------------------ python API


def _binary(op_type: str, default_name: str, doc: str = "") -> Callable[..., Tensor]:
    def fn(x: Any, y: Any, name: str | None = None) -> Tensor:
        xt, yt = binary_inputs(x, y)
        return make_op(op_type, [xt, yt], {"T": xt.dtype}, name=name or default_name)  # type: ignore[no-any-return]

    fn.__name__ = default_name
    fn.__doc__ = doc or None
    return fn


def _unary(op_type: str, doc: str = "") -> Callable[..., Tensor]:
    def fn(x: Any, name: str | None = None) -> Tensor:
        t = convert_to_tensor(x)
        return make_op(op_type, [t], {"T": t.dtype}, name=name or op_type)  # type: ignore[no-any-return]

    fn.__name__ = op_type
    fn.__doc__ = doc or None
    return fn


def add(x: Any, y: Any, name: str | None = None) -> Tensor:
    """x + y elementwise with broadcasting (strings concatenate, via TF's legacy ``Add``)."""
    xt, yt = binary_inputs(x, y)
    op_type = "Add" if xt.dtype is dtypes.string else "AddV2"
    return make_op(op_type, [xt, yt], {"T": xt.dtype}, name=name or "add")  # type: ignore[no-any-return]


def subtract(x: Any, y: Any, name: str | None = None) -> Tensor:
    """x - y elementwise with broadcasting."""
    return _sub(x, y, name)


def multiply(x: Any, y: Any, name: str | None = None) -> Tensor:
    """x * y elementwise with broadcasting."""
    return _mul(x, y, name)


_sub = _binary("Sub", "sub")
_mul = _binary("Mul", "mul")
_realdiv = _binary("RealDiv", "RealDiv")
_floordiv = _binary("FloorDiv", "FloorDiv")
_floormod = _binary("FloorMod", "FloorMod")


def realdiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """x / y for real and complex types (truncating for integers, as TensorFlow's RealDiv)."""
    return _realdiv(x, y, name)


# TF1's truediv: integers become floats before dividing (the narrow ones float32, else float64).
_TRUEDIV_FLOAT = {dtypes.int8: dtypes.float32, dtypes.uint8: dtypes.float32,
                  dtypes.int16: dtypes.float32, dtypes.uint16: dtypes.float32,
                  dtypes.int32: dtypes.float64, dtypes.uint32: dtypes.float64,
                  dtypes.int64: dtypes.float64, dtypes.uint64: dtypes.float64}


def truediv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Python 3 division: integers are cast to floats first (int8/int16 to float32,
    int32/int64 to float64), then ``RealDiv``.

    Raises:
        InvalidArgumentError: x and y have different dtypes (names the node).
    """
    xt, yt = binary_inputs(x, y)
    target = _TRUEDIV_FLOAT.get(xt.dtype)
    if target is not None and xt.dtype is yt.dtype:
        xt, yt = cast(xt, target), cast(yt, target)
    return make_op("RealDiv", [xt, yt], {"T": xt.dtype}, name=name or "truediv")  # type: ignore[no-any-return]


def divide(x: Any, y: Any, name: str | None = None) -> Tensor:
    """Python-style ``x / y`` (same as ``truediv``)."""
    return truediv(x, y, name=name)


def div(x: Any, y: Any, name: str | None = None) -> Tensor:
    """TF1 ``tf.div``: floor division for integers, true division for floats."""
    xt, yt = binary_inputs(x, y)
    if xt.dtype.is_floating or xt.dtype.is_complex:
        return _realdiv(xt, yt, name or "div")
    return _floordiv(xt, yt, name or "div")


def floordiv(x: Any, y: Any, name: str | None = None) -> Tensor:
    """floor(x / y) elementwise, for integers and floats (``FloorDiv``)."""
    return _floordiv(x, y, name)


floor_div = floordiv


def floormod(x: Any, y: Any, name: str | None = None) -> Tensor:
    """x - floor(x / y) * y: the remainder with the sign of y (``FloorMod``)."""
    return _floormod(x, y, name)


mod = floormod
truncatediv = _binary("TruncateDiv", "TruncateDiv", "x / y rounded toward zero (C semantics).")
truncatemod = _binary("TruncateMod", "TruncateMod",
                      "The remainder with the sign of x: x - truncatediv(x, y) * y (C fmod).")
pow = _binary("Pow", "Pow", "x ** y elementwise (integers to negative powers fail at run time).")
maximum = _binary("Maximum", "Maximum", "max(x, y) elementwise with broadcasting.")
minimum = _binary("Minimum", "Minimum", "min(x, y) elementwise with broadcasting.")
squared_difference = _binary("SquaredDifference", "SquaredDifference",
                             "(x - y) ** 2 elementwise with broadcasting.")


def scalar_mul(scalar: Any, x: Any, name: str | None = None) -> Tensor:
    """``scalar * x`` for a scalar of x's dtype.

    Raises:
        ValueError: ``scalar`` is not a scalar.
    """
    xt = convert_to_tensor(x)
    with xt.graph.as_default():
        s = convert_to_tensor(scalar, dtype=xt.dtype)
    if s.shape.rank != 0:
        raise ValueError(f"Only scalar multiply works, got shape {s.shape}")
    return _mul(s, xt, name or "scalar_mul")


def add_n(inputs: Sequence[Any], name: str | None = None) -> Tensor:
    """Elementwise sum of a list of tensors of one shape and dtype.

    Raises:
        ValueError: ``inputs`` is empty.
    """
    ts = [convert_to_tensor(i) for i in inputs]
    if not ts:
        raise ValueError("inputs must be a non-empty list of tensors")
    if len(ts) == 1 and name is None:
        return ts[0]
    return make_op("AddN", ts, {"T": ts[0].dtype, "N": len(ts)}, name=name or "AddN")  # type: ignore[no-any-return]


def accumulate_n(inputs: Sequence[Any], shape: Any = None, tensor_dtype: Any = None,
                 name: str | None = None) -> Tensor:
    """The elementwise sum of ``inputs`` (TF1's accumulate_n; here the same as ``add_n``)."""
    ts = [convert_to_tensor(i, dtype=tensor_dtype) for i in inputs]
    if shape is not None:
        for t in ts:
            t.shape.assert_is_compatible_with(shape)
    return add_n(ts, name=name)


negative = _unary("Neg", "-x elementwise.")
sign = _unary("Sign", "-1, 0 or 1 by the sign of each element (x / |x| for complex).")
square = _unary("Square", "x * x elementwise.")
sqrt = _unary("Sqrt", "The square root elementwise.")
rsqrt = _unary("Rsqrt", "1 / sqrt(x) elementwise.")
exp = _unary("Exp", "e ** x elementwise.")
log = _unary("Log", "The natural logarithm elementwise.")
log1p = _unary("Log1p", "log(1 + x) elementwise, accurate for small x.")
sin = _unary("Sin", "The sine elementwise.")
cos = _unary("Cos", "The cosine elementwise.")
tanh = _unary("Tanh", "The hyperbolic tangent elementwise.")
sigmoid = _unary("Sigmoid", "1 / (1 + exp(-x)) elementwise.")
reciprocal = _unary("Reciprocal", "1 / x elementwise.")
floor = _unary("Floor", "The largest integer not greater than x, elementwise (floating types).")
ceil = _unary("Ceil", "The smallest integer not less than x, elementwise (floating types).")
round = _unary("Round", "Round half to even, elementwise (integers unchanged).")
is_finite = _unary("IsFinite", "True where x is neither inf nor nan.")
is_nan = _unary("IsNan", "True where x is nan.")
is_inf = _unary("IsInf", "True where x is +inf or -inf.")
logical_not = _unary("LogicalNot", "not x elementwise (bool).")


def abs(x: Any, name: str | None = None) -> Tensor:
    """|x| elementwise for integer and floating types."""
    t = convert_to_tensor(x)
    return make_op("Abs", [t], {"T": t.dtype}, name=name or "Abs")  # type: ignore[no-any-return]


def conj(x: Any, name: str | None = None) -> Tensor:
    """The complex conjugate; a real tensor is returned unchanged (no op is added)."""
    t = convert_to_tensor(x)
    if not t.dtype.is_complex:
        return t
    return make_op("Conj", [t], {"T": t.dtype}, name=name or "Conj")  # type: ignore[no-any-return]


equal = _binary("Equal", "Equal",
                "x == y elementwise (bool), for every value type including strings.")
not_equal = _binary("NotEqual", "NotEqual", "x != y elementwise (bool).")
less = _binary("Less", "Less", "x < y elementwise (bool).")
less_equal = _binary("LessEqual", "LessEqual", "x <= y elementwise (bool).")
greater = _binary("Greater", "Greater", "x > y elementwise (bool).")
greater_equal = _binary("GreaterEqual", "GreaterEqual", "x >= y elementwise (bool).")
logical_and = _binary("LogicalAnd", "LogicalAnd", "x and y elementwise (bool).")
logical_or = _binary("LogicalOr", "LogicalOr", "x or y elementwise (bool).")


def logical_xor(x: Any, y: Any, name: str = "LogicalXor") -> Tensor:
    """x xor y elementwise (bool): (x or y) and not (x and y)."""
    xt, yt = binary_inputs(x, y)
    with xt.graph.as_default(), xt.graph.name_scope(name):
        return logical_and(logical_or(xt, yt), logical_not(logical_and(xt, yt)))


def _condition_and_values(condition: Any, x: Any, y: Any) -> tuple[Tensor, Tensor, Tensor]:
    with graph_of([condition, x, y]).as_default():
        c = convert_to_tensor(condition, dtype_hint=dtypes.bool_)
        xt, yt = binary_inputs(x, y)
    return c, xt, yt


def _select_op(condition: Any, x: Any, y: Any, name: str | None, v2: bool) -> Tensor:
    c, xt, yt = _condition_and_values(condition, x, y)
    op_type = "SelectV2" if v2 else "Select"
    return make_op(op_type, [c, xt, yt], {"T": xt.dtype}, name=name or op_type)  # type: ignore[no-any-return]


def _where_indices(condition: Any, name: str | None) -> Tensor:
    c = convert_to_tensor(condition)
    return make_op("Where", [c], {"T": c.dtype}, name=name or "Where")  # type: ignore[no-any-return]


def where(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """TF1's where.

    With only ``condition``: the int64 coordinates of its true elements, shape [num_true, rank].
    With ``x`` and ``y``: x where condition is true, else y. As in TF1, ``condition`` may also be a
    vector choosing whole rows of higher-rank x and y (``Select``); otherwise the broadcasting
    ``SelectV2`` is used, which agrees with TF1 on every shape TF1 accepts.

    Raises:
        ValueError: exactly one of x and y is given.
    """
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    c, xt, yt = _condition_and_values(condition, x, y)
    data_rank = xt.shape.rank if xt.shape.rank is not None else yt.shape.rank
    row_select = c.shape.rank in (None, 1) and (data_rank is None or data_rank > 1)
    return _select_op(c, xt, yt, name, v2=not row_select)


def where_v2(condition: Any, x: Any = None, y: Any = None, name: str | None = None) -> Tensor:
    """Like ``where``, but condition, x and y broadcast against each other (``SelectV2``).

    Raises:
        ValueError: exactly one of x and y is given.
    """
    if x is None and y is None:
        return _where_indices(condition, name)
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    return _select_op(condition, x, y, name, v2=True)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any,
                  name: str | None = None) -> Tensor:
    """t clipped to [clip_value_min, clip_value_max] (TF1's Minimum-then-Maximum composite).

    Raises:
        ValueError: the bounds would broadcast ``t`` to a larger shape.
    """
    tt = convert_to_tensor(t)
    with tt.graph.as_default(), tt.graph.name_scope(name or "clip_by_value"):
        lo = convert_to_tensor(clip_value_min, dtype_hint=tt.dtype)
        hi = convert_to_tensor(clip_value_max, dtype_hint=tt.dtype)
        out = maximum(minimum(tt, hi), lo)
    if not tt.shape.is_compatible_with(out.shape):
        raise ValueError(f"clip_by_value: the bounds broadcast t of shape {tt.shape} to "
                         f"{out.shape}")
    return out


def broadcast_gradient_args(s0: Any, s1: Any, name: str | None = None) -> tuple[Tensor, Tensor]:
    """The reduction axes for the gradients of a broadcasting binary op with input shapes s0, s1."""
    with graph_of([s0, s1]).as_default():
        a = convert_to_tensor(s0, dtype_hint=dtypes.int32)
        b = convert_to_tensor(s1, dtype=a.dtype)
    return make_op("BroadcastGradientArgs", [a, b], {"T": a.dtype},  # type: ignore[no-any-return]
                   name=name or "BroadcastGradientArgs")


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False,
           adjoint_a: bool = False, adjoint_b: bool = False, a_is_sparse: bool = False,
           b_is_sparse: bool = False, name: str | None = None) -> Tensor:
    """The matrix product of a and b, optionally transposed or adjointed (conjugate transposed).

    Rank-2 inputs give ``MatMul``; higher (or unknown) ranks give ``BatchMatMulV2``, whose leading
    batch dimensions broadcast.

    Raises:
        ValueError: both transpose and adjoint requested for one input.
    """
    if transpose_a and adjoint_a:
        raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
        raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    at, bt = binary_inputs(a, b)
    ra, rb = at.shape.rank, bt.shape.rank
    if ra is None or rb is None or ra > 2 or rb > 2:
        # For batch matmul, a transpose is the adjoint of the conjugate.
        if transpose_a:
            at = conj(at)
        if transpose_b:
            bt = conj(bt)
        return make_op("BatchMatMulV2", [at, bt],  # type: ignore[no-any-return]
                       {"T": at.dtype, "adj_x": bool(transpose_a or adjoint_a),
                        "adj_y": bool(transpose_b or adjoint_b)}, name=name or "MatMul")
    if adjoint_a:
        at = conj(at)
    if adjoint_b:
        bt = conj(bt)
    return make_op("MatMul", [at, bt], {"T": at.dtype,  # type: ignore[no-any-return]
                                        "transpose_a": bool(transpose_a or adjoint_a),
                                        "transpose_b": bool(transpose_b or adjoint_b)},
                   name=name or "MatMul")


def cast(x: Any, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` converted to ``dtype``: floats to integers truncate, numbers to bool test != 0,
    complex to real keeps the real part. Returns ``x`` itself when it already has that dtype."""
    t = convert_to_tensor(x)
    dt = dtypes.as_dtype(dtype)
    if t.dtype is dt:
        return t
    return make_op("Cast", [t], {"SrcT": t.dtype, "DstT": dt, "Truncate": False},  # type: ignore[no-any-return]
                   name=name or "Cast")


def to_float(x: Any, name: str = "ToFloat") -> Tensor:
    """``cast(x, float32)``."""
    return cast(x, dtypes.float32, name=name)


def to_double(x: Any, name: str = "ToDouble") -> Tensor:
    """``cast(x, float64)``."""
    return cast(x, dtypes.float64, name=name)


def to_int32(x: Any, name: str = "ToInt32") -> Tensor:
    """``cast(x, int32)``."""
    return cast(x, dtypes.int32, name=name)


def to_int64(x: Any, name: str = "ToInt64") -> Tensor:
    """``cast(x, int64)``."""
    return cast(x, dtypes.int64, name=name)


def to_bfloat16(x: Any, name: str = "ToBFloat16") -> Tensor:
    """``cast(x, bfloat16)``."""
    return cast(x, dtypes.bfloat16, name=name)


# ------------------------------------------------------------------------------ operators


def _install_overloads() -> None:
    """Python operators on Tensor, as TF1 defines them (== and != stay identity comparisons)."""

    def both(name: str, fn: Callable[..., Tensor], scope: str) -> None:
        setattr(Tensor, f"__{name}__", lambda self, other: fn(self, other, name=scope))
        setattr(Tensor, f"__r{name}__", lambda self, other: fn(other, self, name=scope))

    both("add", add, "add")
    both("sub", _sub, "sub")
    both("mul", _mul, "mul")
    both("truediv", truediv, "truediv")
    both("floordiv", floordiv, "floordiv")
    both("mod", floormod, "mod")
    both("pow", pow, "pow")
    both("matmul", matmul, "matmul")
    both("and", logical_and, "and")
    both("or", logical_or, "or")
    both("xor", logical_xor, "xor")
    for name, fn in (("lt", less), ("le", less_equal), ("gt", greater), ("ge", greater_equal)):
        setattr(Tensor, f"__{name}__", lambda self, other, fn=fn: fn(self, other))
    setattr(Tensor, "__neg__", lambda self: negative(self))  # noqa: B010
    setattr(Tensor, "__abs__", lambda self: abs(self))  # noqa: B010
    setattr(Tensor, "__invert__", lambda self: logical_not(self))  # noqa: B010


_install_overloads()

# The reductions: defined in their own module, exported from here (imported last: it uses the above).
from tensorgrid.ops import math_reduce as _math_reduce  # noqa: E402
from tensorgrid.ops.math_reduce import *  # noqa: E402, F403

__all__ += _math_reduce.__all__
