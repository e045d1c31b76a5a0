"""Builds the HTTP master app: settings in, FastAPI app out (nothing runs at import)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import tensorgrid
from services.master import errors
from services.master.metrics import LatencyMiddleware
from services.master.routers import (
    checkpoints,
    cluster,
    dashboard,
    dashboard_live,
    graphs,
    health,
    run,
    sessions,
)
from services.master.state import MasterState
from tensorgrid.settings import MasterSettings


def create_app(settings: MasterSettings | None = None) -> FastAPI:
    """The HTTP master over the cluster of ``settings`` (``MasterSettings()``, read from the
    ``TENSORGRID_*`` variables, when None).

    The master's state (a MasterCore with gRPC clients of the tasks over one channel pool, the
    health monitor and the metrics) lives from the app's startup to its shutdown.
    """
    config = settings if settings is not None else MasterSettings()  # type: ignore[call-arg]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = MasterState(config)
        app.state.master = state
        await state.start()
        try:
            yield
        finally:
            await state.close()

    app = FastAPI(title="tensorgrid master", version=getattr(tensorgrid, "__version__", "0"),
                  description="Sessions, planning and steps over a tensorgrid cluster.",
                  lifespan=lifespan)
    errors.install(app)
    app.add_middleware(LatencyMiddleware)
    for module in (graphs, sessions, run, cluster, checkpoints, health, dashboard,
                   dashboard_live):
        app.include_router(module.router)
    return app
