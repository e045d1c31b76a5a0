"""A task's per-step tensor budget in the executor: nodes of run-time shape are measured after
they run, nodes of known shape are refused before they allocate, on the generated path, the
interpreter and the dataflow loop; the error names the node; a graph of known shapes pays
nothing per op; the next step runs."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import dtypes, errors
from tensorgrid.core.ir import NodeDef
from tensorgrid.runtime import memory_budget as mb
from tensorgrid.runtime.executor import Executable, LocalDevice

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
F32, I32 = dtypes.float32, dtypes.int32
MiB = 1024 * 1024


def _graph(fill: bool = False) -> list[NodeDef]:
    """y = x * x; z = y + y (x fed, of any size); with ``fill``, a 4 MiB Fill of constant dims."""
    nodes = [NodeDef("x", "_Arg", (), "", {"T": F32, "index": 0}),
             NodeDef("y", "Mul", ("x", "x"), "", {"T": F32}),
             NodeDef("z", "AddV2", ("y", "y"), "", {"T": F32}),
             NodeDef("out", "_Retval", ("z",), "", {"T": F32, "index": 0})]
    if fill:
        nodes += [NodeDef("dims", "Const", (), "", {"dtype": I32,
                                                    "value": np.array([1024, 1024], np.int32)}),
                  NodeDef("one", "Const", (), "", {"dtype": F32, "value": np.array(1, np.float32)}),
                  NodeDef("big", "Fill", ("dims", "one"), "", {"T": F32, "index_type": I32}),
                  NodeDef("out_big", "_Retval", ("big",), "", {"T": F32, "index": 1})]
    return nodes


def _exe(nodes: list[NodeDef], budget: int | None) -> Executable:
    return Executable(nodes, {CPU: LocalDevice(CPU)}, CPU, infer_graph(nodes),
                      memory_budget=budget)


def _run(exe: Executable, x: np.ndarray, how: str) -> list[object]:
    step = exe.new_step(args=[x])
    if how == "traced":
        step.trace = []  # the interpreter's path
    if how == "async":
        return asyncio.run(exe.run_async(step))
    return exe.run_sync(step)


@pytest.mark.parametrize("how", ["generated", "traced"])
def test_a_step_over_the_budget_fails_at_the_node_that_went_over(how: str) -> None:
    exe = _exe(_graph(), 3 * MiB)
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(exe, np.ones(512 * 1024, np.float32), how)  # y: 2 MiB, z: 2 MiB more
    assert info.value.node_name == "z" and info.value.op_type == "AddV2"
    assert "step_memory_bytes" in info.value.message
    # the next step, smaller, runs
    assert _run(exe, np.ones(4, np.float32), how)[0].tolist() == [2.0] * 4


def test_a_node_of_known_shape_is_refused_before_it_allocates() -> None:
    exe = _exe(_graph(fill=True), 3 * MiB)
    big = next(cn for cn in exe.nodes if cn.node.name == "big")
    assert big.mem == mb.OVER and big.mem_prefix == 4 * MiB
    with pytest.raises(errors.ResourceExhaustedError) as info:
        _run(exe, np.ones(4, np.float32), "generated")
    assert info.value.node_name == "big" and str(4 * MiB) in info.value.message


def test_no_budget_and_known_shapes_cost_nothing_per_op() -> None:
    assert all(cn.mem == mb.NONE for cn in _exe(_graph(), None).nodes)
    known = _exe(_graph(fill=True)[4:], 64 * MiB)  # the Fill alone: every shape known
    assert all(cn.mem == mb.NONE for cn in known.nodes)
    assert _run(known, np.ones(4, np.float32), "generated")[1].shape == (1024, 1024)


def test_the_plan_checks_known_nodes_only_after_a_measured_one() -> None:
    spec = infer_graph(_graph(fill=True))
    acts = mb.plan([(True, spec["big"]), (True, spec["y"]), (True, spec["big"]),
                    (False, spec["z"])], 10 * MiB)
    assert acts == [(mb.NONE, 4 * MiB), (mb.MEASURE, 4 * MiB), (mb.CHECK, 8 * MiB),
                    (mb.NONE, 8 * MiB)]
    assert mb.declared_bytes(spec["y"]) is None
    assert mb.value_bytes((np.zeros(3, np.float32), np.zeros(2, np.int64), "h")) == 28
    assert mb.value_bytes(np.float64(1)) == 0  # a scalar is a few bytes: not counted
