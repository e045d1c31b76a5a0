"""The checkpoint ops (TensorFlow has no equivalents: its save and restore ops write files):

* ``CheckpointSaveShard(path, redis_url, *tensors) -> fragment``: writes its tensors' blobs (with
  their sha256) to Redis from the device it runs on, and outputs a small JSON fragment describing
  them. Attr ``tensor_names``.
* ``CheckpointCommit(path, redis_url, global_step, *fragments) -> path``: writes the manifest, adds
  it to the index and moves ``latest`` in one transaction, then applies ``max_to_keep`` (attr) and
  removes abandoned saves. Outputs the committed path.
* ``CheckpointRestoreShard(path, redis_url) -> *tensors``: reads its tensors' blobs, verifies byte
  counts and sha256 against the manifest and the graph's dtypes and shapes (attrs
  ``tensor_names``, ``dtypes``, ``shapes``), and outputs them for ``Assign`` ops on its device.

``path`` is a checkpoint path (``"runs/exp1/model.ckpt-100"``: directory and name) and
``redis_url`` the Redis to use; both are string scalars fed at run time, like the filename tensor
of TensorFlow's Saver. All three are stateful (never folded, merged or pruned as duplicates) and
not differentiable. Importing this module registers them; it does not import redis.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, not_differentiable, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.framework.convert import make_op
from tensorgrid.framework.graph import Tensor
from tensorgrid.ops._infer import spec

SAVE_SHARD = "CheckpointSaveShard"
COMMIT = "CheckpointCommit"
RESTORE_SHARD = "CheckpointRestoreShard"


def _string_scalars(ctx: InferContext, count: int) -> None:
    for i in range(count):
        if ctx.dtype(i) is not dtypes.string:
            ctx.fail(f"input {i} must be a string (the checkpoint path or the Redis URL), got "
                     f"{ctx.dtype(i).name}")
        if ctx.shape(i).rank not in (None, 0):
            ctx.fail(f"input {i} must be a scalar, got shape {ctx.shape(i)}")


@op(SAVE_SHARD, stateful=True, defaults={"tensor_names": []})
def _save_shard(ctx: InferContext) -> Sequence[TensorSpec]:
    names = list(ctx.attr("tensor_names"))
    if ctx.num_inputs < 2:
        ctx.fail("expects the checkpoint path and the Redis URL, then the tensors")
    _string_scalars(ctx, 2)
    if len(names) != ctx.num_inputs - 2:
        ctx.fail(f"has {ctx.num_inputs - 2} tensors but {len(names)} tensor_names")
    if len(set(names)) != len(names):
        ctx.fail(f"tensor_names has duplicates: {sorted(names)}")
    return [spec(dtypes.string, ())]


@op(COMMIT, stateful=True, defaults={"max_to_keep": 5})
def _commit(ctx: InferContext) -> Sequence[TensorSpec]:
    if ctx.num_inputs < 3:
        ctx.fail("expects the checkpoint path, the Redis URL and the global step, then the "
                 "fragments of the save shards")
    _string_scalars(ctx, 2)
    if not ctx.dtype(2).is_integer:
        ctx.fail(f"input 2 (the global step) must be an integer, got {ctx.dtype(2).name}")
    for i in range(3, ctx.num_inputs):
        if ctx.dtype(i) is not dtypes.string:
            ctx.fail(f"input {i} (a save shard's fragment) must be a string")
    return [spec(dtypes.string, ())]


@op(RESTORE_SHARD, stateful=True, defaults={"tensor_names": [], "dtypes": [], "shapes": []})
def _restore_shard(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _string_scalars(ctx, 2)
    names = list(ctx.attr("tensor_names"))
    types = [dtypes.as_dtype(t) for t in ctx.attr("dtypes")]
    shapes = [as_shape(s) for s in ctx.attr("shapes")]
    if not len(names) == len(types) == len(shapes):
        ctx.fail(f"tensor_names, dtypes and shapes differ in length ({len(names)}, {len(types)}, "
                 f"{len(shapes)})")
    return [spec(t, s) for t, s in zip(types, shapes)]


not_differentiable(SAVE_SHARD, COMMIT, RESTORE_SHARD)


# ------------------------------------------------------------------------------ python API


def save_shard(path: Tensor, redis_url: Tensor, tensors: Sequence[Tensor],
               tensor_names: Sequence[str], name: str | None = None) -> Tensor:
    """A save-shard op writing ``tensors`` under ``tensor_names``; returns its fragment."""
    out: Tensor = make_op(SAVE_SHARD, [path, redis_url, *tensors],
                          {"tensor_names": list(tensor_names)}, name=name or "save_shard")
    return out


def commit(path: Tensor, redis_url: Tensor, global_step: Tensor, fragments: Sequence[Tensor],
           max_to_keep: int | None, name: str | None = None) -> Tensor:
    """The commit op of a save; returns the committed checkpoint path."""
    out: Tensor = make_op(COMMIT, [path, redis_url, global_step, *fragments],
                          {"max_to_keep": int(max_to_keep or 0)}, name=name or "commit")
    return out


def restore_shard(path: Tensor, redis_url: Tensor, tensor_names: Sequence[str],
                  types: Sequence[Any], shapes: Sequence[Any],
                  name: str | None = None) -> list[Tensor]:
    """A restore-shard op; returns one verified tensor per name."""
    attrs = {"tensor_names": list(tensor_names), "dtypes": [dtypes.as_dtype(t) for t in types],
             "shapes": [TensorShape(s) for s in shapes]}
    g = path.graph
    restored = g.create_op(RESTORE_SHARD, [path, redis_url], attrs, name=name or "restore_shard")
    return list(restored.outputs)
