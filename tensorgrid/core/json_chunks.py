"""JSON decoding in pieces, so that a large document does not hold the interpreter lock for its
whole length.

``json.loads`` is one C call: on a 25 MB GraphDef it holds the GIL for most of a second, and a
server parsing one in a worker thread answers nothing else meanwhile. ``loads`` decodes the outer
levels of the document (a GraphDef's object and its ``node`` list) in Python, and each element
(one node) with one C call, so other threads run between elements.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def loads(text: str, depth: int = 2) -> Any:
    """Decode a JSON document like ``json.loads``; objects and arrays down to ``depth`` levels
    are walked in Python, what lies below them is decoded element by element.

    Raises:
        json.JSONDecodeError (a ValueError): not JSON, with the position.
        RecursionError: nested deeper than the interpreter allows (as ``json.loads``).
    """
    idx = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    value, idx = _value(text, idx, depth)
    idx = _SPACE.match(text, idx).end()  # type: ignore[union-attr]
    if idx != len(text):
        raise json.JSONDecodeError("Extra data", text, idx)
    return value


def _space(text: str, idx: int) -> int:
    return _SPACE.match(text, idx).end()  # type: ignore[union-attr]


def _value(text: str, idx: int, depth: int) -> tuple[Any, int]:
    if depth > 0 and idx < len(text):
        if text[idx] == "[":
            return _array(text, idx + 1, depth - 1)
        if text[idx] == "{":
            return _object(text, idx + 1, depth - 1)
    try:
        return _DECODER.raw_decode(text, idx)
    except StopIteration:  # older decoders' "no value here"
        raise json.JSONDecodeError("Expecting value", text, idx) from None


def _array(text: str, idx: int, depth: int) -> tuple[list[Any], int]:
    out: list[Any] = []
    idx = _space(text, idx)
    if text.startswith("]", idx):
        return out, idx + 1
    while True:
        value, idx = _value(text, idx, depth)
        out.append(value)
        idx = _space(text, idx)
        if text.startswith(",", idx):
            idx = _space(text, idx + 1)
        elif text.startswith("]", idx):
            return out, idx + 1
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)


def _object(text: str, idx: int, depth: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    idx = _space(text, idx)
    if text.startswith("}", idx):
        return out, idx + 1
    while True:
        if not text.startswith('"', idx):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes",
                                       text, idx)
        key, idx = scanstring(text, idx + 1)
        idx = _space(text, idx)
        if not text.startswith(":", idx):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, idx)
        out[key], idx = _value(text, _space(text, idx + 1), depth)
        idx = _space(text, idx)
        if text.startswith(",", idx):
            idx = _space(text, idx + 1)
        elif text.startswith("}", idx):
            return out, idx + 1
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, idx)
