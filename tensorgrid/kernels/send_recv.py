"""Kernels of ``_Send`` and ``_Recv``: the step's rendezvous moves the value.

``_Send`` never blocks. ``_Recv`` is asynchronous: it waits on the step's rendezvous, which either
finds the value locally or fetches it from the sending task.

Inside a loop the executor passes ``frame_iter`` (the frame instance and iteration, see
``runtime/frames.py``): it is the last part of the rendezvous key, so each iteration's value meets
the receive of the same iteration. A dead tensor (``core.ir.DEAD``) is sent and received like any
value; the executor hands it on as dead.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from tensorgrid.core import errors
from tensorgrid.core.device import task_of
from tensorgrid.core.registry import AsyncKernel, KernelContext, StepKernel
from tensorgrid.core.registry import register_kernel as kernel
from tensorgrid.core.rendezvous_key import make_key

ROOT_FRAME_ITER = "0:0"


async def _raise(err: errors.OpError) -> Any:
    raise err


def _key_prefix(ctx: KernelContext) -> str:
    """The key without its frame and iteration (which the executor knows only at run time)."""
    key = make_key(ctx.attr("send_device"), int(ctx.attr("send_device_incarnation")),
                   ctx.attr("recv_device"), ctx.attr("tensor_name"), "")
    return key


@kernel("_Send")
def _send(ctx: KernelContext) -> StepKernel:
    prefix = _key_prefix(ctx)
    root_key = prefix + ROOT_FRAME_ITER

    def run(step: Any, value: Any, frame_iter: str | None = None) -> None:
        rdv = step.rendezvous
        if rdv is None:
            raise ctx.error(errors.FailedPreconditionError,
                            "_Send outside a distributed step (no rendezvous)")
        rdv.send(root_key if frame_iter is None else prefix + frame_iter, value)

    return StepKernel(run)


@kernel("_Recv")
def _recv(ctx: KernelContext) -> AsyncKernel:
    prefix = _key_prefix(ctx)
    root_key = prefix + ROOT_FRAME_ITER
    src_task = task_of(ctx.attr("send_device"))

    def run(step: Any, frame_iter: str | None = None) -> Coroutine[Any, Any, Any]:
        # the key is made now, not when the coroutine starts: the executor's frame and
        # iteration are those of this call
        rdv = step.rendezvous
        if rdv is None:
            return _raise(ctx.error(errors.FailedPreconditionError,
                                    "_Recv outside a distributed step (no rendezvous)"))
        return rdv.recv(root_key if frame_iter is None else prefix + frame_iter,  # type: ignore[no-any-return]
                        src_task)

    return AsyncKernel(run)
