"""The JSON request bodies (their protobuf forms are the ``master.proto`` messages)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from services.master.codec import PROTOBUF
from tensorgrid.master.master_session import SessionOptions

MAX_TIMEOUT_MS = 2**31 - 1  # about 24.8 days: a deadline any timer can hold


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline_refs(defs[ref[len("#/$defs/"):]], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def request_body(model: type[BaseModel], proto: str | None = None) -> dict[str, Any]:
    """``openapi_extra`` describing a route's body: the JSON model, and the protobuf message
    when the route takes one (the routes read their bodies themselves, to negotiate)."""
    schema = model.model_json_schema()
    content: dict[str, Any] = {
        "application/json": {"schema": _inline_refs(schema, schema.get("$defs", {}))}}
    if proto is not None:
        content[PROTOBUF] = {"schema": {"type": "string", "format": "binary",
                                        "description": f"binary tensorgrid.{proto}"}}
    return {"requestBody": {"required": True, "content": content}}


# A GraphDef in TensorFlow's JSON form (protobuf's JSON mapping): what the schema can say of it.
# A graph valid by this schema may still be one the master refuses (a cycle, a dangling input, an
# op that is not registered, an attr of the wrong type): that is a 400 or 404 naming the node.
GRAPH_DEF_JSON: dict[str, Any] = {
    "type": "object",
    "description": "a GraphDef, TensorFlow's JSON form: {\"node\": [{\"name\", \"op\", "
                   "\"input\", \"device\", \"attr\"}], \"versions\", \"library\"}",
    "required": ["node"],
    "properties": {
        "node": {"type": "array", "items": {
            "type": "object", "required": ["name", "op"],
            "properties": {
                "name": {"type": "string"}, "op": {"type": "string"},
                "input": {"type": "array", "items": {"type": "string"}},
                "device": {"type": "string"},
                "attr": {"type": "object", "description": "attr name -> AttrValue"},
            }}},
        # protobuf's JSON mapping reads null as "not set"
        "versions": {"type": ["object", "null"]},
        "library": {"type": ["object", "null"]},
    },
}


def integral(value: Any) -> Any:
    """JSON Schema's integer is a number with no fractional part: 5557.0 is the integer 5557
    (a client that writes every number as a float sends it so). Anything else is left to the
    strict check, which refuses 5557.5, "5557" and true."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# an integer field of a request body
JsonInt = Annotated[int, BeforeValidator(integral)]


class _Body(BaseModel):
    # strict: JSON's types as the schema says them (false is not 0, "1" is not 1)
    model_config = ConfigDict(extra="forbid", strict=True)


class SessionConfig(_Body):
    """Session options, as ``master.proto``'s SessionOptions."""

    allow_soft_placement: bool = False
    log_device_placement: bool = False
    device_filters: list[str] = Field(default_factory=list)
    disable_cse: bool = False
    disable_constant_folding: bool = False
    operation_timeout_ms: JsonInt = Field(default=0, ge=0, le=MAX_TIMEOUT_MS)
    wire_dtype: Literal["", "bfloat16", "float16"] = Field(
        default="", description="lossy wire type of cross-task float32 tensors ('': none)")
    wire_min_bytes: JsonInt = Field(default=0, ge=0)
    wire_gradients_only: bool = False
    wire_codec: Literal["", "lz4", "lz4hc", "zstd", "zlib"] = Field(
        default="", description="lossless codec of cross-task tensors ('': none)")
    wire_codec_level: JsonInt = Field(default=1, ge=1, le=9)
    wire_codec_min_bytes: JsonInt = Field(default=64 * 1024, ge=0)
    wire_codec_edges: Literal["all", "gradients", "non_gradients"] = "all"
    wire_codec_integers: bool = False
    wire_codec_cross_host_only: bool = True
    wire_delta: Literal["", "lz4", "zstd"] = Field(
        default="", description="codec of the deltas that cross-host variable reads travel as "
                                "('': sent whole)")
    wire_delta_level: JsonInt = Field(default=1, ge=1, le=9)
    wire_delta_min_bytes: JsonInt = Field(default=64 * 1024, ge=0)
    wire_delta_cross_host_only: bool = True

    def options(self) -> SessionOptions:
        """The core's SessionOptions."""
        return SessionOptions(
            allow_soft_placement=self.allow_soft_placement,
            log_device_placement=self.log_device_placement,
            device_filters=tuple(self.device_filters), do_cse=not self.disable_cse,
            do_constant_folding=not self.disable_constant_folding,
            timeout_s=self.operation_timeout_ms / 1000.0, wire_dtype=self.wire_dtype,
            wire_min_bytes=self.wire_min_bytes, wire_gradients_only=self.wire_gradients_only,
            wire_codec=self.wire_codec, wire_codec_level=self.wire_codec_level,
            wire_codec_min_bytes=self.wire_codec_min_bytes,
            wire_codec_edges=self.wire_codec_edges,
            wire_codec_integers=self.wire_codec_integers,
            wire_codec_cross_host_only=self.wire_codec_cross_host_only,
            wire_delta=self.wire_delta, wire_delta_level=self.wire_delta_level,
            wire_delta_min_bytes=self.wire_delta_min_bytes,
            wire_delta_cross_host_only=self.wire_delta_cross_host_only)


def _one_of_graph_and_id(schema: dict[str, Any]) -> None:
    schema["oneOf"] = [{"required": ["graph_id"]}, {"required": ["graph"]}]


class _GraphSource(_Body):
    # exactly one of the two, never null (SkipJsonSchema: None is only the "not given" default)
    model_config = ConfigDict(json_schema_extra=_one_of_graph_and_id)

    graph_id: str | SkipJsonSchema[None] = Field(
        default=None, description="a graph stored by POST /v1/graphs")
    graph: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, json_schema_extra=GRAPH_DEF_JSON)  # type: ignore[arg-type]
    config: SessionConfig = Field(default_factory=lambda: SessionConfig())

    @model_validator(mode="after")
    def _one_graph(self) -> _GraphSource:
        given = {"graph_id", "graph"} & self.model_fields_set
        if len(given) != 1 or None in (getattr(self, name) for name in given):
            raise ValueError("give exactly one of 'graph_id' and 'graph', not null")
        return self


class CreateSessionBody(_GraphSource):
    """``POST /v1/sessions``: a stored graph's id or a graph, and options."""


class ExtendSessionBody(_Body):
    """``POST /v1/sessions/{id}/extend``: the nodes added since ``current_version``."""

    graph: dict[str, Any] = Field(json_schema_extra=GRAPH_DEF_JSON)  # type: ignore[arg-type]
    current_version: JsonInt = Field(ge=0)


class _StepFields(_Body):
    feeds: dict[str, Any] = Field(default_factory=dict,
                                  description="tensor name -> {dtype, shape, values | b64}")
    fetches: list[str] = Field(default_factory=list)
    targets: list[str] = Field(default_factory=list)
    timeout_ms: JsonInt = Field(default=0, ge=0, le=MAX_TIMEOUT_MS)
    trace_level: JsonInt = Field(
        default=0, ge=0, le=3,
        description="RunOptions.trace_level: nonzero (FULL_TRACE = 3) returns 'step_stats', "
                    "every node each task ran and the master's planning and dispatch time")
    encoding: Literal["values", "b64"] = Field(
        default="values",
        description="how results come back: nested 'values', or raw bytes in 'b64'")


class RunStepBody(_StepFields):
    """``POST /v1/sessions/{id}/run``."""


class OneShotRunBody(_StepFields, _GraphSource):
    """``POST /v1/run``: a graph and one step of it."""


class ResetBody(_Body):
    """``POST /v1/reset``: the containers to clear (all when empty)."""

    containers: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------------ error answers
class ErrorDetail(BaseModel):
    """What went wrong (``services/master/errors.py``): TensorFlow's code name, a finer reason,
    the message, and the node, op and device when there is one."""

    code: str = Field(description="TensorFlow's error code name, e.g. INVALID_ARGUMENT")
    reason: str = Field(description="the finer cause, e.g. invalid_json, bad_attr, too_large")
    message: str
    node: str | None
    op: str | None
    device: str | None
    retryable: bool = Field(description="the client may recreate its session and try again")
    derived: bool = Field(description="the error only follows from another failure")


class ErrorBody(BaseModel):
    """Every error answer of the master: ``{"error": {...}}``."""

    error: ErrorDetail


_ERROR_MEANINGS = {
    400: "bad input: a body that is not JSON / protobuf or not of the schema, an unknown field, "
         "a graph the master rejects (cycle, attr of the wrong type, dtype or shape mismatch, "
         "unknown device), a bad feed or parameter",
    401: "no or a wrong bearer token (Authorization: Bearer <token>)",
    403: "a checkpoint directory the master may not read: neither tracked in Redis for this "
         "cluster nor under its checkpoint_root (reason checkpoint_directory_not_allowed)",
    404: "no such session, graph or checkpoint, or a node whose op is not registered",
    409: "the step was aborted (a task failed or restarted): recreate the session and retry",
    412: "a failed precondition: a stale graph version, an uninitialized variable",
    413: "over a limit: body bytes, nodes, tensor bytes, stored graphs, sessions, live steps",
    429: "over this client's share (reason client_quota): sessions, stored graphs and their "
         "bytes, live steps",
    500: "a kernel or a task failed in a way the master cannot tell apart from a bug",
    503: "a task (or Redis) is unavailable",
    504: "the step ran past its deadline",
}


# what a step can end with: bad input, a missing session, and every way running it can fail
STEP_ERRORS = (400, 401, 404, 409, 412, 413, 429, 500, 503, 504)


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` of a route: each error status it answers with, as the error body."""
    return {status: {"model": ErrorBody, "description": _ERROR_MEANINGS[status]}
            for status in statuses}
