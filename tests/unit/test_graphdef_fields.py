"""tensorgrid's GraphDef has every field of TensorFlow's, with its number and type.

``tests/fixtures/tf_protos/graphdef_fields.json`` is TensorFlow 2.21's table (written by
``make_fields.py`` with the optional TensorFlow peer). The walk follows TensorFlow's message
tree from GraphDef and compares each message's fields with the one at the same place here.
"""

from __future__ import annotations

import json
import pathlib

from tensorgrid.pb import graph_pb2

TABLE = json.loads((pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tf_protos"
                    / "graphdef_fields.json").read_text())


def test_every_tensorflow_graphdef_field_is_declared_with_its_number_and_type() -> None:
    problems: list[str] = []
    seen: set[str] = set()
    stack = [(graph_pb2.GraphDef.DESCRIPTOR, "GraphDef")]
    while stack:
        ours, theirs = stack.pop()
        if theirs in seen:
            continue
        seen.add(theirs)
        have = {f.name: f for f in ours.fields}
        for name, (number, ftype, sub) in TABLE[theirs].items():
            f = have.get(name)
            if f is None:
                problems.append(f"{theirs}.{name} is missing")
                continue
            if (f.number, f.type) != (number, ftype):
                problems.append(f"{theirs}.{name}: ({f.number}, {f.type}) != ({number}, {ftype})")
            if sub is not None and f.message_type is not None:
                stack.append((f.message_type, sub))
        extra = set(have) - set(TABLE[theirs])
        if extra:
            problems.append(f"{theirs} has fields TensorFlow lacks: {sorted(extra)}")
    assert problems == []
    assert len(seen) == len(TABLE)  # every message type: library, OpDef, FullTypeDef, debug info...
