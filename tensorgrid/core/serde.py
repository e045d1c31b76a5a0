"""Serialization: tensors, attrs and graphs to and from TensorFlow-compatible protobufs.

The protobuf messages (``tensorgrid/pb``) use TensorFlow's names and field numbers, so everything
here reads GraphDefs that TensorFlow wrote (binary, JSON or text format) and writes ones that it
reads. These are pure functions with no network; the services call them to decode requests.
Graphs are encoded here; tensors, dtypes and shapes in ``core.serde_tensor`` and attr values in
``core.serde_attr``, whose functions are re-exported here as one API.

Every malformed input raises ``InvalidArgumentError`` (never a raw protobuf exception); inputs over
the caller's ``GraphLimits`` raise ``ResourceExhaustedError`` before big tensors are allocated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format, text_format
from google.protobuf.message import DecodeError

from tensorgrid.core import errors, ir, json_chunks
from tensorgrid.core.serde_attr import (
    AttrPlaceholder,
    NameAttrList,
    attr_from_proto,
    attr_to_proto,
    fill_attr,
)
from tensorgrid.core.serde_function import LIBRARY_ATTR, attach_libraries, merge_library
from tensorgrid.core.serde_tensor import (
    dtype_from_enum,
    dtype_to_enum,
    fill_shape_proto,
    fill_tensor_proto,
    invalid,
    located,
    shape_from_proto,
    shape_to_proto,
    tensor_from_proto,
    tensor_nbytes,
    tensor_to_proto,
)
from tensorgrid.pb import graph_pb2, types_pb2

__all__ = [
    "AttrPlaceholder", "GraphLimits", "NameAttrList", "attr_from_proto", "attr_to_proto",
    "check_graph_limits", "dtype_from_enum", "dtype_to_enum", "fill_shape_proto",
    "fill_tensor_proto", "graph_from_bytes", "graph_from_json", "graph_from_proto",
    "graph_from_text", "graph_to_bytes", "graph_to_json", "graph_to_proto", "graph_to_text",
    "shape_from_proto", "shape_to_proto", "tensor_from_proto", "tensor_nbytes", "tensor_to_proto",
]

_PARSE_ERRORS = (DecodeError, ValueError, RuntimeError, TypeError, OverflowError)


@dataclass(frozen=True)
class GraphLimits:
    """Caps on what decoding a GraphDef may allocate (None: no cap).

    Attributes:
        max_nodes: most nodes a graph may have.
        max_tensor_bytes: most bytes all its tensor attrs may take once decoded (see
            ``tensor_nbytes``: a small message may describe a huge tensor).
        max_message_bytes: most bytes of the encoded graph (binary, JSON or text).
    """

    max_nodes: int | None = None
    max_tensor_bytes: int | None = None
    max_message_bytes: int | None = None


def _attr_tensors(pb: graph_pb2.AttrValue) -> Iterator[types_pb2.TensorProto]:
    """Every TensorProto inside an AttrValue, func attrs included (iteratively)."""
    stack = [pb]
    while stack:
        a = stack.pop()
        which = a.WhichOneof("value")
        if which == "tensor":
            yield a.tensor
        elif which == "func":
            stack.extend(a.func.attr.values())
        elif which == "list":
            yield from a.list.tensor
            for f in a.list.func:
                stack.extend(f.attr.values())


def check_graph_limits(pb: graph_pb2.GraphDef, limits: GraphLimits) -> None:
    """Check a parsed GraphDef against limits before any of its tensors is decoded.

    Raises:
        ResourceExhaustedError: too many nodes, or tensors that would take too many bytes (names
            the node and attr where the total went over).
        InvalidArgumentError: a tensor with an unknown dtype or a partial shape.
    """
    count = len(pb.node) + sum(len(f.node_def) for f in pb.library.function)
    if limits.max_nodes is not None and count > limits.max_nodes:
        raise errors.ResourceExhaustedError(
            f"GraphDef has {count} nodes (function bodies included), over the limit of "
            f"{limits.max_nodes}"
        )
    if limits.max_tensor_bytes is None:
        return
    total = 0
    # function bodies count too: their constants are decoded when a calling node runs
    body_nodes = [nd for f in pb.library.function for nd in f.node_def]
    for n in [*pb.node, *body_nodes]:
        for key in sorted(n.attr):
            for t in _attr_tensors(n.attr[key]):
                total += tensor_nbytes(t, n.name, key)
                if total > limits.max_tensor_bytes:
                    raise errors.ResourceExhaustedError(
                        f"GraphDef's tensors take at least {total} bytes, over the limit of "
                        f"{limits.max_tensor_bytes} (reached at node '{n.name}', attr '{key}')",
                        node_name=n.name, op_type=n.op,
                    )


def _check_message_size(size: int, limits: GraphLimits | None, what: str) -> None:
    if limits is not None and limits.max_message_bytes is not None \
            and size > limits.max_message_bytes:
        raise errors.ResourceExhaustedError(
            f"{what} is {size} bytes, over the limit of {limits.max_message_bytes}"
        )


def graph_to_proto(graph_def: ir.GraphDef) -> graph_pb2.GraphDef:
    """Encode an IR GraphDef as a protobuf GraphDef (``versions.producer`` = its producer).

    The IR's ``version`` (a change counter for caches) is not encoded. The function libraries
    that calling nodes carry (``core.serde_function``) become the GraphDef's ``library``.

    Raises:
        InvalidArgumentError: an attr value that cannot be encoded (names the node and attr).
    """
    pb = graph_pb2.GraphDef()
    pb.versions.producer = graph_def.producer
    for n in graph_def.nodes:
        npb = pb.node.add(name=n.name, op=n.op, input=list(n.inputs), device=n.device)
        for key, value in n.attrs.items():
            if key == LIBRARY_ATTR:
                merge_library(pb, n)
                continue
            fill_attr(npb.attr[key], value, n.name, key)
    return pb


def graph_from_proto(pb: graph_pb2.GraphDef, limits: GraphLimits | None = None) -> ir.GraphDef:
    """Decode a protobuf GraphDef into the IR, checking ``limits`` first when given.

    Raises:
        ResourceExhaustedError: over the limits.
        InvalidArgumentError: a node without name or op, a duplicate node name, an attr that cannot
            be decoded (names the node and attr).
        NotFoundError: a node calls a function the library lacks.
    """
    if limits is not None:
        check_graph_limits(pb, limits)
    nodes: list[ir.NodeDef] = []
    seen: set[str] = set()
    for i, n in enumerate(pb.node):
        if not n.name:
            raise invalid(f"Node #{i} (op {n.op or '?'}) has no name")
        if not n.op:
            raise invalid(f"Node '{n.name}' has no op", n.name)
        if n.name in seen:
            raise invalid(f"Duplicate node name '{n.name}' in GraphDef", n.name, n.op)
        seen.add(n.name)
        attrs = {key: attr_from_proto(n.attr[key], n.name, key) for key in sorted(n.attr)}
        nodes.append(ir.NodeDef(n.name, n.op, tuple(n.input), n.device, attrs))
    # the nodes that call library functions (If, While, PartitionedCall...) carry their bodies
    return ir.GraphDef(attach_libraries(pb, nodes), producer=pb.versions.producer)


def graph_to_bytes(graph_def: ir.GraphDef) -> bytes:
    """The binary GraphDef (deterministic: equal graphs give equal bytes)."""
    return graph_to_proto(graph_def).SerializeToString(deterministic=True)


def graph_from_bytes(data: bytes | bytearray | memoryview,
                     limits: GraphLimits | None = None) -> ir.GraphDef:
    """Decode a binary GraphDef, with its size checked before parsing and its node count and tensor
    bytes checked before any tensor is decoded.

    Raises:
        TypeError: ``data`` is not bytes-like.
        ResourceExhaustedError: over the limits.
        InvalidArgumentError: the bytes are not a GraphDef, or the graph is malformed.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"graph_from_bytes takes bytes, got {type(data).__name__}")
    _check_message_size(len(data), limits, "Serialized GraphDef")
    pb = graph_pb2.GraphDef()
    try:
        pb.ParseFromString(bytes(data))
    except _PARSE_ERRORS as exc:
        raise invalid(f"Malformed GraphDef: {len(data)} bytes do not parse as a binary GraphDef "
                       f"({exc})") from None
    return graph_from_proto(pb, limits)


def graph_to_json(graph_def: ir.GraphDef, indent: int | None = 2) -> str:
    """The GraphDef in protobuf's JSON mapping (camelCase names, enums by name, bytes as base64),
    the form TensorFlow's ``json_format.MessageToJson`` writes; ``"node"`` is always present
    (an empty list for an empty graph) so that ``graph_from_json`` reads it back."""
    doc = json_format.MessageToDict(graph_to_proto(graph_def))
    doc.setdefault("node", [])
    return json.dumps(doc, indent=indent)


_NODE_INDEX = re.compile(r"\bnode\[(\d+)\]")


def graph_from_json(text: str | bytes, limits: GraphLimits | None = None, *,
                    ignore_unknown_fields: bool = False) -> ir.GraphDef:
    """Decode a GraphDef from protobuf's JSON mapping (TensorFlow's JSON form included:
    ``"attr": {"T": {"type": "DT_FLOAT"}}``, camelCase or snake_case field names).

    Every field TensorFlow writes in a GraphDef is modelled (function library, full types, debug
    info), so a field outside them means the document is not a GraphDef: it is refused rather than
    read as an empty graph. The document must have a ``"node"`` list (``graph_to_json`` always
    writes one).

    Args:
        text: the JSON document.
        limits: checked on the text's size, then on the parsed graph before tensors are decoded.
        ignore_unknown_fields: drop unknown fields instead of refusing them (for documents from
            a newer writer). Unknown enum names (an unknown ``DT_...``) still fail.

    Raises:
        ResourceExhaustedError: over the limits.
        InvalidArgumentError: not JSON, not a GraphDef (no ``node`` list, or an unknown field,
            named with its path), or an unknown enum name (names the node).
    """
    if isinstance(text, bytes | bytearray):
        _check_message_size(len(text), limits, "GraphDef JSON")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid(f"Malformed GraphDef JSON: not UTF-8 ({exc})") from None
    else:
        _check_message_size(len(text.encode("utf-8")), limits, "GraphDef JSON")
    try:
        # node by node: a large graph does not hold the interpreter lock for its whole length
        doc = json_chunks.loads(text)
    except (ValueError, RecursionError) as exc:
        raise invalid(f"Malformed GraphDef JSON: {exc}") from None
    return graph_from_json_object(doc, limits, ignore_unknown_fields=ignore_unknown_fields)


def graph_from_json_object(doc: Any, limits: GraphLimits | None = None, *,
                           ignore_unknown_fields: bool = False) -> ir.GraphDef:
    """``graph_from_json`` of a document already decoded (a GraphDef inside a JSON request).

    Raises:
        As ``graph_from_json``, but for the size of the text.
    """
    if not isinstance(doc, dict):
        raise invalid(f"Malformed GraphDef JSON: expected an object, got {type(doc).__name__}")
    desc = graph_pb2.GraphDef.DESCRIPTOR
    unknown = [k for k in doc if k not in desc.fields_by_camelcase_name
               and k not in desc.fields_by_name]
    if unknown and not ignore_unknown_fields:
        raise invalid(f"Malformed GraphDef JSON: unknown top-level field(s) {unknown}; a GraphDef "
                      f"has {sorted(desc.fields_by_name)}")
    if not isinstance(doc.get("node"), list):
        raise invalid("Malformed GraphDef JSON: no 'node' list (an empty graph is "
                      "{\"node\": []})")
    if ignore_unknown_fields:
        _drop_unknown_fields(doc, graph_pb2.GraphDef.DESCRIPTOR)
    pb = graph_pb2.GraphDef()
    try:
        json_format.ParseDict(doc, pb)
    except (json_format.ParseError, *_PARSE_ERRORS) as exc:
        node = _node_named_in(str(exc), doc)
        raise invalid(f"Malformed GraphDef JSON: {exc}{located(node, None)}", node) from None
    return graph_from_proto(pb, limits)


def _node_named_in(message: str, doc: dict[str, Any]) -> str | None:
    """The name of the node that a json_format error's path ('node[3]') points at."""
    m = _NODE_INDEX.search(message)
    nodes = doc.get("node")
    if m is None or not isinstance(nodes, list) or int(m.group(1)) >= len(nodes):
        return None
    entry = nodes[int(m.group(1))]
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def _drop_unknown_fields(doc: dict[str, Any], desc: Any) -> None:
    """Remove, in place, keys that name no field of the message (at every depth).

    json_format's own ``ignore_unknown_fields`` would also drop unknown enum names silently (an
    unknown DT_... in a list of types would vanish); this drops only fields.
    """
    stack: list[tuple[dict[str, Any], Any]] = [(doc, desc)]
    while stack:
        obj, d = stack.pop()
        for key in list(obj):
            f = d.fields_by_camelcase_name.get(key) or d.fields_by_name.get(key)
            if f is None:
                del obj[key]
                continue
            sub = f.message_type
            if sub is None:
                continue
            value = obj[key]
            if sub.GetOptions().map_entry:
                value_field = sub.fields_by_name["value"]
                if value_field.message_type is not None and isinstance(value, dict):
                    stack.extend((v, value_field.message_type) for v in value.values()
                                 if isinstance(v, dict))
            elif isinstance(value, list):
                stack.extend((v, sub) for v in value if isinstance(v, dict))
            elif isinstance(value, dict):
                stack.append((value, sub))


def graph_to_text(graph_def: ir.GraphDef) -> str:
    """The GraphDef in protobuf text format (TensorFlow's ``.pbtxt``)."""
    return text_format.MessageToString(graph_to_proto(graph_def))


def graph_from_text(text: str | bytes, limits: GraphLimits | None = None) -> ir.GraphDef:
    """Decode a GraphDef from protobuf text format (a ``.pbtxt`` TensorFlow wrote).

    Raises:
        ResourceExhaustedError: over the limits.
        InvalidArgumentError: not a text-format GraphDef, or a malformed graph.
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise invalid(f"Malformed GraphDef text: not UTF-8 ({exc})") from None
    _check_message_size(len(text.encode("utf-8")), limits, "GraphDef text")
    pb = graph_pb2.GraphDef()
    try:
        text_format.Parse(text, pb)
    except (text_format.ParseError, *_PARSE_ERRORS) as exc:
        raise invalid(f"Malformed GraphDef text: {exc}") from None
    return graph_from_proto(pb, limits)
