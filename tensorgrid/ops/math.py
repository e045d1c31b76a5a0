"""Math ops: elementwise arithmetic, comparisons, logic, selection, casts and matmul (TensorFlow's op
names, input order, attrs and inference).

Reductions, argmax and cumulative sums are defined in ``ops/math_reduce.py``. The python API (and
the ``Tensor`` operator overloads) is ``tensorgrid.framework.math_ops``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, broadcast_shapes
from tensorgrid.ops._attrs import declare_attrs
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
    if c.rank == 1 and out.dims is not None and len(out.dims) > 1:
        if not TensorShape([out.dims[0]]).is_compatible_with(c):
            ctx.fail(f"condition of shape {c} must be a vector of size {out.dims[0]} "
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


declare_attrs({
    "Abs": "T",
    "Add": "T",
    "AddN": "N T",
    "AddV2": "T",
    "BatchMatMul": "T adj_x adj_y grad_x grad_y",
    "BatchMatMulV2": "T adj_x adj_y grad_x grad_y",
    "BroadcastGradientArgs": "T",
    "Cast": "DstT SrcT Truncate",
    "Ceil": "T",
    "ClipByValue": "T",
    "Conj": "T",
    "Cos": "T",
    "Div": "T",
    "Equal": "T incompatible_shape_error",
    "Exp": "T",
    "Floor": "T",
    "FloorDiv": "T",
    "FloorMod": "T",
    "Greater": "T",
    "GreaterEqual": "T",
    "IsFinite": "T",
    "IsInf": "T",
    "IsNan": "T",
    "Less": "T",
    "LessEqual": "T",
    "Log": "T",
    "Log1p": "T",
    "LogicalAnd": "T",
    "LogicalNot": "T",
    "LogicalOr": "T",
    "MatMul": "T grad_a grad_b transpose_a transpose_b",
    "Maximum": "T",
    "Minimum": "T",
    "Mul": "T",
    "Neg": "T",
    "NotEqual": "T incompatible_shape_error",
    "Pow": "T",
    "RealDiv": "T",
    "Reciprocal": "T",
    "ReciprocalGrad": "T",
    "Round": "T",
    "Rsqrt": "T",
    "RsqrtGrad": "T",
    "Select": "T",
    "SelectV2": "T",
    "Sigmoid": "T",
    "SigmoidGrad": "T",
    "Sign": "T",
    "Sin": "T",
    "Sqrt": "T",
    "SqrtGrad": "T",
    "Square": "T",
    "SquaredDifference": "T",
    "Sub": "T",
    "Tanh": "T",
    "TanhGrad": "T",
    "TruncateDiv": "T",
    "TruncateMod": "T",
    "Where": "T",
})
