"""Partitioning graphs with control flow across tasks: control-flow nodes colocated with their data,
a control loop on every task of a frame that spans tasks (driven by the frame's LoopCond, received
from its task), receives inside a frame anchored to their task's control loop, receives of values
that can be dead marked, and dead tensors on the wire."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.compiler.control_loops import (
    MAY_BE_DEAD,
    colocate,
    control_loops,
    frames_of,
)
from tensorgrid.compiler.plan import build_plan
from tensorgrid.core import dtypes, errors
from tensorgrid.core.ir import DEAD, NodeDef, parse_input, topological_order
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport import tensors

W0 = "/job:worker/replica:0/task:0/device:CPU:0"
PS = "/job:ps/replica:0/task:0/device:CPU:0"
T_W0, T_PS = "/job:worker/replica:0/task:0", "/job:ps/replica:0/task:0"
F32 = dtypes.float32


def _plan(build: Any, fetch_names: Sequence[str] = ()) -> tuple[dict[str, tuple[NodeDef, ...]],
                                                               list[NodeDef]]:
    g = tf.Graph()
    with g.as_default():
        fetches = build()
    nodes = list(g.as_graph_def().nodes)
    plan = build_plan(nodes, None, [], [f.name for f in fetches], [], [W0, PS], W0)
    return dict(plan.partitions), nodes


def _loop_with_body_on_ps(variable: bool = True) -> list[Any]:
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(1.5, name="w") if variable else tf.constant(1.5, name="w")
    with tf.device("/job:worker/task:0"):
        def body(i: Any, x: Any) -> tuple[Any, Any]:
            with tf.device("/job:ps/task:0"):
                y = x * w
            return i + 1, y + 1.0

        return list(tf.while_loop(lambda i, x: i < 5, body, [tf.constant(0), tf.constant(1.0)],
                                  name="loop"))


def assert_closed_and_acyclic(parts: Mapping[str, Sequence[NodeDef]]) -> None:
    for task, nodes in parts.items():
        names = {n.name for n in nodes}
        assert len(names) == len(nodes), f"duplicate names on {task}"
        for n in nodes:
            assert n.device.startswith(task), f"{n.name} on {n.device} is in {task}'s partition"
            for inp in n.inputs:
                assert parse_input(inp)[0] in names, f"{n.name} reads {inp}, not on {task}"
        topological_order(nodes)


def assert_pairs_match(parts: Mapping[str, Sequence[NodeDef]]) -> None:
    def key(n: NodeDef) -> tuple[Any, ...]:
        return (n.attrs["tensor_name"], n.attrs["send_device"], n.attrs["recv_device"])

    sends = sorted(key(n) for p in parts.values() for n in p if n.op == "_Send")
    recvs = sorted(key(n) for p in parts.values() for n in p if n.op == "_Recv")
    assert sends == recvs and len(set(sends)) == len(sends)


def test_a_loop_spanning_two_tasks_gets_a_control_loop_on_each() -> None:
    parts, _ = _plan(_loop_with_body_on_ps)
    assert_closed_and_acyclic(parts)
    assert_pairs_match(parts)
    for task, short in ((T_W0, "worker_0"), (T_PS, "ps_0")):
        by_name = {n.name: n for n in parts[task]}
        [base] = [n.name.removesuffix("/merge") for n in parts[task]
                  if n.name.startswith("_cloop/") and n.name.endswith(f"/{short}/merge")]
        enter, merge, switch, nxt = (by_name[f"{base}/{k}"]
                                     for k in ("enter", "merge", "switch", "next"))
        assert enter.op == "Enter" and not enter.attrs["is_constant"]
        assert merge.inputs == (enter.name, nxt.name)
        assert switch.inputs[0] == merge.name
        assert nxt.inputs == (f"{switch.name}:1",)
        pred = by_name[parse_input(switch.inputs[1])[0]]
        if task == T_W0:
            assert pred.op == "LoopCond"  # the task that computes the predicate reads it directly
        else:
            assert pred.op == "_Recv" and pred.attrs["tensor_name"].startswith("loop/LoopCond")
            assert pred.inputs == (f"^{merge.name}",)
        # every receive of a value made inside the loop runs once per iteration of this copy
        in_frame = [n for n in parts[task] if n.op == "_Recv" and n.inputs]
        assert in_frame and all(n.inputs == (f"^{merge.name}",) for n in in_frame)


def test_the_frame_and_iteration_reach_the_ps_by_the_predicate_only() -> None:
    parts, _ = _plan(_loop_with_body_on_ps)
    sent_to_ps = sorted(n.attrs["tensor_name"] for n in parts[T_W0] if n.op == "_Send")
    assert any(t.startswith("loop/LoopCond") for t in sent_to_ps)
    # the loop variable's Switch moved to the task of its data; the ps reads x inside the loop
    assert all(n.op not in ("Switch", "Merge") or n.name.startswith("_cloop/")
               for n in parts[T_PS])


def test_a_loop_on_one_task_gets_no_control_loop() -> None:
    def build() -> list[Any]:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(2.0, name="w")
        with tf.device("/job:worker/task:0"):
            return list(tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * w),
                                      [tf.constant(0), tf.constant(1.0)]))

    parts, _ = _plan(build)
    assert not [n for p in parts.values() for n in p if n.name.startswith("_cloop/")]
    assert not [n for p in parts.values() for n in p if n.op == "_Recv" and n.inputs]


def test_a_nested_control_loop_enters_from_its_outer_control_loop() -> None:
    def build() -> list[Any]:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(0.5, name="w")
        with tf.device("/job:worker/task:0"):
            def outer(i: Any, t: Any) -> tuple[Any, Any]:
                def inner(j: Any, s: Any) -> tuple[Any, Any]:
                    with tf.device("/job:ps/task:0"):
                        s2 = s + w
                    return j + 1, s2

                return i + 1, tf.while_loop(lambda j, s: j < i, inner, [tf.constant(0), t],
                                            name="inner")[1]

            return list(tf.while_loop(lambda i, t: i < 3, outer,
                                      [tf.constant(0), tf.constant(0.0)], name="outer"))

    parts, nodes = _plan(build)
    assert_closed_and_acyclic(parts)
    assert_pairs_match(parts)
    _, _, loops = frames_of(topological_order(nodes))
    inner_frame = next(f for f in loops.values() if f.parent)
    for task in (T_W0, T_PS):
        enters = [n for n in parts[task] if n.name.startswith("_cloop/") and n.op == "Enter"]
        assert len(enters) == 2
        inner_enter = next(n for n in enters if n.attrs["frame_name"] == inner_frame.name)
        outer_merge = [n for n in parts[task] if n.name.startswith("_cloop/")
                       and n.op == "Merge" and n.name != inner_enter.name]
        assert parse_input(inner_enter.inputs[0])[0] in {m.name for m in outer_merge}


def test_a_cond_across_tasks_marks_the_receives_that_can_be_dead() -> None:
    def build() -> list[Any]:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(3.0, name="w")
        with tf.device("/job:worker/task:0"):
            p = tf.constant(True)
            x = tf.constant(2.0)

            def on_ps() -> Any:
                with tf.device("/job:ps/task:0"):
                    return x * w

            return [tf.cond(p, on_ps, lambda: x - 1.0) + w]

    parts, _ = _plan(build)
    recvs = [n for p in parts.values() for n in p if n.op == "_Recv"]
    marked = [n for n in recvs if n.attrs.get(MAY_BE_DEAD)]
    plain = [n for n in recvs if not n.attrs.get(MAY_BE_DEAD)]
    # out of the conditional: the branch's input and result; never dead: the variable, the predicate
    assert {n.attrs["tensor_name"] for n in marked} == {"cond/Switch_1:1", "cond/mul:0"}
    assert {n.attrs["tensor_name"] for n in plain} == {"w/read:0", "cond/pred_id:0"}
    # the Switch of the variable moved to the variable's task
    assert [n.name for n in parts[T_PS] if n.op == "Switch"] == ["cond/Switch_2"]
    assert not [n for p in parts.values() for n in p if n.name.startswith("_cloop/")]


def _n(name: str, op: str, device: str, *inputs: str, **attrs: Any) -> NodeDef:
    return NodeDef(name, op, inputs, device, {"T": F32, **attrs})


def test_colocation_moves_switch_exit_enter_and_next_iteration_to_their_data() -> None:
    nodes = [
        NodeDef("x", "Const", (), PS, {"value": np.float32(1.0), "dtype": F32}),
        NodeDef("p", "Const", (), W0, {"value": np.bool_(True), "dtype": dtypes.bool_}),
        _n("sw", "Switch", W0, "x", "p"),  # its data is on the ps: it moves there
        _n("ex", "Exit", W0, "sw"),  # with its input, after the Switch moved
        _n("en", "Enter", W0, "x", frame_name="f"),
        _n("use", "Square", PS, "en"),  # the Enter's first consumer is on the ps
        _n("nx", "NextIteration", W0, "use"),
        _n("mg", "Merge", PS, "en", "nx", N=2),
    ]
    moved = {n.name: n.device for n in colocate(topological_order(nodes))}
    assert moved["sw"] == PS and moved["ex"] == PS and moved["en"] == PS and moved["nx"] == PS
    assert moved["p"] == W0


def test_a_frame_across_tasks_without_loop_cond_is_refused() -> None:
    nodes = [
        NodeDef("x", "Const", (), W0, {"value": np.float32(1.0), "dtype": F32}),
        _n("en", "Enter", W0, "x", frame_name="f"),
        _n("sq", "Square", PS, "en"),
    ]
    frame, _, loops = frames_of(nodes)
    with pytest.raises(errors.InvalidArgumentError, match="'f'.*no LoopCond"):
        control_loops(nodes, frame, loops, {T_W0: "worker_0", T_PS: "ps_0"})


def test_a_dead_tensor_travels_as_a_flag() -> None:
    chunks = list(tensors.encode(3, DEAD, use_shm=False))
    assert len(chunks) == 1 and chunks[0].is_dead and not chunks[0].HasField("inline")
    assert tensors.Assembler().add(chunks[0]) == (3, DEAD)
    live = list(tensors.encode(0, np.float32(2.0), use_shm=False))
    assert not live[0].is_dead and float(tensors.Assembler().add(live[0])[1]) == 2.0


class _PeerRecv:
    """RemoteRecv between WorkerCores of this process: takes the value from the sender's core (its
    real rendezvous), recording the keys asked for."""

    def __init__(self) -> None:
        self.cores: dict[str, WorkerCore] = {}
        self.keys: list[str] = []

    async def recv(self, src_task: str, step_id: int, key: str) -> Any:
        self.keys.append(key)
        return await self.cores[src_task].recv_tensor(step_id, key)


def test_each_iteration_moves_under_its_own_frame_and_iteration_key() -> None:
    g = tf.Graph()
    with g.as_default():
        fetches = _loop_with_body_on_ps(variable=False)
    plan = build_plan(list(g.as_graph_def().nodes), None, [], [f.name for f in fetches], [],
                      [W0, PS], W0)
    peers = _PeerRecv()
    for task in (T_W0, T_PS):
        peers.cores[task] = WorkerCore(task, remote=peers)
    handles = {t: peers.cores[t].register_graph(plan.partitions[t]) for t in (T_W0, T_PS)}

    async def step() -> list[Any]:
        return await asyncio.gather(*(peers.cores[t].run_graph(handles[t], 7, [])
                                      for t in (T_W0, T_PS)))

    rets_w0, _ = asyncio.run(step())
    ret_of = dict(zip((plan.rets[0][1], plan.rets[1][1]), (0, 1)))
    assert int(rets_w0[ret_of[0]]) == 5
    assert float(rets_w0[ret_of[1]]) == pytest.approx(20.78125)  # x <- 1.5 x + 1, five times
    # the predicate went to the ps once per iteration, the last (false) one included
    pred_keys = sorted(k for k in peers.keys if ";loop/LoopCond" in k)
    frames = {k.rsplit(";", 1)[1].rsplit(":", 1)[0] for k in pred_keys}
    assert len(frames) == 1 and next(iter(frames)).startswith("0/0/loop")
    assert sorted(int(k.rsplit(":", 1)[1]) for k in pred_keys) == list(range(6))
    # x went to the ps and x * w came back in every iteration: live in the five that ran the
    # body, dead in the last
    for tensor in ("loop/Identity_1:0", "loop/mul:0"):
        its = [k.rsplit(":", 1)[1] for k in peers.keys if f";{tensor};" in k]
        assert sorted(map(int, its)) == list(range(6))
    for core in peers.cores.values():  # nothing left behind in any rendezvous
        assert len(core.rendezvous) == 0
