"""``/v1/sessions``: a client's graph on the master, grown by extension, run step by step.

JSON bodies, or the ``master.proto`` messages with ``Content-Type: application/x-protobuf`` (what
the SDK's ``Session("http://...")`` sends)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from services.master import codec, steps
from services.master.deps import Authorized, Body, ClientId, State, WireFormat
from services.master.errors import INVALID_PROTOBUF, invalid, too_large
from services.master.parsing import decoded, off_loop
from services.master.schemas import (
    STEP_ERRORS,
    CreateSessionBody,
    ExtendSessionBody,
    RunStepBody,
    error_responses,
    request_body,
)
from tensorgrid.client.timeline import Timeline
from tensorgrid.core import errors
from tensorgrid.pb import master_pb2
from tensorgrid.transport import tensors
from tensorgrid.transport.master_service import options_from_proto

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=[Authorized])


def _check_handle(path_id: str, body_id: str) -> None:
    if body_id and body_id != path_id:
        raise invalid(f"The body names session {body_id}, the path {path_id}", INVALID_PROTOBUF)


@router.post("", status_code=201, summary="Open a session",
             openapi_extra=request_body(CreateSessionBody, "CreateSessionRequest"),
             responses=error_responses(400, 401, 404, 413, 429))
async def create_session(state: State, body: Body, wire: WireFormat,
                         client: ClientId) -> Response:
    """Open a session on a stored graph (``graph_id``) or on a graph given here; the graph is
    validated now, and an error names the node."""
    limits = state.settings.graph_limits()

    def decode() -> tuple[Any, Any, str | None]:
        # off the event loop: a large graph must not stall /healthz or the heartbeats
        if wire.protobuf_in:
            req = codec.parse_proto(body, master_pb2.CreateSessionRequest)
            return (codec.graph_from_proto(req.graph_def, limits).nodes,
                    options_from_proto(req.options), None)
        doc = codec.parse_model(CreateSessionBody, codec.parse_json(body))
        if doc.graph_id is not None:
            return None, doc.config.options(), doc.graph_id
        return codec.graph_from_json_doc(doc.graph, limits).nodes, doc.config.options(), None

    nodes, options, graph_id = await off_loop(decode, len(body))
    if graph_id is not None:
        nodes = steps.stored_graph(state, graph_id)
    session = await state.core.create_session(nodes, options, client)
    if wire.protobuf_out:
        return codec.proto_response(master_pb2.CreateSessionResponse(
            session_handle=session.handle, graph_version=session.version), 201)
    return JSONResponse({"session_id": session.handle, "graph_version": session.version}, 201)


@router.post("/{session_id}/extend", summary="Add nodes to a session's graph",
             openapi_extra=request_body(ExtendSessionBody, "ExtendSessionRequest"),
             responses=error_responses(400, 401, 404, 412, 413))
async def extend_session(session_id: str, state: State, body: Body, wire: WireFormat) -> Response:
    """Add the nodes created since ``current_version``; all or nothing."""
    session = (await state.core.find_session(session_id))
    limits = state.settings.graph_limits()

    def decode() -> tuple[Any, int]:
        if wire.protobuf_in:
            req = codec.parse_proto(body, master_pb2.ExtendSessionRequest)
            _check_handle(session_id, req.session_handle)
            return codec.graph_from_proto(req.graph_def, limits).nodes, req.current_graph_version
        doc = codec.parse_model(ExtendSessionBody, codec.parse_json(body))
        return codec.graph_from_json_doc(doc.graph, limits).nodes, doc.current_version

    nodes, current = await decoded(decode, len(body))
    if len(session.nodes) + len(nodes) > state.settings.max_nodes:
        raise too_large(f"Session {session_id} would have {len(session.nodes) + len(nodes)} "
                        f"nodes; the limit is {state.settings.max_nodes}")
    version = await state.core.extend_session(session_id, nodes, current)
    if wire.protobuf_out:
        return codec.proto_response(master_pb2.ExtendSessionResponse(new_graph_version=version))
    return JSONResponse({"graph_version": version})


@router.post("/{session_id}/run", summary="Run one step",
             openapi_extra=request_body(RunStepBody, "RunStepRequest"),
             responses=error_responses(*STEP_ERRORS))
async def run_step(session_id: str, request: Request, state: State, body: Body,
                   wire: WireFormat) -> Response:
    """Feed tensors, run the fetches and targets, and return the fetched values."""
    session = (await state.core.find_session(session_id))

    def decode() -> tuple[Any, list[str], list[str], int, bool, int]:
        # large feeds decode off the event loop (see services/master/parsing.py)
        if wire.protobuf_in:
            req = codec.parse_proto(body, master_pb2.RunStepRequest)
            _check_handle(session_id, req.session_handle)
            if req.graph_version and req.graph_version != session.version:
                raise errors.FailedPreconditionError(
                    f"Session {session_id} is at graph version {session.version}, the step was "
                    f"built for {req.graph_version}")
            return (steps.proto_feeds(state, req.feed), list(req.fetch), list(req.target),
                    req.timeout_ms, False, req.trace_level)
        doc = codec.parse_model(RunStepBody, codec.parse_json(body))
        return (steps.json_feeds(state, doc.feeds), doc.fetches, doc.targets, doc.timeout_ms,
                doc.encoding == "b64", doc.trace_level)

    feeds, fetches, targets, timeout_ms, b64, trace_level = await decoded(decode, len(body))
    trace = session.new_trace() if trace_level else None
    values, step_id = await steps.unless_client_leaves(
        request, steps.run_step(session, feeds, fetches, targets, timeout_ms, trace))
    if wire.protobuf_out:
        return codec.proto_response(master_pb2.RunStepResponse(step_id=step_id, tensor=[
            master_pb2.NamedTensor(name=n, tensor=tensors.to_proto(v))
            for n, v in zip(fetches, values)],
            step_stats=trace.step_stats() if trace is not None else None))
    doc_out: dict[str, Any] = {"results": steps.json_results(fetches, values, b64),
                               "step_id": step_id}
    if trace is not None:
        doc_out["step_stats"] = steps.json_step_stats(trace)
    return JSONResponse(doc_out)


@router.get("/{session_id}", summary="Session stats", responses=error_responses(401, 404))
async def get_session(session_id: str, state: State) -> dict[str, Any]:
    """Graph version, plan cache hits and misses, steps."""
    session = (await state.core.find_session(session_id))
    return {**session.describe(), "session_id": session.handle,
            "created": session.created, "last_used": session.last_used,
            "client": state.core.session_clients.get(session.handle, "")}


@router.get("/{session_id}/placement", summary="Where the latest plan put each node",
            responses=error_responses(401, 404))
async def get_placement(session_id: str, state: State) -> list[dict[str, str]]:
    """``[{"node", "device", "reason"}]`` of the session's latest plan (empty before any step)."""
    plan = (await state.core.find_session(session_id)).last_plan
    return [] if plan is None else plan.explain()


@router.get("/{session_id}/trace", summary="The latest traced step as a Chrome trace",
            responses=error_responses(400, 401, 404))
async def get_trace(session_id: str, state: State, show_memory: bool = False,
                    show_dataflow: bool = True) -> JSONResponse:
    """The latest step of the session run with a trace level (``trace_level`` on a run, or
    ``tensorgrid trace``), as the Chrome trace JSON that chrome://tracing and Perfetto load.

    Raises:
        NotFoundError: no step of the session was traced yet.
    """
    trace = (await state.core.find_session(session_id)).last_trace
    if trace is None:
        raise errors.NotFoundError(f"Session {session_id} has no traced step yet: run one with "
                                   "trace_level 3 (or tensorgrid trace)")
    return JSONResponse(Timeline(trace.step_stats()).trace_events(show_dataflow, show_memory))


@router.delete("/{session_id}", status_code=204, summary="Close a session",
               responses=error_responses(401, 404))
async def close_session(session_id: str, state: State) -> Response:
    """Close the session and release its partitions on the tasks."""
    await state.close_session(session_id)
    return Response(status_code=204)
