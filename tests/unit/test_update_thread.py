"""Updates of large variables run on the device's update thread, off the event loop: the loop keeps
running other steps while one waits for its update, the updates of one device run one at a time in
the order they came, small variables are still updated on the loop, and the values are those of
the same update run inline."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

from tensorgrid.core import dtypes, errors, registry
from tensorgrid.core.ir import NodeDef
from tensorgrid.core.registry import AsyncKernel, InferContext, TensorSpec
from tensorgrid.core.shapes import TensorShape
from tensorgrid.runtime.executor import Executable, LocalDevice
from tensorgrid.runtime.update_thread import OFFLOAD_BYTES, is_update_op, worth_offloading

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
F32 = dtypes.float32
BIG = OFFLOAD_BYTES // 4  # float32 elements of a variable just big enough to be offloaded
PUSHED = "TestUpdatePushed"  # passes its input through after one turn of the loop, like a _Recv


def _pass_through(ctx: InferContext) -> list[TensorSpec]:
    return [ctx.input(0)]


def _pushed(ctx: registry.KernelContext) -> AsyncKernel:
    async def run(step: Any, x: Any) -> Any:
        await asyncio.sleep(0)
        return x

    return AsyncKernel(run)


if not registry.has_op(PUSHED):
    registry.register_op(PUSHED, _pass_through, stateful=True)
    registry.register_kernel(PUSHED)(_pushed)
    registry.not_differentiable(PUSHED)


def _gd_graph(name: str, n: int, via_yield: bool = True) -> list[NodeDef]:
    """``name`` (a VariableV2 of n floats) -= 0.5 * ones; the delta passes through an async kernel
    (as a pushed gradient passes through a _Recv) so that the step runs on ``run_async``."""
    delta = np.ones(n, np.float32)
    nodes = [
        NodeDef(name, "VariableV2", (), "", {"dtype": F32, "shape": TensorShape([n]),
                                             "container": "", "shared_name": ""}),
        NodeDef(f"{name}/alpha", "Const", (), "", {"value": np.array(0.5, np.float32),
                                                   "dtype": F32}),
        NodeDef(f"{name}/delta", "Const", (), "", {"value": delta, "dtype": F32}),
    ]
    src = f"{name}/delta"
    if via_yield:
        nodes.append(NodeDef(f"{name}/pushed", PUSHED, (src,), "", {"T": F32}))
        src = f"{name}/pushed"
    nodes.append(NodeDef(f"{name}/apply", "ApplyGradientDescent", (name, f"{name}/alpha", src),
                         "", {"T": F32, "use_locking": False}))
    return nodes


def _init(dev: LocalDevice, name: str, n: int, value: float) -> None:
    var = dev.resources.variable("", name, F32, TensorShape([n]))
    var.write(np.full(n, value, np.float32))


def _value(dev: LocalDevice, name: str) -> Any:
    var = dev.resources.lookup("", name)
    assert var is not None
    return var.value


def test_update_ops_are_the_training_ops() -> None:
    assert is_update_op("ApplyAdam") and is_update_op("ResourceApplyAdam")
    assert is_update_op("ResourceSparseApplyAdagrad") and is_update_op("SparseApplyFtrl")
    assert not is_update_op("Assign") and not is_update_op("AssignAdd")
    assert not worth_offloading(np.zeros(BIG, np.float32))  # not a variable reference


def test_a_large_update_runs_on_the_update_thread_with_the_inline_result() -> None:
    dev = LocalDevice(CPU)
    exe = Executable(_gd_graph("w", BIG), {CPU: dev}, CPU)
    _init(dev, "w", BIG, 3.0)
    assert exe.has_async
    asyncio.run(exe.run_async(exe.new_step(step_id=1)))
    assert dev.resources.updates.runs == 1
    np.testing.assert_array_equal(_value(dev, "w"), np.full(BIG, 2.5, np.float32))
    assert not _value(dev, "w").flags.writeable  # still a frozen snapshot


def test_a_small_update_stays_on_the_loop() -> None:
    dev = LocalDevice(CPU)
    exe = Executable(_gd_graph("s", 16), {CPU: dev}, CPU)
    _init(dev, "s", 16, 1.0)
    asyncio.run(exe.run_async(exe.new_step(step_id=1)))
    assert dev.resources.updates.runs == 0
    np.testing.assert_array_equal(_value(dev, "s"), np.full(16, 0.5, np.float32))


def test_the_loop_runs_other_steps_while_an_update_waits_for_the_thread() -> None:
    dev = LocalDevice(CPU)
    big = Executable(_gd_graph("w", BIG), {CPU: dev}, CPU)
    small = Executable(_gd_graph("s", 16), {CPU: dev}, CPU)
    _init(dev, "w", BIG, 3.0)
    _init(dev, "s", 16, 1.0)
    release = threading.Event()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        # occupy the device's update thread, as a long update of another step would
        busy = dev.resources.updates.run(release.wait, (10.0,))
        waiting = asyncio.ensure_future(big.run_async(big.new_step(step_id=1)))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # its update is queued behind the busy one
        # the loop is free: another step runs to its end meanwhile
        await asyncio.wait_for(small.run_async(small.new_step(step_id=2)), 5)
        np.testing.assert_array_equal(_value(dev, "s"), np.full(16, 0.5, np.float32))
        np.testing.assert_array_equal(_value(dev, "w"), np.full(BIG, 3.0, np.float32))
        loop.call_soon(release.set)
        await asyncio.wait_for(busy, 5)
        await asyncio.wait_for(waiting, 5)

    asyncio.run(go())
    np.testing.assert_array_equal(_value(dev, "w"), np.full(BIG, 2.5, np.float32))


def test_updates_of_one_variable_from_concurrent_steps_are_not_lost() -> None:
    dev = LocalDevice(CPU)
    exe = Executable(_gd_graph("w", BIG), {CPU: dev}, CPU)
    _init(dev, "w", BIG, 0.0)

    async def go() -> None:
        steps = [exe.run_async(exe.new_step(step_id=i)) for i in range(1, 9)]
        await asyncio.wait_for(asyncio.gather(*steps), 10)

    asyncio.run(go())
    assert dev.resources.updates.runs == 8
    np.testing.assert_array_equal(_value(dev, "w"), np.full(BIG, -4.0, np.float32))


def test_a_failing_offloaded_update_names_its_node() -> None:
    dev = LocalDevice(CPU)
    nodes = _gd_graph("w", BIG)
    # a delta of the wrong length: the update fails inside the thread
    nodes[2] = NodeDef("w/delta", "Const", (), "", {"value": np.ones(BIG + 1, np.float32),
                                                    "dtype": F32})
    exe = Executable(nodes, {CPU: dev}, CPU)
    _init(dev, "w", BIG, 1.0)
    with pytest.raises(errors.OpError) as info:
        asyncio.run(exe.run_async(exe.new_step(step_id=1)))
    assert info.value.node_name == "w/apply"
    assert info.value.op_type == "ApplyGradientDescent"
    assert dev.resources.updates.runs == 1
    np.testing.assert_array_equal(_value(dev, "w"), np.full(BIG, 1.0, np.float32))
