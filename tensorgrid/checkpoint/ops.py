"""The checkpoint ops (TensorFlow's ``SaveV2``/``MergeV2Checkpoints``/``RestoreV2`` play these
parts; these take whole variables, one op per device):

* ``CheckpointSaveShard(prefix, token, *tensors) -> fragment``: writes its tensors as shard
  ``shard`` of ``num_shards`` (attrs) of the checkpoint ``prefix``: a single-shard tensor bundle
  under a temporary name made with ``token`` (``bundle.shard_prefix``), on the task it runs on.
  Outputs a small JSON fragment describing what it wrote. Attr ``sync`` (default false): the
  data file is made durable (``fsync``) before the op ends. Attr ``tensor_names``; optional attr
  ``slice_specs`` (one per tensor, "" for a whole tensor): a tensor with a spec
  (TensorFlow's ``"<full dims> <start>,<length>:..."``) is saved as that slice of the full tensor
  named by its tensor name, so the shards of a partitioned variable make one tensor in the file.
* ``CheckpointMerge(prefix, *fragments) -> manifest``: renames the shards' data files to the
  checkpoint's and writes its ``.index``; outputs the JSON of the checkpoint's files and tensors
  (what Redis then tracks; the client commits it, the task touches no Redis). With attr ``sync``
  the index and the directory's new names are made durable before the op ends.
* ``CheckpointRestoreShard(prefix) -> *tensors``: reads its tensors from the checkpoint's files,
  checking them against the graph's dtypes and shapes (attrs ``tensor_names``, ``dtypes``,
  ``shapes``) and their CRC-32C, and outputs them for ``CheckpointAssign`` ops on its device. With
  ``slice_specs``, a sliced tensor's part is cut from the full tensor (however it was saved).
* ``CheckpointAssign(ref, value) -> ref``: ``Assign`` for a value that a restore shard has just
  read: the variable takes the array itself (``Assign`` copies, as its caller may hold the
  array; nothing else holds a freshly read one, and a copy of a large model costs seconds).

``prefix`` (an absolute path) and ``token`` are string scalars fed at run time, like the filename
tensor of TensorFlow's Saver. All three are stateful (never folded, merged or pruned as
duplicates) and not differentiable. The Python wrappers that add them to a graph are in the Saver
(``tensorgrid.client.train.saver``).
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs

SAVE_SHARD = "CheckpointSaveShard"
MERGE = "CheckpointMerge"
RESTORE_SHARD = "CheckpointRestoreShard"
ASSIGN = "CheckpointAssign"


def _string_scalars(ctx: InferContext, count: int) -> None:
    for i in range(count):
        if ctx.dtype(i) is not dtypes.string:
            ctx.fail(f"input {i} must be a string (the checkpoint path or the save's token), got "
                     f"{ctx.dtype(i).name}")
        if ctx.shape(i).rank not in (None, 0):
            ctx.fail(f"input {i} must be a scalar, got shape {ctx.shape(i)}")


def _scalar() -> TensorSpec:
    return TensorSpec(dtypes.string, TensorShape([]))


def _names_and_specs(ctx: InferContext) -> list[tuple[str, str]]:
    """(name, slice spec) per tensor; a name repeats only for different slices."""
    names = [str(n) for n in ctx.attr("tensor_names")]
    specs = [str(s) for s in ctx.attr("slice_specs")] or [""] * len(names)
    if len(specs) != len(names):
        ctx.fail(f"has {len(names)} tensor_names but {len(specs)} slice_specs")
    pairs = list(zip(names, specs, strict=True))
    if len(set(pairs)) != len(pairs) or any(
            not spec and names.count(name) > 1 for name, spec in pairs):
        ctx.fail(f"tensor_names has duplicates: {sorted(names)}")
    return pairs


@op(SAVE_SHARD, stateful=True,
    defaults={"tensor_names": [], "shard": 0, "num_shards": 1, "slice_specs": [],
              "sync": False})
def _save_shard(ctx: InferContext) -> Sequence[TensorSpec]:
    names = _names_and_specs(ctx)
    if ctx.num_inputs < 2:
        ctx.fail("expects the checkpoint path and the save's token, then the tensors")
    _string_scalars(ctx, 2)
    if len(names) != ctx.num_inputs - 2:
        ctx.fail(f"has {ctx.num_inputs - 2} tensors but {len(names)} tensor_names")
    shard, num = int(ctx.attr("shard")), int(ctx.attr("num_shards"))
    if not 0 <= shard < num:
        ctx.fail(f"shard {shard} is not one of num_shards={num}")
    return [_scalar()]


@op(MERGE, stateful=True, defaults={"sync": False})
def _merge(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs < 2:
        ctx.fail("expects the checkpoint path, then the fragments of the save shards")
    _string_scalars(ctx, ctx.num_inputs)
    return [_scalar()]


@op(RESTORE_SHARD, stateful=True,
    defaults={"tensor_names": [], "dtypes": [], "shapes": [], "slice_specs": []})
def _restore_shard(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _string_scalars(ctx, 1)
    names = _names_and_specs(ctx)
    types = [dtypes.as_dtype(t) for t in ctx.attr("dtypes")]
    shapes = [as_shape(s) for s in ctx.attr("shapes")]
    if not len(names) == len(types) == len(shapes):
        ctx.fail(f"tensor_names, dtypes and shapes differ in length ({len(names)}, {len(types)}, "
                 f"{len(shapes)})")
    return [TensorSpec(t, s) for t, s in zip(types, shapes)]


@op(ASSIGN, stateful=True, ref_inputs=(0,), ref_outputs=(0,))
def _assign(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    ref, value = ctx.input(0), ctx.input(1)
    if ref.dtype is not value.dtype:
        ctx.fail(f"cannot assign a {value.dtype.name} value to a {ref.dtype.name} variable")
    if not ref.shape.is_compatible_with(value.shape):
        ctx.fail(f"shapes must be equal: the variable has shape {ref.shape}, the value "
                 f"{value.shape}")
    return [TensorSpec(ref.dtype, ref.shape)]


not_differentiable(SAVE_SHARD, MERGE, RESTORE_SHARD, ASSIGN)


declare_attrs({
    "CheckpointAssign": "T",
    "CheckpointMerge": "sync:bool",
    "CheckpointRestoreShard": "dtypes shapes slice_specs tensor_names",
    "CheckpointSaveShard": "num_shards shard slice_specs sync:bool tensor_names",
})
