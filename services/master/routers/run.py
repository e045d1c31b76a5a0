"""``/v1/run``: one step of a graph without keeping a session (JSON only)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from services.master import codec, steps
from services.master.deps import Authorized, Body, ClientId, State, WireFormat
from services.master.errors import INVALID_PROTOBUF, invalid
from services.master.parsing import off_loop
from services.master.schemas import STEP_ERRORS, OneShotRunBody, error_responses, request_body

router = APIRouter(prefix="/v1/run", tags=["run"], dependencies=[Authorized])


@router.post("", summary="Run a graph once", openapi_extra=request_body(OneShotRunBody),
             responses=error_responses(*STEP_ERRORS))
async def run_once(request: Request, state: State, body: Body, wire: WireFormat,
                   client: ClientId) -> JSONResponse:
    """Open a session on the graph, run one step, close the session; the fetched values."""
    if wire.protobuf_in:
        raise invalid("POST /v1/run takes a JSON body; protobuf clients open a session",
                      INVALID_PROTOBUF)
    limits = state.settings.graph_limits()

    def decode() -> tuple[OneShotRunBody, Any, Any]:
        # off the event loop: a large graph must not stall /healthz or the heartbeats
        doc = codec.parse_model(OneShotRunBody, codec.parse_json(body))
        graph = None if doc.graph_id is not None else \
            codec.graph_from_json_doc(doc.graph, limits).nodes
        return doc, graph, steps.json_feeds(state, doc.feeds)

    doc, nodes, feeds = await off_loop(decode, len(body))
    if doc.graph_id is not None:
        nodes = steps.stored_graph(state, doc.graph_id)
    session = await state.core.create_session(nodes, doc.config.options(), client)
    trace = session.new_trace() if doc.trace_level else None
    try:
        values, step_id = await steps.unless_client_leaves(
            request, steps.run_step(session, feeds, doc.fetches, doc.targets, doc.timeout_ms,
                                    trace))
    finally:
        await state.close_session(session.handle)
    out: dict[str, Any] = {"results": steps.json_results(doc.fetches, values,
                                                         doc.encoding == "b64"),
                           "step_id": step_id}
    if trace is not None:
        out["step_stats"] = steps.json_step_stats(trace)
    return JSONResponse(out)
