"""TensorArray op definitions (TensorFlow's V3 family): a step-scoped array of tensors, written and
read by index, usually inside a while_loop.

Every op that changes or depends on the array's contents takes and gives a *flow* (a float32
scalar): the data edge that orders the array's uses in the graph (and carries their gradients).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, register_op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs

_FLOW = TensorSpec(dtypes.float32, TensorShape([]))
_HANDLE = TensorSpec(dtypes.resource, TensorShape([2]))


def _element_shape(ctx: InferContext, attr: str = "element_shape") -> TensorShape:
    value = ctx.attr(attr, None)
    return TensorShape(None) if value is None else as_shape(value)


def _tensor_array(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [_HANDLE, _FLOW]


def _write(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    return [_FLOW]


def _read(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    return [TensorSpec(ctx.attr("dtype"), _element_shape(ctx, "element_shape"))]


def _gather(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    idx = ctx.shape(1)
    n = idx.dims[0] if idx.dims is not None and len(idx.dims) == 1 else None
    elem = _element_shape(ctx)
    shape = TensorShape(None) if elem.rank is None else TensorShape([n, *elem.as_list()])
    return [TensorSpec(ctx.attr("dtype"), shape)]


def _scatter(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    return [_FLOW]


def _size(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    return [TensorSpec(dtypes.int32, TensorShape([]))]


def _close(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return []


def _concat(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    rest = _element_shape(ctx, "element_shape_except0")
    shape = TensorShape(None) if rest.rank is None else TensorShape([None, *rest.as_list()])
    return [TensorSpec(ctx.attr("dtype"), shape), TensorSpec(dtypes.int64, TensorShape([None]))]


def _split(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(4)
    return [_FLOW]


def _grad(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    return [_HANDLE, _FLOW]


_UNKNOWN = TensorShape(None)
_TA_DEFAULTS = {"element_shape": _UNKNOWN, "dynamic_size": False, "clear_after_read": True,
                "identical_element_shapes": False, "tensor_array_name": ""}
register_op("TensorArrayV3", _tensor_array, stateful=True, defaults=_TA_DEFAULTS)
register_op("TensorArrayWriteV3", _write, stateful=True)
register_op("TensorArrayReadV3", _read, stateful=True, defaults={"element_shape": _UNKNOWN})
register_op("TensorArrayGatherV3", _gather, stateful=True, defaults={"element_shape": _UNKNOWN})
register_op("TensorArrayScatterV3", _scatter, stateful=True)
register_op("TensorArraySizeV3", _size, stateful=True)
register_op("TensorArrayCloseV3", _close, stateful=True)
register_op("TensorArrayConcatV3", _concat, stateful=True,
            defaults={"element_shape_except0": _UNKNOWN})
register_op("TensorArraySplitV3", _split, stateful=True)
register_op("TensorArrayGradV3", _grad, stateful=True)


declare_attrs({
    "TensorArrayCloseV3": "",
    "TensorArrayConcatV3": "dtype element_shape_except0",
    "TensorArrayGatherV3": "dtype element_shape",
    "TensorArrayGradV3": "source",
    "TensorArrayReadV3": "dtype element_shape",
    "TensorArrayScatterV3": "T",
    "TensorArraySizeV3": "",
    "TensorArraySplitV3": "T",
    "TensorArrayV3": ("clear_after_read dtype dynamic_size element_shape "
        "identical_element_shapes tensor_array_name"),
    "TensorArrayWriteV3": "T",
})
