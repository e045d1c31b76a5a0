"""Which mode each window of a training run spent its large products in: the BLAS mode chooser's
periods (``tensorgrid.kernels.blas_chooser``) laid over ``bench/local.py``'s windows.

    python bench/blas_modes.py [--model mlp|cnn] [--windows 7] [--window-s 0.5] [--warm-s 0.5]

One process, tensorgrid only. For each window: examples/s, wall and CPU milliseconds per step, the
seconds spent in each mode, and the periods begun in it (``t`` threaded, ``b`` blocks, ``s``
single; ``?`` marks a probe). A window that runs slower than its neighbours shows here whether a
probe, a switch of mode or the machine's load (CPU per step far above wall per step: BLAS's threads
waiting) made it so.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from frameworks import load
from workloads import build_cnn, build_mlp


def spent_in_modes(trace: list[tuple[float, str, bool]], t0: float, t1: float) -> dict[str, float]:
    """Seconds of ``[t0, t1)`` under each mode, from the chooser's trace of period starts."""
    spent: dict[str, float] = {}
    before = [mode for start, mode, _ in trace if start < t0]
    mode, since = (before[-1] if before else None), t0
    for start, nxt, _ in trace:
        if t0 <= start < t1:
            if mode is not None:
                spent[mode] = spent.get(mode, 0.0) + start - since
            mode, since = nxt, start
    if mode is not None:
        spent[mode] = spent.get(mode, 0.0) + t1 - since
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    parser.add_argument("--windows", type=int, default=7)
    parser.add_argument("--window-s", type=float, default=0.5)
    parser.add_argument("--warm-s", type=float, default=0.5)
    args = parser.parse_args()

    from tensorgrid.kernels.parallel import blas_chooser

    api = load("tensorgrid")
    tf = api.tf
    chooser = blas_chooser()
    trace: list[tuple[float, str, bool]] = []
    chooser.trace = trace
    graph = tf.Graph()
    with graph.as_default():
        model: Any = (build_mlp if args.model == "mlp" else build_cnn)(api)
        init = tf.global_variables_initializer()
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        start = time.perf_counter()
        while time.perf_counter() - start < args.warm_s:
            sess.run(model.train_op)
        for k in range(args.windows):
            t0, c0, steps = time.perf_counter(), time.process_time(), 0
            while time.perf_counter() - t0 < args.window_s:
                sess.run(model.train_op)
                steps += 1
            t1, c1 = time.perf_counter(), time.process_time()
            spent = spent_in_modes(trace, t0, t1)
            periods = " ".join(f"{s - start:.2f}:{m[0]}{'?' if probe else ''}"
                               for s, m, probe in trace if t0 <= s < t1)
            print(f"window {k}: {steps * model.batch / (t1 - t0):9.0f} ex/s  "
                  f"wall {1e3 * (t1 - t0) / steps:.3f} ms/step  "
                  f"cpu {1e3 * (c1 - c0) / steps:.3f} ms/step  "
                  + " ".join(f"{m}:{v:.2f}s" for m, v in spent.items())
                  + (f"  [{periods}]" if periods else ""))
    costs = " ".join(f"{m}:{c * 1e12:.1f}" for m, c in chooser.cost.items())
    print(f"chooser: chosen {chooser.chosen}, {chooser.probes} probes, {chooser.reprobes} changes "
          f"of load; costs (ps/flop) {costs}")


if __name__ == "__main__":
    main()
