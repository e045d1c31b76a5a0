"""Random ops (TensorFlow's names, attrs and inference); the python API (``tf.random_normal``, ...)
is ``tensorgrid.framework.random_ops``.

Seeds follow TF1 (``framework.random_ops.get_seed``): a node carries attrs ``seed`` and
``seed2``; both zero means a nondeterministic stream. The kernels key a counter-based generator (Philox) by the pair, so the same
seeds give the same sequence in a new session, and the stateful kernel (cached per device by the
executor) keeps drawing new values on successive runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import const_ints, spec

# ------------------------------------------------------------------------------ definitions

_SEED_DEFAULTS = {"seed": 0, "seed2": 0}


def _shape_input(ctx: InferContext, i: int = 0) -> TensorShape:
    """The output shape that a shape tensor (input i) describes, as far as it is known."""
    if not ctx.dtype(i).is_integer or ctx.shape(i).rank not in (None, 1):
        ctx.fail(f"shape must be a 1-D int32 or int64 tensor, got {ctx.dtype(i).name} "
                 f"{ctx.shape(i)}")
    dims = const_ints(ctx, i)
    if dims is None:
        s = ctx.shape(i)
        return TensorShape(None if s.dims is None or s.dims[0] is None else [None] * s.dims[0])
    if any(d < 0 for d in dims):
        ctx.fail(f"shape must not have negative dimensions, got {dims}")
    return TensorShape(dims)


def _float_random(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    dt = ctx.attr("dtype")
    if not dt.is_floating:
        ctx.fail(f"dtype must be a floating type, got {dt.name}")
    return [spec(dt, _shape_input(ctx))]


for _name in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal"):
    op(_name, stateful=True, defaults=_SEED_DEFAULTS)(_float_random)


@op("RandomUniformInt", stateful=True, defaults=_SEED_DEFAULTS)
def _random_uniform_int(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    dt = ctx.same_dtype(1, 2)
    if dt not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"minval and maxval must be int32 or int64, got {dt.name}")
    for i, what in ((1, "minval"), (2, "maxval")):
        if ctx.shape(i).rank not in (None, 0):
            ctx.fail(f"{what} must be a scalar, got shape {ctx.shape(i)}")
    lo, hi = const_ints(ctx, 1), const_ints(ctx, 2)
    if lo is not None and hi is not None and lo[0] >= hi[0]:
        ctx.fail(f"Need minval < maxval: {lo[0]} >= {hi[0]}")
    return [spec(dt, _shape_input(ctx))]


@op("RandomShuffle", stateful=True, defaults=_SEED_DEFAULTS)
def _random_shuffle(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return [ctx.input(0)]


@op("Multinomial", stateful=True, defaults={**_SEED_DEFAULTS, "output_dtype": dtypes.int64})
def _multinomial(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    if not ctx.dtype(0).is_floating:
        ctx.fail(f"logits must be a floating type, got {ctx.dtype(0).name}")
    logits = ctx.shape(0)
    if logits.rank not in (None, 2):
        ctx.fail(f"logits must be 2-dimensional [batch_size, num_classes], got shape {logits}")
    if ctx.dtype(1) is not dtypes.int32 or ctx.shape(1).rank not in (None, 0):
        ctx.fail(f"num_samples must be an int32 scalar, got {ctx.dtype(1).name} {ctx.shape(1)}")
    out = ctx.attr("output_dtype")
    if out not in (dtypes.int32, dtypes.int64):
        ctx.fail(f"output_dtype must be int32 or int64, got {out.name}")
    n = const_ints(ctx, 1)
    if n is not None and n[0] < 0:
        ctx.fail(f"num_samples should be nonnegative, got {n[0]}")
    batch = logits.dims[0] if logits.dims is not None else None
    return [spec(out, [batch, n[0] if n is not None else None])]


declare_attrs({
    "Multinomial": "T output_dtype seed seed2",
    "RandomShuffle": "T seed seed2",
    "RandomStandardNormal": "T dtype seed seed2",
    "RandomUniform": "T dtype seed seed2",
    "RandomUniformInt": "T Tout:type seed seed2",
    "TruncatedNormal": "T dtype seed seed2",
})
