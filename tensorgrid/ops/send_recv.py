"""Communication ops that partitioning inserts on cross-task edges: ``_Send`` and ``_Recv``.

Their attrs name the rendezvous key's parts: the sending device and its incarnation, the receiving
device, and the tensor. Kernels: ``tensorgrid/kernels/send_recv.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tensorgrid.core.registry import InferContext, TensorSpec, op
from tensorgrid.core.shapes import TensorShape, as_shape
from tensorgrid.ops._attrs import declare_attrs
from tensorgrid.ops._infer import spec

_DEFAULTS = {"send_device_incarnation": 0, "client_terminated": False}


@op("_Send", stateful=True, defaults=_DEFAULTS)
def _send(ctx: InferContext) -> Sequence[TensorSpec]:
    ctx.expect_inputs(1)
    return []


@op("_Recv", stateful=True, defaults={**_DEFAULTS, "shape": TensorShape(None)})
def _recv(ctx: InferContext) -> Sequence[TensorSpec]:
    return [spec(ctx.attr("tensor_type"), as_shape(ctx.attr("shape")))]


declare_attrs({
    "_Recv": ("client_terminated recv_device send_device send_device_incarnation "
        "shape tensor_name tensor_type"),
    "_Send": "T client_terminated recv_device send_device send_device_incarnation tensor_name",
})
