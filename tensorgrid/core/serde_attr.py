"""Attr values to and from TensorFlow's ``AttrValue`` protobuf.

Python values map to the message's fields by kind: bool, int, float, str/bytes, DType, TensorShape,
numpy arrays (tensors), ``NameAttrList`` (functions), ``AttrPlaceholder`` and lists of one kind.
Every malformed message raises ``InvalidArgumentError`` naming the node and the attr when known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorgrid.core import ir
from tensorgrid.core.dtypes import DType
from tensorgrid.core.serde_tensor import (
    dtype_from_enum,
    fill_shape_proto,
    fill_tensor_proto,
    invalid,
    located,
    shape_from_proto,
    tensor_from_proto,
)
from tensorgrid.core.shapes import TensorShape
from tensorgrid.pb import graph_pb2


@dataclass(frozen=True, eq=False)
class NameAttrList:
    """A ``func`` attr value: a function name and the attrs to instantiate it with."""

    name: str
    attr: Mapping[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NameAttrList):
            return NotImplemented
        return self.name == other.name and ir.attrs_key(self.attr) == ir.attrs_key(other.attr)

    def __hash__(self) -> int:
        return hash((self.name, ir.attrs_key(self.attr)))


@dataclass(frozen=True)
class AttrPlaceholder:
    """A ``placeholder`` attr value (inside function bodies): the function attr that supplies it."""

    name: str


def attr_kind(v: Any) -> str:
    """The AttrValue field a python value goes into ('' for a value no field takes)."""
    if isinstance(v, bool | np.bool_):
        return "b"
    if isinstance(v, int | np.integer):
        return "i"
    if isinstance(v, float | np.floating):
        return "f"
    if isinstance(v, str | bytes):
        return "s"
    if isinstance(v, DType):
        return "type"
    if isinstance(v, TensorShape):
        return "shape"
    if isinstance(v, np.ndarray):
        return "tensor"
    if isinstance(v, NameAttrList):
        return "func"
    if isinstance(v, AttrPlaceholder):
        return "placeholder"
    if isinstance(v, list | tuple):
        return "list"
    return ""


def attr_to_proto(value: Any, node: str | None = None,
                  attr: str | None = None) -> graph_pb2.AttrValue:
    """Encode a python attr value as an AttrValue.

    bool -> b, int -> i, float -> f, str (UTF-8) / bytes -> s, DType -> type, TensorShape ->
    shape, numpy array -> tensor, NameAttrList -> func, AttrPlaceholder -> placeholder, and a
    list/tuple of one of the first eight kinds -> list (ints mixed into floats become floats; an
    empty list is an empty ListValue).

    Raises:
        InvalidArgumentError: the value (or a list element) has no AttrValue kind, or a list
            mixes kinds; names the node and attr when given.
    """
    pb = graph_pb2.AttrValue()
    fill_attr(pb, value, node, attr)
    return pb


def fill_attr(pb: graph_pb2.AttrValue, value: Any, node: str | None, attr: str | None) -> None:
    kind = attr_kind(value)
    if kind == "list":
        _fill_list(pb.list, value, node, attr)
    elif kind == "":
        raise invalid(
            f"Cannot encode a {type(value).__name__} as an attr value{located(node, attr)}", node
        )
    elif kind == "tensor":
        fill_tensor_proto(pb.tensor, value)
    elif kind == "shape":
        fill_shape_proto(pb.shape, value)
    elif kind == "func":
        pb.func.SetInParent()
        pb.func.name = value.name
        for k, v in value.attr.items():
            fill_attr(pb.func.attr[k], v, node, attr)
    else:
        setattr(pb, kind, _scalar_to_field(kind, value))


def _scalar_to_field(kind: str, v: Any) -> Any:
    if kind == "s":
        return v.encode("utf-8") if isinstance(v, str) else v
    if kind == "type":
        return v.enum
    if kind == "placeholder":
        return v.name
    return {"b": bool, "i": int, "f": float}[kind](v)


def _fill_list(pb: graph_pb2.AttrValue.ListValue, values: Sequence[Any], node: str | None,
               attr: str | None) -> None:
    pb.SetInParent()  # an empty list is still a list
    kinds = {attr_kind(v) for v in values}
    if kinds == {"i", "f"}:
        kinds = {"f"}
    if len(kinds) > 1 or kinds & {"", "list", "placeholder"}:
        raise invalid(f"Cannot encode a list attr of {sorted(type(v).__name__ for v in values)}; "
                       f"elements must be of one kind{located(node, attr)}", node)
    if not kinds:
        return
    kind = kinds.pop()
    if kind == "tensor":
        for v in values:
            fill_tensor_proto(pb.tensor.add(), v)
    elif kind == "shape":
        for v in values:
            fill_shape_proto(pb.shape.add(), v)
    elif kind == "func":
        for v in values:
            f = pb.func.add(name=v.name)
            for k, a in v.attr.items():
                fill_attr(f.attr[k], a, node, attr)
    else:
        getattr(pb, kind).extend(_scalar_to_field(kind, v) for v in values)


def _decode_s(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def _decode_f(f: float) -> float:
    # AttrValue.f is a float32: give back the shortest float that prints the same, so 0.1 written
    # returns 0.1 rather than 0.10000000149011612.
    return float(str(np.float32(f)))


def attr_from_proto(pb: graph_pb2.AttrValue, node: str | None = None,
                    attr: str | None = None) -> Any:
    """Decode an AttrValue into the python value that ``attr_to_proto`` takes.

    ``s`` becomes str when it is valid UTF-8, else bytes; ``type`` a DType; ``shape`` a
    TensorShape; ``tensor`` a numpy array; ``func`` a NameAttrList; ``placeholder`` an
    AttrPlaceholder; ``list`` a python list (empty when no field is set).

    Raises:
        InvalidArgumentError: no value set, an unsupported dtype, a bad tensor, or a list with
            more than one kind of element; names the node and attr when given.
    """
    which = pb.WhichOneof("value")
    if which == "list":
        return _list_from_proto(pb.list, node, attr)
    if which is None:
        raise invalid(f"Attr value is not set{located(node, attr)}", node)
    if which == "s":
        return _decode_s(pb.s)
    if which == "i":
        return int(pb.i)
    if which == "f":
        return _decode_f(pb.f)
    if which == "b":
        return bool(pb.b)
    if which == "type":
        return dtype_from_enum(pb.type, node, attr)
    if which == "shape":
        return shape_from_proto(pb.shape, node, attr)
    if which == "tensor":
        return tensor_from_proto(pb.tensor, node, attr)
    if which == "func":
        return _func_from_proto(pb.func, node, attr)
    return AttrPlaceholder(pb.placeholder)


def _func_from_proto(pb: graph_pb2.NameAttrList, node: str | None,
                     attr: str | None) -> NameAttrList:
    return NameAttrList(pb.name, {k: attr_from_proto(pb.attr[k], node, f"{attr}.{k}")
                                  for k in sorted(pb.attr)})


def _list_from_proto(pb: graph_pb2.AttrValue.ListValue, node: str | None,
                     attr: str | None) -> list[Any]:
    present = [f.name for f, _ in pb.ListFields()]
    if len(present) > 1:
        raise invalid(f"A list attr sets more than one kind of value {present}"
                       f"{located(node, attr)}", node)
    if not present:
        return []
    kind = present[0]
    if kind == "s":
        return [_decode_s(b) for b in pb.s]
    if kind == "i":
        return [int(v) for v in pb.i]
    if kind == "f":
        return [_decode_f(v) for v in pb.f]
    if kind == "b":
        return [bool(v) for v in pb.b]
    if kind == "type":
        return [dtype_from_enum(v, node, attr) for v in pb.type]
    if kind == "shape":
        return [shape_from_proto(s, node, attr) for s in pb.shape]
    if kind == "tensor":
        return [tensor_from_proto(t, node, attr) for t in pb.tensor]
    return [_func_from_proto(f, node, attr) for f in pb.func]
