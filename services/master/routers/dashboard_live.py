"""The dashboard's live views of a session: the scalars its client logs (``POST
/v1/sessions/{id}/scalars``, what ``tensorgrid.client.dashboard.log_scalars`` and the
``DashboardScalarsHook`` send), its latest traced step as timeline rows, and a request to trace its
next step. Everything kept is bounded per session (``tensorgrid.master.session_stats``) and goes
with the session when it closes. Behind the cluster's token like every ``/v1`` route."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints

from services.master import codec
from services.master.dashboard_views import timeline_view, trace_key
from services.master.deps import Authorized, Body, State
from services.master.schemas import error_responses, integral, request_body
from tensorgrid.master.session_stats import MAX_TAG_CHARS

router = APIRouter(tags=["dashboard"], dependencies=[Authorized],
                   responses=error_responses(401, 404))


class ScalarsBody(BaseModel):
    """``{"scalars": {"loss": 0.25}, "step": 120}``: one value per tag (null: not a finite
    number, drawn as a gap), at a step (the session's step count when absent)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    scalars: dict[Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_CHARS)],
                  float | None] = Field(min_length=1)
    # the bound before the validator, so the schema says "minimum"
    step: Annotated[int, Field(ge=0), BeforeValidator(integral)] | None = None


@router.post("/v1/sessions/{session_id}/scalars", summary="Log scalars for the dashboard",
             openapi_extra=request_body(ScalarsBody), responses=error_responses(400, 413))
async def log_scalars(session_id: str, state: State, body: Body) -> dict[str, Any]:
    """Add one point per tag to the session's scalar charts (at most 32 tags a session, the
    latest 1000 points a tag).

    Raises:
        InvalidArgumentError: a tag or value is malformed.
        ResourceExhaustedError: too many tags.
    """
    doc = codec.parse_model(ScalarsBody, codec.parse_json(body))
    session = await state.core.find_session(session_id)
    step = doc.step if doc.step is not None else session.stats["steps"]
    session.scalars.log({tag: math.nan if v is None else v for tag, v in doc.scalars.items()},
                        step)
    return {"step": step, "tags": len(session.scalars.tags())}


@router.get("/v1/dashboard/sessions/{session_id}/scalars", summary="A session's logged scalars")
async def get_scalars(session_id: str, state: State) -> dict[str, Any]:
    """Per tag, ``[step, wall_time, value]`` oldest first; ``logged`` counts every value logged
    (it grows with each point, so a poller sees whether anything is new)."""
    log = (await state.core.find_session(session_id)).scalars
    return {"logged": log.logged, "tags": log.series()}


@router.get("/v1/dashboard/sessions/{session_id}/timeline",
            summary="A session's latest traced step as timeline rows")
async def get_timeline(
        session_id: str, state: State,
        known: Annotated[str | None, Query(description="the key of the step the caller has "
                                           "drawn: when it is still the latest, only "
                                           "{key, unchanged} comes back")] = None
) -> dict[str, Any]:
    """The rows (one per device of every task, the master's first), the node slices and the
    transfers between tasks of the latest traced step; ``{"rows": []}`` before one was traced.
    ``pending`` says a trace of the next step was asked for and has not run yet."""
    session = await state.core.find_session(session_id)
    pending = session.sampler.pending
    trace = session.last_trace
    if trace is None:
        return {"key": "", "rows": [], "slices": [], "transfers": [], "duration_us": 0,
                "dropped": 0, "pending": pending}
    if known and trace_key(trace) == known:
        return {"key": known, "unchanged": True, "pending": pending}
    return {**timeline_view(trace), "pending": pending}


@router.post("/v1/dashboard/sessions/{session_id}/trace", status_code=202,
             summary="Trace the session's next step")
async def trace_next(session_id: str, state: State) -> dict[str, Any]:
    """The session's next step (whoever runs it) is traced, and becomes its latest timeline;
    the client's answer does not change."""
    session = await state.core.find_session(session_id)
    session.sampler.request_next()
    return {"pending": True}
