"""Attr types, in TensorFlow's sense, and the check of a node's attrs against its op's declaration.

An op declares each attr it takes with a type: ``type``, ``int``, ``float``, ``bool``, ``string``,
``shape``, ``tensor``, ``func``, or ``list(<one of these>)``. A node's attr values are the python
values of ``core.ir`` (bool, int, float, str/bytes, DType, TensorShape, numpy array, NameAttrList,
lists of these); ``value_type`` names the type a value has, and ``check_node_attrs`` refuses a node
whose attr is not declared by its op or holds a value of another type.

Attrs whose names start with ``_`` (``_class``, ``_output_shapes``, ``_placed``, ...) belong to the
runtime and to exporters, not to the op: they are never checked, as in TensorFlow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tensorgrid.core import errors
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.serde_attr import AttrPlaceholder, attr_kind

SCALAR_TYPES = frozenset({"type", "int", "float", "bool", "string", "shape", "tensor", "func"})
ATTR_TYPES = SCALAR_TYPES | frozenset(f"list({t})" for t in SCALAR_TYPES)


def check_type_name(name: str) -> str:
    """``name`` when it is an attr type (``int``, ``list(shape)``, ...).

    Raises:
        ValueError: not an attr type.
    """
    if name not in ATTR_TYPES:
        raise ValueError(f"'{name}' is not an attr type; one of {sorted(ATTR_TYPES)}")
    return name


# the attr type of a value by the AttrValue field it is encoded in (lists and placeholders aside)
_TYPE_OF_KIND = {"b": "bool", "i": "int", "f": "float", "s": "string", "type": "type",
                 "shape": "shape", "tensor": "tensor", "func": "func"}


def _scalar_type(value: Any) -> str | None:
    return _TYPE_OF_KIND.get(attr_kind(value))


def value_type(value: Any) -> str:
    """The attr type of a python attr value: ``int``, ``list(float)``, ``list`` (an empty list,
    of any element type), or ``unknown``."""
    if isinstance(value, list | tuple):
        kinds = {_scalar_type(v) for v in value}
        if not kinds:
            return "list"
        if kinds == {"int", "float"}:
            kinds = {"float"}
        if len(kinds) == 1 and None not in kinds:
            return f"list({kinds.pop()})"
        return "list(mixed)"
    return _scalar_type(value) or "unknown"


def _fits(expected: str, given: str) -> bool:
    if given == expected:
        return True
    if given == "int" and expected == "float":
        return True  # a whole number for a float attr (JSON writes 1.0 as 1)
    if given == "list":
        return expected.startswith("list(")
    return given == "list(int)" and expected == "list(float)"


def check_node_attrs(node: NodeDef, declared: Mapping[str, str]) -> None:
    """Check every attr of ``node`` against its op's declared attr types.

    Raises:
        InvalidArgumentError: an attr the op does not declare (names starting with ``_`` aside),
            or a value of another type; the message names the node, the op, the attr, the
            expected and the given type.
    """
    for name, value in node.attrs.items():
        if name.startswith("_"):
            continue
        expected = declared.get(name)
        if expected is None:
            known = ", ".join(sorted(declared)) or "none"
            raise errors.InvalidArgumentError(
                f"Node '{node.name}' (op {node.op}) has attr '{name}', which op {node.op} does "
                f"not take (its attrs: {known})", node_name=node.name, op_type=node.op)
        if isinstance(value, AttrPlaceholder):
            continue  # a function body's attr that its caller supplies
        given = value_type(value)
        if not _fits(expected, given):
            raise errors.InvalidArgumentError(
                f"Node '{node.name}' (op {node.op}) attr '{name}' expects {expected}, "
                f"got {given}", node_name=node.name, op_type=node.op)
