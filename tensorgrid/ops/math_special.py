"""More elementwise math that TensorFlow's v1 losses, layers and gradients put in graphs
(TensorFlow's op names and attrs): ``DivNoNan``, ``Xlogy``, ``Xdivy``, ``Atan2``,
``ApproximateEqual``; ``Erf``, ``Erfc``, ``Expm1``, ``Tan``, ``Asin``, ``Acos``, ``Atan``,
``Sinh``, ``Cosh``, ``Asinh``, ``Acosh``, ``Atanh``, ``Rint``, ``Selu`` and ``SeluGrad``; and the
shape helpers ``ConcatOffset`` (in every TensorFlow gradient of a concat) and ``EnsureShape``.
The python API is ``tensorgrid.framework.math_special_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import binary, int_input, is_float_or_complex, is_floating, spec, unary

FLOAT_BINARY = ("DivNoNan", "Xlogy", "Xdivy")
FLOAT_UNARY = ("Erf", "Erfc", "Expm1", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
               "Acosh", "Atanh", "Rint", "Selu")

for _name in FLOAT_BINARY:
    op(_name)(binary(allowed=is_float_or_complex, what="a floating or complex type"))
op("Atan2")(binary(allowed=is_floating, what="a floating type"))
op("ApproximateEqual", defaults={"tolerance": 1e-5})(
    binary(out_dtype=dtypes.bool_, allowed=lambda d: d.is_numeric, what="a numeric type"))
for _name in FLOAT_UNARY:
    op(_name)(unary(is_float_or_complex if _name not in ("Erf", "Erfc", "Rint", "Selu")
                    else is_floating, "a floating type"))
op("SeluGrad")(binary(allowed=is_floating, what="a floating type"))


@op("ConcatOffset", defaults={"shape_type": dtypes.int32})
def _concat_offset(ctx: InferContext) -> Sequence[TensorSpec]:
    """concat_dim, shape[0..N-1] -> N offsets: where each input starts in the concatenation."""
    if ctx.num_inputs < 3:
        ctx.fail(f"expects concat_dim and at least 2 shapes, got {ctx.num_inputs} inputs")
    int_input(ctx, 0, "concat_dim")
    dt = ctx.same_dtype(*range(1, ctx.num_inputs))
    first = ctx.shape(1)
    for i in range(1, ctx.num_inputs):
        if ctx.shape(i).rank not in (None, 1):
            ctx.fail(f"shape {i - 1} must be a vector, got shape {ctx.shape(i)}")
        if not first.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"shape {i - 1} has {ctx.shape(i)} entries; shape 0 has {first}")
    return [spec(dt, first)] * (ctx.num_inputs - 1)


@op("EnsureShape")
def _ensure_shape(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    want = as_shape(ctx.attr("shape"))
    if not ctx.shape(0).is_compatible_with(want):
        ctx.fail(f"Shape of tensor {ctx.shape(0)} is not compatible with expected shape {want}")
    return [spec(ctx.dtype(0), ctx.shape(0).merge_with(want))]


declare_attrs({
    "Acos": "T",
    "Acosh": "T",
    "ApproximateEqual": "T tolerance",
    "Asin": "T",
    "Asinh": "T",
    "Atan": "T",
    "Atan2": "T",
    "Atanh": "T",
    "ConcatOffset": "N shape_type",
    "Cosh": "T",
    "DivNoNan": "T",
    "EnsureShape": "T shape",
    "Erf": "T",
    "Erfc": "T",
    "Expm1": "T",
    "Rint": "T",
    "Selu": "T",
    "SeluGrad": "T",
    "Sinh": "T",
    "Tan": "T",
    "Xdivy": "T",
    "Xlogy": "T",
})
