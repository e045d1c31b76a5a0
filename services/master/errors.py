"""Errors as HTTP answers: ``{"error": {"code", "reason", "message", "node", "op", "device",
"retryable", "derived"}}`` with the HTTP status of the code (``errors.HTTP_STATUS``).

``code`` is TensorFlow's code name; ``reason`` a finer cause. A request the service rejects while
decoding raises ``ApiError`` with its reason; an ``OpError`` from the core gets its reason from
``reason_of``, which reads the error's code and the node, op and message the core gave it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from tensorgrid.core import errors, registry
from tensorgrid.master.quotas import ClientQuotaError

log = logging.getLogger("tensorgrid.master")

INVALID_JSON = "invalid_json"
INVALID_PROTOBUF = "invalid_protobuf"
BAD_FEED = "bad_feed"
TOO_LARGE = "too_large"
CLIENT_QUOTA = "client_quota"  # one client's share of a cap is used up: HTTP 429


class ApiError(Exception):
    """A rejected request: the OpError to answer with and its reason."""

    def __init__(self, error: errors.OpError, reason: str) -> None:
        super().__init__(error.message)
        self.error = error
        self.reason = reason


def invalid(message: str, reason: str, node: str | None = None) -> ApiError:
    """An INVALID_ARGUMENT rejection with the given reason."""
    return ApiError(errors.InvalidArgumentError(message, node_name=node), reason)


def too_large(message: str, node: str | None = None) -> ApiError:
    """A RESOURCE_EXHAUSTED rejection (over a configured limit)."""
    return ApiError(errors.ResourceExhaustedError(message, node_name=node), TOO_LARGE)


# reasons by code, when nothing finer is known
_BY_CODE = {
    errors.NOT_FOUND: "not_found", errors.UNAVAILABLE: "unavailable",
    errors.DEADLINE_EXCEEDED: "deadline", errors.ABORTED: "aborted", errors.CANCELLED: "aborted",
    errors.INTERNAL: "internal", errors.UNKNOWN: "internal", errors.DATA_LOSS: "internal",
    errors.RESOURCE_EXHAUSTED: TOO_LARGE,
}
# what graph validation says, in the core's words (compiler.infer, core.ir, master.core, placement)
_DEVICE = re.compile(r"requests device|Cannot assign a device|Malformed device name")
_DTYPE = re.compile(r"dtype|data type|value to a \w+ variable|must be bool")
_SHAPE = re.compile(r"shape|rank|dimension|size-incompatible|[Ii]ncompatible|broadcast")
# core.attr_types: an attr of the wrong type, or one the op does not take
_ATTR = re.compile(r"\battr '[^']*' expects |has attr '[^']*', which op ")


def reason_of(exc: errors.OpError) -> str:
    """The finer cause of a core error: ``cycle``, ``unknown_op``, ``dangling_input``,
    ``duplicate_node``, ``bad_attr``, ``unknown_device``, ``type_mismatch``, ``shape_mismatch``, or one derived
    from the code (``not_found``, ``unavailable``, ``deadline``, ``aborted``, ``too_large``,
    ``internal``; otherwise the code's name in lower case)."""
    code, msg = exc.error_code, exc.message
    if isinstance(exc, ClientQuotaError):
        return CLIENT_QUOTA
    if code == errors.NOT_FOUND:
        if exc.op_type and "not registered" in msg and not registry.has_op(exc.op_type):
            return "unknown_op"
        if exc.node_name and "has input" in msg:
            return "dangling_input"
    if code == errors.INVALID_ARGUMENT:
        if "Duplicate node name" in msg:
            return "duplicate_node"
        if "has a cycle" in msg:
            return "cycle"
        if _ATTR.search(msg):
            return "bad_attr"
        if _DEVICE.search(msg):
            return "unknown_device"
        if _DTYPE.search(msg):
            return "type_mismatch"
        if _SHAPE.search(msg):
            return "shape_mismatch"
    return _BY_CODE.get(code) or errors.CODE_NAMES.get(code, "UNKNOWN").lower()


def error_response(exc: errors.OpError, reason: str | None = None) -> JSONResponse:
    """The JSON answer for an error."""
    body: dict[str, Any] = exc.to_dict()
    body["reason"] = reason or reason_of(exc)
    body = {k: body[k] for k in ("code", "reason", "message", "node", "op", "device", "retryable",
                              "derived")}
    status = 429 if isinstance(exc, ClientQuotaError) else \
        errors.HTTP_STATUS.get(exc.error_code, 500)
    return JSONResponse({"error": body}, status_code=status)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.error, exc.reason)


async def _op_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.OpError)
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    reason = INVALID_JSON if first.get("loc", ("",))[0] == "body" else "invalid_argument"
    return error_response(errors.InvalidArgumentError(
        f"Invalid request: {where}: {first.get('msg', 'invalid value')}"), reason)


_HTTP_CODES = {400: errors.INVALID_ARGUMENT, 401: errors.UNAUTHENTICATED,
               403: errors.PERMISSION_DENIED, 404: errors.NOT_FOUND, 405: errors.UNIMPLEMENTED,
               413: errors.RESOURCE_EXHAUSTED}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, errors.UNKNOWN)
    err = errors.make_error(code, f"{request.method} {request.url.path}: {exc.detail}")
    response = error_response(err)
    response.status_code = exc.status_code  # keep the router's own status (405 stays 405)
    response.headers.update(exc.headers or {})
    if exc.status_code == 405:
        allowed = _documented_methods(request.app, request.url.path)
        if allowed:
            response.headers["Allow"] = ", ".join(allowed)
    return response


def _documented_methods(app: FastAPI, path: str) -> list[str]:
    """The methods the OpenAPI document gives for a path: a path served by two routes (GET and
    DELETE on ``/v1/graphs/{graph_id}``) allows both, where starlette's 405 names only the first
    route's."""
    methods: set[str] = set()
    for template, operations in app.openapi().get("paths", {}).items():
        pattern = re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(template))
        if re.fullmatch(pattern, path):
            methods |= {m.upper() for m in operations}
    return sorted(methods)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error in %s %s", request.method, request.url.path)
    return error_response(errors.InternalError(f"{type(exc).__name__}: {exc}"), "internal")


def _openapi_errors(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The app's OpenAPI document as the handlers above answer: no route answers 422 (a request
    that fails validation is a 400 with the error body), and a route that answers 401 needs the
    bearer token, so it names the ``bearer`` security scheme."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = build()
        for path in doc.get("paths", {}).values():
            for operation in path.values():
                responses = operation.get("responses", {})
                responses.pop("422", None)
                for status, response in responses.items():
                    if int(status) >= 400:  # errors are JSON, whatever the route's answer is
                        response["content"] = {"application/json": {
                            "schema": {"$ref": "#/components/schemas/ErrorBody"}}}
                if "401" in responses:
                    operation["security"] = [{"bearer": []}]
        schemas = doc.get("components", {}).get("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        doc.setdefault("components", {})["securitySchemes"] = {"bearer": {
            "type": "http", "scheme": "bearer",
            "description": "the cluster's secret (tensorgrid token; TENSORGRID_TOKEN)"}}
        app.openapi_schema = doc
        return doc

    return openapi


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into the JSON error body, and describe
    them in the app's OpenAPI document."""
    app.openapi = _openapi_errors(app)  # type: ignore[method-assign]
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(errors.OpError, _op_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
