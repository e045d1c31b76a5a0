"""Candidate sampling ops (TensorFlow's names, attrs and inference): the samplers that
``tf.nn.nce_loss`` and ``tf.nn.sampled_softmax_loss`` draw negative classes with, and
``ComputeAccidentalHits``; the python API is ``tensorgrid.framework.candidate_sampling_ops``.

Every sampler takes ``true_classes`` ([batch, num_true] int64) and returns ``sampled_candidates``
([num_sampled] int64), ``true_expected_count`` ([batch, num_true] float32) and
``sampled_expected_count`` ([num_sampled] float32). None of them has a gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

_SAMPLER_DEFAULTS = {"seed": 0, "seed2": 0, "unique": False}


def _true_classes(ctx: InferContext, num_true: int) -> list[int | None]:
    """Checks input 0 is int64 [batch, num_true] and returns its dims."""
    if ctx.dtype(0) is not dtypes.int64:
        ctx.fail(f"true_classes must be int64, got {ctx.dtype(0).name}")
    s = ctx.shape(0)
    if s.rank not in (None, 2):
        ctx.fail(f"true_classes must be a matrix [batch_size, num_true], got shape {s}")
    dims = s.dims if s.dims is not None else [None, None]
    if dims[1] is not None and dims[1] != num_true:
        ctx.fail(f"true_classes must have num_true={num_true} columns, got shape {s}")
    return [dims[0], num_true]


def _sampler(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    num_true, num_sampled = int(ctx.attr("num_true")), int(ctx.attr("num_sampled"))
    if num_true < 1:
        ctx.fail(f"num_true must be at least 1, got {num_true}")
    if num_sampled < 1:
        ctx.fail(f"num_sampled must be at least 1, got {num_sampled}")
    range_max = int(ctx.attr("range_max"))
    if range_max < 1:
        ctx.fail(f"range_max must be at least 1, got {range_max}")
    if ctx.attr("unique") and num_sampled > range_max:
        ctx.fail(f"with unique=True, num_sampled ({num_sampled}) must not exceed range_max "
                 f"({range_max})")
    true_dims = _true_classes(ctx, num_true)
    return [spec(dtypes.int64, [num_sampled]), spec(dtypes.float32, true_dims),
            spec(dtypes.float32, [num_sampled])]


for _name in ("UniformCandidateSampler", "LogUniformCandidateSampler"):
    op(_name, stateful=True, defaults=_SAMPLER_DEFAULTS)(_sampler)

op("FixedUnigramCandidateSampler", stateful=True,
   defaults={**_SAMPLER_DEFAULTS, "distortion": 1.0, "num_reserved_ids": 0, "num_shards": 1,
             "shard": 0, "vocab_file": "", "unigrams": []})(_sampler)


@op("ComputeAccidentalHits", defaults={"seed": 0, "seed2": 0})
def _compute_accidental_hits(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _true_classes(ctx, int(ctx.attr("num_true")))
    if ctx.dtype(1) is not dtypes.int64 or ctx.shape(1).rank not in (None, 1):
        ctx.fail(f"sampled_candidates must be an int64 vector, got {ctx.dtype(1).name} "
                 f"{ctx.shape(1)}")
    return [spec(dtypes.int32, [None]), spec(dtypes.int64, [None]), spec(dtypes.float32, [None])]


not_differentiable("UniformCandidateSampler", "LogUniformCandidateSampler",
                   "FixedUnigramCandidateSampler", "ComputeAccidentalHits")


declare_attrs({
    "ComputeAccidentalHits": "num_true seed seed2",
    "FixedUnigramCandidateSampler": ("distortion num_reserved_ids num_sampled num_shards num_true range_max "
        "seed seed2 shard unigrams unique vocab_file"),
    "LogUniformCandidateSampler": "num_sampled num_true range_max seed seed2 unique",
    "UniformCandidateSampler": "num_sampled num_true range_max seed seed2 unique",
})
