"""Placement: explicit requests, partial specs, colocation (``_class`` and reference edges), soft
placement, errors that name the node and the device, the cost model, and ``explain()``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.compiler.infer import infer_graph
from tensorgrid.compiler.placement import Placement, place
from tensorgrid.core import dtypes, errors, registry
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import InferContext, TensorSpec

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
W0_GPU = "/job:worker/replica:0/task:0/device:GPU:0"
W1 = "/job:worker/replica:0/task:1/device:CPU:0"
PS = "/job:ps/replica:0/task:0/device:CPU:0"
CLUSTER = [W0, W1, PS]
F32 = dtypes.float32
CPU_ONLY = "TestPlacementCpuOnly"
CPU_AND_GPU = "TestPlacementCpuAndGpu"


def _same(ctx: InferContext) -> Sequence[TensorSpec]:
    return [ctx.input(0)]


if not registry.has_op(CPU_ONLY):
    registry.register_op(CPU_ONLY, _same)
    registry.register_kernel(CPU_ONLY, "CPU")(lambda ctx: (lambda x: x))
    registry.not_differentiable(CPU_ONLY)
if not registry.has_op(CPU_AND_GPU):
    registry.register_op(CPU_AND_GPU, _same)
    registry.register_kernel(CPU_AND_GPU, ("CPU", "GPU"))(lambda ctx: (lambda x: x))
    registry.not_differentiable(CPU_AND_GPU)


def const(name: str, value: Any = 1.0, device: str = "", **attrs: Any) -> NodeDef:
    return NodeDef(name, "Const", (), device,
                   {"value": np.asarray(value, np.float32), "dtype": F32, **attrs})


def op(name: str, op_type: str, *inputs: str, device: str = "", **attrs: Any) -> NodeDef:
    return NodeDef(name, op_type, inputs, device, {"T": F32, **attrs})


def variable(name: str, device: str = "") -> NodeDef:
    return NodeDef(name, "VariableV2", (), device, {"dtype": F32, "shape": tf.TensorShape([])})


def run_place(nodes: Sequence[NodeDef], devices: Sequence[str] = CLUSTER,
              default: str = W0, **kw: Any) -> Placement:
    return place(nodes, infer_graph(nodes), devices, default_device=default, **kw)


def test_explicit_full_and_partial_requests() -> None:
    nodes = [
        const("full", device=W1),
        const("job_only", device="/job:ps"),
        const("task_only", device="/job:worker/task:1"),
        const("type_only", device="/device:CPU:0"),
        const("free"),
    ]
    p = run_place(nodes)
    assert p.devices == {"full": W1, "job_only": PS, "task_only": W1, "type_only": W0,
                         "free": W0}
    assert p.reasons["full"] == "explicit request"
    assert p.reasons["free"] == "cost model: no consumers placed; the session's default task"


def test_default_device_wins_ties_for_partial_requests() -> None:
    p = run_place([const("cpu", device="/device:CPU:0")], default=W1)
    assert p.devices["cpu"] == W1


def test_colocation_through_class_attr() -> None:
    nodes = [
        variable("v", device="/job:ps"),
        const("c"),
        op("near", "Identity", "c", _class=["loc:@v"]),
        op("follower", "Identity", "c", device="/device:CPU:0", _class=["loc:@near"]),
    ]
    p = run_place(nodes)
    assert p.devices["near"] == PS and p.devices["follower"] == PS
    assert p.reasons["near"].startswith("colocated with 'v'")


def test_colocation_through_reference_edges() -> None:
    # no _class at all: Assign takes v's reference, so it must run where v lives
    nodes = [
        variable("v", device="/job:worker/task:1"),
        const("c", device="/job:worker/task:0"),
        op("assign", "Assign", "v", "c"),
        op("bump", "AssignAdd", "v", "c"),
    ]
    p = run_place(nodes)
    assert p.devices["assign"] == W1 and p.devices["bump"] == W1 and p.devices["c"] == W0
    assert "colocated with 'v'" in p.reasons["assign"]


def test_colocated_nodes_with_conflicting_requests_fail_naming_the_node() -> None:
    nodes = [
        variable("v", device="/job:ps"),
        const("c"),
        op("pinned", "Identity", "c", device="/job:worker/task:0", _class=["loc:@v"]),
    ]
    with pytest.raises(errors.InvalidArgumentError,
                       match="Cannot colocate node 'pinned' \\(op Identity\\) with its group: it "
                             "requests '/job:worker/task:0' but the group is restricted to "
                             f"{PS}") as info:
        run_place(nodes)
    assert info.value.node_name == "pinned"


def test_a_missing_device_is_named_and_soft_placement_relaxes_it() -> None:
    nodes = [const("c", device="/job:worker/task:7")]
    with pytest.raises(errors.InvalidArgumentError) as info:
        run_place(nodes)
    message = str(info.value)
    assert "node 'c' (op Const)" in message and "'/job:worker/task:7'" in message
    assert W0 in message and "allow_soft_placement" in message
    assert info.value.node_name == "c" and info.value.op_type == "Const"
    p = run_place(nodes, allow_soft_placement=True)
    assert p.devices["c"] == W0  # same job, another task
    assert "soft placement relaxed '/job:worker/task:7' of 'c'" in p.reasons["c"]


def test_soft_placement_drops_a_missing_device_type_first() -> None:
    nodes = [const("g", device="/job:worker/task:1/device:GPU:0")]
    with pytest.raises(errors.InvalidArgumentError, match="GPU:0"):
        run_place(nodes)
    assert run_place(nodes, allow_soft_placement=True).devices["g"] == W1
    unknown_job = [const("j", device="/job:nowhere")]
    assert run_place(unknown_job, allow_soft_placement=True).devices["j"] == W0


def test_ops_go_where_they_have_kernels() -> None:
    devices = [W0, W0_GPU]
    nodes = [const("c"), op("cpu_only", CPU_ONLY, "c"), op("both", CPU_AND_GPU, "c")]
    p = run_place(nodes, devices, preferred_types=("GPU", "CPU"))
    assert p.devices == {"c": W0, "cpu_only": W0, "both": W0_GPU}
    pinned = [const("c"), op("cpu_only", CPU_ONLY, "c", device="/device:GPU:0")]
    with pytest.raises(errors.InvalidArgumentError,
                       match="Cannot assign a device for node 'cpu_only' .*no kernel for it on "
                             "'/device:GPU:0'"):
        run_place(pinned, devices)
    assert run_place(pinned, devices, allow_soft_placement=True).devices["cpu_only"] == W0


def test_cost_model_follows_big_inputs() -> None:
    nodes = [
        const("big", np.zeros((100, 100)), device="/job:worker/task:1"),
        const("small", 1.0, device="/job:ps"),
        op("consumer", "AddV2", "big", "small"),
        op("next", "Identity", "consumer"),
        op("tiny", "Identity", "small"),
    ]
    p = run_place(nodes)
    assert p.devices["consumer"] == W1
    assert p.reasons["consumer"] == ("cost model: 40000 input bytes already on "
                                     "/job:worker/replica:0/task:1")
    assert p.devices["next"] == W1
    assert p.devices["tiny"] == PS


def test_explain_lists_every_node() -> None:
    nodes = [variable("v", device="/job:ps"), const("c"), op("a", "Assign", "v", "c")]
    rows = run_place(nodes).explain()
    assert [r["node"] for r in rows] == ["v", "c", "a"]
    # the constant has no inputs: it goes where its only consumer is, so nothing crosses tasks
    assert {r["node"]: r["device"] for r in rows} == {"v": PS, "c": PS, "a": PS}
    assert rows[1]["reason"] == "cost model: its consumers are on /job:ps/replica:0/task:0"
    assert rows[0]["reason"] == "explicit request within colocation group 'v'"
    assert rows[2]["reason"] == "colocated with 'v'; explicit request within colocation group 'v'"
    assert set(rows[1]) == {"node", "device", "reason"}


def test_sources_follow_their_consumers() -> None:
    nodes = [
        variable("v", device="/job:ps"),
        const("init"),
        op("a", "Assign", "v", "init"),
        const("k"),
        op("w_side", "Identity", "k", device=W1),
    ]
    p = run_place(nodes).devices
    assert p["init"] == PS  # its only consumer updates the variable on the ps
    assert p["k"] == W1  # not the default task (worker 0): its consumer is on worker 1


def test_session_placement_errors_and_soft_placement() -> None:
    with tf.device("/job:ps/task:3"):
        c = tf.constant(1.0, name="far")
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError,
                           match="Cannot assign a device for node 'far' \\(op Const\\)"):
            sess.run(c)
    with tf.Session(config=tf.ConfigProto(allow_soft_placement=True)) as sess:
        assert sess.run(c) == 1.0


def test_session_honours_colocation_of_variable_updates() -> None:
    with tf.device("/cpu:0"):
        v = tf.Variable(1.0, name="v")
    with tf.device("/job:localhost/task:0"):
        inc = v.assign_add(2.0)
    with tf.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(inc) == 3.0
        md = tf.RunMetadata()
        sess.run(inc, options=tf.RunOptions(trace_level=3), run_metadata=md)
        devices = {n.node_name: s.device for s in md.step_stats.dev_stats for n in s.node_stats}
        assert devices["AssignAdd"] == "/job:localhost/replica:0/task:0/device:CPU:0"
