"""The ops every graph needs: constants, placeholders, identity, grouping, and the call-frame ops
(``_Arg``/``_Retval``) through which a plan takes feeds and returns fetches. The python API is
``tensorgrid.framework.core_ops``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import same_as_input, spec

# ------------------------------------------------------------------------------ definitions


@op("Const")
def _const(ctx: InferContext) -> Sequence[TensorSpec]:
    value = ctx.attr("value")
    if not isinstance(value, np.ndarray):
        ctx.fail("attr 'value' must be a tensor")
    return [spec(ctx.attr("dtype"), value.shape)]


@op("Placeholder", defaults={"shape": TensorShape(None)})
def _placeholder(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(ctx.attr("dtype"), as_shape(ctx.attr("shape")))]


@op("PlaceholderWithDefault")
def _placeholder_with_default(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    shape = as_shape(ctx.attr("shape"))
    if not shape.is_compatible_with(ctx.shape(0)):
        ctx.fail(f"default value of shape {ctx.shape(0)} does not match shape {shape}")
    return [spec(ctx.dtype(0), shape)]


op("Identity")(same_as_input)
op("Snapshot")(same_as_input)
op("StopGradient")(same_as_input)
op("PreventGradient")(same_as_input)


@op("IdentityN")
def _identity_n(ctx: InferContext) -> Sequence[TensorSpec]:
    return list(ctx.inputs)


@op("NoOp", stateful=False)
def _no_op(ctx: InferContext) -> Sequence[TensorSpec]:
    return []


@op("_Arg", stateful=True)
def _arg(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(ctx.attr("T"), as_shape(ctx.attr("shape", TensorShape(None))))]


@op("_Retval", stateful=True)
def _retval(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return []


declare_attrs({
    "Const": "dtype value",
    "Identity": "T",
    "IdentityN": "T:list(type)",
    "NoOp": "",
    "Placeholder": "dtype shape",
    "PlaceholderWithDefault": "dtype shape",
    "PreventGradient": "T message",
    "Snapshot": "T",
    "StopGradient": "T",
    "_Arg": "T index shape",
    "_Retval": "T index",
})
