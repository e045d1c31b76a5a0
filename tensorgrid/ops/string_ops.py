"""String ops (TensorFlow's op names, inputs and attrs): ``AsString``, ``StringJoin``,
``StringSplit``/``StringSplitV2`` (sparse outputs: indices, values, dense_shape),
``StringToNumber``, ``Substr``, ``RegexReplace``/``StaticRegexReplace``, ``StringLength``,
``StringStrip``, ``StringLower``/``StringUpper``. Strings are bytes. None has a gradient. The python
API is ``tensorgrid.framework.string_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, broadcast_shapes
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec
from tensorgrid.ops.debug import attr_text

STRING_OPS = ("AsString", "StringJoin", "StringSplit", "StringSplitV2", "StringToNumber",
              "Substr", "RegexReplace", "StaticRegexReplace", "StringLength", "StringStrip",
              "StringLower", "StringUpper")


def _strings(ctx: InferContext, *idx: int) -> None:
    for i in idx:
        if ctx.dtype(i) is not dtypes.string:
            ctx.fail(f"input {i} must be a string tensor, got {ctx.dtype(i).name}")


def _scalar(ctx: InferContext, i: int, what: str) -> None:
    if ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")


def _broadcast(ctx: InferContext, idx: Sequence[int]) -> TensorShape:
    shape = ctx.shape(idx[0])
    for i in idx[1:]:
        try:
            shape = broadcast_shapes(shape, ctx.shape(i))
        except Exception:  # noqa: BLE001 - re-raised naming the node
            ctx.fail(f"shapes {shape} and {ctx.shape(i)} do not broadcast")
    return shape


@op("AsString", defaults={"precision": -1, "scientific": False, "shortest": False,
                          "width": -1, "fill": ""})
def _as_string(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dt = ctx.dtype(0)
    if not (dt.is_numeric or dt.is_bool or dt is dtypes.string):
        ctx.fail(f"does not support dtype {dt.name}")
    fill = ctx.attr("fill")
    if len(fill) > 1:
        ctx.fail(f"fill must be at most one character, got {fill!r}")
    if ctx.attr("scientific") and ctx.attr("shortest"):
        ctx.fail("cannot select both scientific and shortest notation")
    return [spec(dtypes.string, ctx.shape(0))]


@op("StringJoin", defaults={"separator": ""})
def _string_join(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("StringJoin needs at least one input")
    _strings(ctx, *range(ctx.num_inputs))
    shaped = [i for i in range(ctx.num_inputs) if ctx.shape(i).rank != 0]
    if not shaped:
        return [spec(dtypes.string, [])]
    shape = ctx.shape(shaped[0])
    for i in shaped[1:]:
        if not shape.is_compatible_with(ctx.shape(i)):
            ctx.fail(f"non-scalar inputs must have the same shape: {shape} vs {ctx.shape(i)}")
        shape = shape.merge_with(ctx.shape(i))
    return [spec(dtypes.string, shape)]


def _sparse_split(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _strings(ctx, 0, 1)
    if ctx.shape(0).rank not in (None, 1):
        ctx.fail(f"input must be a vector, got shape {ctx.shape(0)}")
    _scalar(ctx, 1, "the delimiter")
    return [spec(dtypes.int64, [None, 2]), spec(dtypes.string, [None]), spec(dtypes.int64, [2])]


op("StringSplit", defaults={"skip_empty": True})(_sparse_split)
op("StringSplitV2", defaults={"maxsplit": -1})(_sparse_split)


@op("StringToNumber", defaults={"out_type": dtypes.float32})
def _string_to_number(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _strings(ctx, 0)
    out = ctx.attr("out_type")
    if out not in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64):
        ctx.fail(f"out_type must be float32, float64, int32 or int64, got {out.name}")
    return [spec(out, ctx.shape(0))]


@op("Substr", defaults={"unit": "BYTE"})
def _substr(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _strings(ctx, 0)
    for i, what in ((1, "pos"), (2, "len")):
        if ctx.dtype(i) not in (dtypes.int32, dtypes.int64):
            ctx.fail(f"{what} must be int32 or int64, got {ctx.dtype(i).name}")
    if attr_text(ctx.attr("unit")) not in ("BYTE", "UTF8_CHAR"):
        ctx.fail(f"unit must be BYTE or UTF8_CHAR, got {ctx.attr('unit')!r}")
    if not ctx.shape(1).is_compatible_with(ctx.shape(2)):
        ctx.fail(f"pos and len must have the same shape: {ctx.shape(1)} vs {ctx.shape(2)}")
    return [spec(dtypes.string, _broadcast(ctx, [0, 1]))]


@op("RegexReplace", defaults={"replace_global": True})
def _regex_replace(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _strings(ctx, 0, 1, 2)
    _scalar(ctx, 1, "pattern")
    _scalar(ctx, 2, "rewrite")
    return [spec(dtypes.string, ctx.shape(0))]


def _string_to_string(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _strings(ctx, 0)
    return [spec(dtypes.string, ctx.shape(0))]


op("StaticRegexReplace", defaults={"replace_global": True})(_string_to_string)
op("StringStrip")(_string_to_string)
op("StringLower", defaults={"encoding": ""})(_string_to_string)
op("StringUpper", defaults={"encoding": ""})(_string_to_string)


@op("StringLength", defaults={"unit": "BYTE"})
def _string_length(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _strings(ctx, 0)
    if attr_text(ctx.attr("unit")) not in ("BYTE", "UTF8_CHAR"):
        ctx.fail(f"unit must be BYTE or UTF8_CHAR, got {ctx.attr('unit')!r}")
    return [spec(dtypes.int32, ctx.shape(0))]


declare_attrs({
    "AsString": "T fill precision scientific shortest width",
    "RegexReplace": "replace_global",
    "StaticRegexReplace": "pattern replace_global rewrite",
    "StringJoin": "N separator",
    "StringLength": "unit",
    "StringLower": "encoding",
    "StringSplit": "skip_empty",
    "StringSplitV2": "maxsplit",
    "StringStrip": "",
    "StringToNumber": "out_type",
    "StringUpper": "encoding",
    "Substr": "T unit",
})
