"""Debugging ops: ``CheckNumerics``/``V2`` (fail on NaN or Inf), ``Print`` (log tensors, pass the
input through), ``StringFormat`` and ``PrintV2`` (what ``tf.print`` builds), with TensorFlow's op
names, inputs and attrs. The python API is ``tensorgrid.framework.debug_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import is_float_or_complex, spec

OUTPUT_STREAMS = ("stdout", "stderr", "log(info)", "log(warning)", "log(error)")


def attr_text(value: object) -> str:
    """A string attr as str (GraphDefs from elsewhere may carry it as bytes)."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _check_numerics(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if not is_float_or_complex(ctx.dtype(0)):
        ctx.fail(f"does not support dtype {ctx.dtype(0).name}; needs a floating type")
    return [ctx.input(0)]


op("CheckNumerics", stateful=True, foldable=False, defaults={"message": ""})(_check_numerics)
op("CheckNumericsV2", stateful=True, foldable=False, defaults={"message": ""})(_check_numerics)


@op("Print", stateful=True, foldable=False,
    defaults={"message": "", "first_n": -1, "summarize": 3})
def _print(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs == 0:
        ctx.fail("Print needs the tensor to pass through")
    return [ctx.input(0)]


@op("StringFormat", defaults={"template": "%s", "placeholder": "%s", "summarize": 3})
def _string_format(ctx: InferContext) -> Sequence[TensorSpec]:
    template = attr_text(ctx.attr("template"))
    holder = attr_text(ctx.attr("placeholder"))
    if template.count(holder) != ctx.num_inputs:
        ctx.fail(f"template {template!r} has {template.count(holder)} placeholders "
                 f"{holder!r}, but {ctx.num_inputs} tensors were given")
    return [spec(dtypes.string, [])]


@op("PrintV2", stateful=True, foldable=False, defaults={"output_stream": "stderr", "end": "\n"})
def _print_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    if ctx.dtype(0) is not dtypes.string or ctx.shape(0).rank not in (None, 0):
        ctx.fail(f"input must be a string scalar, got {ctx.dtype(0).name} {ctx.shape(0)}")
    stream = attr_text(ctx.attr("output_stream"))
    if stream not in OUTPUT_STREAMS and not stream.startswith("file://"):
        ctx.fail(f"output_stream must be one of {list(OUTPUT_STREAMS)} or file://<path>, got "
                 f"{stream!r}")
    return []


@op("Assert", stateful=True, foldable=False, defaults={"summarize": 3})
def _assert(ctx: InferContext) -> Sequence[TensorSpec]:
    """condition (a bool scalar), data... -> nothing; fails when condition is false."""
    if ctx.num_inputs == 0:
        ctx.fail("Assert needs a condition")
    if ctx.dtype(0) is not dtypes.bool_ or ctx.shape(0).rank not in (None, 0):
        ctx.fail(f"condition must be a bool scalar, got {ctx.dtype(0).name} {ctx.shape(0)}")
    return []


declare_attrs({
    "Assert": "T:list(type) summarize",
    "CheckNumerics": "T message",
    "CheckNumericsV2": "T message",
    "Print": "T U:list(type) first_n message summarize",
    "PrintV2": "end output_stream",
    "StringFormat": "T:list(type) placeholder summarize template",
})
