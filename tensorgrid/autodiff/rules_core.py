"""Gradient rules of the core, state and communication ops."""

from __future__ import annotations

from typing import Any

from tensorgrid.core.registry import not_differentiable, register_gradient
from tensorgrid.framework.graph import Operation

# Sources, sinks, state and plumbing: nothing flows back through them.
not_differentiable(
    "Const", "Placeholder", "NoOp", "_Arg", "_Retval", "_Send", "_Recv", "_WireEncode",
    "_WireDecode", "StopGradient",
    "VariableV2", "Assign", "AssignAdd", "AssignSub", "IsVariableInitialized",
    "ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyAdagrad", "ApplyRMSProp",
    "ApplyCenteredRMSProp",
)


@register_gradient("Identity")
def _identity_grad(op: Operation, grad: Any) -> list[Any]:
    return [grad]


@register_gradient("Snapshot")
def _snapshot_grad(op: Operation, grad: Any) -> list[Any]:
    return [grad]


@register_gradient("PlaceholderWithDefault")
def _placeholder_with_default_grad(op: Operation, grad: Any) -> list[Any]:
    return [grad]


@register_gradient("IdentityN")
def _identity_n_grad(op: Operation, *grads: Any) -> list[Any]:
    return list(grads)


@register_gradient("PreventGradient")
def _prevent_gradient_grad(op: Operation, grad: Any) -> list[Any]:
    message = op.get_attr("message") if "message" in op._attrs else ""
    raise LookupError(f"Gradient explicitly disabled for node '{op.name}'. {message}")
