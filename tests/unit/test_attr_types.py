"""Attr types against the op: every registered op declares its attrs with their types, and a
node whose attr is unknown to its op or of another type is refused by graph inference (so by the
master and by ``import_graph_def``), naming the node, the attr, the expected and the given type."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import attr_types, dtypes, errors, registry, serde
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.serde_attr import AttrPlaceholder, NameAttrList
from tensorgrid.core.shapes import TensorShape
from tensorgrid.ops._attrs import COMMON, parse_attrs


def test_every_registered_op_declares_typed_attrs() -> None:
    package = str(Path(tf.__file__).parent)
    # the package's own ops (other tests register ops of their own)
    ops = {n: d for n, d in registry.registered_ops().items() if d.source.startswith(package)}
    assert len(ops) > 350
    undeclared = sorted(name for name, d in ops.items() if d.attrs is None)
    assert undeclared == []
    for name, d in ops.items():
        assert d.attrs is not None
        for attr, attr_type in d.attrs.items():
            assert attr_type in attr_types.ATTR_TYPES, (name, attr, attr_type)
        # an op's defaults are attrs it takes, of their declared type
        for attr, value in d.defaults.items():
            assert attr in d.attrs, (name, attr)
            attr_types.check_node_attrs(NodeDef("n", name, attrs={attr: value}), d.attrs)


def test_declarations_follow_tensorflow_where_the_op_is_tensorflow_s() -> None:
    assert registry.get_op("MatMul").attrs == {
        "T": "type", "transpose_a": "bool", "transpose_b": "bool", "grad_a": "bool",
        "grad_b": "bool"}
    assert registry.get_op("Conv2D").attrs["strides"] == "list(int)"
    assert registry.get_op("Placeholder").attrs["shape"] == "shape"
    assert registry.get_op("Const").attrs == {"dtype": "type", "value": "tensor"}
    assert registry.get_op("IdentityN").attrs == {"T": "list(type)"}
    assert registry.get_op("RandomUniformInt").attrs["Tout"] == "type"
    assert registry.get_op("While").attrs["body"] == "func"
    assert registry.get_op("NoOp").attrs == {}


@pytest.mark.parametrize("value, expected", [
    (True, "bool"), (np.bool_(False), "bool"), (3, "int"), (np.int64(3), "int"), (0.5, "float"),
    ("s", "string"), (b"\xff", "string"), (dtypes.float32, "type"), (TensorShape([2]), "shape"),
    (np.zeros(2), "tensor"), (NameAttrList("f"), "func"), ([1, 2], "list(int)"),
    ([1, 2.5], "list(float)"), ([TensorShape(None)], "list(shape)"), ([], "list"),
    ([1, "a"], "list(mixed)"), (None, "unknown"),
])
def test_value_type(value, expected) -> None:
    assert attr_types.value_type(value) == expected


def _matmul(**attrs) -> NodeDef:
    return NodeDef("mm", "MatMul", ("a", "b"), attrs={"T": dtypes.float32, **attrs})


def test_wrong_type_names_node_attr_expected_and_given() -> None:
    with pytest.raises(errors.InvalidArgumentError) as info:
        registry.check_attrs(_matmul(transpose_a="yes"), registry.get_op("MatMul"))
    assert info.value.message == ("Node 'mm' (op MatMul) attr 'transpose_a' expects bool, "
                                  "got string")
    assert info.value.node_name == "mm"
    assert info.value.op_type == "MatMul"


def test_unknown_attr_is_refused_and_underscore_attrs_are_not() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="has attr 'foo', which op MatMul does "
                       "not take"):
        registry.check_attrs(_matmul(foo=1), registry.get_op("MatMul"))
    registry.check_attrs(_matmul(_class=["loc:@w"], _output_shapes=[TensorShape([2, 2])],
                                 transpose_b=True), registry.get_op("MatMul"))


@pytest.mark.parametrize("node, attr, expected, given", [
    (NodeDef("p", "MaxPool", ("x",), attrs={"ksize": ["1", "2"]}), "ksize", "list(int)",
     "list(string)"),
    (NodeDef("p", "MaxPool", ("x",), attrs={"strides": 2}), "strides", "list(int)", "int"),
    (NodeDef("x", "Placeholder", attrs={"shape": [2, 3]}), "shape", "shape", "list(int)"),
    (NodeDef("x", "Placeholder", attrs={"dtype": "float32"}), "dtype", "type", "string"),
    (NodeDef("c", "Const", attrs={"value": 1.0}), "value", "tensor", "float"),
    (NodeDef("s", "Sum", ("x", "i"), attrs={"keep_dims": 1}), "keep_dims", "bool", "int"),
    (NodeDef("l", "LeakyRelu", ("x",), attrs={"alpha": "0.2"}), "alpha", "float", "string"),
])
def test_list_shape_and_scalar_mismatches(node, attr, expected, given) -> None:
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"attr '{attr}' expects {expected.replace('(', '.').replace(')', '.')}"
                             f", got {given.replace('(', '.').replace(')', '.')}$"):
        registry.check_attrs(node, registry.get_op(node.op))


def test_widening_empty_lists_and_placeholders_are_accepted() -> None:
    registry.check_attrs(NodeDef("l", "LeakyRelu", ("x",), attrs={"alpha": 1}),
                         registry.get_op("LeakyRelu"))  # JSON writes 1.0 as 1
    registry.check_attrs(NodeDef("p", "MaxPool", ("x",), attrs={"ksize": []}),
                         registry.get_op("MaxPool"))
    registry.check_attrs(_matmul(transpose_a=AttrPlaceholder("ta")), registry.get_op("MatMul"))


def test_infer_graph_refuses_a_bad_attr() -> None:
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(np.eye(2, dtype=np.float32), name="a")
        tf.matmul(a, a, name="mm")
    nodes = [n if n.name != "mm" else n.with_(attrs={**n.attrs, "transpose_a": "yes"})
             for n in g.as_graph_def().nodes]
    infer_graph(g.as_graph_def().nodes)  # the SDK's graph is fine
    with pytest.raises(errors.InvalidArgumentError, match="'mm'.*'transpose_a' expects bool"):
        infer_graph(nodes)


def test_import_graph_def_refuses_a_bad_attr() -> None:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        tf.nn.max_pool(tf.reshape(x, [1, 2, 1, 1]), [1, 1, 1, 1], [1, 1, 1, 1], "VALID",
                       name="pool")
    doc = json.loads(serde.graph_to_json(g.as_graph_def()))
    for n in doc["node"]:
        if n["name"] == "pool":
            n["attr"]["strides"] = {"list": {"s": ["MQ==", "MQ==", "MQ==", "MQ=="]}}
    bad = serde.graph_from_json(json.dumps(doc))
    with tf.Graph().as_default(), pytest.raises(
            errors.InvalidArgumentError,
            match=r"Node 'pool' \(op MaxPool\) attr 'strides' expects list\(int\), "
                  r"got list\(string\)"):
        tf.import_graph_def(bad, name="")


def test_declarations_need_types_for_names_the_table_does_not_know() -> None:
    assert parse_attrs("X", "T transpose_a T2:list(int)") == {
        "T": "type", "transpose_a": "bool", "T2": "list(int)"}
    with pytest.raises(ValueError, match="attr 'mystery' needs a type"):
        parse_attrs("X", "mystery")
    with pytest.raises(ValueError, match="not an attr type"):
        registry.register_op("AttrTypesTestBadType", lambda ctx: [], attrs={"a": "integer"})
    assert not registry.has_op("AttrTypesTestBadType")
    with pytest.raises(errors.AlreadyExistsError, match="already declared"):
        registry.declare_attrs("MatMul", {"T": "type"})
    assert COMMON["use_locking"] == "bool"
