"""The graph builder follows TensorFlow 1.x: default graphs, names and scopes, devices, control
dependencies, colocation, collections, variables and the small ops every graph uses."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import errors

# ------------------------------------------------------------------------------ default graph


def test_default_graph_and_as_default_nest() -> None:
    outer = tf.get_default_graph()
    g1, g2 = tf.Graph(), tf.Graph()
    with g1.as_default() as entered:
        assert entered is g1
        assert tf.get_default_graph() is g1
        with g2.as_default():
            assert tf.constant(1.0).graph is g2
        assert tf.constant(1.0).graph is g1
    assert tf.get_default_graph() is outer
    assert [op.name for op in g1.get_operations()] == ["Const"]
    assert [op.name for op in g2.get_operations()] == ["Const"]


def test_reset_default_graph_replaces_it_and_refuses_inside_as_default() -> None:
    before = tf.get_default_graph()
    tf.constant(1.0)
    tf.reset_default_graph()
    after = tf.get_default_graph()
    assert after is not before
    assert after.get_operations() == []
    with tf.Graph().as_default():
        with pytest.raises(AssertionError, match="reset_default_graph"):
            tf.reset_default_graph()


# ------------------------------------------------------------------------------ names


def test_unique_names_follow_tensorflow() -> None:
    a, b = tf.constant(1.0), tf.constant(2.0)
    assert (a.name, b.name) == ("Const:0", "Const_1:0")
    assert [(a + b).name, tf.add(a, b).name, tf.add(a, b).name] == ["add:0", "add_1:0", "add_2:0"]
    # an explicitly taken "x_1" is skipped when "x" is uniquified
    assert tf.constant(0, name="x_1").op.name == "x_1"
    assert tf.constant(0, name="x").op.name == "x"
    assert tf.constant(0, name="x").op.name == "x_2"
    # names are unique regardless of case, as in TensorFlow
    assert tf.constant(0, name="X").op.name == "X_3"


def test_name_scopes_nest_reenter_and_go_absolute() -> None:
    g = tf.get_default_graph()
    with tf.name_scope("outer") as outer:
        assert outer == "outer/"
        assert g.get_name_scope() == "outer"
        with tf.name_scope("inner") as inner:
            assert inner == "outer/inner/"
            assert tf.constant(1).op.name == "outer/inner/Const"
        with tf.name_scope("inner") as inner2:
            assert inner2 == "outer/inner_1/"
        # a scope string ending in '/' re-enters that scope exactly
        with tf.name_scope(inner):
            assert tf.constant(1).op.name == "outer/inner/Const_1"
        with tf.name_scope("abs/"):
            assert tf.constant(1).op.name == "abs/Const"
        # None and '' go back to the root
        with tf.name_scope(None) as root:
            assert root == ""
            assert tf.constant(1).op.name == "Const"
        assert tf.constant(1, name="q").op.name == "outer/q"
    with tf.name_scope("outer") as again:
        assert again == "outer_1/"
    assert g.get_name_scope() == ""


def test_name_scope_with_default_name_and_values_uses_their_graph() -> None:
    g = tf.Graph()
    with g.as_default():
        t = tf.constant(1.0)
    with tf.name_scope(None, default_name="helper", values=[t]) as scope:
        assert scope == "helper/"
        c = tf.constant(2.0)
    assert c.graph is g
    assert c.op.name == "helper/Const"


def test_invalid_node_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="not a valid node name"):
        tf.constant(1.0, name="bad name!")


# ------------------------------------------------------------------------------ devices


def test_device_scopes_nest_inner_fields_win_outer_fill_in() -> None:
    with tf.device("/job:ps/task:0"):
        on_ps = tf.constant(1.0)
        with tf.device("/device:GPU:1"):
            gpu = tf.constant(1.0)
        with tf.device("/job:worker"):
            worker = tf.constant(1.0)
        with tf.device(None):
            cleared = tf.constant(1.0)
            with tf.device("/cpu:0"):
                only_cpu = tf.constant(1.0)
    assert on_ps.device == "/job:ps/task:0"
    assert gpu.device == "/job:ps/task:0/device:GPU:1"
    assert worker.device == "/job:worker/task:0"
    assert cleared.device == ""
    assert only_cpu.device == "/device:CPU:0"
    assert tf.constant(1.0).device == ""


def test_device_accepts_devicespec_and_functions() -> None:
    def by_type(op: tf.Operation) -> str:
        return "/job:ps/task:1" if op.type == "Const" else "/job:worker/task:0"

    with tf.device(tf.DeviceSpec(job="w", task=2, device_type="CPU", device_index=0)):
        a = tf.constant(1.0)
    with tf.device(by_type):
        c = tf.constant(1.0)
        i = tf.identity(c)
    assert a.device == "/job:w/task:2/device:CPU:0"
    assert c.device == "/job:ps/task:1"
    assert i.device == "/job:worker/task:0"
    # a device function under a string scope: the function decides, the outer scope fills in
    with tf.device("/device:CPU:0"), tf.device(lambda op: "/job:ps"):
        assert tf.constant(1.0).device == "/job:ps/device:CPU:0"


def test_node_def_reflects_the_device_a_device_function_chose() -> None:
    def peeking(op: tf.Operation) -> str:
        # looking at the NodeDef (as replica_device_setter-style functions do) must not freeze it
        return "/job:ps/task:0" if op.node_def.op == "Const" else ""

    with tf.device(peeking):
        c = tf.constant(1.0, name="c")
    assert c.op.node_def.device == "/job:ps/task:0"
    assert tf.get_default_graph().as_graph_def().nodes[-1].device == "/job:ps/task:0"


def test_malformed_device_name_fails_when_the_scope_opens() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="Malformed device name"):
        with tf.device("/job:ps/bogus:1"):
            pass


# ------------------------------------------------------------------------------ control deps


def test_control_dependencies_apply_without_duplicates() -> None:
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    with tf.control_dependencies([a]):
        first = tf.identity(b, name="first")
        # its input was made inside the block, so it already runs after `a`
        second = tf.identity(first, name="second")
        # a data input on the controller itself needs no control edge either
        on_a = tf.identity(a, name="on_a")
        explicit = tf.group(first, name="g")
    assert first.op.control_inputs == [a.op]
    assert second.op.control_inputs == []
    assert on_a.op.control_inputs == []
    assert explicit.control_inputs == [first.op]
    assert first.op.node_def.inputs == ("b", "^a")


def test_control_dependencies_nest_and_none_clears() -> None:
    a, b, c = tf.constant(1.0), tf.constant(2.0), tf.constant(3.0)
    with tf.control_dependencies([a]):
        with tf.control_dependencies([b, b.op]):
            both = tf.identity(c)
        with tf.control_dependencies(None):
            free = tf.identity(c)
            with tf.control_dependencies([b]):
                only_b = tf.identity(c)
    assert both.op.control_inputs == [a.op, b.op]
    assert free.op.control_inputs == []
    assert only_b.op.control_inputs == [b.op]


def test_control_dependency_on_a_variable_uses_its_op() -> None:
    v = tf.Variable(1.0, name="v")
    with tf.control_dependencies([v]):
        x = tf.constant(2.0)
    assert x.op.control_inputs == [v.op]


def test_add_control_input_invalidates_the_node_def() -> None:
    a = tf.constant(1.0, name="a")
    b = tf.identity(a, name="b")
    version = tf.get_default_graph().version
    assert b.op.node_def.inputs == ("a",)
    b.op._add_control_input(a.op)
    b.op._add_control_input(a.op)  # no duplicate
    assert b.op.node_def.inputs == ("a", "^a")
    assert tf.get_default_graph().version > version


# ------------------------------------------------------------------------------ colocation


def test_colocate_with_takes_device_and_class() -> None:
    with tf.device("/job:ps/task:1"):
        v = tf.Variable(3.0, name="v")
    assert v.device == "/job:ps/task:1"
    assert v.initializer.get_attr("_class") == ["loc:@v"]
    assert v.value().op.get_attr("_class") == ["loc:@v"]
    with tf.device("/job:worker/task:0"):
        with tf.colocate_with(v.op):
            near = tf.identity(v)
            with tf.device("/job:worker/task:5"):
                # the colocation target's device wins over device scopes inside the block
                still_near = tf.identity(v)
        far = tf.identity(v)
    assert near.device == "/job:ps/task:1"
    assert near.op.get_attr("_class") == ["loc:@v"]
    assert still_near.device == "/job:ps/task:1"
    assert far.device == "/job:worker/task:0"
    assert "_class" not in far.op.node_def.attrs


def test_colocate_with_nests_and_none_clears() -> None:
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    with tf.colocate_with(a):
        with tf.colocate_with(b):
            both = tf.identity(a)
        with tf.colocate_with(b, ignore_existing=True):
            only_b = tf.identity(a)
        with tf.colocate_with(None):
            none = tf.identity(a)
    assert both.op.get_attr("_class") == ["loc:@a", "loc:@b"]
    assert only_b.op.get_attr("_class") == ["loc:@b"]
    assert "_class" not in none.op.node_def.attrs
    assert both.op.colocation_groups() == ["loc:@a", "loc:@b"]
    assert a.op.colocation_groups() == ["loc:@a"]


# ------------------------------------------------------------------------------ collections


def test_collections() -> None:
    g = tf.get_default_graph()
    tf.add_to_collection("c", 1)
    tf.add_to_collections(["c", "d"], 2)
    tf.add_to_collections("d", 3)
    assert tf.get_collection("c") == [1, 2]
    assert tf.get_collection("d") == [2, 3]
    assert tf.get_collection("missing") == []
    ref = tf.get_collection_ref("c")
    ref.append(5)
    assert tf.get_collection("c") == [1, 2, 5]
    copy = tf.get_collection("c")
    copy.append(99)
    assert tf.get_collection("c") == [1, 2, 5]
    assert sorted(g.get_all_collection_keys()) == ["c", "d"]
    g.clear_collection("c")
    assert tf.get_collection("c") == []


def test_collection_scope_filters_by_name() -> None:
    a = tf.Variable(1.0, name="scope_a/v")
    b = tf.Variable(1.0, name="scope_b/w", trainable=False)
    assert tf.global_variables() == [a, b]
    assert tf.global_variables("scope_a") == [a]
    assert tf.trainable_variables() == [a]
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="scope_b") == [b]


# ------------------------------------------------------------------------------ variables


def test_variable_nodes_and_properties() -> None:
    v = tf.Variable([1.0, 2.0], name="v")
    assert v.name == "v:0"
    assert v.op.name == "v" and v.op.type == "VariableV2"
    assert v.dtype is tf.float32
    assert v.shape == tf.TensorShape([2])
    assert v.initializer.name == "v/Assign" and v.initializer.type == "Assign"
    assert v.value().name == "v/read:0" and v.value().op.type == "Identity"
    assert v.initial_value.op.name == "v/initial_value"
    assert v.trainable
    assert v in tf.global_variables() and v in tf.trainable_variables()
    assert repr(v) == "<tf.Variable 'v:0' shape=(2,) dtype=float32>"


def test_variable_dtype_callable_initializer_and_collections() -> None:
    v = tf.Variable(lambda: [1, 2], dtype=tf.float64, name="w")
    assert v.dtype is tf.float64
    assert v.initial_value.op.name == "w/Initializer/initial_value"
    local = tf.Variable(0, collections=[tf.GraphKeys.LOCAL_VARIABLES], trainable=False, name="l")
    assert local not in tf.global_variables()
    assert tf.local_variables() == [local]
    assert tf.local_variables_initializer().control_inputs == [local.initializer]
    with pytest.raises(ValueError, match="initial_value must be specified"):
        tf.Variable()
    p = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match="fully known shape"):
        tf.Variable(p)
    with pytest.raises(ValueError, match="dtype"):
        tf.Variable(tf.constant(1), dtype=tf.float32)


def test_variable_updates_and_reads_through_a_session() -> None:
    v = tf.Variable([1.0, 2.0], name="v")
    add = v.assign_add([1.0, 1.0])
    sub = v.assign_sub([0.5, 0.5])
    assign = v.assign([7.0, 8.0])
    assert add.dtype is tf.float32 and add.shape == tf.TensorShape([2])
    assert v.assign(1.0 * np.ones(2, np.float32), read_value=False).type == "Assign"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(add), [2.0, 3.0])
        np.testing.assert_array_equal(sess.run(sub), [1.5, 2.5])
        np.testing.assert_array_equal(sess.run(v.read_value()), [1.5, 2.5])
        np.testing.assert_array_equal(sess.run(assign), [7.0, 8.0])
        np.testing.assert_array_equal(sess.run(v + 1.0), [8.0, 9.0])
        np.testing.assert_array_equal(v.eval(sess), [7.0, 8.0])
        v.load([5.0, 6.0], sess)
        np.testing.assert_array_equal(sess.run(v.value()), [5.0, 6.0])


def test_variables_initializer_runs_only_its_variables() -> None:
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    init_a = tf.variables_initializer([a])
    assert init_a.type == "NoOp" and init_a.control_inputs == [a.initializer]
    empty = tf.variables_initializer([])
    assert empty.type == "NoOp" and empty.control_inputs == []
    init = tf.global_variables_initializer()
    assert init.name == "init_2"  # the two variables_initializer calls took "init", "init_1"
    assert init.control_inputs == [a.initializer, b.initializer]
    with tf.Session() as sess:
        sess.run(empty)
        sess.run(init_a)
        assert sess.run(a) == 1.0
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value b"):
            sess.run(b)
        sess.run(init)
        assert sess.run([a, b]) == [1.0, 2.0]


def test_variable_initialized_value_initializes_another_variable() -> None:
    a = tf.Variable(3.0, name="a")
    with tf.control_dependencies([tf.no_op()]):
        b = tf.Variable(a.initialized_value() * 2.0, name="b")
    assert a.initialized_value().op.control_inputs == []
    with tf.Session() as sess:
        # b's initializer runs fine before a's ...
        sess.run(b.initializer)
        assert sess.run(b) == 6.0
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value a"):
            sess.run(a)
        # ... and after it
        sess.run(tf.global_variables_initializer())
        assert sess.run([a, b]) == [3.0, 6.0]


# ------------------------------------------------------------------------------ small ops


def test_identity_no_op_group_stop_gradient() -> None:
    a = tf.constant([1.0, 2.0], name="a")
    i = tf.identity(a, name="i")
    s = tf.stop_gradient(a)
    n = tf.no_op(name="nothing")
    g = tf.group(i, [s.op, None], {"k": a}, name="grp")
    assert i.op.type == "Identity" and i.op.name == "i"
    assert s.op.type == "StopGradient"
    assert n.type == "NoOp" and n.outputs == [] and n.values() == ()
    assert g.type == "NoOp"
    assert [c.name for c in g.control_inputs] == ["i", "StopGradient", "a"]
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(i), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(s), [1.0, 2.0])
        assert sess.run(n) is None
        assert sess.run(g) is None


def test_group_gates_on_the_device_of_its_inputs() -> None:
    """As TF1: the NoOp of a group sits with its inputs (updates on the ps finish there instead of
    sending a control edge to the worker and back); inputs on several devices get a NoOp each."""
    cluster = tf.train.ClusterSpec({"ps": ["h:1", "h:2"], "worker": ["h:3"]})
    with tf.device(tf.train.replica_device_setter(cluster=cluster,
                                                  worker_device="/job:worker/task:0")):
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(1.0, name="w")
        loss = w * w
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        v = tf.Variable(2.0, name="v")  # the ps tasks are taken in turn
        with tf.device(w.device):
            on_w = tf.identity(w)
        with tf.device(v.device):
            on_v = tf.identity(v)
        both = tf.group(on_w, on_v, name="both")
        local = tf.group(tf.identity(loss), name="local")
    assert w.device != v.device
    update = tf.get_default_graph().get_operation_by_name("GradientDescent/update")
    assert update.type == "NoOp" and update.device == w.device
    assert train.device == step.device
    assert both.device == "/job:worker/task:0"
    gates = both.control_inputs
    assert sorted(op.device for op in gates) == sorted([w.device, v.device])
    assert all(op.type == "NoOp" and len(op.control_inputs) == 1 for op in gates)
    assert local.device == "/job:worker/task:0"


def test_operator_overloads() -> None:
    a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(a + 1), [[2, 3], [4, 5]])
        np.testing.assert_array_equal(sess.run(1 + a), [[2, 3], [4, 5]])
        np.testing.assert_array_equal(sess.run(a - 1), [[0, 1], [2, 3]])
        np.testing.assert_array_equal(sess.run(10 - a), [[9, 8], [7, 6]])
        np.testing.assert_array_equal(sess.run(a * 2), [[2, 4], [6, 8]])
        np.testing.assert_array_equal(sess.run(2 * a), [[2, 4], [6, 8]])
        np.testing.assert_array_equal(sess.run(a @ a), [[7, 10], [15, 22]])
        np.testing.assert_array_equal(sess.run(np.eye(2, dtype=np.float32) @ a), sess.run(a))
        np.testing.assert_array_equal(sess.run(np.ones((2, 2), np.float32) + a), [[2, 3], [4, 5]])
    assert (a + 1).dtype is tf.float32
    assert (tf.constant(1) + 2).dtype is tf.int32
    assert (a @ a).op.type == "MatMul"


def test_shape_size_rank() -> None:
    x = tf.placeholder(tf.float32, [3, None], name="x")
    assert x.shape == tf.TensorShape([3, None])
    assert x.get_shape().as_list() == [3, None]
    shape, size, rank = tf.shape(x), tf.size(x), tf.rank(x)
    assert (shape.dtype, shape.shape) == (tf.int32, tf.TensorShape([2]))
    assert (size.dtype, size.shape) == (tf.int32, tf.TensorShape([]))
    assert tf.shape(x, out_type=tf.int64).dtype is tf.int64
    with tf.Session() as sess:
        value = np.zeros((3, 5), np.float32)
        got = sess.run([shape, size, rank], {x: value})
        np.testing.assert_array_equal(got[0], [3, 5])
        assert got[1] == 15 and got[2] == 2
    x.set_shape([3, 5])
    assert x.shape == tf.TensorShape([3, 5])
    with pytest.raises(ValueError, match="not compatible"):
        x.set_shape([4, 5])


def test_tensor_protocols() -> None:
    t = tf.constant([1.0, 2.0], name="t")
    assert repr(t) == "<tf.Tensor 't:0' shape=(2,) dtype=float32>"
    with pytest.raises(TypeError, match="Python `bool`"):
        bool(t)
    with pytest.raises(TypeError, match="not iterable"):
        iter(t)
    with pytest.raises(TypeError, match="run it in a Session"):
        np.asarray(t)
    assert t.value_index == 0 and t.op.outputs[0] is t
    assert t.consumers() == []
    u = tf.identity(t)
    assert t.consumers() == [u.op]
    assert t == t and t != u  # tensors compare by identity


# ------------------------------------------------------------------------------ lookups, finalize


def test_lookups_by_name() -> None:
    g = tf.get_default_graph()
    c = tf.constant(1.0, name="c")
    assert g.get_tensor_by_name("c:0") is c
    assert g.get_operation_by_name("c") is c.op
    assert g.as_graph_element("c:0") is c and g.as_graph_element("c") is c.op
    with pytest.raises(ValueError, match="looks like an Operation name"):
        g.get_tensor_by_name("c")
    with pytest.raises(KeyError, match="does not exist"):
        g.get_tensor_by_name("c:3")
    with pytest.raises(KeyError, match="'nope' refers to an Operation not in the graph"):
        g.get_operation_by_name("nope")


def test_finalize_blocks_new_ops() -> None:
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0)
    g.finalize()
    assert g.finalized
    with g.as_default():
        with pytest.raises(RuntimeError, match="finalized"):
            tf.constant(2.0)
    assert len(g.get_operations()) == 1


def test_graph_def_is_cached_until_the_graph_changes() -> None:
    g = tf.get_default_graph()
    a = tf.constant(1.0, name="a")
    gd1 = g.as_graph_def()
    assert g.as_graph_def() is gd1
    assert [n.name for n in gd1.nodes] == ["a"]
    tf.identity(a, name="b")
    gd2 = g.as_graph_def()
    assert gd2 is not gd1 and [n.name for n in gd2.nodes] == ["a", "b"]
    assert gd2.nodes[1].inputs == ("a",) and gd2.version > gd1.version


def test_tensors_from_another_graph_are_rejected() -> None:
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0, name="foreign")
    local = tf.constant(2.0)
    with pytest.raises(ValueError, match="must be from the same graph"):
        tf.add(foreign, local)
    with pytest.raises(ValueError, match="different graph"):
        with tf.control_dependencies([foreign]):
            pass
    with pytest.raises(ValueError, match="different graphs"):
        local.op._add_control_input(foreign.op)
    with pytest.raises(ValueError, match="not an element of this graph"):
        tf.get_default_graph().as_graph_element(foreign)
    # a python operand joins the tensor's own graph, as in TensorFlow
    shifted = foreign + 1.0
    assert shifted.graph is other
    assert tf.identity(foreign).graph is other
