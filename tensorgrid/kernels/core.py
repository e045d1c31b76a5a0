"""Kernels of the core ops and of the variable ops (numpy, written against ``ctx.xp``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorgrid.core import errors
from tensorgrid.core.registry import KernelContext, StepKernel
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.shapes import as_shape
from tensorgrid.core.variable import Var, VarRef
from tensorgrid.kernels.parallel import split_batch


def freeze(value: Any) -> Any:
    """Mark a numpy array read-only: values held by variables and constants are never written in
    place, and a caller that tries gets an error instead of silently changing shared state."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


def _identity(x: Any) -> Any:
    return x


@kernel("Const")
def _const(ctx: KernelContext) -> Callable[[], Any]:
    value = freeze(ctx.attr("value").view())
    return lambda: value


@kernel("Placeholder")
def _placeholder(ctx: KernelContext) -> Callable[[], Any]:
    dtype = ctx.attr("dtype")
    shape = as_shape(ctx.attr("shape"))
    dims = "<unknown>" if shape.dims is None else "[" + ",".join(
        "?" if d is None else str(d) for d in shape.dims) + "]"
    message = (f"You must feed a value for placeholder tensor '{ctx.name}' with dtype "
               f"{dtype.name} and shape {dims}")

    def run() -> Any:
        raise errors.InvalidArgumentError(message)

    return run


for _op in ("Identity", "Snapshot", "StopGradient", "PreventGradient", "PlaceholderWithDefault"):
    kernel(_op)(lambda ctx: _identity)


@kernel("IdentityN")
def _identity_n(ctx: KernelContext) -> Callable[..., Any]:
    return lambda *xs: tuple(xs)


@kernel("NoOp")
def _no_op(ctx: KernelContext) -> Callable[[], None]:
    return lambda: None


def _arg(ctx: KernelContext) -> StepKernel:
    i = int(ctx.attr("index"))
    return StepKernel(lambda step: step.args[i])


def _retval(ctx: KernelContext) -> StepKernel:
    i = int(ctx.attr("index"))

    def run(step: Any, value: Any) -> None:
        step.rets[i] = value

    return StepKernel(run)


kernel("_Arg")(_arg)
kernel("_Retval")(_retval)


# ------------------------------------------------------------------------------ variables


@kernel("VariableV2")
def _variable(ctx: KernelContext) -> Callable[[], VarRef]:
    name = ctx.attr("shared_name") or ctx.name
    var = ctx.resources.variable(ctx.attr("container"), name, ctx.attr("dtype"),
                                 as_shape(ctx.attr("shape")))
    ref = VarRef(var)
    return lambda: ref


def _check_value(ctx: KernelContext, var: Var, value: Any, validate: bool) -> None:
    if getattr(value, "dtype", None) != var.dtype.np:
        raise ctx.error(errors.InvalidArgumentError,
                        f"Cannot assign a value of dtype {getattr(value, 'dtype', type(value))} "
                        f"to variable {var.name} of dtype {var.dtype.name}")
    if validate and var.shape.dims is not None and not var.shape.is_compatible_with(value.shape):
        raise ctx.error(errors.InvalidArgumentError,
                        f"Assign requires shapes of both tensors to match. lhs shape= "
                        f"{list(var.shape.dims)} rhs shape= {list(value.shape)} (variable {var.name})")


@kernel("Assign")
def _assign(ctx: KernelContext) -> Callable[[VarRef, Any], VarRef]:
    validate = bool(ctx.attr("validate_shape"))
    xp = ctx.xp

    def run(ref: VarRef, value: Any) -> VarRef:
        var = ref.var
        value = xp.asarray(value)
        _check_value(ctx, var, value, validate)
        # the caller may still hold (and later change) the array it assigned: keep a copy
        var.write(freeze(xp.array(value, copy=True)))
        return ref

    return run


def _update(ctx: KernelContext, fn: Callable[[Any, Any], Any]) -> Callable[[VarRef, Any], VarRef]:
    def run(ref: VarRef, value: Any) -> VarRef:
        var = ref.var
        cur = var.read(ctx.name, ctx.node.op, ctx.device)
        new = fn(cur, value)
        if new.shape != cur.shape:
            raise ctx.error(errors.InvalidArgumentError,
                            f"Update of variable {var.name} would change its shape from "
                            f"{list(cur.shape)} to {list(new.shape)}")
        var.write(freeze(new.astype(cur.dtype, copy=False)))
        return ref

    return run


kernel("AssignAdd")(lambda ctx: _update(ctx, lambda a, b: a + b))
kernel("AssignSub")(lambda ctx: _update(ctx, lambda a, b: a - b))


@kernel("IsVariableInitialized")
def _is_initialized(ctx: KernelContext) -> Callable[[VarRef], Any]:
    return lambda ref: np.bool_(ref.var.initialized)


# ------------------------------------------------------------------------------ Apply*


def _apply(ctx: KernelContext, num_refs: int, rule: Callable[..., tuple[Any, ...]]) -> Any:
    """An Apply* kernel: read the refs, compute new values with ``rule``, write them all."""
    node, op_type, device = ctx.name, ctx.node.op, ctx.device

    def run(*args: Any) -> VarRef:
        refs = args[:num_refs]
        cur = [r.var.read(node, op_type, device) for r in refs]
        new = rule(*cur, *args[num_refs:])
        for r, c, v in zip(refs, cur, new):
            r.var.write(freeze(v.astype(c.dtype, copy=False)))
        return refs[0]

    return run


def _gd_step(var: Any, alpha: Any, delta: Any) -> tuple[Any]:
    """``var - alpha * delta`` into one new array (not two: for a 3136x1024 layer a 12.8 MB array
    less per step), in blocks on the kernels' threads when large (``split_batch``: memory-bound,
    two threads halve it)."""
    if (isinstance(var, np.ndarray) and isinstance(delta, np.ndarray)
            and delta.shape == var.shape and delta.dtype == var.dtype
            and var.flags.c_contiguous and delta.flags.c_contiguous and np.ndim(alpha) == 0):
        out = np.empty_like(var)
        v, d, o = var.reshape(-1), delta.reshape(-1), out.reshape(-1)
        a = np.asarray(alpha, dtype=var.dtype)

        def block(b0: int, b1: int) -> None:
            np.multiply(d[b0:b1], a, out=o[b0:b1])
            np.subtract(v[b0:b1], o[b0:b1], out=o[b0:b1])

        split_batch(block, v.size, var.nbytes)
        return (out,)
    step = alpha * delta
    if isinstance(step, np.ndarray) and step.shape == var.shape and step.dtype == var.dtype:
        return (np.subtract(var, step, out=step),)
    return (var - step,)


@kernel("ApplyGradientDescent")
def _apply_gd(ctx: KernelContext) -> Any:
    return _apply(ctx, 1, _gd_step)


@kernel("ApplyMomentum")
def _apply_momentum(ctx: KernelContext) -> Any:
    nesterov = bool(ctx.attr("use_nesterov"))

    def rule(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any) -> tuple[Any, ...]:
        accum = accum * momentum + grad
        if nesterov:
            return var - (grad * lr + accum * momentum * lr), accum
        return var - lr * accum, accum

    return _apply(ctx, 2, rule)


@kernel("ApplyAdam")
def _apply_adam(ctx: KernelContext) -> Any:
    nesterov = bool(ctx.attr("use_nesterov"))
    xp = ctx.xp

    def rule(var: Any, m: Any, v: Any, b1p: Any, b2p: Any, lr: Any, b1: Any, b2: Any, eps: Any,
             grad: Any) -> tuple[Any, ...]:
        lr_t = lr * xp.sqrt(1 - b2p) / (1 - b1p)
        m = m + (grad - m) * (1 - b1)
        v = v + (grad * grad - v) * (1 - b2)
        step = (m * b1 + (1 - b1) * grad) if nesterov else m
        return var - lr_t * step / (xp.sqrt(v) + eps), m, v

    return _apply(ctx, 3, rule)


@kernel("ApplyAdagrad")
def _apply_adagrad(ctx: KernelContext) -> Any:
    update_slots = bool(ctx.attr("update_slots"))
    xp = ctx.xp

    def rule(var: Any, accum: Any, lr: Any, grad: Any) -> tuple[Any, ...]:
        if update_slots:
            accum = accum + grad * grad
        return var - lr * grad / xp.sqrt(accum), accum

    return _apply(ctx, 2, rule)


@kernel("ApplyRMSProp")
def _apply_rmsprop(ctx: KernelContext) -> Any:
    xp = ctx.xp

    def rule(var: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, eps: Any,
             grad: Any) -> tuple[Any, ...]:
        ms = ms + (grad * grad - ms) * (1 - rho)
        mom = mom * momentum + lr * grad / xp.sqrt(ms + eps)
        return var - mom, ms, mom

    return _apply(ctx, 3, rule)


@kernel("ApplyCenteredRMSProp")
def _apply_centered_rmsprop(ctx: KernelContext) -> Any:
    xp = ctx.xp

    def rule(var: Any, mg: Any, ms: Any, mom: Any, lr: Any, rho: Any, momentum: Any, eps: Any,
             grad: Any) -> tuple[Any, ...]:
        mg = mg + (grad - mg) * (1 - rho)
        ms = ms + (grad * grad - ms) * (1 - rho)
        mom = mom * momentum + lr * grad / xp.sqrt(ms - mg * mg + eps)
        return var - mom, mg, ms, mom

    return _apply(ctx, 4, rule)
