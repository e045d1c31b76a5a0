"""A task's per-step tensor budget inside control flow: a loop that makes a tensor per iteration
is counted (its past iterations released, what it keeps for later counted while kept), fails with
ResourceExhaustedError naming the node over the budget, and the next step runs; under the
general frames runner and as a compiled python loop."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.compiler.plan import build_plan
from tensorgrid.core import errors
from tensorgrid.runtime import frames, loops
from tensorgrid.runtime.executor import Executable, LocalDevice

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
MiB = 1024 * 1024
ROW = MiB // 4  # float32 elements in 1 MiB


@pytest.fixture(autouse=True, params=["compiled", "general"])
def _graph(request: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[tf.Graph]:
    """Every test runs with simple loops compiled to python loops, and under the general
    runner."""
    if request.param == "general":
        monkeypatch.setattr(frames, "compile_loops", lambda nodes, *args: list(nodes))
    g = tf.Graph()
    with g.as_default():
        yield g


def _exe(feeds: list[Any], fetches: list[Any], budget: int | None) -> Executable:
    nodes = tf.get_default_graph().as_graph_def().nodes
    plan = build_plan(nodes, infer_graph(nodes), [f.name for f in feeds],
                      [f.name for f in fetches], [], [CPU], CPU)
    (part,) = plan.partitions.values()
    exe = Executable(part, {CPU: LocalDevice(CPU)}, CPU, plan.specs, memory_budget=budget)
    assert exe._frames is not None
    assert exe._frames.compiled_loops == (1 if frames.compile_loops is loops.compile_loops
                                          else 0)
    return exe


def _run(exe: Executable, *args: Any) -> list[Any]:
    return exe.run_sync(exe.new_step(args=list(args)))


def _per_iteration_loop() -> tuple[Any, Any]:
    """n iterations, each making a 1 MiB tensor (of known shape) that it reduces to a scalar."""
    n = tf.placeholder(tf.int32, [], name="n")

    def body(i: Any, total: Any) -> Any:
        big = tf.add(tf.zeros([ROW]), tf.cast(i, tf.float32), name="big")
        return i + 1, total + tf.reduce_sum(big)

    _, total = tf.while_loop(lambda i, t: i < n, body, [tf.constant(0), tf.constant(0.0)])
    return n, total


def test_a_loop_under_the_budget_runs_its_past_iterations_released() -> None:
    n, total = _per_iteration_loop()
    exe = _exe([n], [total], 6 * MiB)
    # 20 iterations of 1 MiB each: 20 MiB in all, never more than a few MiB live
    assert _run(exe, np.int32(20))[0] == pytest.approx(ROW * sum(range(20)))


def test_a_loop_over_the_budget_fails_naming_the_node_and_the_next_step_runs() -> None:
    n, total = _per_iteration_loop()
    exe = _exe([n], [total], MiB // 2)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(exe, np.int32(3))
    assert info.value.node_name.endswith("big") and info.value.op_type == "AddV2"
    assert info.value.device == CPU and "step_memory_bytes" in info.value.message
    assert _run(exe, np.int32(0))[0] == 0.0  # no iteration: nothing allocated


def test_a_growing_loop_variable_is_measured() -> None:
    x = tf.placeholder(tf.float32, [None], name="x")
    _, y = tf.while_loop(lambda i, v: i < 30,
                         lambda i, v: (i + 1, tf.concat([v, v], 0, name="grow")),
                         [tf.constant(0), x],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    exe = _exe([x], [y], 8 * MiB)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(exe, np.ones(1024, np.float32))  # doubles every iteration: 4 KiB, 8 KiB, ...
    assert info.value.node_name.endswith("grow") and info.value.op_type == "ConcatV2"


def test_a_tensor_array_written_by_a_loop_counts_while_it_lives() -> None:
    n = tf.placeholder(tf.int32, [], name="n")
    ta = tf.TensorArray(tf.float32, size=n)

    def body(i: Any, ta: Any) -> Any:
        return i + 1, ta.write(i, tf.add(tf.zeros([ROW]), tf.cast(i, tf.float32)))

    _, out = tf.while_loop(lambda i, ta: i < n, body, [tf.constant(0), ta])
    size = out.size()
    exe = _exe([n], [size], 6 * MiB)
    assert _run(exe, np.int32(3))[0] == 3  # 3 MiB kept: fits
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(exe, np.int32(10))  # 10 MiB kept by the array: does not
    assert info.value.op_type == "TensorArrayWriteV3"
    assert "stores" in info.value.message


def test_a_gradient_loop_s_stacks_are_counted() -> None:
    x = tf.placeholder(tf.float32, [ROW], name="x")
    n = tf.placeholder(tf.int32, [], name="n")
    # each iteration's sin input is pushed on a stack for the gradient loop to pop
    _, y = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, tf.sin(v)),
                         [tf.constant(0), x])
    (g,) = tf.gradients(tf.reduce_sum(y), [x])
    ops = {nd.op for nd in tf.get_default_graph().as_graph_def().nodes}
    assert "StackPushV2" in ops and "StackPopV2" in ops
    # the gradient's own graph is not a simple loop: the general runner takes it
    nodes = tf.get_default_graph().as_graph_def().nodes
    plan = build_plan(nodes, infer_graph(nodes), [x.name, n.name], [g.name], [], [CPU], CPU)
    (part,) = plan.partitions.values()
    big, small = (Executable(part, {CPU: LocalDevice(CPU)}, CPU, plan.specs, memory_budget=b)
                  for b in (64 * MiB, 12 * MiB))
    xs = np.full(ROW, 0.5, np.float32)
    want = _run(big, xs, np.int32(20))[0]  # 20 MiB of stacks at most: fits in 64
    assert want.shape == (ROW,)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(small, xs, np.int32(20))
    assert info.value.op_type == "StackPushV2", info.value
    np.testing.assert_allclose(_run(small, xs, np.int32(3))[0], _run(big, xs, np.int32(3))[0])


def test_a_finished_loop_leaves_only_what_it_returned_counted() -> None:
    n, total = _per_iteration_loop()
    exe = _exe([n], [total], 6 * MiB)
    step = exe.new_step(args=[np.int32(20)])
    exe.run_sync(step)
    assert 0 <= step.tensor_bytes < 1024  # 20 MiB made, all released; a scalar returned


def test_nested_loops_are_counted_and_released() -> None:
    n = tf.placeholder(tf.int32, [], name="n")

    def outer(j: Any, acc: Any) -> Any:
        def inner(i: Any, t: Any) -> Any:
            big = tf.add(tf.zeros([ROW]), tf.cast(i + j, tf.float32), name="inner_big")
            return i + 1, t + tf.reduce_sum(big)

        _, t = tf.while_loop(lambda i, t: i < n, inner, [tf.constant(0), tf.constant(0.0)])
        return j + 1, acc + t

    _, total = tf.while_loop(lambda j, a: j < 3, outer, [tf.constant(0), tf.constant(0.0)])
    nodes = tf.get_default_graph().as_graph_def().nodes
    plan = build_plan(nodes, infer_graph(nodes), [n.name], [total.name], [], [CPU], CPU)
    (part,) = plan.partitions.values()
    fits, over = (Executable(part, {CPU: LocalDevice(CPU)}, CPU, plan.specs, memory_budget=b)
                  for b in (10 * MiB, MiB // 2))
    want = ROW * sum(i + j for j in range(3) for i in range(5))
    # 15 MiB made; live at once: a few (compiled), up to the 5 iterations of an inner loop
    # running side by side (the general runner's parallel_iterations)
    assert _run(fits, np.int32(5))[0] == pytest.approx(want)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(over, np.int32(5))
    assert info.value.node_name.endswith("inner_big")
