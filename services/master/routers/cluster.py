"""``/v1/cluster`` (what the master knows of its tasks) and ``/v1/reset`` (clear variables)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from services.master import codec
from services.master.deps import Authorized, Body, State, WireFormat
from services.master.errors import invalid
from services.master.schemas import ResetBody, error_responses, request_body
from tensorgrid.pb import master_pb2

router = APIRouter(tags=["cluster"], dependencies=[Authorized])


@router.get("/v1/cluster", summary="The master and its tasks",
            responses=error_responses(401))
async def get_cluster(state: State) -> dict[str, Any]:
    """The master's counters, and each task's address, incarnation, health and devices."""
    core = state.core
    state.graphs.expire()
    master = {**core.describe(), "graphs": len(state.graphs),
              "heartbeat_timeout_s": core.cluster.heartbeat_timeout,
              "jobs": {job: len(tasks) for job, tasks in core.cluster.jobs.items()}}
    return {"master": master, "tasks": core.cluster.describe()}


@router.post("/v1/reset", summary="Clear variables on every task",
             openapi_extra=request_body(ResetBody, "ResetSessionStateRequest"),
             responses=error_responses(400, 401, 413, 503, 504))
async def reset(state: State, body: Body, wire: WireFormat) -> Response:
    """Drop the variables of the given containers (all when none) on every task."""
    if not body:
        # an empty body used to mean "every container": wiping all variables must be asked for
        raise invalid("POST /v1/reset needs a body naming the containers to clear: "
                      '{"containers": []} clears all of them', "invalid_argument")
    if wire.protobuf_in:
        containers = list(codec.parse_proto(body, master_pb2.ResetSessionStateRequest).containers)
    else:
        containers = codec.parse_model(ResetBody, codec.parse_json(body or b"{}")).containers
    await state.core.reset(containers)
    if wire.protobuf_out:
        return codec.proto_response(master_pb2.ResetSessionStateResponse())
    return JSONResponse({"containers": containers, "tasks": list(state.core.cluster.tasks)})
