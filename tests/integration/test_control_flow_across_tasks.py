"""Control flow across tasks over real gRPC: a ps and a worker (``train.Server``s of this process on
127.0.0.1) run loops and conditionals whose nodes lie on both, and every result equals the
one-process run's.

* a ``while_loop`` whose body computes on the ps (with a ps variable) and on the worker;
* its gradient (the backward loop spans the tasks too, with its stacks on the task that leads it);
* ``cond`` whose branches lie on other tasks than the predicate, both outcomes;
* a ``while_loop`` with a ``cond`` inside, and a nested ``while_loop``, across tasks;
* RNN training (``dynamic_rnn`` with ``BasicRNNCell`` / ``GRUCell``) whose weights live on the ps.
* ``map_fn`` and ``scan`` whose functions run on the ps, ``maximum_iterations``;
* a loop over three tasks (two ps) with a cond inside, four iterations in flight;
* an error inside a loop on the ps: the step fails naming the node, and the session runs on.

The graphs are also planned here (``build_plan`` over the same two devices) to check that the loop
frames really span the tasks: the ps partition holds a control loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client.train.device_setter import replica_device_setter
from tensorgrid.client.train.server import ClusterSpec, Server, free_port
from tensorgrid.compiler.plan import build_plan

PS = "/job:ps/task:0"
WORKER = "/job:worker/task:0"
PS_CPU = "/job:ps/replica:0/task:0/device:CPU:0"
WORKER_CPU = "/job:worker/replica:0/task:0/device:CPU:0"
TIMEOUT_MS = 20_000


class Cluster:
    """One ps and one worker, Servers of this process on 127.0.0.1."""

    def __init__(self) -> None:
        self.spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"],
                                 "worker": [f"127.0.0.1:{free_port()}"]})
        self.servers: list[Server] = []
        try:
            self.servers.append(Server(self.spec, "ps", 0))
            self.servers.append(Server(self.spec, "worker", 0))
        except BaseException:
            self.stop()
            raise

    @property
    def target(self) -> str:
        return self.servers[1].target

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.stop()


Builder = Callable[[Callable[[str], Any]], tuple[list[Any], dict[Any, Any]]]


def _run(build: Builder, target: str | None, feeds_list: Sequence[dict[str, Any]] = ({},),
         ) -> tuple[list[Any], tf.Graph, list[Any]]:
    """Build the graph (devices only when ``target`` is set), initialize, run every feed."""
    g = tf.Graph()
    with g.as_default():
        def dev(d: str) -> Any:
            return d if target is not None else None

        fetches, names = build(dev)
        init = tf.global_variables_initializer()
    config = tf.ConfigProto(operation_timeout_in_ms=TIMEOUT_MS)
    out = []
    with tf.Session(target, graph=g, config=config) as sess:
        sess.run(init)
        for feeds in feeds_list:
            out.append(sess.run(fetches, {names[k]: v for k, v in feeds.items()}))
    return out, g, fetches


def _ps_has_control_loop(g: tf.Graph, fetches: Sequence[Any]) -> bool:
    nodes = g.as_graph_def().nodes
    names = [f.name for f in fetches]
    plan = build_plan(nodes, None, [], [n for n in names if ":" in n],
                      [n for n in names if ":" not in n], [WORKER_CPU, PS_CPU], WORKER_CPU)
    ps_nodes = plan.partitions["/job:ps/replica:0/task:0"]
    return any(n.name.startswith("_cloop/") for n in ps_nodes)


def _assert_same(local: Any, remote: Any, atol: float = 0.0) -> None:
    assert len(local) == len(remote)
    for a, b in zip(local, remote):
        if isinstance(a, list | tuple):
            _assert_same(a, b, atol)
        else:
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=0, atol=atol)


def _loop_on_two_tasks(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
    """x <- tanh(x @ w) * 1.5 + sin(x), four times: the matmul on the ps, the rest on the worker."""
    with tf.device(dev(PS)):
        w = tf.get_variable("w_loop", initializer=np.array([[0.5, -0.2], [0.3, 0.8]],
                                                           np.float32))
    with tf.device(dev(WORKER)):
        x0 = tf.placeholder(tf.float32, [1, 2], name="x0")

        def body(i: Any, x: Any) -> tuple[Any, Any]:
            with tf.device(dev(PS)):
                h = tf.tanh(tf.matmul(x, w))
            return i + 1, h * 1.5 + tf.sin(x)

        n, out = tf.while_loop(lambda i, x: i < 4, body, [tf.constant(0), x0])
        loss = tf.reduce_sum(out * out)
        grads = tf.gradients(loss, [w, x0])
    return [n, out, loss, *grads], {"x0": x0}


def test_a_while_loop_whose_body_spans_ps_and_worker_matches_one_process(
        cluster: Cluster) -> None:
    feeds = [{"x0": np.array([[1.0, 2.0]], np.float32)},
             {"x0": np.array([[-0.5, 0.25]], np.float32)}]
    local, _, _ = _run(_loop_on_two_tasks, None, feeds)
    remote, g, fetches = _run(_loop_on_two_tasks, cluster.target, feeds)
    _assert_same(local, remote)
    assert int(remote[0][0]) == 4
    assert _ps_has_control_loop(g, fetches)


def _loop_led_by_the_ps(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
    """The loop (its predicate, variables and gradient stacks) on the ps; the body's matmul on the
    worker; 20 iterations."""
    with tf.device(dev(PS)):
        w = tf.get_variable("w_lead", initializer=np.array([[0.9, -0.1], [0.2, 0.7]],
                                                           np.float32), use_resource=True)
        x0 = tf.placeholder(tf.float32, [1, 2], name="x0")

        def body(i: Any, x: Any) -> tuple[Any, Any]:
            with tf.device(dev(WORKER)):
                h = tf.tanh(tf.matmul(x, w))
            return i + 1, h + 0.1 * x

        _, out = tf.while_loop(lambda i, x: i < 20, body, [tf.constant(0), x0])
        loss = tf.reduce_sum(out * out)
        grads = tf.gradients(loss, [w, x0])
    return [out, loss, *grads], {"x0": x0}


def test_the_gradient_of_a_loop_led_by_the_ps_matches_one_process(cluster: Cluster) -> None:
    feeds = [{"x0": np.array([[1.0, -2.0]], np.float32)}]
    local, _, _ = _run(_loop_led_by_the_ps, None, feeds)
    remote, g, fetches = _run(_loop_led_by_the_ps, cluster.target, feeds)
    _assert_same(local, remote)
    assert _ps_has_control_loop(g, fetches)
    stacks = [op for op in g.get_operations() if op.type == "StackPushV2"]
    assert stacks  # the backward loop keeps forward values on stacks


def _cond_across_tasks(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
    """The predicate on the worker; one branch on the ps, the other on the worker; a second cond
    whose false branch is on the ps; a third whose data lives on the ps (its Switch moves there)."""
    with tf.device(dev(PS)):
        w = tf.get_variable("w_cond", initializer=np.float32(3.0))
        v = tf.get_variable("v_cond", initializer=np.float32(-4.0))
    with tf.device(dev(WORKER)):
        p = tf.placeholder(tf.bool, [], name="p")
        x = tf.placeholder(tf.float32, [], name="x")

        def on_ps(fn: Callable[[], Any]) -> Callable[[], Any]:
            def branch() -> Any:
                with tf.device(dev(PS)):
                    return fn()
            return branch

        a = tf.cond(p, on_ps(lambda: x * w), lambda: x - 1.0)
        b = tf.cond(p, lambda: x * 2.0, on_ps(lambda: x + w))
        c = tf.cond(p, lambda: v * 2.0, lambda: v + x)
        total = a + b + c
    return [a, b, c, total], {"p": p, "x": x}


def test_a_cond_whose_branches_span_tasks_takes_both_outcomes(cluster: Cluster) -> None:
    feeds = [{"p": True, "x": 2.0}, {"p": False, "x": 2.0}, {"p": False, "x": -1.5},
             {"p": True, "x": 0.5}]
    local, _, _ = _run(_cond_across_tasks, None, feeds)
    remote, _, _ = _run(_cond_across_tasks, cluster.target, feeds)
    _assert_same(local, remote)
    assert [float(r[0]) for r in remote] == [6.0, 1.0, -2.5, 1.5]
    assert [float(r[1]) for r in remote] == [4.0, 5.0, 1.5, 1.0]


def _cond_in_loop_and_nested_loops(dev: Callable[[str], Any]
                                   ) -> tuple[list[Any], dict[Any, Any]]:
    """A loop whose body takes a cond with a branch on the ps; an outer loop on the worker with an
    inner loop whose body is on the ps."""
    with tf.device(dev(PS)):
        w = tf.get_variable("w_nested", initializer=np.float32(0.5))
    with tf.device(dev(WORKER)):
        n = tf.placeholder(tf.int32, [], name="n")

        def body(i: Any, acc: Any) -> tuple[Any, Any]:
            def odd() -> Any:
                with tf.device(dev(PS)):
                    return acc * w + tf.cast(i, tf.float32)
            return i + 1, tf.cond(tf.equal(i % 2, 1), odd, lambda: acc + 1.0)

        _, acc = tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), tf.constant(1.0)])

        def outer(i: Any, total: Any) -> tuple[Any, Any]:
            def inner(j: Any, t: Any) -> tuple[Any, Any]:
                with tf.device(dev(PS)):
                    t2 = t + w * tf.cast(i * 10 + j, tf.float32)
                return j + 1, t2

            _, t = tf.while_loop(lambda j, t: j < i + 1, inner, [tf.constant(0), total])
            return i + 1, t

        _, nested = tf.while_loop(lambda i, t: i < n, outer, [tf.constant(0), tf.constant(0.0)])
    return [acc, nested], {"n": n}


def test_a_cond_inside_a_loop_and_nested_loops_across_tasks(cluster: Cluster) -> None:
    feeds = [{"n": 0}, {"n": 1}, {"n": 5}, {"n": 8}]
    local, _, _ = _run(_cond_in_loop_and_nested_loops, None, feeds)
    remote, g, fetches = _run(_cond_in_loop_and_nested_loops, cluster.target, feeds)
    _assert_same(local, remote)
    assert float(remote[0][0]) == 1.0  # no iteration
    assert float(remote[0][1]) == 0.0
    assert _ps_has_control_loop(g, fetches)


def _rnn_training(cell_type: str, use_resource: bool
                  ) -> Callable[[Callable[[str], Any]], tuple[list[Any], dict[Any, Any]]]:
    def build(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
        rng = np.random.RandomState(7)
        xs = rng.randn(4, 6, 3).astype(np.float32)
        ys = rng.randn(4, 5).astype(np.float32)
        setter = (replica_device_setter(ps_tasks=1, worker_device=WORKER)
                  if dev(PS) is not None else None)
        with tf.device(setter):
            x = tf.constant(xs)
            with tf.variable_scope(f"rnn_{cell_type}_{use_resource}", initializer=tf.random_uniform_initializer(-0.5, 0.5,
                                                                                   seed=3),
                                   use_resource=use_resource):
                cell = (tf.nn.rnn_cell.GRUCell(5) if cell_type == "gru"
                        else tf.nn.rnn_cell.BasicRNNCell(5))
                _, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
            loss = tf.reduce_mean(tf.square(state - ys))
            train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
        return [loss, train_op], {}
    return build


@pytest.mark.parametrize("cell_type,use_resource", [("basic", True), ("gru", True),
                                                    ("basic", False)])
def test_an_rnn_whose_weights_live_on_the_ps_trains_as_in_one_process(
        cluster: Cluster, cell_type: str, use_resource: bool) -> None:
    build = _rnn_training(cell_type, use_resource)
    steps = [{}] * 6
    local, _, _ = _run(build, None, steps)
    remote, g, fetches = _run(build, cluster.target, steps)
    weights = list(g.get_collection("variables"))
    assert weights and all(v.op.device == PS for v in weights)
    local_losses = [float(r[0]) for r in local]
    remote_losses = [float(r[0]) for r in remote]
    assert remote_losses[-1] < remote_losses[0] * 0.9  # the loss falls
    np.testing.assert_allclose(remote_losses, local_losses, rtol=0, atol=1e-5)
    if use_resource:  # the weights are read inside the loop, on the ps: the frame spans tasks
        assert _ps_has_control_loop(g, fetches)


def test_an_error_inside_a_loop_on_the_ps_fails_the_step_naming_the_node(
        cluster: Cluster) -> None:
    g = tf.Graph()
    with g.as_default():
        with tf.device(WORKER):
            x0 = tf.placeholder(tf.float32, [], name="x0")

            def body(i: Any, x: Any) -> tuple[Any, Any]:
                with tf.device(PS):
                    y = tf.check_numerics(tf.log(x), "log of the loop value")
                return i + 1, y - 1.0

            out = tf.while_loop(lambda i, x: i < 3, body, [tf.constant(0), x0])
    config = tf.ConfigProto(operation_timeout_in_ms=TIMEOUT_MS)
    with tf.Session(cluster.target, graph=g, config=config) as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match="log of the loop value") as exc:
            sess.run(out, {x0: 2.0})  # log(2) - 1 < 0: NaN in the second iteration
        assert "/job:ps/" in str(exc.value) and "CheckNumerics" in str(exc.value)
        n, x = sess.run(out, {x0: 1e6})  # the session still runs the loop
    assert int(n) == 3
    np.testing.assert_allclose(float(x), np.log(np.log(np.log(1e6) - 1) - 1) - 1, rtol=1e-5)


def test_a_loop_over_three_tasks_with_a_cond_inside_and_its_gradient() -> None:
    """Two ps tasks and a worker: x * a on ps 0, a cond on ps 1, the loop on the worker; four
    iterations in flight at once."""
    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"],
                        "worker": [f"127.0.0.1:{free_port()}"]})
    servers: list[Server] = []

    def build(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
        with tf.device(dev("/job:ps/task:0")):
            a = tf.get_variable("a3", initializer=np.float32(0.9), use_resource=True)
        with tf.device(dev("/job:ps/task:1")):
            b = tf.get_variable("b3", initializer=np.float32(0.3))
        with tf.device(dev(WORKER)):
            def body(i: Any, x: Any) -> tuple[Any, Any]:
                with tf.device(dev("/job:ps/task:0")):
                    y = x * a
                with tf.device(dev("/job:ps/task:1")):
                    z = tf.cond(i % 3 > 0, lambda: y + b, lambda: y - b)
                return i + 1, z

            _, out = tf.while_loop(lambda i, x: i < 50, body, [tf.constant(0), tf.constant(1.0)],
                                   parallel_iterations=4)
        return [out, *tf.gradients(out, [a, b])], {}

    try:
        servers += [Server(spec, "ps", 0), Server(spec, "ps", 1), Server(spec, "worker", 0)]
        local, _, _ = _run(build, None)
        remote, _, _ = _run(build, servers[2].target)
    finally:
        for server in reversed(servers):
            server.stop()
    _assert_same(local, remote)


def _map_fn_and_scan_on_the_ps(dev: Callable[[str], Any]) -> tuple[list[Any], dict[Any, Any]]:
    """map_fn and scan whose functions run on the ps (the TensorArrays stay on the worker), a
    loop bounded by maximum_iterations, and the gradients through them."""
    with tf.device(dev(PS)):
        w = tf.get_variable("w_map", initializer=np.float32(2.0), use_resource=True)
    with tf.device(dev(WORKER)):
        xs = tf.placeholder(tf.float32, [5, 3], name="xs")

        def f(row: Any) -> Any:
            with tf.device(dev(PS)):
                return tf.reduce_sum(row * w)

        def step(acc: Any, row: Any) -> Any:
            with tf.device(dev(PS)):
                return acc * 0.5 + row * w

        mapped = tf.map_fn(f, xs)
        scanned = tf.scan(step, xs, initializer=tf.zeros([3]))
        bounded = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [tf.constant(0)],
                                maximum_iterations=7)
        grads = tf.gradients(tf.reduce_sum(mapped) + tf.reduce_sum(scanned), [w, xs])
    return [mapped, scanned, bounded, *grads], {"xs": xs}


def test_map_fn_and_scan_whose_functions_run_on_the_ps(cluster: Cluster) -> None:
    feeds = [{"xs": np.arange(15, dtype=np.float32).reshape(5, 3)}]
    local, _, _ = _run(_map_fn_and_scan_on_the_ps, None, feeds)
    remote, g, fetches = _run(_map_fn_and_scan_on_the_ps, cluster.target, feeds)
    _assert_same(local, remote)
    assert int(remote[0][2]) == 7
    assert _ps_has_control_loop(g, fetches)
