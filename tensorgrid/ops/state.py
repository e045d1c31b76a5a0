"""Variables and their updates: VariableV2, Assign*, and the Apply* ops that optimizers emit.

Input 0 of every update op (and the other slot inputs of Apply*) is a *reference* to a variable: the
output of a VariableV2 node. The executor hands such inputs over as references and dereferences them
for every other consumer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core import dtypes
from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.framework.convert import convert_to_tensor, make_op
from tensorgrid.framework.graph import Tensor
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


# ------------------------------------------------------------------------------ python API


def variable_op_v2(shape: Any, dtype: Any, name: str = "Variable", container: str = "",
                   shared_name: str = "") -> Tensor:
    return make_op("VariableV2", [], {
        "shape": as_shape(shape), "dtype": dtypes.as_dtype(dtype),
        "container": container, "shared_name": shared_name,
    }, name=name)


def _ref_of(ref: Any) -> Tensor:
    """The reference tensor of a Variable (or a VariableV2 output given directly)."""
    r = getattr(ref, "_variable", None)
    if isinstance(r, Tensor):
        return r
    if isinstance(ref, Tensor) and ref.op.type == "VariableV2":
        return ref
    raise TypeError(
        f"This op needs a variable (a tf.Variable or a VariableV2 output), got {ref!r}"
    )


def assign(ref: Any, value: Any, validate_shape: bool | None = None, use_locking: bool | None = None,
           name: str | None = None) -> Tensor:
    """Set the variable to ``value``; the result reads the new value."""
    r = _ref_of(ref)
    v = convert_to_tensor(value, dtype_hint=r.dtype)
    attrs: dict[str, Any] = {"T": r.dtype, "validate_shape": True if validate_shape is None
                             else bool(validate_shape), "use_locking": True}
    out = make_op("Assign", [r, v], attrs, name=name or "Assign")
    if validate_shape is False:
        out.set_shape(TensorShape(None))
    return out


def assign_add(ref: Any, value: Any, use_locking: bool | None = None,
               name: str | None = None) -> Tensor:
    """Add ``value`` to the variable; the result reads the new value."""
    r = _ref_of(ref)
    v = convert_to_tensor(value, dtype=r.dtype)
    return make_op("AssignAdd", [r, v], {"T": r.dtype}, name=name or "AssignAdd")


def assign_sub(ref: Any, value: Any, use_locking: bool | None = None,
               name: str | None = None) -> Tensor:
    """Subtract ``value`` from the variable; the result reads the new value."""
    r = _ref_of(ref)
    v = convert_to_tensor(value, dtype=r.dtype)
    return make_op("AssignSub", [r, v], {"T": r.dtype}, name=name or "AssignSub")


def is_variable_initialized(ref: Any, name: str | None = None) -> Tensor:
    r = _ref_of(ref)
    return make_op("IsVariableInitialized", [r], {"dtype": r.dtype},
                   name=name or "IsVariableInitialized")


def apply_op(op_type: str, refs: Sequence[Any], others: Sequence[Any],
             attrs: dict[str, Any] | None = None, name: str | None = None) -> Tensor:
    """Build an Apply* update: ``refs`` are variables, ``others`` tensors cast to their dtype."""
    ref_ts = [_ref_of(r) for r in refs]
    dt = ref_ts[0].dtype
    rest = [convert_to_tensor(o, dtype=dt) if not isinstance(o, Tensor) else o for o in others]
    return make_op(op_type, ref_ts + rest, {"T": dt, **(attrs or {})}, name=name or op_type)
