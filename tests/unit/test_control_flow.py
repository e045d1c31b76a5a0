"""tf.cond, tf.case and tf.while_loop: the graphs they build, what the executor makes of frames,
iterations and dead tensors, the passes around them, and gradients through cond."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.compiler import passes
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import dtypes, errors
from tensorgrid.core.ir import NodeDef
from tensorgrid.runtime import frames, loops
from tensorgrid.runtime.executor import Executable, LocalDevice


@pytest.fixture(autouse=True, params=["compiled", "general"])
def _graph(request: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every test runs twice: with simple loops compiled to python loops, and with every loop
    under the general frames runner."""
    if request.param == "general":
        monkeypatch.setattr(frames, "compile_loops", lambda nodes, *args: list(nodes))
    g = tf.Graph()
    with g.as_default():
        yield g


def _run(fetches: Any, feed: dict | None = None) -> Any:
    with tf.Session() as s:
        return s.run(fetches, feed)


def test_cond_runs_only_the_taken_branch() -> None:
    x = tf.placeholder(tf.float32, [])
    v = tf.Variable(0.0)
    # each branch updates the variable (through a RefSwitch): only the taken one may run
    y = tf.cond(x > 0.0, lambda: tf.assign_add(v, 1.0), lambda: tf.assign_add(v, 10.0))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(y, {x: 3.0}) == 1.0
        assert s.run(y, {x: -3.0}) == 11.0
        assert s.run(v) == 11.0
    ops = {op.type for op in tf.get_default_graph().get_operations()}
    assert "RefSwitch" in ops


def test_cond_structures_python_values_and_nesting() -> None:
    x = tf.placeholder(tf.float32, [])
    a, b = tf.cond(x < 1.0, lambda: (x + 1.0, 5.0), lambda: (x * 3.0, 7.0))
    nested = tf.cond(x > 0.0, lambda: tf.cond(x > 5.0, lambda: x * 10.0, lambda: x + 100.0),
                     lambda: -x)
    outside = tf.cond(x > 0.0, lambda: x, lambda: tf.constant(-1.0))
    assert _run([a, b, nested, outside], {x: 0.5}) == [1.5, 5.0, 100.5, 0.5]
    assert _run([a, b, nested, outside], {x: 7.0}) == [21.0, 7.0, 70.0, 7.0]
    assert _run([a, b, nested, outside], {x: -2.0}) == [-1.0, 5.0, 2.0, -1.0]


def test_cond_rejects_mismatched_branches() -> None:
    x = tf.placeholder(tf.float32, [])
    with pytest.raises(ValueError, match="same structure"):
        tf.cond(x > 0.0, lambda: (x, x), lambda: x)
    with pytest.raises(ValueError, match="int32"):
        tf.cond(x > 0.0, lambda: x, lambda: tf.constant(1))
    with pytest.raises(TypeError):
        tf.cond(x > 0.0, None, lambda: x)


def test_case_picks_the_first_true_predicate() -> None:
    x = tf.placeholder(tf.float32, [])
    y = tf.case([(x < 0.0, lambda: x * -1.0), (x < 10.0, lambda: x + 0.5)],
                default=lambda: tf.constant(99.0))
    assert [_run(y, {x: v}) for v in (-3.0, 2.0, 50.0)] == [3.0, 2.5, 99.0]


def test_case_exclusive_fails_when_two_predicates_hold() -> None:
    x = tf.placeholder(tf.float32, [])
    y = tf.case([(x < 0.0, lambda: x * -1.0), (x < 10.0, lambda: x + 0.5)],
                default=lambda: tf.constant(99.0), exclusive=True)
    assert [_run(y, {x: v}) for v in (2.0, 50.0)] == [2.5, 99.0]
    with pytest.raises(errors.InvalidArgumentError, match=r"exclusive=True: more than 1") as e:
        _run(y, {x: -3.0})
    assert "exclusive_check" in str(e.value)
    # without a default the last pair is the fallback, and is checked as well
    z = tf.case([(x < 0.0, lambda: x * -1.0), (x < 10.0, lambda: x + 0.5)], exclusive=True)
    assert _run(z, {x: 50.0}) == 50.5
    with pytest.raises(errors.InvalidArgumentError, match="exclusive"):
        _run(z, {x: -1.0})


def test_while_loop_and_its_graph() -> None:
    n = tf.placeholder(tf.int32, [])
    i, acc = tf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + i * 2),
                           [tf.constant(0), tf.constant(0)])
    assert _run([i, acc], {n: 10}) == [10, 90]
    assert _run([i, acc], {n: 0}) == [0, 0]
    ops = {op.type for op in tf.get_default_graph().get_operations()}
    assert {"Enter", "Merge", "LoopCond", "Switch", "NextIteration", "Exit"} <= ops
    enters = [op for op in tf.get_default_graph().get_operations() if op.type == "Enter"]
    # the loop variables enter as variables, the captured limit as a loop invariant
    assert sorted(op.get_attr("is_constant") for op in enters) == [False, False, True]
    assert {op.get_attr("parallel_iterations") for op in enters} == {10}


def test_nested_while_and_cond_inside_loops() -> None:
    x = tf.placeholder(tf.float32, [])

    def outer(i: Any, t: Any) -> Any:
        _, s = tf.while_loop(lambda j, s: j < 4,
                             lambda j, s: (j + 1, s + tf.cast(i * j, tf.float32) + x),
                             [tf.constant(0), tf.constant(0.0)])
        return i + 1, t + s

    _, total = tf.while_loop(lambda i, t: i < 3, outer, [tf.constant(0), tf.constant(0.0)])
    _, v = tf.while_loop(lambda i, v: i < 5,
                         lambda i, v: (i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v * x,
                                                      lambda: v + 1.0)),
                         [tf.constant(0), tf.constant(1.0)])
    # inner sum over j of (i*j + x) is 6i + 4x; the outer adds it for i = 0, 1, 2
    assert _run([total, v], {x: 1.5}) == [18.0 + 12 * 1.5, ((1.5 + 1) * 1.5 + 1) * 1.5]


def test_loop_in_an_untaken_branch_is_dead_and_the_cond_still_merges() -> None:
    x = tf.placeholder(tf.float32, [])

    def loop() -> Any:
        return tf.while_loop(lambda k, v: k < 3, lambda k, v: (k + 1, v * 2.0),
                             [tf.constant(0), x])[1]

    y = tf.cond(x > 0.0, loop, lambda: x - 7.0)
    assert _run(y, {x: 1.5}) == 12.0
    assert _run(y, {x: -1.0}) == -8.0


@pytest.mark.parametrize("parallel", [1, 2, 10, 32])
def test_parallel_iterations_bound_gives_the_same_result(parallel: int) -> None:
    r = tf.while_loop(lambda i, s: i < 100, lambda i, s: (i + 1, s + tf.cast(i, tf.float64)),
                      [tf.constant(0), tf.constant(0.0, tf.float64)],
                      parallel_iterations=parallel)
    assert _run(r) == [100, 4950.0]


def test_maximum_iterations_and_shape_invariants() -> None:
    x = tf.placeholder(tf.float32, [])
    v = tf.while_loop(lambda v: v < 1e9, lambda v: v * 2.0 + 1.0, x, maximum_iterations=6)
    grown = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v * 2.0], 0)),
                          [tf.constant(0), tf.reshape(x, [1])],
                          shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])[1]
    assert grown.shape.as_list() == [None]
    out = _run([v, grown], {x: 1.0})
    assert out[0] == 127.0
    np.testing.assert_array_equal(out[1], [1, 2, 2, 4, 2, 4, 4, 8])
    with pytest.raises(ValueError, match="shape_invariants"):
        tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v], 0)),
                      [tf.constant(0), tf.reshape(x, [1])])


def test_fetching_a_dead_tensor_names_it() -> None:
    x = tf.placeholder(tf.float32, [])
    from tensorgrid.framework.control_flow_ops import switch

    f, t = switch(x, x > 0.0)
    with tf.Session() as s:
        assert s.run(t, {x: 1.0}) == 1.0
        with pytest.raises(errors.InvalidArgumentError, match="dead tensor"):
            s.run(t, {x: -1.0})


def _const(name: str, v: Any, dt: Any, inputs: tuple[str, ...] = ()) -> NodeDef:
    return NodeDef(name, "Const", inputs, "", {"value": np.array(v, dtype=dt.np), "dtype": dt})


def test_executor_rejects_inputs_from_two_frames() -> None:
    i32 = dtypes.int32
    nodes = [
        _const("a", 1, i32), _const("b", 2, i32),
        NodeDef("enter", "Enter", ("a",), "", {"T": i32, "frame_name": "loop"}),
        NodeDef("add", "AddV2", ("enter", "b"), "", {"T": i32}),
    ]
    with pytest.raises(errors.InvalidArgumentError, match="different frames"):
        Executable(nodes, {"/cpu:0": LocalDevice("/cpu:0")}, "/cpu:0", infer_graph(nodes))


def test_passes_keep_frames_and_branches() -> None:
    i32 = dtypes.int32
    nodes = [
        _const("a", 1, i32), _const("p", True, dtypes.bool_),
        NodeDef("e1", "Enter", ("a",), "", {"T": i32, "frame_name": "f1", "is_constant": True}),
        NodeDef("e2", "Enter", ("a",), "", {"T": i32, "frame_name": "f1", "is_constant": True}),
        NodeDef("sw", "Switch", ("a", "p"), "", {"T": i32}),
        NodeDef("pivot", "Identity", ("sw:1",), "", {"T": i32}),
        _const("c1", 2, i32, ("^pivot",)), _const("c2", 3, i32, ("^pivot",)),
        NodeDef("sum", "AddV2", ("c1", "c2"), "", {"T": i32}),
    ]
    specs = infer_graph(nodes)
    out = passes.optimize(nodes, specs, frozenset())
    by_name = {n.name: n for n in out}
    # control-flow nodes are never merged or folded
    assert {"e1", "e2", "sw"} <= set(by_name) and by_name["sw"].op == "Switch"
    # a constant folded from a branch's constants stays in the branch
    assert by_name["sum"].op == "Const" and "^pivot" in by_name["sum"].inputs


def _numeric_grad(f: Any, x0: float, eps: float = 1e-6) -> float:
    return (f(x0 + eps) - f(x0 - eps)) / (2 * eps)


@pytest.mark.parametrize("x0", [2.5, 0.5, -1.0])
def test_cond_gradients_match_finite_differences(x0: float) -> None:
    x = tf.placeholder(tf.float64, [])
    w = tf.placeholder(tf.float64, [])
    y = tf.cond(x > 1.0, lambda: tf.square(x) * 3.0 * w, lambda: tf.sin(x) + w)
    z = tf.cond(x > 0.0, lambda: tf.cond(x > 2.0, lambda: x * x * x, lambda: x * w),
                lambda: w - x)
    grads = tf.gradients(y, [x, w]) + tf.gradients(z, [x, w])
    with tf.Session() as s:
        got = s.run(grads, {x: x0, w: 1.5})
        for k, (out, var) in enumerate([(y, x), (y, w), (z, x), (z, w)]):
            if var is x:
                num = _numeric_grad(lambda v: s.run(out, {x: v, w: 1.5}), x0)
            else:
                num = _numeric_grad(lambda v: s.run(out, {x: x0, w: v}), 1.5)
            assert got[k] == pytest.approx(num, rel=1e-5, abs=1e-7), k


def _check_grads(out: Any, params: list[Any], values: list[Any]) -> None:
    """Gradients of sum(out) against central finite differences, one parameter entry at a
    time."""
    grads = tf.gradients(out, params)
    feed = dict(zip(params, values))
    with tf.Session() as s:
        got = s.run(grads, feed)
        for p, v, gv in zip(params, values, got):
            v = np.asarray(v, dtype=np.float64)
            num = np.zeros_like(v)
            for idx in np.ndindex(v.shape):
                for sign in (1, -1):
                    shifted = v.copy()
                    shifted[idx] += sign * 1e-6
                    num[idx] += sign * np.sum(s.run(out, {**feed, p: shifted})) / 2e-6
            np.testing.assert_allclose(gv, num, rtol=1e-5, atol=1e-6, err_msg=p.name)


def test_while_loop_gradients_match_finite_differences() -> None:
    x = tf.placeholder(tf.float64, [])
    w = tf.placeholder(tf.float64, [])
    _, v = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x + w), [tf.constant(0), x])
    _check_grads(v, [x, w], [1.5, 0.5])


def test_rnn_like_loop_gradients_with_maximum_iterations_and_a_cond() -> None:
    w = tf.placeholder(tf.float64, [3, 3])
    h0 = tf.placeholder(tf.float64, [2, 3])

    def step(h: Any) -> Any:
        z = tf.tanh(tf.matmul(h, w))
        return tf.cond(tf.reduce_sum(z) > 100.0, lambda: z * 0.0, lambda: z + h * 0.5)

    h = tf.while_loop(lambda h: tf.reduce_sum(h) < 1e6, step, h0, maximum_iterations=4)
    rng = np.random.default_rng(0)
    _check_grads(tf.reduce_sum(h * h), [w, h0],
                 [rng.normal(size=(3, 3)) * 0.5, rng.normal(size=(2, 3))])


def test_nested_while_loop_gradients() -> None:
    x = tf.placeholder(tf.float64, [])

    def outer(i: Any, t: Any) -> Any:
        _, s = tf.while_loop(lambda j, s: j < 3, lambda j, s: (j + 1, s * x + t),
                             [tf.constant(0), t])
        return i + 1, s * 0.5

    _, total = tf.while_loop(lambda i, t: i < 2, outer, [tf.constant(0), x])
    _check_grads(total, [x], [0.7])


def test_gradient_through_a_loop_without_back_prop_fails_clearly() -> None:
    x = tf.placeholder(tf.float32, [])
    v = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [tf.constant(0), x],
                      back_prop=False)[1]
    with pytest.raises(LookupError, match="back_prop"):
        tf.gradients(v, x)


def test_simple_loops_are_compiled_and_conds_in_loops_are_not() -> None:
    i32 = dtypes.int32
    nodes = [
        _const("i0", 0, i32), _const("n", 10, i32),
        NodeDef("ei", "Enter", ("i0",), "", {"T": i32, "frame_name": "w"}),
        NodeDef("en", "Enter", ("n",), "", {"T": i32, "frame_name": "w", "is_constant": True}),
        NodeDef("m", "Merge", ("ei", "nx"), "", {"T": i32, "N": 2}),
        NodeDef("less", "Less", ("m", "en"), "", {"T": i32}),
        NodeDef("lc", "LoopCond", ("less",), "", {}),
        NodeDef("sw", "Switch", ("m", "lc"), "", {"T": i32}),
        NodeDef("id", "Identity", ("sw:1",), "", {"T": i32}),
        _const("one", 1, i32, ("^id",)),
        NodeDef("add", "AddV2", ("id", "one"), "", {"T": i32}),
        NodeDef("nx", "NextIteration", ("add",), "", {"T": i32}),
        NodeDef("exit", "Exit", ("sw",), "", {"T": i32}),
        NodeDef("_retval/0", "_Retval", ("exit",), "", {"T": i32, "index": 0}),
    ]
    exe = Executable(nodes, {"/cpu:0": LocalDevice("/cpu:0")}, "/cpu:0", infer_graph(nodes))
    assert exe.run_sync(exe.new_step()) == [10]
    assert exe._frames is not None
    expected = 0 if frames.compile_loops is not loops.compile_loops else 1
    assert exe._frames.compiled_loops == expected


def test_a_failing_node_inside_a_compiled_loop_is_named() -> None:
    x = tf.placeholder(tf.float32, [None])
    r = tf.while_loop(lambda i, v: i < 3,
                      lambda i, v: (i + 1, tf.reshape(v, [2])), [tf.constant(0), x])
    with tf.Session() as s, pytest.raises(errors.InvalidArgumentError) as info:
        s.run(r, {x: np.ones(3, np.float32)})
    assert info.value.op_type == "Reshape"


def test_control_flow_with_kernels_that_wait() -> None:
    # queue ops wait, so the step runs under the asynchronous runner
    q = tf.FIFOQueue(100, tf.float32, shapes=[[]])
    x = tf.placeholder(tf.float32, [])
    fill = q.enqueue_many([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])
    taken = tf.cond(x > 0.0, lambda: q.dequeue() * 10.0, lambda: x)
    # a loop whose body dequeues: a kernel that waits inside a frame
    _, total = tf.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t + q.dequeue()),
                             [tf.constant(0), tf.constant(0.0)])
    with tf.Session() as s:
        s.run(fill)
        assert s.run(taken, {x: 1.0}) == 10.0
        assert s.run(taken, {x: -1.0}) == -1.0  # nothing dequeued on the untaken side
        assert s.run(total) == 2.0 + 3.0
        assert s.run(q.size()) == 3


def test_gradient_of_a_loop_inside_a_cond() -> None:
    x = tf.placeholder(tf.float64, [])

    def loop() -> Any:
        return tf.while_loop(lambda k, v: k < 3, lambda k, v: (k + 1, v * x), [tf.constant(0),
                                                                               x])[1]

    y = tf.cond(x > 0.0, loop, lambda: x * 7.0)
    _check_grads(y, [x], [1.3])
    _check_grads(y, [x], [-0.4])


def test_a_cond_inside_a_loop_runs_only_its_taken_branch() -> None:
    x = tf.placeholder(tf.float32, [None])

    def body(i: Any, v: Any) -> Any:
        # the untaken branch would fail (a reshape of 3 values to 2): it must not run
        v2 = tf.cond(tf.reduce_sum(v) > -1e9, lambda: v * 2.0,
                     lambda: tf.reshape(tf.reshape(v, [2]), [-1]))
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: v2 + 1.0, lambda: v2)

    _, v = tf.while_loop(lambda i, v: i < 4, body, [tf.constant(0), x])
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(v, {x: [1.0, 2.0, 3.0]}),
                                   (((np.array([1, 2, 3]) * 2 + 1) * 2) * 2 + 1) * 2)
    nodes = tf.get_default_graph().as_graph_def().nodes
    specs = infer_graph(nodes)
    from tensorgrid.compiler.plan import build_plan

    plan = build_plan(nodes, specs, [x.name], [v.name], [], ["/job:localhost/replica:0/task:0"
                                                             "/device:CPU:0"],
                      "/job:localhost/replica:0/task:0/device:CPU:0")
    (part,) = plan.partitions.values()
    exe = Executable(part, {"/job:localhost/replica:0/task:0/device:CPU:0": LocalDevice(
        "/job:localhost/replica:0/task:0/device:CPU:0")},
        "/job:localhost/replica:0/task:0/device:CPU:0", plan.specs)
    assert exe._frames is not None
    compiled = frames.compile_loops is loops.compile_loops
    assert exe._frames.compiled_loops == (1 if compiled else 0)


def test_while_loop_inside_control_dependencies_waits_for_them() -> None:
    v = tf.Variable(1.0)
    inc = tf.assign_add(v, 1.0)
    with tf.control_dependencies([inc]):
        # each iteration reads the variable through a (no-op) update, after inc has run
        _, total = tf.while_loop(lambda i, a: i < 3,
                                 lambda i, a: (i + 1, a + tf.assign_add(v, 0.0)),
                                 [tf.constant(0), tf.constant(0.0)])
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(total) == 6.0
        assert s.run(v) == 2.0  # inc ran once, before the loop
