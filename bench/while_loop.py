"""``tf.while_loop`` speed: a loop of N scalar iterations (``i = i + 1`` while ``i < n``), in
microseconds per iteration, tensorgrid and TensorFlow 1.x graph mode measured in the same run.

Each framework runs in its own child process (TensorFlow in its own venv, when there is one):
build the loop once, warm it up, then time ``reps`` runs of ``session.run`` with ``n`` fed; a
repetition's figure is its run's time divided by N (the row: median, min and max over the
repetitions, figure ``loops.local.per_iter``). Every run's result is checked (``i == N``).

    python bench/while_loop.py [--iters 10000] [--reps 7] [--frameworks tensorgrid,tensorflow]
    make bench BENCH=loops.local                 # through the runner: RESULTS.md
    python bench/while_loop.py --child tensorgrid --iters 10000 --reps 7     # internal
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    Settings,
    child_env,
    emit,
    error_reason,
    info,
    missing_rows,
    python_for,
    run_child,
    status_row,
    summarize,
)

FIGURE = "loops.local.per_iter"
ITERS = 10_000
PARALLEL_ITERATIONS = 10  # tf.while_loop's default
CHILD_TIMEOUT_S = 300.0


def child(framework: str, iters: int, reps: int, parallel: int) -> dict[str, Any]:
    """Build and time the loop in this process (one framework); the figure's row."""
    if framework == "tensorflow":
        import tensorflow as tf_mod  # lazy: only the TensorFlow child has it

        tf = tf_mod.compat.v1
        tf.disable_v2_behavior()
        tf.disable_control_flow_v2()
    else:
        import tensorgrid as tf  # lazy: the child of each framework imports only its own
    n = tf.placeholder(tf.int32, [])
    i = tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)],
                      parallel_iterations=parallel)
    results_ok = True
    with tf.Session() as sess:
        for _ in range(3):  # warm-up: plans, caches, thread pools
            results_ok &= int(sess.run(i, {n: 100})) == 100
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out = sess.run(i, {n: iters})
            times.append(time.perf_counter() - t0)
            results_ok &= int(out) == iters
    return summarize(FIGURE, framework, [t / iters * 1e6 for t in times], "us/iter", "lower",
                     iters=iters, parallel_iterations=parallel,
                     checks={"loop_result": results_ok})


def run(s: Settings, frameworks: list[str], log_dir: Path, iters: int = ITERS,
        reps: int | None = None, parallel: int = PARALLEL_ITERATIONS) -> list[dict[str, Any]]:
    """Time the loop for each framework, one child process each (bounded, stopped by PID).

    Returns:
        A row per framework: the measurement, or a skipped / error row.
    """
    rows: list[dict[str, Any]] = []
    for fw in frameworks:
        py = python_for(fw)
        if py is None:
            rows.append(status_row(FIGURE, fw, "skipped", "no Python for this framework"))
            continue
        argv = [py, str(Path(__file__).resolve()), "--child", fw, "--iters", str(iters),
                "--reps", str(reps if reps is not None else s.reps),
                "--parallel-iterations", str(parallel)]
        rc, got, text = run_child(f"loops-local-{fw}", argv, log_dir, CHILD_TIMEOUT_S,
                                  child_env(fw))
        rows += got + missing_rows([FIGURE], fw, got, rc, text, "while_loop")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=ITERS)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--parallel-iterations", type=int, default=PARALLEL_ITERATIONS)
    parser.add_argument("--frameworks", default="tensorgrid,tensorflow")
    parser.add_argument("--child", choices=("tensorgrid", "tensorflow"))
    args = parser.parse_args()
    if args.child:
        try:
            row = child(args.child, args.iters, args.reps, args.parallel_iterations)
        except Exception as exc:  # reported as the figure's error
            row = status_row(FIGURE, args.child, "error", error_reason(exc))
        emit(row)
        return
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_loops_"))
    rows = run(Settings(reps=args.reps), args.frameworks.split(","), log_dir, args.iters,
               args.reps, args.parallel_iterations)
    medians = {}
    for row in rows:
        if row.get("status") != "ok":
            print(f"{row['framework']:11s} {row['status']}: {row.get('reason', '')}")
            continue
        medians[row["framework"]] = row["median"]
        spread = ", ".join(f"{v:.2f}" for v in row["values"])
        print(f"{row['framework']:11s} while_loop {args.iters} iterations: median "
              f"{row['median']:.2f} us/iter (runs: {spread}); checks {row['checks']}")
    if len(medians) == 2:
        ratio = medians["tensorgrid"] / medians["tensorflow"]
        print(f"ratio tensorgrid/tensorflow: {ratio:.2f}x")
    info(f"logs in {log_dir}")


if __name__ == "__main__":
    sys.exit(main())
