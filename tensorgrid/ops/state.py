"""Variables and their updates: VariableV2, Assign*, and the Apply* ops that optimizers emit.

Input 0 of every update op (and the other slot inputs of Apply*) is a *reference* to a variable: the
output of a VariableV2 node. The executor hands such inputs over as references and dereferences them
for every other consumer. The python API is ``tensorgrid.framework.state_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec


@op("VariableV2", stateful=True, ref_outputs=(0,),
    defaults={"container": "", "shared_name": ""})
def _variable_v2(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(ctx.attr("dtype"), as_shape(ctx.attr("shape")))]


def _assign_like(check_shape: bool) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(2)
        ref, value = ctx.input(0), ctx.input(1)
        if ref.dtype is not value.dtype:
            ctx.fail(f"cannot assign a {value.dtype.name} value to a {ref.dtype.name} variable")
        validate = ctx.attr("validate_shape", True) if check_shape else True
        if validate and not ref.shape.is_compatible_with(value.shape):
            ctx.fail(f"shapes must be equal: the variable has shape {ref.shape}, the value {value.shape}")
        shape = ref.shape if validate else value.shape
        return [spec(ref.dtype, shape)]

    return infer


op("Assign", stateful=True, ref_inputs=(0,), ref_outputs=(0,),
   defaults={"validate_shape": True, "use_locking": True})(_assign_like(True))
op("AssignAdd", stateful=True, ref_inputs=(0,), ref_outputs=(0,),
   defaults={"use_locking": False})(_assign_like(False))
op("AssignSub", stateful=True, ref_inputs=(0,), ref_outputs=(0,),
   defaults={"use_locking": False})(_assign_like(False))


@op("IsVariableInitialized", stateful=True, ref_inputs=(0,))
def _is_initialized(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(dtypes.bool_, ())]


def _apply(num_refs: int, scalars: Sequence[int], grad: int) -> Any:
    """Inference for an Apply* op: refs first, then scalar hyper-parameters, then the gradient."""

    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        var = ctx.input(0)
        for i in range(ctx.num_inputs):
            if ctx.dtype(i) is not var.dtype:
                ctx.fail(f"input {i} has dtype {ctx.dtype(i).name}; the variable is {var.dtype.name}")
        for i in range(1, num_refs):
            if not ctx.shape(i).is_compatible_with(var.shape):
                ctx.fail(f"slot input {i} has shape {ctx.shape(i)}; the variable has {var.shape}")
        for i in scalars:
            if ctx.shape(i).rank not in (None, 0):
                ctx.fail(f"input {i} must be a scalar, got shape {ctx.shape(i)}")
        if not ctx.shape(grad).is_compatible_with(var.shape):
            ctx.fail(f"gradient has shape {ctx.shape(grad)}; the variable has {var.shape}")
        return [var]

    return infer


_LOCKING = {"use_locking": False}
op("ApplyGradientDescent", stateful=True, ref_inputs=(0,), ref_outputs=(0,),
   defaults=_LOCKING)(_apply(1, [1], 2))
op("ApplyMomentum", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,),
   defaults={**_LOCKING, "use_nesterov": False})(_apply(2, [2, 4], 3))
op("ApplyAdam", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,),
   defaults={**_LOCKING, "use_nesterov": False})(_apply(3, [3, 4, 5, 6, 7, 8], 9))
op("ApplyAdagrad", stateful=True, ref_inputs=(0, 1), ref_outputs=(0,),
   defaults={**_LOCKING, "update_slots": True})(_apply(2, [2], 3))
op("ApplyRMSProp", stateful=True, ref_inputs=(0, 1, 2), ref_outputs=(0,),
   defaults=_LOCKING)(_apply(3, [3, 4, 5, 6], 7))
op("ApplyCenteredRMSProp", stateful=True, ref_inputs=(0, 1, 2, 3), ref_outputs=(0,),
   defaults=_LOCKING)(_apply(4, [4, 5, 6, 7], 8))


declare_attrs({
    "ApplyAdagrad": "T update_slots use_locking",
    "ApplyAdam": "T use_locking use_nesterov",
    "ApplyCenteredRMSProp": "T use_locking",
    "ApplyGradientDescent": "T use_locking",
    "ApplyMomentum": "T use_locking use_nesterov",
    "ApplyRMSProp": "T use_locking",
    "Assign": "T use_locking validate_shape",
    "AssignAdd": "T use_locking",
    "AssignSub": "T use_locking",
    "IsVariableInitialized": "dtype",
    "VariableV2": "container dtype shape shared_name",
})
