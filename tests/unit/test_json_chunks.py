"""``json_chunks.loads`` decodes what ``json.loads`` decodes, and refuses what it refuses."""

from __future__ import annotations

import json

import pytest

from tensorgrid.core import json_chunks

DOCS = [
    '{"node": [{"name": "a", "op": "Const"}, {"name": "b", "input": ["a"]}], "versions": {}}',
    ' { "node" : [ ] , "library" : { "function" : [ { "x" : 1 } ] } } ',
    '[1, 2.5, "s", null, true, false, {"k": [1, {"z": "\\u00e9\\n"}]}]',
    '{"a": {"b": {"c": {"d": [1, 2, 3]}}}}',
    '"just a string"', "3", "[]", "{}", '{"dup": 1, "dup": 2}', '{"n": NaN}',
]
BAD = ['', '{', '{"a" 1}', '{"a": 1,}', '[1 2]', '[1,]', '{a: 1}', '{"a": 1} x', '[', '{"a":']


@pytest.mark.parametrize("text", DOCS)
@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_same_values_as_json_loads(text: str, depth: int) -> None:
    got = json_chunks.loads(text, depth)
    want = json.loads(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


@pytest.mark.parametrize("text", BAD)
@pytest.mark.parametrize("depth", [0, 2])
def test_refuses_what_json_loads_refuses(text: str, depth: int) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        json_chunks.loads(text, depth)
