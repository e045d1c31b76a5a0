"""Request and response bodies: content negotiation, graphs, and tensors in JSON.

A body is binary protobuf (a ``master.proto`` message, or a GraphDef) when its ``Content-Type`` is
``application/x-protobuf``, else JSON. The answer is protobuf when ``Accept`` asks for it (or, with
no preference, when the request was protobuf). Errors are always JSON.

A tensor in JSON is ``{"dtype": "float32", "shape": [2, 3], "values": [[...], [...]]}`` (nested
lists, or a flat list of every element; non-finite floats as "NaN", "Infinity", "-Infinity"; complex
numbers as [re, im] pairs) or ``{"dtype", "shape", "b64": <base64 of the raw little-endian
bytes>}``. Every size is checked against the request's byte budget before anything is allocated.
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from fastapi import Response
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from pydantic import BaseModel, ValidationError

from services.master.errors import (
    BAD_FEED,
    INVALID_JSON,
    INVALID_PROTOBUF,
    TOO_LARGE,
    ApiError,
    invalid,
    reason_of,
    too_large,
)
from tensorgrid.core import dtypes, errors, ir, json_chunks, serde
from tensorgrid.core.dtypes import DType
from tensorgrid.core.serde import GraphLimits

PROTOBUF = "application/x-protobuf"
_PROTOBUF_TYPES = frozenset({PROTOBUF, "application/protobuf", "application/vnd.google.protobuf"})

M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", bound=ProtoMessage)


# ------------------------------------------------------------------------ negotiation
@dataclass(frozen=True)
class Wire:
    """How a request came (``protobuf_in``) and how its answer goes (``protobuf_out``)."""

    protobuf_in: bool
    protobuf_out: bool


def _media_types(header: str) -> list[str]:
    return [part.split(";")[0].strip().lower() for part in header.split(",") if part.strip()]


def negotiate(content_type: str, accept: str) -> Wire:
    """The wire formats of a request from its ``Content-Type`` and ``Accept`` headers."""
    proto_in = any(t in _PROTOBUF_TYPES for t in _media_types(content_type))
    accepted = _media_types(accept)
    if any(t in _PROTOBUF_TYPES for t in accepted):
        proto_out = True
    elif "application/json" in accepted:
        proto_out = False
    else:  # no preference (or */*): answer in the request's format
        proto_out = proto_in
    return Wire(proto_in, proto_out)


def proto_response(message: ProtoMessage, status_code: int = 200) -> Response:
    """A binary protobuf answer."""
    return Response(message.SerializeToString(), status_code=status_code, media_type=PROTOBUF)


# ------------------------------------------------------------------------ bodies
def parse_json(body: bytes) -> Any:
    """The JSON document of a body.

    Raises:
        ApiError(invalid_json): not UTF-8 JSON.
    """
    if not body:
        raise invalid("The request body is empty; expected JSON", INVALID_JSON)
    try:
        # the request, its graph and the graph's nodes are walked in Python and each node
        # decoded by itself: a large body does not hold the interpreter lock for its length
        return json_chunks.loads(body.decode("utf-8"), depth=3)
    except (ValueError, RecursionError) as exc:
        raise invalid(f"The request body is not valid JSON: {exc}", INVALID_JSON) from None


def parse_model(model: type[M], doc: Any) -> M:
    """A JSON document checked against the request's schema.

    Raises:
        ApiError(invalid_json): a field is missing, unknown or of the wrong type.
    """
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise invalid(f"Invalid {model.__name__}: {where}: {first['msg']}", INVALID_JSON) from None


def parse_proto(body: bytes, message_type: type[P]) -> P:
    """A binary protobuf message.

    Raises:
        ApiError(invalid_protobuf): the bytes do not parse as that message.
    """
    msg = message_type()
    try:
        msg.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError, TypeError) as exc:
        raise invalid(f"The request body ({len(body)} bytes) is not a binary "
                      f"{message_type.DESCRIPTOR.full_name}: {exc}", INVALID_PROTOBUF) from None
    return msg


# ------------------------------------------------------------------------ graphs
def _decoding(fn: Callable[[], ir.GraphDef], reason: str) -> ir.GraphDef:
    """Run a serde decoder; its errors keep a finer reason (duplicate node, too large) when
    there is one, else get the body's ``reason``."""
    try:
        return fn()
    except errors.OpError as exc:
        found = reason_of(exc)
        raise ApiError(exc, found if found in ("duplicate_node", TOO_LARGE) else reason) from None


def graph_from_body(body: bytes, protobuf: bool, limits: GraphLimits) -> ir.GraphDef:
    """A GraphDef body: binary protobuf, or TensorFlow's JSON form. Limits are checked on the
    size, then on the parsed message before any tensor is decoded."""
    if protobuf:
        return _decoding(lambda: serde.graph_from_bytes(body, limits), INVALID_PROTOBUF)
    return _decoding(lambda: serde.graph_from_json(body, limits), INVALID_JSON)


def graph_from_json_doc(doc: Any, limits: GraphLimits) -> ir.GraphDef:
    """A GraphDef given as a JSON object inside a JSON request."""
    if not isinstance(doc, dict):
        raise invalid("'graph' must be a GraphDef JSON object", INVALID_JSON)
    return _decoding(lambda: serde.graph_from_json_object(doc, limits), INVALID_JSON)


def graph_from_proto(pb: Any, limits: GraphLimits) -> ir.GraphDef:
    """A GraphDef message inside a protobuf request."""
    return _decoding(lambda: serde.graph_from_proto(pb, limits), INVALID_PROTOBUF)


# ------------------------------------------------------------------------ tensors
class ByteBudget:
    """What the tensors of one request may still take once decoded."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def take(self, nbytes: int, name: str) -> None:
        """Reserve bytes for a tensor.

        Raises:
            ApiError(too_large): the request's tensors would take more than the limit.
        """
        if nbytes > self.left:
            raise too_large(f"Tensor '{name}' takes {nbytes} bytes; the request's tensors may "
                            f"take at most {self.limit} bytes (max_tensor_bytes)")
        self.left -= nbytes


def _bad(name: str, message: str) -> ApiError:
    return invalid(f"Feed '{name}': {message}", BAD_FEED)


def _json_dtype(name: str, doc: dict[str, Any]) -> DType:
    try:
        dt = dtypes.as_dtype(doc.get("dtype"))
    except (TypeError, ValueError):
        raise _bad(name, f"unknown dtype {doc.get('dtype')!r}") from None
    if dt is dtypes.resource:
        raise _bad(name, "resource tensors cannot be fed")
    return dt


def _json_shape(name: str, doc: dict[str, Any]) -> tuple[int, ...]:
    shape = doc.get("shape")
    if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 63 for d in shape):
        raise _bad(name, "'shape' must be a list of non-negative 64-bit integers, got "
                         f"{shape!r}")
    return tuple(shape)


def tensor_from_json(name: str, doc: Any, budget: ByteBudget) -> np.ndarray:
    """Decode a JSON tensor (``values`` or ``b64``).

    Raises:
        ApiError(bad_feed): malformed, or the values do not match the dtype and shape.
        ApiError(too_large): over the byte budget (checked before allocating).
    """
    if not isinstance(doc, dict):
        raise _bad(name, "a tensor is an object {\"dtype\", \"shape\", \"values\" or \"b64\"}")
    dt = _json_dtype(name, doc)
    shape = _json_shape(name, doc)
    # exact integer arithmetic: a product that overflows int64 must not wrap to a small count
    count = math.prod(shape)
    budget.take(count * max(dt.np.itemsize, 1), name)
    if ("values" in doc) == ("b64" in doc):
        raise _bad(name, "give exactly one of 'values' and 'b64'")
    if "b64" in doc:
        return _from_b64(name, doc["b64"], dt, shape, count)
    return _from_values(name, doc["values"], dt, shape, count)


def _from_b64(name: str, text: Any, dt: DType, shape: tuple[int, ...], count: int) -> np.ndarray:
    if dt is dtypes.string:
        raise _bad(name, "string tensors take 'values', not 'b64'")
    if not isinstance(text, str):
        raise _bad(name, "'b64' must be a base64 string")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad(name, f"'b64' is not valid base64: {exc}") from None
    expected = count * dt.np.itemsize
    if len(raw) != expected:
        raise _bad(name, f"a {dt.name} tensor of shape {list(shape)} takes {expected} bytes, "
                         f"'b64' holds {len(raw)}")
    if dt is dtypes.bool_:
        return (np.frombuffer(raw, dtype=np.uint8) != 0).reshape(shape)
    arr = np.frombuffer(raw, dtype=dt.np)
    if sys.byteorder == "big":
        arr = arr.byteswap()
    return arr.reshape(shape).copy()


def _from_values(name: str, values: Any, dt: DType, shape: tuple[int, ...],
                 count: int) -> np.ndarray:
    try:
        raw = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise _bad(name, f"'values' is not a rectangular array: {exc}") from None
    if dt.is_complex:
        if raw.shape[-1:] != (2,) or raw.dtype.kind not in "iuf":
            raise _bad(name, f"{dt.name} values are [re, im] pairs of numbers")
        raw = np.ascontiguousarray(raw, dtype=np.float64).view(np.complex128)[..., 0]
    kind = raw.dtype.kind
    ok = {"f": "iufU", "c": "c", "i": "iu", "u": "iu", "b": "b", "O": "U"}
    want = "O" if dt is dtypes.string else ("c" if dt.is_complex else dt.np.kind)
    if dt is dtypes.bfloat16:
        want = "f"
    if raw.size and kind not in ok.get(want, ""):
        raise _bad(name, f"values of kind {raw.dtype} cannot be {dt.name}")
    if raw.shape != shape:
        if raw.ndim == 1 and raw.size == count:
            raw = raw.reshape(shape)
        else:
            raise _bad(name, f"'values' have shape {list(raw.shape)}, but the tensor's shape is "
                             f"{list(shape)}")
    if dt is dtypes.string:
        out = np.empty(shape, dtype=object)
        out.reshape(-1)[:] = [s.encode("utf-8") for s in raw.reshape(-1).tolist()]
        return out
    if kind in "iu" and dt.is_integer:
        info = np.iinfo(dt.np)
        if raw.size and (raw.min() < info.min or raw.max() > info.max):
            raise _bad(name, f"values out of the range of {dt.name}")
    try:
        return raw.astype(dt.np)
    except (ValueError, TypeError, OverflowError) as exc:
        raise _bad(name, f"values are not {dt.name}: {exc}") from None


def tensor_from_proto(name: str, pb: Any, budget: ByteBudget) -> np.ndarray:
    """Decode a TensorProto feed, its size checked before it is allocated.

    Raises:
        ApiError(bad_feed): a malformed tensor. ApiError(too_large): over the byte budget.
    """
    try:
        budget.take(serde.tensor_nbytes(pb), name)
        return serde.tensor_from_proto(pb)
    except errors.OpError as exc:
        if exc.error_code == errors.RESOURCE_EXHAUSTED:
            raise ApiError(exc, TOO_LARGE) from None
        raise _bad(name, exc.message) from None


_NON_FINITE = {float("inf"): "Infinity", float("-inf"): "-Infinity"}


def _float_values(arr: np.ndarray) -> Any:
    wide = arr.astype(np.float64)
    if np.isfinite(wide).all():
        return wide.tolist()
    out = wide.astype(object)
    flat = out.reshape(-1)
    for i in np.flatnonzero(~np.isfinite(wide.reshape(-1))):
        v = flat[i]
        flat[i] = "NaN" if v != v else _NON_FINITE[v]
    return out.tolist()


def tensor_to_json(value: Any, b64: bool = False) -> dict[str, Any]:
    """Encode a tensor as JSON (``values``, or ``b64`` for numeric tensors when asked)."""
    arr = np.asarray(value)
    dt = dtypes.as_dtype(arr.dtype)
    out: dict[str, Any] = {"dtype": dt.name, "shape": list(arr.shape)}
    if dt is dtypes.string:
        out["values"] = np.vectorize(
            lambda s: s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s),
            otypes=[object])(arr).tolist() if arr.size else arr.tolist()
    elif b64:
        native = np.ascontiguousarray(arr)
        if sys.byteorder == "big":
            native = native.byteswap()
        out["b64"] = base64.b64encode(native.tobytes()).decode("ascii")
    elif dt.is_complex:
        out["values"] = _float_values(np.stack([arr.real, arr.imag], axis=-1))
    elif dt.is_floating:
        out["values"] = _float_values(arr)
    else:
        out["values"] = arr.tolist()
    return out
