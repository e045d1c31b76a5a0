"""framework.importer: import_graph_def, graph_from_graph_def and write_graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import dtypes, errors, ir, registry, serde
from tensorgrid.framework.importer import graph_from_graph_def, import_graph_def, write_graph
from tensorgrid.pb import graph_pb2

DATA = Path(__file__).parent / "data"
X = np.array([[1.0, 2.0], [3.0, -1.0], [0.0, 0.0]], np.float32)
W = np.array([[2.0], [-1.0]], np.float32)
B = np.array([0.5], np.float32)


def linear_json(add_op: str = "Add") -> str:
    """TensorFlow's JSON for y = x @ w + b; TF1 exports ``x + b`` as the legacy ``Add``."""
    doc = json.loads((DATA / "linear_tf.json").read_text())
    for node in doc["node"]:
        if node["name"] == "y":
            node["op"] = add_op
    return json.dumps(doc)


def node(name: str, op: str, inputs=(), device: str = "", **attrs) -> ir.NodeDef:
    return ir.NodeDef(name, op, tuple(inputs), device, attrs)


def const(name: str, value, **kw) -> ir.NodeDef:
    arr = np.asarray(value, np.float32)
    return node(name, "Const", value=arr, dtype=dtypes.float32, **kw)


@pytest.mark.parametrize("add_op", ["Add", "AddV2"])
def test_tensorflow_json_graph_imports_and_runs(add_op):
    if not registry.has_op(add_op):
        pytest.skip(f"op {add_op} is not registered yet (the math ops register it)")
    gd = serde.graph_from_json(linear_json(add_op))
    y, x = import_graph_def(gd, return_elements=["y:0", "x:0"])
    assert y.name == "import/y:0" and y.op.type == add_op
    assert y.shape.as_list() == [None, 1] and y.dtype is dtypes.float32
    with tf.Session() as sess:
        out = sess.run(y, feed_dict={x: X})
    np.testing.assert_allclose(out, X @ W + B)


def test_tensorflow_pbtxt_graph_imports_and_runs():
    if not registry.has_op("Add"):
        pytest.skip("op Add is not registered yet (the math ops register it)")
    gd = serde.graph_from_text((DATA / "linear_tf.pbtxt").read_text())
    g = graph_from_graph_def(gd)
    with tf.Session(graph=g) as sess:
        out = sess.run("y:0", feed_dict={"x:0": X})
    np.testing.assert_allclose(out, X @ W + B)


def test_accepts_ir_protobuf_and_bytes():
    gd = ir.GraphDef((const("c", [1.0, 2.0]), node("i", "Identity", ["c"], T=dtypes.float32)))
    for i, form in enumerate((gd, serde.graph_to_proto(gd), serde.graph_to_bytes(gd))):
        (t,) = import_graph_def(form, return_elements=["i:0"], name=f"f{i}")
        assert t.name == f"f{i}/i:0"
    with pytest.raises(TypeError):
        import_graph_def({"node": []})


def test_name_prefixes():
    gd = ir.GraphDef((const("c", 1.0),))
    import_graph_def(gd)
    import_graph_def(gd)
    import_graph_def(gd, name="mine")
    import_graph_def(gd, name="")
    with tf.name_scope("outer"):
        import_graph_def(gd)
    names = [op.name for op in tf.get_default_graph().get_operations()]
    assert names == ["import/c", "import_1/c", "mine/c", "c", "outer/import/c"]
    with pytest.raises(ValueError, match="already has an operation"):
        import_graph_def(gd, name="")


def test_inputs_controls_input_map_and_return_elements():
    gd = ir.GraphDef((
        node("x", "Placeholder", dtype=dtypes.float32),
        const("two", 2.0),
        node("m", "Mul", ["x", "two:0"], T=dtypes.float32),
        node("after", "NoOp", ["^m"]),
        node("out", "Identity", ["m", "^after"], T=dtypes.float32),
    ))
    feed = tf.constant(np.float32(5.0), name="feed")
    out, out_op, after = import_graph_def(
        gd, input_map={"x": feed}, return_elements=["out:0", "out", "after"])
    assert isinstance(out_op, tf.Operation) and out_op is out.op
    assert out.op.control_inputs == [after]
    assert after.control_inputs[0].name == "import/m"
    assert out.op.inputs[0].op.inputs[0] is feed
    with tf.Session() as sess:
        assert sess.run(out) == 10.0


def test_input_map_converts_values_and_maps_control_inputs():
    gd = ir.GraphDef((
        node("x", "Placeholder", dtype=dtypes.float32),
        node("gate", "NoOp"),
        node("y", "Identity", ["x", "^gate"], T=dtypes.float32),
    ))
    other = tf.no_op(name="other")
    (y,) = import_graph_def(gd, input_map={"x:0": np.float32(3.0), "^gate": other},
                            return_elements=["y:0"])
    assert y.op.control_inputs == [other]
    assert y.op.inputs[0].op.name.startswith("import/_inputs/")
    with tf.Session() as sess:
        assert sess.run(y) == 3.0


def test_input_map_may_name_a_node_missing_from_the_graph():
    gd = ir.GraphDef((node("y", "Identity", ["outside:0"], T=dtypes.float32),))
    feed = tf.constant(1.5)
    (y,) = import_graph_def(gd, input_map={"outside:0": feed}, return_elements=["y:0"])
    assert y.op.inputs == (feed,)


def test_input_map_errors():
    gd = ir.GraphDef((node("x", "Placeholder", dtype=dtypes.int32),
                      node("y", "Identity", ["x"], T=dtypes.int32)))
    before = len(tf.get_default_graph().get_operations())
    with pytest.raises(ValueError, match="not found in graph_def"):
        import_graph_def(gd, input_map={"nope:0": tf.constant(1)})
    assert len(tf.get_default_graph().get_operations()) == before + 1  # only that constant
    with pytest.raises(ValueError, match="float32 .* incompatible with expected int32"):
        import_graph_def(gd, input_map={"x:0": tf.constant(1.0)})
    with pytest.raises(ValueError, match="not found in graph_def"):
        import_graph_def(gd, input_map={"x:3": tf.constant(1)})
    with pytest.raises(ValueError, match="return_element"):
        import_graph_def(gd, return_elements=["missing:0"])
    with pytest.raises(ValueError, match="return_element"):
        import_graph_def(gd, return_elements=["x:1"])


def test_unknown_op_is_not_found_naming_the_node_and_creates_nothing():
    gd = ir.GraphDef((const("c", 1.0), node("weird", "NoSuchOpAnywhere", ["c"])))
    with pytest.raises(errors.NotFoundError, match="NoSuchOpAnywhere.*'weird'") as info:
        import_graph_def(gd)
    assert info.value.node_name == "weird"
    assert tf.get_default_graph().get_operations() == []


def test_cycle_is_invalid_argument_naming_a_node_on_it():
    gd = ir.GraphDef((
        const("c", 1.0),
        node("a", "AddV2", ["c", "b"], T=dtypes.float32),
        node("b", "Identity", ["a"], T=dtypes.float32),
    ))
    with pytest.raises(errors.InvalidArgumentError, match="cycle") as info:
        import_graph_def(gd)
    assert info.value.node_name in {"a", "b"}
    assert tf.get_default_graph().get_operations() == []


def test_missing_input_node_and_bad_output_index():
    with pytest.raises(errors.NotFoundError, match="'ghost'"):
        import_graph_def(ir.GraphDef((node("y", "Identity", ["ghost"], T=dtypes.float32),)))
    gd = ir.GraphDef((const("c", 1.0), node("y", "Identity", ["c:1"], T=dtypes.float32)))
    with pytest.raises(errors.InvalidArgumentError, match="only 1 outputs") as info:
        import_graph_def(gd, name="bad")
    assert info.value.node_name == "y"


def test_duplicate_names_in_ir_are_invalid_argument():
    with pytest.raises(errors.InvalidArgumentError, match="Duplicate"):
        import_graph_def(ir.GraphDef((const("c", 1.0), const("c", 2.0))))


def test_missing_attrs_get_op_defaults():
    gd = ir.GraphDef((
        const("a", [[1.0, 2.0]]), const("b", [[3.0], [4.0]]),
        node("mm", "MatMul", ["a", "b"], T=dtypes.float32),  # no transpose_a / transpose_b
    ))
    (mm,) = import_graph_def(gd, return_elements=["mm"])
    assert mm.get_attr("transpose_a") is False
    assert mm.node_def.attrs["transpose_b"] is False
    with tf.Session() as sess:
        assert sess.run(mm.outputs[0]).tolist() == [[11.0]]


def test_imported_nodes_keep_their_device_and_class():
    gd = ir.GraphDef((
        const("w", 1.0, device="/job:ps/replica:0/task:0/device:CPU:0"),
        node("r", "Identity", ["w"], device="/device:CPU:0", T=dtypes.float32,
             _class=["loc:@w", "loc:@elsewhere"]),
        node("free", "Identity", ["w"], T=dtypes.float32),
    ))
    with tf.device("/job:worker/task:3"):
        w, r, free = import_graph_def(gd, return_elements=["w", "r", "free"])
    assert w.device == "/job:ps/replica:0/task:0/device:CPU:0"
    assert r.device == "/job:worker/task:3/device:CPU:0"  # its own fields win, the scope fills in
    assert free.device == "/job:worker/task:3"
    assert r.get_attr("_class") == ["loc:@import/w", "loc:@elsewhere"]
    with tf.colocate_with(free):
        (r2,) = import_graph_def(gd, return_elements=["r"], name="again")
    assert r2.get_attr("_class") == ["loc:@again/w", "loc:@elsewhere"]


def test_malformed_device_names_the_node():
    gd = ir.GraphDef((const("c", 1.0, device="/bogus:thing"),))
    with pytest.raises(errors.InvalidArgumentError, match="'c'"):
        import_graph_def(gd)


def test_round_trip_through_bytes_rebuilds_the_same_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.constant(W, name="w")
        with tf.device("/job:worker/task:0"):
            y = tf.matmul(x, w, transpose_b=False, name="y")
        with tf.control_dependencies([y]):
            tf.no_op(name="done")
    gd = g.as_graph_def()
    rebuilt = graph_from_graph_def(serde.graph_to_bytes(gd)).as_graph_def()
    def key(d):
        return [(n.name, n.op, n.inputs, n.device, ir.attrs_key(n.attrs)) for n in d.nodes]

    assert key(rebuilt) == key(gd)


def test_imported_variables_initialize_and_run():
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.array([1.0, 2.0], np.float32), name="v")
        tf.assign_add(v, np.array([10.0, 10.0], np.float32), name="bump")
    gd = g.as_graph_def()
    init_name = next(op.name for op in g.get_operations()
                     if op.type == "Assign" and not op.name.startswith("bump"))
    target = tf.Graph()
    with target.as_default():
        init, bump = import_graph_def(gd, return_elements=[init_name, "bump:0"], name="m")
        with tf.Session() as sess:
            sess.run(init)
            assert sess.run(bump).tolist() == [11.0, 12.0]


def test_write_graph_text_and_binary(tmp_path):
    g = tf.Graph()
    with g.as_default():
        tf.identity(tf.constant([1.0, 2.0], name="c"), name="i")
    gd = g.as_graph_def()
    text_path = write_graph(g, str(tmp_path / "logs"), "graph.pbtxt")
    assert text_path == str(tmp_path / "logs" / "graph.pbtxt")
    text = Path(text_path).read_text()
    assert 'name: "i"' in text and "type: DT_FLOAT" in text
    bin_path = write_graph(gd, str(tmp_path), "graph.pb", as_text=False)
    pb_path = write_graph(serde.graph_to_proto(gd), str(tmp_path), "proto.pb", as_text=False)
    for back in (serde.graph_from_text(text), serde.graph_from_bytes(Path(bin_path).read_bytes()),
                 serde.graph_from_bytes(Path(pb_path).read_bytes())):
        assert [n.name for n in back.nodes] == ["c", "i"]
        assert back.node_map()["c"].attrs["value"].tolist() == [1.0, 2.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.pb", "logs", "proto.pb"]
    with pytest.raises(TypeError):
        write_graph("not a graph", str(tmp_path), "x")


def test_graphdef_proto_class_interop():
    """A protobuf GraphDef built the TensorFlow way (ParseFromString) imports directly."""
    pb = graph_pb2.GraphDef()
    pb.ParseFromString(serde.graph_to_bytes(ir.GraphDef((const("c", [3.0]),))))
    (c,) = import_graph_def(pb, return_elements=["c:0"], name="")
    with tf.Session() as sess:
        assert sess.run(c).tolist() == [3.0]
