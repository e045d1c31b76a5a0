"""Lossy wire compression: the partitioner narrows the float32 edges a WirePolicy selects with a
cast pair around their Send/Recv, and training across tasks with bfloat16 on the wire still
converges (TF1's ``GraphOptions.enable_bfloat16_sendrecv``)."""

from __future__ import annotations

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.client.train.device_setter import replica_device_setter
from tensorgrid.client.train.server import ClusterSpec, Server, free_port
from tensorgrid.compiler.partition import partition
from tensorgrid.compiler.wire import WirePolicy
from tensorgrid.core import dtypes
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import TensorSpec
from tensorgrid.core.shapes import TensorShape

PS = "/job:ps/replica:0/task:0/device:CPU:0"
WORKER = "/job:worker/replica:0/task:0/device:CPU:0"


def _graph(dtype=dtypes.float32, shape=(256,), producer="w", consumer_device=WORKER):
    """A constant on the ps read by an Identity on ``consumer_device``: one cross-task edge."""
    nodes = [NodeDef(producer, "Const", (), PS, {"dtype": dtype,
                                                   "value": np.zeros(shape, dtype.np)}),
             NodeDef("y", "Identity", (producer,), consumer_device, {"T": dtype})]
    specs = {producer: [TensorSpec(dtype, TensorShape(shape))],
             "y": [TensorSpec(dtype, TensorShape(shape))]}
    return nodes, specs


def _ops(part):
    return {n.name: n for n in part}


def test_a_selected_edge_travels_as_bfloat16_between_two_casts():
    nodes, specs = _graph()
    parts = partition(nodes, specs, WirePolicy(dtypes.bfloat16))
    ps, worker = (_ops(parts[t]) for t in ("/job:ps/replica:0/task:0",
                                             "/job:worker/replica:0/task:0"))
    to_wire = next(n for n in ps.values() if n.op == "Cast")
    send = next(n for n in ps.values() if n.op == "_Send")
    assert (to_wire.inputs, to_wire.attrs["DstT"]) == (("w:0",), dtypes.bfloat16)
    assert send.inputs == (to_wire.name,) and send.attrs["T"] is dtypes.bfloat16
    recv = next(n for n in worker.values() if n.op == "_Recv")
    back = next(n for n in worker.values() if n.op == "Cast")
    assert recv.attrs["tensor_type"] is dtypes.bfloat16
    assert back.inputs == (recv.name,) and back.attrs["DstT"] is dtypes.float32
    assert worker["y"].inputs == (back.name,)
    assert send.attrs["tensor_name"] == recv.attrs["tensor_name"]


@pytest.mark.parametrize("policy,dtype,shape,producer", [
    (WirePolicy(dtypes.bfloat16), dtypes.int32, (256,), "w"),          # only float32 narrows
    (WirePolicy(dtypes.bfloat16), dtypes.float64, (256,), "w"),
    (WirePolicy(dtypes.float16, min_bytes=4096), dtypes.float32, (256,), "w"),  # 1 KB < 4 KB
    (WirePolicy(dtypes.bfloat16, gradients_only=True), dtypes.float32, (256,), "w"),
])
def test_edges_the_policy_leaves_alone_travel_as_they_are(policy, dtype, shape, producer):
    nodes, specs = _graph(dtype, shape, producer)
    parts = partition(nodes, specs, policy)
    assert not any(n.op == "Cast" for p in parts.values() for n in p)
    send = next(n for p in parts.values() for n in p if n.op == "_Send")
    assert send.attrs["T"] is dtype


def test_gradients_only_and_min_bytes_select_big_gradients():
    nodes, specs = _graph(producer="gradients/MatMul_grad/MatMul")
    parts = partition(nodes, specs, WirePolicy(dtypes.float16, min_bytes=1024,
                                               gradients_only=True))
    send = next(n for p in parts.values() for n in p if n.op == "_Send")
    assert send.attrs["T"] is dtypes.float16


def test_a_policy_refuses_types_that_are_not_narrow_floats():
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        WirePolicy(dtypes.int8)
    with pytest.raises(ValueError, match="bfloat16"):
        tf.ConfigProto(graph_options=tf.GraphOptions(
            wire_compression=tf.WireCompression(dtype="int8"))).wire_options()


def _train(config: tf.ConfigProto) -> tuple[float, float, set]:
    """Linear regression with its variables on a ps Server, trained from a worker Server."""
    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"],
                        "worker": [f"127.0.0.1:{free_port()}"]})
    servers = [Server(spec, "ps", 0), Server(spec, "worker", 0)]
    try:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((256, 32)).astype(np.float32)
        y = x @ rng.standard_normal((32, 16)).astype(np.float32)  # w: 2 KB, worth narrowing
        with tf.Graph().as_default():
            with tf.device(replica_device_setter(cluster=spec,
                                                 worker_device="/job:worker/task:0")):
                w = tf.Variable(tf.zeros([32, 16]), name="w")
                loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x), w) - tf.constant(y)))
                step = train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.Session(servers[1].target, config=config) as sess:
                sess.run(tf.global_variables_initializer())
                first = float(sess.run(loss))
                for _ in range(200):
                    sess.run(step)
                last = float(sess.run(loss))
                plans = [reg.plan for s in servers[1].master.sessions.values()
                         for reg in s.plans.values()]
                sent = {n.attrs["T"] for p in plans for part in p.partitions.values()
                        for n in part if n.op == "_Send"}
                casts = [r for p in plans for r in p.explain()
                         if r["reason"].startswith("wire_cast")]
                assert bool(casts) == bool(config.wire_options()["wire_dtype"]), casts
        return first, last, sent
    finally:
        for s in servers:
            s.stop()


def test_training_across_tasks_converges_with_bfloat16_on_the_wire():
    cfg = tf.ConfigProto(graph_options=tf.GraphOptions(enable_bfloat16_sendrecv=True))
    first, last, sent = _train(cfg)
    # the weights and their gradient narrowed; scalars (the loss, the learning rate) stay float32
    assert dtypes.bfloat16 in sent
    assert last < 0.05 * first
    plain_first, plain_last, plain_sent = _train(tf.ConfigProto())
    assert dtypes.bfloat16 not in plain_sent
    # narrowing costs precision, not convergence: both runs end within a small factor
    assert last < 10 * plain_last + 1e-3


def test_small_tensors_such_as_hyperparameters_are_never_narrowed():
    """An Adam beta2 of 0.999 sent as bfloat16 arrives as 1.0 (and training gets NaN): scalars
    and other tensors under 1 KB keep float32 even when every edge is to be narrowed."""
    for shape in ((), (4,), (255,)):
        nodes, specs = _graph(shape=shape)
        parts = partition(nodes, specs, WirePolicy(dtypes.bfloat16))
        assert not any(n.op == "Cast" for p in parts.values() for n in p), shape
