"""What a task's per-step tensor budget (``step_memory_bytes``) costs per op: a chain of 100
adds run by the executor's generated code, with no budget, with a budget on a graph whose
shapes are all known (checked when the plan is built: nothing per op), and with a budget on a
graph of run-time shapes (each add measured after it runs), fed a scalar and a 4-element array.
Rounds interleave the cases; medians, and each case's ratio to the same feed without a budget.

    python bench/step_budget.py [--rounds 7] [--runs 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tensorgrid.compiler.infer import infer_graph
from tensorgrid.core import dtypes
from tensorgrid.core.ir import NodeDef
from tensorgrid.runtime.executor import Executable, LocalDevice

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
CHAIN = 100


def chain(known: bool) -> list[NodeDef]:
    """x (fed; a scalar, or of unknown shape) + 1, 100 times."""
    shape = {"shape": ()} if known else {}
    nodes = [NodeDef("x", "_Arg", (), "", {"T": dtypes.float32, "index": 0, **shape}),
             NodeDef("one", "Const", (), "", {"dtype": dtypes.float32,
                                              "value": np.array(1, np.float32)})]
    prev = "x"
    for i in range(CHAIN):
        nodes.append(NodeDef(f"a{i}", "AddV2", (prev, "one"), "", {"T": dtypes.float32}))
        prev = f"a{i}"
    nodes.append(NodeDef("out", "_Retval", (prev,), "", {"T": dtypes.float32, "index": 0}))
    return nodes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--runs", type=int, default=2000)
    a = p.parse_args()
    scalar, array = np.float32(0), np.zeros(4, np.float32)
    cases = {}  # name: (executable, feed, the case it compares with)
    for name, known, budget, x, base in (
            ("scalar, no budget", False, None, scalar, ""),
            ("scalar, budget, known shapes", True, 1 << 30, scalar, "scalar, no budget"),
            ("scalar, budget, run-time shapes", False, 1 << 30, scalar, "scalar, no budget"),
            ("array, no budget", False, None, array, ""),
            ("array, budget, run-time shapes", False, 1 << 30, array, "array, no budget")):
        nodes = chain(known)
        cases[name] = (Executable(nodes, {CPU: LocalDevice(CPU)}, CPU, infer_graph(nodes),
                                  memory_budget=budget), x, base or name)
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(a.rounds):
        for name, (exe, x, _base) in cases.items():
            t0 = time.perf_counter()
            for _ in range(a.runs):
                exe.run_sync(exe.new_step(args=[x]))
            times[name].append((time.perf_counter() - t0) / a.runs / CHAIN * 1e6)
    for name, ts in times.items():
        med = statistics.median(ts)
        base = statistics.median(times[cases[name][2]])
        print(f"{name:32s} median {med:.3f} us/add  ({med / base:.3f}x)  "
              f"min {min(ts):.3f} max {max(ts):.3f}")


if __name__ == "__main__":
    main()
