"""The TensorFlow 1.x distributed example: one parameter server, one worker, a
``MonitoredTrainingSession`` that stops at step 200.

The worker places ``x`` and ``w`` (and the global step) on the ps with
``tf.train.replica_device_setter`` and computes ``y = matmul(x, w) = [[20.]]`` on itself, then
increments the global step until ``StopAtStepHook(last_step=200)`` says stop.

Synthetic data only (there is no network to download a data set from): the values are constants.

Each role is one process, as in TensorFlow::

    python examples/seed_cluster.py --ps 127.0.0.1:2222 --worker 127.0.0.1:2223 --job ps --task 0
    python examples/seed_cluster.py --ps 127.0.0.1:2222 --worker 127.0.0.1:2223 --job worker --task 0

Without ``--job`` it launches both roles itself, as two processes on free loopback ports, waits
for the worker and then stops the ps (by its PID)::

    python examples/seed_cluster.py
    python examples/seed_cluster.py --last-step 20      # a short run

The worker prints ``step N y [[20.]]`` for every step and ``done at step N``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence

from launch import Process, exit_on_sigterm, free_port

import tensorgrid as tf

WORKER_TIMEOUT_S = 300.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ps", help="the ps task's HOST:PORT (default: a free loopback port)")
    parser.add_argument("--worker",
                        help="the worker task's HOST:PORT (default: a free loopback port)")
    parser.add_argument("--job", choices=["ps", "worker"],
                        help="the role of this process; without it, launch both roles")
    parser.add_argument("--task", type=int, default=0, help="task index in the job (0)")
    parser.add_argument("--last-step", type=int, default=200,
                        help="the StopAtStepHook's last step (default: 200)")
    return parser


def run_ps(cluster: tf.train.ClusterSpec, task: int) -> int:
    """Serve the variables until the process is stopped."""
    server = tf.train.Server(cluster, job_name="ps", task_index=task)
    print(f"ps {task} serving on {cluster.task_address('ps', task)}", flush=True)
    server.join()
    return 0


def run_worker(cluster: tf.train.ClusterSpec, task: int, last_step: int) -> int:
    """Build the graph under the device setter and train until the last step."""
    server = tf.train.Server(cluster, job_name="worker", task_index=task)
    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{task}",
                                                  cluster=cluster)):
        x = tf.Variable([[1.0, 2.0, 3.0, 4.0]])
        w = tf.Variable([[2.0], [2.0], [2.0], [2.0]])
        y = tf.matmul(x, w)
        global_step = tf.train.get_or_create_global_step()
        inc = tf.assign_add(global_step, 1)
    step = 0
    with tf.train.MonitoredTrainingSession(
            master=server.target, is_chief=True,
            hooks=[tf.train.StopAtStepHook(last_step=last_step)]) as sess:
        while not sess.should_stop():
            value, step = sess.run([y, inc])
            print(f"step {step} y {value}", flush=True)
    print(f"done at step {step}", flush=True)
    server.stop()
    return 0


def launch(args: argparse.Namespace) -> int:
    """Run the ps and the worker as two processes of this script; returns the worker's status."""
    exit_on_sigterm()
    ps_address = args.ps or f"127.0.0.1:{free_port()}"
    worker_address = args.worker or f"127.0.0.1:{free_port()}"
    common = [sys.executable, __file__, "--ps", ps_address, "--worker", worker_address]
    logs = tempfile.mkdtemp(prefix="tensorgrid-seed-")
    ps = Process("ps0", [*common, "--job", "ps", "--task", "0"], log_dir=logs)
    try:
        ps.wait_for_output("serving on")
        # the worker's output goes straight to ours
        worker = Process("worker0", [*common, "--job", "worker", "--task", "0",
                                     "--last-step", str(args.last_step)])
        try:
            status = worker.wait(WORKER_TIMEOUT_S)
        finally:
            worker.stop()
    finally:
        ps.stop()
    if status != 0:
        print(f"the worker failed (status {status}); the ps log:\n{ps.log_tail()}",
              file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.job is None:
        return launch(args)
    if not (args.ps and args.worker):
        build_parser().error("--job needs --ps and --worker")
    cluster = tf.train.ClusterSpec({"ps": [args.ps], "worker": [args.worker]})
    if args.job == "ps":
        return run_ps(cluster, args.task)
    return run_worker(cluster, args.task, args.last_step)


if __name__ == "__main__":
    sys.exit(main())
