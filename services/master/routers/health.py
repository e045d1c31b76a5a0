"""``/healthz`` (the process is up) and ``/metrics`` (Prometheus); neither needs the token."""

from __future__ import annotations

from fastapi import APIRouter, Response

from services.master.deps import State
from services.master.metrics import CONTENT_TYPE

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness")
async def healthz() -> dict[str, str]:
    """``{"status": "ok"}`` while the master serves."""
    return {"status": "ok"}


@router.get("/metrics", summary="Prometheus metrics")
async def metrics(state: State) -> Response:
    """Steps, failed steps, plan cache hits and misses, sessions, request latency."""
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)
