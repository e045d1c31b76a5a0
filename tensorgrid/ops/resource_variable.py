"""Resource variables: VarHandleOp and the ops that read and update a variable through its handle.

A resource variable is reached through a *handle*: the scalar ``resource`` output of a
``VarHandleOp``, naming the variable by container and shared name on the handle's device. Unlike
the reference of a ``VariableV2``, a handle is an ordinary value: reads are explicit
(``ReadVariableOp``), updates output nothing, and every op that takes a handle runs on the
handle's device (placement colocates it). Names, inputs and attrs are TensorFlow's, so GraphDefs
that TensorFlow exports with resource variables import. The python API is
``tensorgrid.framework.resource_variable_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec
from tensorgrid.ops.state_apply import MORE_APPLY


def _expect_handle(ctx: InferContext, i: int) -> None:
    if ctx.dtype(i) is not dtypes.resource:
        ctx.fail(f"input {i} must be a resource handle (a VarHandleOp output), got "
                 f"{ctx.dtype(i).name}")


@op("VarHandleOp", stateful=True,
    defaults={"container": "", "shared_name": "", "allowed_devices": [], "debug_name": ""})
def _var_handle(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.attr("dtype")
    ctx.attr("shape")
    return [spec(dtypes.resource, ())]


@op("ReadVariableOp", stateful=True)
def _read(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx, 0)
    # the handle is a scalar: the value's shape is the variable's, known to the python wrapper
    return [spec(ctx.attr("dtype"), TensorShape(None))]


def _assign_like(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx, 0)
    want = ctx.attr("dtype")
    if ctx.dtype(1) is not want:
        ctx.fail(f"the value has dtype {ctx.dtype(1).name}; the variable is {want.name}")
    return []


op("AssignVariableOp", stateful=True, defaults={"validate_shape": False})(_assign_like)
op("AssignAddVariableOp", stateful=True)(_assign_like)
op("AssignSubVariableOp", stateful=True)(_assign_like)


@op("VarIsInitializedOp", stateful=True)
def _is_initialized(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx, 0)
    return [spec(dtypes.bool_, ())]


@op("VariableShape", stateful=True, defaults={"out_type": dtypes.int32})
def _variable_shape(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx, 0)
    return [spec(ctx.attr("out_type"), TensorShape([None]))]


@op("DestroyResourceOp", stateful=True, defaults={"ignore_lookup_error": True})
def _destroy(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    _expect_handle(ctx, 0)
    return []


@op("ResourceGather", stateful=True, defaults={"batch_dims": 0, "validate_indices": True})
def _gather(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(2)
    _expect_handle(ctx, 0)
    if not ctx.dtype(1).is_integer:
        ctx.fail(f"indices must be integers, got {ctx.dtype(1).name}")
    if int(ctx.attr("batch_dims")) != 0:
        ctx.fail("only batch_dims=0 is supported")
    return [spec(ctx.attr("dtype"), TensorShape(None))]


def _scatter(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(3)
    _expect_handle(ctx, 0)
    if not ctx.dtype(1).is_integer:
        ctx.fail(f"indices must be integers, got {ctx.dtype(1).name}")
    if ctx.dtype(2) is not ctx.attr("dtype"):
        ctx.fail(f"updates have dtype {ctx.dtype(2).name}; the variable is "
                 f"{ctx.attr('dtype').name}")
    return []


for _name in ("ResourceScatterAdd", "ResourceScatterSub", "ResourceScatterUpdate"):
    op(_name, stateful=True)(_scatter)


def _apply(num_handles: int, scalars: Sequence[int], indices: int | None = None) -> Any:
    """Inference of a ResourceApply* op: handles first, then hyper-parameters and the gradient,
    all of dtype T; no outputs. A ResourceSparseApply* op also has integer ``indices`` (the rows
    of the variables that the gradient's rows update) at that position, right after the
    gradient."""
    least = num_handles + 1 if indices is None else indices + 1

    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        t = ctx.attr("T")
        if ctx.num_inputs < least:
            ctx.fail(f"expects {least} inputs or more ({num_handles} variable handles first), "
                     f"got {ctx.num_inputs}")
        for i in range(num_handles):
            _expect_handle(ctx, i)
        if indices is not None and (not ctx.dtype(indices).is_integer
                                    or ctx.shape(indices).rank not in (None, 1)):
            ctx.fail(f"input {indices} (indices) must be an integer vector, got "
                     f"{ctx.dtype(indices).name} of shape {ctx.shape(indices)}")
        for i in range(num_handles, ctx.num_inputs):
            if i != indices and ctx.dtype(i) is not t:
                ctx.fail(f"input {i} has dtype {ctx.dtype(i).name}; T is {t.name}")
        for i in scalars:
            if ctx.shape(i).rank not in (None, 0):
                ctx.fail(f"input {i} must be a scalar, got shape {ctx.shape(i)}")
        return []

    return infer


_LOCKING = {"use_locking": False}
op("ResourceApplyGradientDescent", stateful=True, defaults=_LOCKING)(_apply(1, [1]))
op("ResourceApplyMomentum", stateful=True,
   defaults={**_LOCKING, "use_nesterov": False})(_apply(2, [2, 4]))
op("ResourceApplyAdam", stateful=True,
   defaults={**_LOCKING, "use_nesterov": False})(_apply(3, [3, 4, 5, 6, 7, 8]))
op("ResourceApplyAdagrad", stateful=True,
   defaults={**_LOCKING, "update_slots": True})(_apply(2, [2]))
op("ResourceApplyRMSProp", stateful=True, defaults=_LOCKING)(_apply(3, [3, 4, 5, 6]))
op("ResourceApplyCenteredRMSProp", stateful=True, defaults=_LOCKING)(_apply(4, [4, 5, 6, 7]))
# TensorFlow's other v1 optimizers (Adadelta, proximal, FTRL), as their ref ops take them
for _name, (_refs, _scalars, _grad) in MORE_APPLY.items():
    op("Resource" + _name, stateful=True, defaults={**_LOCKING, **(
        {"multiply_linear_by_lr": False} if _name.startswith("ApplyFtrl") else {})})(
        _apply(_refs, list(_scalars)))


# the sparse updates TensorFlow's optimizers emit for a gathered (IndexedSlices) gradient;
# GradientDescent and Adam use ResourceScatterAdd instead
op("ResourceSparseApplyMomentum", stateful=True,
   defaults={**_LOCKING, "use_nesterov": False})(_apply(2, [2, 5], 4))
op("ResourceSparseApplyAdagrad", stateful=True,
   defaults={**_LOCKING, "update_slots": True})(_apply(2, [2], 4))
op("ResourceSparseApplyRMSProp", stateful=True, defaults=_LOCKING)(_apply(3, [3, 4, 5, 6], 8))
op("ResourceSparseApplyCenteredRMSProp", stateful=True,
   defaults=_LOCKING)(_apply(4, [4, 5, 6, 7], 9))


declare_attrs({
    "AssignAddVariableOp": "dtype",
    "AssignSubVariableOp": "dtype",
    "AssignVariableOp": "dtype validate_shape",
    "DestroyResourceOp": "ignore_lookup_error",
    "ReadVariableOp": "dtype",
    "ResourceApplyAdadelta": "T use_locking",
    "ResourceApplyAdagrad": "T update_slots use_locking",
    "ResourceApplyAdam": "T use_locking use_nesterov",
    "ResourceApplyCenteredRMSProp": "T use_locking",
    "ResourceApplyFtrl": "T multiply_linear_by_lr use_locking",
    "ResourceApplyFtrlV2": "T multiply_linear_by_lr use_locking",
    "ResourceApplyGradientDescent": "T use_locking",
    "ResourceApplyMomentum": "T use_locking use_nesterov",
    "ResourceApplyProximalAdagrad": "T use_locking",
    "ResourceApplyProximalGradientDescent": "T use_locking",
    "ResourceApplyRMSProp": "T use_locking",
    "ResourceGather": "Tindices batch_dims dtype validate_indices",
    "ResourceScatterAdd": "Tindices dtype",
    "ResourceScatterSub": "Tindices dtype",
    "ResourceScatterUpdate": "Tindices dtype",
    "ResourceSparseApplyAdagrad": "T Tindices update_slots use_locking",
    "ResourceSparseApplyCenteredRMSProp": "T Tindices use_locking",
    "ResourceSparseApplyMomentum": "T Tindices use_locking use_nesterov",
    "ResourceSparseApplyRMSProp": "T Tindices use_locking",
    "VarHandleOp": "allowed_devices container debug_name dtype shape shared_name",
    "VarIsInitializedOp": "",
    "VariableShape": "out_type",
})
