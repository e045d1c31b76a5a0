"""``/healthz`` (the process is up), open to anyone; ``/metrics`` (Prometheus), which needs the
bearer token unless the ``open_metrics`` setting serves it openly; ``/metrics/tasks`` (every
task's metrics, asked now), which always needs it, as it calls every task."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from services.master.deps import Authorized, State, require_token
from services.master.metrics import CONTENT_TYPE, merge_task_metrics
from services.master.schemas import error_responses
from tensorgrid.master.core import MasterCore

# how long the master waits for each task's metrics
TASK_METRICS_TIMEOUT_S = 2.0

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    """``{"status": "ok"}`` while the master serves."""
    return {"status": "ok"}


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse,
            responses=error_responses(401))
async def metrics(request: Request, state: State) -> Response:
    """Steps, failed steps, plan cache hits and misses, sessions, request latency."""
    if not state.settings.open_metrics:
        require_token(request, state)
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


async def _task_metrics(core: MasterCore, task: str, timeout: float) -> str | None:
    try:
        return await asyncio.wait_for(core.client(task).metrics(timeout), timeout + 0.5)
    except Exception:  # noqa: BLE001 - a task that does not answer is reported down, not raised
        return None


@router.get("/metrics/tasks", summary="Every task's Prometheus metrics", dependencies=[Authorized],
            response_class=PlainTextResponse, responses=error_responses(401))
async def task_metrics(state: State) -> Response:
    """Each task's steps, kernels and transfers (see ``tensorgrid/runtime/metrics.py``), asked
    now over its gRPC status call, in one exposition with a ``task`` label on every series, and
    ``tensorgrid_task_up`` (0 for a task that did not answer within 2 s)."""
    core = state.core
    timeout = min(state.settings.rpc_timeout_s, TASK_METRICS_TIMEOUT_S)
    names = list(core.cluster.tasks)
    answers = await asyncio.gather(*(_task_metrics(core, t, timeout) for t in names))
    return Response(merge_task_metrics(dict(zip(names, answers))), media_type=CONTENT_TYPE)
