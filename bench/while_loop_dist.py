"""``tf.while_loop`` across two processes: a loop of N scalar iterations (``i = i + 1`` while
``i < n``) whose loop variable, predicate and client live on a worker and whose add runs on a ps,
in microseconds per iteration; tensorgrid and TensorFlow 1.x graph mode in the same run.

Every iteration crosses the processes both ways: the worker sends ``i`` (and the predicate, which
drives the ps's copy of the loop) to the ps, the ps sends ``i + 1`` back. Per framework: a ps
process (its ``train.Server``, serving until stopped), then a worker process that hosts its own
server and runs the client (classic TF1 between-graph style): build the loop once, warm it up,
time ``reps`` runs of ``session.run`` with ``n`` fed; the figure is the median run divided by N,
checked (``i == N``) before it counts. Every process started here is stopped by its PID.

    python bench/while_loop_dist.py [--iters 10000] [--reps 5] [--frameworks tensorgrid,tensorflow]
    python bench/while_loop_dist.py --role ps|worker --framework F --ports P,W ...   # internal
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    child_env,
    free_ports,
    info,
    python_for,
    start_process,
    stop_process,
    wait_for_log,
    wait_for_ports,
    wait_process,
)

HERE = Path(__file__).resolve().parent
SERVING = "serving on"


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
    tf = _api(framework)
    spec = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]}
    cluster = tf.train.ClusterSpec(spec)
    server = tf.train.Server(cluster, job_name=role, task_index=0)
    print(f"{framework} {role} {SERVING} {spec[role][0]}", flush=True)
    if role == "ps":
        server.join()
        return
    wait_for_ports(spec["ps"], timeout_s=120)
    with tf.device("/job:worker/task:0"):
        n = tf.placeholder(tf.int32, [])

        def body(i: Any) -> Any:
            with tf.device("/job:ps/task:0"):
                return i + 1

        out = tf.while_loop(lambda i: i < n, body, [tf.constant(0)],
                            parallel_iterations=parallel)
    config = tf.ConfigProto(operation_timeout_in_ms=120_000)
    with tf.Session(server.target, config=config) as sess:
        for _ in range(3):
            assert int(sess.run(out, {n: 200})) == 200
        times = []
        cpu0 = time.process_time()
        for _ in range(reps):
            t0 = time.perf_counter()
            got = sess.run(out, {n: iters})
            times.append(time.perf_counter() - t0)
            if int(got) != iters:
                raise SystemExit(f"{framework}: the loop returned {got}, expected {iters}")
        cpu = time.process_time() - cpu0
    per_iter = [t / iters * 1e6 for t in times]
    print("RESULT " + json.dumps({"framework": framework, "iters": iters,
                                  "us_per_iter": per_iter,
                                  "worker_cpu_us_per_iter": cpu / (iters * reps) * 1e6,
                                  "median_us_per_iter": statistics.median(per_iter)}), flush=True)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc; 0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_framework(fw: str, py: str, args: argparse.Namespace, log_dir: Path) -> float | None:
    ports = free_ports(2)
    common = ["--framework", fw, "--ports", ",".join(map(str, ports)), "--iters",
              str(args.iters), "--reps", str(args.reps), "--parallel-iterations",
              str(args.parallel_iterations)]
    me = str(HERE / "while_loop_dist.py")
    ps = start_process(f"{fw}-ps", [py, me, "--role", "ps", *common], log_dir, child_env(fw))
    worker = None
    try:
        if not wait_for_log(ps, SERVING, timeout_s=120):
            info(f"{fw}: the ps did not start: {ps.log_text()[-500:]}")
            return None
        ps_cpu0 = _cpu_seconds(ps.pid)
        worker = start_process(f"{fw}-worker", [py, me, "--role", "worker", *common], log_dir,
                               child_env(fw))
        rc = wait_process(worker, timeout_s=args.timeout)
        ps_cpu = _cpu_seconds(ps.pid) - ps_cpu0
        text = worker.log_text()
        rows = [json.loads(line[7:]) for line in text.splitlines() if line.startswith("RESULT ")]
        if rc != 0 or not rows:
            info(f"{fw}: failed (rc {rc}): {text.strip()[-800:]}")
            return None
    finally:
        if worker is not None:
            info(stop_process(worker))
        info(stop_process(ps))
    row = rows[0]
    spread = ", ".join(f"{v:.1f}" for v in row["us_per_iter"])
    # the ps's CPU over the worker's whole run (warm-up and planning included), per timed iteration
    ps_cpu_us = ps_cpu / (args.iters * args.reps) * 1e6
    print(f"{fw:11s} while_loop across 2 processes, {args.iters} iterations: median "
          f"{row['median_us_per_iter']:.1f} us/iter (runs: {spread}); CPU per iteration: worker "
          f"{row['worker_cpu_us_per_iter']:.0f} us, ps {ps_cpu_us:.0f} us", flush=True)
    return float(row["median_us_per_iter"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--parallel-iterations", type=int, default=10)
    parser.add_argument("--frameworks", default="tensorgrid,tensorflow")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--role", choices=("ps", "worker"))
    parser.add_argument("--framework", choices=("tensorgrid", "tensorflow"))
    parser.add_argument("--ports", default="")
    args = parser.parse_args()
    if args.role:
        role_main(args.framework, args.role, [int(p) for p in args.ports.split(",")],
                  args.iters, args.reps, args.parallel_iterations)
        return
    medians: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="tg-while-dist-") as tmp:
        for fw in args.frameworks.split(","):
            py = python_for(fw)
            if py is None:
                info(f"{fw}: no interpreter, skipped")
                continue
            got = run_framework(fw, py, args, Path(tmp))
            if got is not None:
                medians[fw] = got
    if len(medians) == 2:
        ratio = medians["tensorgrid"] / medians["tensorflow"]
        print(f"ratio tensorgrid/tensorflow: {ratio:.2f}x (goal <= 2x)")


if __name__ == "__main__":
    sys.exit(main())
