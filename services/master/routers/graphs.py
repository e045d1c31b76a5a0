"""``/v1/graphs``: graphs submitted once, validated at once, and used by id to open sessions."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from fastapi import APIRouter, Response

from services.master import codec
from services.master.deps import Authorized, Body, ClientId, State, WireFormat
from services.master.parsing import off_loop
from services.master.schemas import GRAPH_DEF_JSON, error_responses
from tensorgrid.compiler.infer import check_declared_sizes, infer_graph
from tensorgrid.core import registry
from tensorgrid.core.ir import GraphDef
from tensorgrid.core.registry import TensorSpec

router = APIRouter(prefix="/v1/graphs", tags=["graphs"], dependencies=[Authorized])

_INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
_VARIABLE_OPS = frozenset({"VariableV2", "Variable", "VarHandleOp"})
_GRAPH_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": GRAPH_DEF_JSON},
    codec.PROTOBUF: {"schema": {"type": "string", "format": "binary",
                                "description": "binary GraphDef"}}}}}


def _spec(spec: TensorSpec) -> dict[str, Any]:
    dims = spec.shape.dims
    return {"dtype": spec.dtype.name, "shape": None if dims is None else list(dims)}


def graph_report(graph_id: str, graph: GraphDef,
                 specs: Mapping[str, Sequence[TensorSpec]]) -> dict[str, Any]:
    """What a graph holds: its ops, inputs, variables, requested devices and constant bytes."""
    nodes = graph.nodes
    inputs = [n.name for n in nodes if n.op in _INPUT_OPS]
    const_bytes = sum(n.attrs["value"].nbytes for n in nodes
                      if n.op == "Const" and isinstance(n.attrs.get("value"), np.ndarray))
    return {
        "graph_id": graph_id,
        "nodes": len(nodes),
        "ops": dict(sorted(Counter(n.op for n in nodes).items())),
        "inputs": inputs,
        "report": {
            "producer": graph.producer,
            "placeholders": {name: _spec(specs[name][0]) for name in inputs},
            "variables": {n.name: {**_spec(specs[n.name][0]), "device": n.device or None}
                          for n in nodes if n.op in _VARIABLE_OPS},
            "devices": sorted({n.device for n in nodes if n.device}),
            "stateful_ops": sum(1 for n in nodes if registry.get_op(n.op, n).stateful),
            "const_bytes": int(const_bytes),
        },
    }


@router.post("", status_code=201, summary="Submit a graph", openapi_extra=_GRAPH_BODY,
             responses=error_responses(400, 401, 404, 413, 429))
async def submit_graph(state: State, body: Body, wire: WireFormat,
                       client: ClientId) -> dict[str, Any]:
    """Validate a GraphDef (structure, ops, dtypes and shapes, devices) and store it.

    The error of an invalid graph names the node. The answer is the graph's report."""
    state.graphs.check_room(len(body), client)
    settings = state.settings
    graph_id = secrets.token_hex(8)

    def validate() -> tuple[GraphDef, dict[str, Any]]:
        # off the event loop: parsing and checking the largest accepted graph takes seconds,
        # while /healthz and the tasks' heartbeats must still be answered
        graph = codec.graph_from_body(body, wire.protobuf_in, settings.graph_limits())
        specs = infer_graph(graph.nodes)
        check_declared_sizes(graph.nodes, specs, settings.max_declared_tensor_bytes)
        state.core.cluster.validate_devices(graph.nodes)
        return graph, graph_report(graph_id, graph, specs)

    graph, report = await off_loop(validate, len(body))
    state.graphs.put(graph_id, graph.nodes, report,
                     max(len(body), report["report"]["const_bytes"]), client)
    return report


@router.get("/{graph_id}", summary="A stored graph's report",
            responses=error_responses(401, 404))
async def get_graph(graph_id: str, state: State) -> dict[str, Any]:
    """The report of a graph stored by ``POST /v1/graphs``."""
    return state.graphs.report(graph_id)


@router.delete("/{graph_id}", status_code=204, summary="Forget a stored graph",
               responses=error_responses(401, 404))
async def delete_graph(graph_id: str, state: State) -> Response:
    """Drop a graph stored by ``POST /v1/graphs``; sessions opened on it keep their copy."""
    state.graphs.delete(graph_id)
    return Response(status_code=204)
