"""The phases of a traced between-graph training step (``bench/step_phases.py``): pull, compute,
push, apply and tail, read from the nodes of every task, in the order the chain runs."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"
PS = "/job:ps/replica:0/task:0/device:CPU:0"
W0 = "/job:worker/replica:0/task:0/device:CPU:0"
MASTER = "/job:worker/replica:0/task:0/master"
T0 = 1_700_000_000_000_000  # microseconds since the epoch


@pytest.fixture(scope="module")
def phases() -> Any:
    sys.path.insert(0, str(BENCH_DIR))
    try:
        yield importlib.import_module("step_phases")
    finally:
        sys.path.remove(str(BENCH_DIR))


def _step(pull_ms: float, compute_ms: float, push_ms: float, apply_ms: float,
          tail_ms: float) -> list[tuple[str, str, int, int, str]]:
    """A bfloat16-wire step as tensorgrid traces it (start and duration in microseconds)."""
    us = [int(x * 1000) for x in (pull_ms, compute_ms, push_ms, apply_ms, tail_ms)]
    pulled = T0 + us[0]
    sent = pulled + us[1]
    pushed = sent + us[2]
    applied = pushed + us[3]
    end = applied + us[4]
    grad = "gradients/MatMul_grad/MatMul_1"
    return [
        (MASTER, "plan (cache hit)", T0, 5, "plan (cache hit) = Plan()"),
        (MASTER, "RunGraph /job:ps/replica:0/task:0", T0 + 10, end - T0 - 10,
         "RunGraph /job:ps/replica:0/task:0 = RunGraph()"),
        (PS, "W1/read/_0_to_worker_0/_to_wire", T0 + 500, 300, "W1/read/_0_to_worker_0/_to_wire"
         " = Cast(W1/read:0)"),
        (W0, "W1/read/_0_to_worker_0/_recv", T0 + 300, pulled - T0 - 300,
         "W1/read/_0_to_worker_0/_recv = _Recv(W1/read/_0_to_worker_0/_to_wire:0, from=ps)"),
        (W0, f"{grad}/_0_to_ps_0/_to_wire", sent - 400, 400,
         f"{grad}/_0_to_ps_0/_to_wire = Cast({grad}:0)"),
        (W0, f"{grad}/_0_to_ps_0/_send", sent, 10,
         f"{grad}/_0_to_ps_0/_send = _Send({grad}/_0_to_ps_0/_to_wire:0, to=ps)"),
        (PS, f"{grad}/_0_to_ps_0/_recv", T0 + 900, pushed - T0 - 900,
         f"{grad}/_0_to_ps_0/_recv = _Recv({grad}/_0_to_ps_0/_to_wire:0, from=worker)"),
        (PS, "Adam/update_W2/ApplyAdam", sent - 100, 50, "Adam/update_W2/ApplyAdam = ApplyAdam("
         "W2, ...)"),
        (PS, "Adam/update_W1/ApplyAdam", pushed + 200, applied - pushed - 200,
         "Adam/update_W1/ApplyAdam = ApplyAdam(W1, W1/Adam, ...)"),
        (PS, "Adam", applied + 20, 10, "Adam = AssignAdd(global_step, Adam/Const)"),
    ]


def test_each_link_of_the_chain_is_timed(phases: Any) -> None:
    got = phases.step_phases(_step(12.0, 4.0, 10.0, 2.5, 1.5))
    assert got == pytest.approx({"pull": 12.0, "compute": 4.0, "push": 10.0, "apply": 2.5,
                                 "tail": 1.5, "step": 30.0})


def test_a_step_without_the_chain_has_no_phases(phases: Any) -> None:
    rows = [r for r in _step(12.0, 4.0, 10.0, 2.5, 1.5) if "_send" not in r[1]]
    assert phases.step_phases(rows) is None
    assert phases.step_phases([]) is None
    # another variable's chain is not in these rows
    assert phases.step_phases(_step(1, 1, 1, 1, 1), variable="W9") is None


def test_medians_skip_steps_without_phases(phases: Any) -> None:
    steps = [phases.step_phases(_step(p, 4.0, 10.0, 2.0, 1.0)) for p in (10.0, 12.0, 30.0)]
    got = phases.median_phases([*steps, None])
    assert got["steps"] == 3
    assert got["pull"] == pytest.approx(12.0)
    assert got["step"] == pytest.approx(29.0)
