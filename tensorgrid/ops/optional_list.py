"""Optionals and tensor lists: the ``DT_VARIANT`` values of TensorFlow's v2 control flow.

TensorFlow's gradients of ``If`` and ``While`` keep the forward pass's intermediates in them: a
branch returns ``OptionalFromValue`` (or ``OptionalNone`` from the other branch) and its gradient
reads ``OptionalGetValue``; a loop pushes each iteration's values on a tensor list
(``EmptyTensorList``, ``TensorListPushBack``) and its gradient loop pops them
(``TensorListPopBack``). Each value is one scalar of dtype ``variant``. Kernels:
``kernels/optional_list.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, register_op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec


def _variant(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(dtypes.variant, [])]


def _get_value(ctx: InferContext) -> Sequence[TensorSpec]:
    types = list(ctx.attr("output_types"))
    shapes = list(ctx.attr("output_shapes", []) or [])
    return [spec(t, as_shape(shapes[i]) if i < len(shapes) else TensorShape(None))
            for i, t in enumerate(types)]


def _has_value(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(dtypes.bool_, [])]


def _pop_back(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(dtypes.variant, []), spec(ctx.attr("element_dtype"), TensorShape(None))]


def _length(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(dtypes.int32, [])]


# a variant is no tensor a Const could hold: none of these is constant-folded
for _name, _infer in (("OptionalFromValue", _variant), ("OptionalNone", _variant),
                      ("OptionalGetValue", _get_value), ("OptionalHasValue", _has_value),
                      ("EmptyTensorList", _variant), ("TensorListPushBack", _variant),
                      ("TensorListPopBack", _pop_back), ("TensorListLength", _length)):
    register_op(_name, _infer, foldable=False)


declare_attrs({
    "EmptyTensorList": "element_dtype shape_type",
    "OptionalFromValue": "Toutput_types",
    "OptionalGetValue": "output_shapes output_types",
    "OptionalHasValue": "",
    "OptionalNone": "",
    "TensorListLength": "",
    "TensorListPopBack": "element_dtype",
    "TensorListPushBack": "element_dtype",
})
