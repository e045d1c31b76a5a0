"""``tf.while_loop`` across two processes: a loop of N scalar iterations (``i = i + 1`` while
``i < n``) whose loop variable, predicate and client live on a worker and whose add runs on a ps,
in microseconds per iteration; tensorgrid and TensorFlow 1.x graph mode in the same run.

Every iteration crosses the processes both ways: the worker sends ``i`` (and the predicate, which
drives the ps's copy of the loop) to the ps, the ps sends ``i + 1`` back. Per framework: a ps
process (its ``train.Server``, serving until stopped), then a worker process that hosts its own
server and runs the client (classic TF1 between-graph style): build the loop once, warm it up,
time ``reps`` runs of ``session.run`` with ``n`` fed; a repetition's figure is its run's time
divided by N (the row ``loops.dist.per_iter``: median, min and max), every run's result checked
(``i == N``). The row also keeps the worker's and the ps's CPU time per iteration. Every process
started here is stopped by its PID.

    python bench/while_loop_dist.py [--iters 10000] [--reps 5] [--frameworks tensorgrid,tensorflow]
    make bench BENCH=loops.dist                  # through the runner: RESULTS.md
    python bench/while_loop_dist.py --role ps|worker --framework F --ports P,W ...   # internal
"""

from __future__ import annotations

import argparse
import os
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
    free_ports,
    info,
    log_tail,
    missing_rows,
    python_for,
    start_process,
    status_row,
    stop_process,
    summarize,
    wait_for_log,
    wait_for_ports,
    wait_process,
)

HERE = Path(__file__).resolve().parent
SERVING = "serving on"
FIGURE = "loops.dist.per_iter"
ITERS = 10_000
PARALLEL_ITERATIONS = 10  # tf.while_loop's default
PS_START_S = 120.0
WORKER_TIMEOUT_S = 600.0


def _api(framework: str) -> Any:
    if framework == "tensorflow":
        import tensorflow as tf_mod  # lazy: only the TensorFlow children have it

        tf = tf_mod.compat.v1
        tf.disable_v2_behavior()
        tf.disable_control_flow_v2()
        return tf
    import tensorgrid as tf  # lazy: each framework's children import only their own

    return tf


def role_main(framework: str, role: str, ports: list[int], iters: int, reps: int,
              parallel: int) -> None:
    """Serve as the ps (until stopped), or as the worker: build, time and report the loop."""
    tf = _api(framework)
    spec = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    cluster = tf.train.ClusterSpec(spec)
    server = tf.train.Server(cluster, job_name=role, task_index=0)
    print(f"{framework} {role} {SERVING} {spec[role][0]}", flush=True)
    if role == "ps":
        server.join()
        return
    wait_for_ports(spec["ps"], timeout_s=PS_START_S)
    with tf.device("/job:worker/task:0"):
        n = tf.placeholder(tf.int32, [])

        def body(i: Any) -> Any:
            with tf.device("/job:ps/task:0"):
                return i + 1

        out = tf.while_loop(lambda i: i < n, body, [tf.constant(0)],
                            parallel_iterations=parallel)
    config = tf.ConfigProto(operation_timeout_in_ms=120_000)
    results_ok = True
    with tf.Session(server.target, config=config) as sess:
        for _ in range(3):  # warm-up: connections, plans, registrations
            results_ok &= int(sess.run(out, {n: 200})) == 200
        times = []
        cpu0 = time.process_time()
        for _ in range(reps):
            t0 = time.perf_counter()
            got = sess.run(out, {n: iters})
            times.append(time.perf_counter() - t0)
            results_ok &= int(got) == iters
        cpu = time.process_time() - cpu0
    emit(summarize(FIGURE, framework, [t / iters * 1e6 for t in times], "us/iter", "lower",
                   iters=iters, parallel_iterations=parallel,
                   worker_cpu_us_per_iter=cpu / (iters * reps) * 1e6,
                   checks={"loop_result": results_ok}))


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_framework(fw: str, py: str, iters: int, reps: int, parallel: int,
                  log_dir: Path) -> list[dict[str, Any]]:
    """One framework: its ps process, then its worker process; the figure's row (or an error
    row). Both processes are stopped by PID whatever happens."""
    ports = free_ports(2)
    common = ["--framework", fw, "--ports", ",".join(map(str, ports)), "--iters", str(iters),
              "--reps", str(reps), "--parallel-iterations", str(parallel)]
    me = str(HERE / "while_loop_dist.py")
    ps = start_process(f"loops-dist-{fw}-ps", [py, me, "--role", "ps", *common], log_dir,
                       child_env(fw))
    worker = None
    try:
        if not wait_for_log(ps, SERVING, timeout_s=PS_START_S):
            return [status_row(FIGURE, fw, "error",
                               f"the ps did not start: {log_tail(ps.log_text())}")]
        ps_cpu0 = _cpu_seconds(ps.pid)
        worker = start_process(f"loops-dist-{fw}-worker", [py, me, "--role", "worker", *common],
                               log_dir, child_env(fw))
        rc = wait_process(worker, timeout_s=WORKER_TIMEOUT_S)
        ps_cpu = _cpu_seconds(ps.pid) - ps_cpu0
        got = worker.rows()
        text = worker.log_text()
    finally:
        if worker is not None:
            info(stop_process(worker))
        info(stop_process(ps))
    for row in got:
        if row.get("status") == "ok":
            # the ps's CPU over the worker's whole run (warm-up and planning included), per
            # timed iteration
            row["ps_cpu_us_per_iter"] = ps_cpu / (iters * reps) * 1e6
    return got + missing_rows([FIGURE], fw, got, rc, text, "while_loop_dist worker")


def run(s: Settings, frameworks: list[str], log_dir: Path, iters: int = ITERS,
        reps: int | None = None, parallel: int = PARALLEL_ITERATIONS) -> list[dict[str, Any]]:
    """Time the loop across a ps and a worker for each framework, tensorgrid first.

    Returns:
        A row per framework: the measurement, or a skipped / error row.
    """
    rows: list[dict[str, Any]] = []
    for fw in frameworks:
        py = python_for(fw)
        if py is None:
            rows.append(status_row(FIGURE, fw, "skipped", "no Python for this framework"))
            continue
        rows += run_framework(fw, py, iters, reps if reps is not None else s.reps, parallel,
                              log_dir)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=ITERS)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--parallel-iterations", type=int, default=PARALLEL_ITERATIONS)
    parser.add_argument("--frameworks", default="tensorgrid,tensorflow")
    parser.add_argument("--role", choices=("ps", "worker"))
    parser.add_argument("--framework", choices=("tensorgrid", "tensorflow"))
    parser.add_argument("--ports", default="")
    args = parser.parse_args()
    if args.role:
        try:
            role_main(args.framework, args.role, [int(p) for p in args.ports.split(",")],
                      args.iters, args.reps, args.parallel_iterations)
        except Exception as exc:  # the worker reports it as the figure's error
            if args.role == "worker":
                emit(status_row(FIGURE, args.framework, "error", error_reason(exc)))
            raise
        return
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_loops_dist_"))
    rows = run(Settings(reps=args.reps), args.frameworks.split(","), log_dir, args.iters,
               args.reps, args.parallel_iterations)
    medians: dict[str, float] = {}
    for row in rows:
        fw = row["framework"]
        if row.get("status") != "ok":
            print(f"{fw:11s} {row['status']}: {row.get('reason', '')}")
            continue
        medians[fw] = row["median"]
        spread = ", ".join(f"{v:.1f}" for v in row["values"])
        print(f"{fw:11s} while_loop across 2 processes, {args.iters} iterations: median "
              f"{row['median']:.1f} us/iter (runs: {spread}); CPU per iteration: worker "
              f"{row['worker_cpu_us_per_iter']:.0f} us, ps {row['ps_cpu_us_per_iter']:.0f} us; "
              f"checks {row['checks']}", flush=True)
    if len(medians) == 2:
        ratio = medians["tensorgrid"] / medians["tensorflow"]
        print(f"ratio tensorgrid/tensorflow: {ratio:.2f}x (goal <= 2x)")
    info(f"logs in {log_dir}")


if __name__ == "__main__":
    sys.exit(main())
