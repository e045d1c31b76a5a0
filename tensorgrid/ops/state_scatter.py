"""Sparse updates of ref variables: ``ScatterUpdate``/``Add``/``Sub``/``Mul``/``Div``/``Max``/``Min``
(rows at ``indices``) and ``ScatterNdUpdate``/``Add``/``Sub`` (entries at multi-indices), with
TensorFlow's op names, inputs and attrs. Input 0 is a variable reference, as for ``Assign``; the
output is the reference, reading the updated value. The python API is
``tensorgrid.framework.state_scatter_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import int_input

SCATTER = ("ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMax",
           "ScatterMin")
SCATTER_ND = ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub")


def _scatter(ctx: InferContext) -> Sequence[TensorSpec]:
    """updates.shape = indices.shape + ref.shape[1:] (or a scalar, spread over all)."""
    ctx.expect_inputs(3)
    ref, idx, upd = ctx.input(0), ctx.shape(1), ctx.shape(2)
    int_input(ctx, 1, "indices")
    if ctx.dtype(2) is not ref.dtype:
        ctx.fail(f"updates have dtype {ctx.dtype(2).name}; the variable is {ref.dtype.name}")
    if ref.shape.rank == 0:
        ctx.fail("the variable must be at least 1-D")
    if upd.rank != 0 and ref.shape.dims is not None and idx.dims is not None:
        want = TensorShape([*idx.dims, *ref.shape.dims[1:]])
        if not want.is_compatible_with(upd):
            ctx.fail(f"updates must have shape indices.shape + ref.shape[1:] = {want}, got {upd}")
    return [ref]


def _scatter_nd(ctx: InferContext) -> Sequence[TensorSpec]:
    """updates.shape = indices.shape[:-1] + ref.shape[indices.shape[-1]:]."""
    ctx.expect_inputs(3)
    ref, idx, upd = ctx.input(0), ctx.shape(1), ctx.shape(2)
    int_input(ctx, 1, "indices")
    if ctx.dtype(2) is not ref.dtype:
        ctx.fail(f"updates have dtype {ctx.dtype(2).name}; the variable is {ref.dtype.name}")
    if ref.shape.dims is not None and idx.dims is not None and idx.dims and \
            idx.dims[-1] is not None:
        depth = idx.dims[-1]
        if depth > len(ref.shape.dims):
            ctx.fail(f"indices.shape[-1] = {depth} exceeds the variable's rank "
                     f"{len(ref.shape.dims)}")
        want = TensorShape([*idx.dims[:-1], *ref.shape.dims[depth:]])
        if not want.is_compatible_with(upd):
            ctx.fail(f"updates must have shape {want}, got {upd}")
    return [ref]


def _register(names: Sequence[str], infer: Any) -> None:
    for name in names:
        op(name, stateful=True, ref_inputs=(0,), ref_outputs=(0,), foldable=False,
           defaults={"use_locking": name in ("ScatterUpdate", "ScatterNdUpdate")})(infer)


_register(SCATTER, _scatter)
_register(SCATTER_ND, _scatter_nd)


# ------------------------------------------------------------------------------ sparse Apply*
# What TensorFlow's v1 optimizers emit for a gradient that is IndexedSlices (e.g. of a gather
# from a variable): the update of ``Apply*`` on the rows at ``indices`` only. Inputs: the refs,
# the hyper-parameters, ``grad`` [len(indices), ...], ``indices`` (SparseApplyMomentum's
# ``momentum`` comes last).

SPARSE_APPLY = {  # op: (number of refs, scalar inputs, grad input)
    "SparseApplyMomentum": (2, (2, 5), 3),
    "SparseApplyAdagrad": (2, (2,), 3),
    "SparseApplyRMSProp": (3, (3, 4, 5, 6), 7),
    "SparseApplyCenteredRMSProp": (4, (4, 5, 6, 7), 8),
}


def _sparse_apply(num_refs: int, scalars: Sequence[int], grad: int) -> Any:
    def infer(ctx: InferContext) -> Sequence[TensorSpec]:
        ctx.expect_inputs(max(grad + 2, *(i + 1 for i in scalars)))
        var = ctx.input(0)
        for i in [*range(grad + 1), *scalars]:
            if ctx.dtype(i) is not var.dtype:
                ctx.fail(f"input {i} has dtype {ctx.dtype(i).name}; the variable is "
                         f"{var.dtype.name}")
        for i in range(1, num_refs):
            if not ctx.shape(i).is_compatible_with(var.shape):
                ctx.fail(f"slot input {i} has shape {ctx.shape(i)}; the variable has {var.shape}")
        for i in scalars:
            if ctx.shape(i).rank not in (None, 0):
                ctx.fail(f"input {i} must be a scalar, got shape {ctx.shape(i)}")
        int_input(ctx, grad + 1, "indices")
        if ctx.shape(grad + 1).rank not in (None, 1):
            ctx.fail(f"indices must be a vector, got shape {ctx.shape(grad + 1)}")
        g, v = ctx.shape(grad), var.shape
        if g.dims is not None and v.dims is not None and not TensorShape(
                g.dims[1:]).is_compatible_with(v.dims[1:]):
            ctx.fail(f"grad must have the variable's shape past dim 0: {g} vs {v}")
        return [var]

    return infer


_EXTRA_DEFAULTS = {"SparseApplyMomentum": {"use_nesterov": False},
                   "SparseApplyAdagrad": {"update_slots": True}}
for _name, (_refs, _scalars, _grad) in SPARSE_APPLY.items():
    op(_name, stateful=True, ref_inputs=tuple(range(_refs)), ref_outputs=(0,), foldable=False,
       defaults={"use_locking": False, **_EXTRA_DEFAULTS.get(_name, {})})(
        _sparse_apply(_refs, _scalars, _grad))


declare_attrs({
    "ScatterAdd": "T Tindices use_locking",
    "ScatterDiv": "T Tindices use_locking",
    "ScatterMax": "T Tindices use_locking",
    "ScatterMin": "T Tindices use_locking",
    "ScatterMul": "T Tindices use_locking",
    "ScatterNdAdd": "T Tindices bad_indices_policy use_locking",
    "ScatterNdSub": "T Tindices bad_indices_policy use_locking",
    "ScatterNdUpdate": "T Tindices bad_indices_policy use_locking",
    "ScatterSub": "T Tindices use_locking",
    "ScatterUpdate": "T Tindices use_locking",
    "SparseApplyAdagrad": "T Tindices update_slots use_locking",
    "SparseApplyCenteredRMSProp": "T Tindices use_locking",
    "SparseApplyMomentum": "T Tindices use_locking use_nesterov",
    "SparseApplyRMSProp": "T Tindices use_locking",
})
