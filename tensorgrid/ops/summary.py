"""Summary ops: each outputs one serialized ``Summary`` protocol buffer (a string scalar) for a
``FileWriter`` to record. Names, inputs and attrs are TensorFlow's, so a TensorFlow graph that
records summaries imports and runs here.

* ``ScalarSummary(tags, values)``: one ``simple_value`` per element; ``tags`` and ``values`` have
  the same shape.
* ``HistogramSummary(tag, values)``: a ``HistogramProto`` of all the values (non-finite values
  fail the step).
* ``ImageSummary(tag, tensor)``: up to ``max_images`` PNG images of a ``[batch, height, width,
  channels]`` tensor, channels 1, 3 or 4.
* ``TensorSummaryV2(tag, tensor, serialized_summary_metadata)``: the tensor itself, with the
  plugin metadata that says how to show it (text, for ``tf.summary.text``).
* ``TensorSummary(tensor)``: the older form, tagged by the node's name.
* ``MergeSummary(inputs)``: the union of the values of N serialized summaries (tags must differ).

The kernels are in ``kernels/summary.py``. None is folded at compile time: a summary of constants
is cheap, and a bad input should fail the step that records it, naming the node.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

_SUMMARY = spec(dtypes.string, ())
_IMAGE_TYPES = (dtypes.uint8, dtypes.float16, dtypes.float32, dtypes.float64)


def _expect_string_scalar(ctx: InferContext, i: int, what: str) -> None:
    if ctx.dtype(i) is not dtypes.string:
        ctx.fail(f"{what} must be a string, got {ctx.dtype(i).name}")
    if ctx.shape(i).rank not in (None, 0):
        ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")


def _expect_real(ctx: InferContext, i: int, what: str) -> None:
    dt = ctx.dtype(i)
    if not (dt.is_floating or dt.is_integer):
        ctx.fail(f"{what} must be a real number type, got {dt.name}")


@op("ScalarSummary", foldable=False)
def _scalar_summary(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    if ctx.dtype(0) is not dtypes.string:
        ctx.fail(f"tags must be strings, got {ctx.dtype(0).name}")
    _expect_real(ctx, 1, "values")
    if not ctx.shape(0).is_compatible_with(ctx.shape(1)):
        ctx.fail(f"tags and values are not the same shape: {ctx.shape(0)} != {ctx.shape(1)}")
    return [_SUMMARY]


@op("HistogramSummary", foldable=False, defaults={"T": dtypes.float32})
def _histogram_summary(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_string_scalar(ctx, 0, "tag")
    _expect_real(ctx, 1, "values")
    return [_SUMMARY]


@op(
    "ImageSummary",
    foldable=False,
    defaults={
        "max_images": 3,
        "T": dtypes.float32,
        "bad_color": np.array([255, 0, 0, 255], dtype=np.uint8),
    },
)
def _image_summary(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_string_scalar(ctx, 0, "tag")
    if ctx.dtype(1) not in _IMAGE_TYPES:
        ctx.fail(f"images must be uint8, float16, float32 or float64, got {ctx.dtype(1).name}")
    if int(ctx.attr("max_images")) < 1:
        ctx.fail(f"max_images must be at least 1, got {ctx.attr('max_images')}")
    shape = ctx.shape(1)
    if shape.rank is not None:
        if shape.rank != 4:
            ctx.fail(f"images must be 4-D [batch, height, width, channels], got shape {shape}")
        channels = shape.as_list()[3]
        if channels is not None and channels not in (1, 3, 4):
            ctx.fail(f"images must have 1, 3 or 4 channels, got shape {shape}")
    return [_SUMMARY]


@op("TensorSummaryV2", foldable=False)
def _tensor_summary_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _expect_string_scalar(ctx, 0, "tag")
    _expect_string_scalar(ctx, 2, "serialized_summary_metadata")
    return [_SUMMARY]


@op("TensorSummary", foldable=False, defaults={"description": "", "labels": [], "display_name": ""})
def _tensor_summary(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [_SUMMARY]


@op("MergeSummary", foldable=False)
def _merge_summary(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs < 1:
        ctx.fail("needs at least one input summary")
    for i in range(ctx.num_inputs):
        if ctx.dtype(i) is not dtypes.string:
            ctx.fail(f"input {i} must be a serialized summary (string), got {ctx.dtype(i).name}")
    return [_SUMMARY]


not_differentiable(
    "ScalarSummary",
    "HistogramSummary",
    "ImageSummary",
    "TensorSummaryV2",
    "TensorSummary",
    "MergeSummary",
)


declare_attrs({
    "HistogramSummary": "T",
    "ImageSummary": "T bad_color max_images",
    "MergeSummary": "N",
    "ScalarSummary": "T",
    "TensorSummary": "T description display_name labels",
    "TensorSummaryV2": "T",
})
