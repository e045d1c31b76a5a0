"""Data-parallel training with between-graph replication, TensorFlow 1.x style: one parameter
server and two workers, each worker a process with its own ``tf.train.Server`` and its own client
that trains an MLP on its shard of the data.

Synthetic data only (there is no network to download a data set from): Gaussian blobs, one per
class, drawn with a fixed seed by every process (``mlp.py``); each worker takes its shard.

``--mode async``: each worker applies its gradients to the ps variables as soon as it has them.
``--mode sync``: ``SyncReplicasOptimizer(opt, replicas_to_aggregate=2, total_num_replicas=2)``
averages one gradient of each worker per update; the chief (worker 0) runs the update loop through
``make_session_run_hook(is_chief)`` and keeps it alive until the other worker is done.
Both train under ``MonitoredTrainingSession`` with ``StopAtStepHook(last_step=...)`` on the shared
global step.

Launch all three processes on free loopback ports (this process waits for the workers, then stops
the ps by its PID)::

    python examples/data_parallel.py --mode async
    python examples/data_parallel.py --mode sync --last-step 40     # a short run

Or run each role yourself, one process per task::

    python examples/data_parallel.py --ps 127.0.0.1:2222 --workers 127.0.0.1:2223,127.0.0.1:2224 \\
        --job ps --task 0                      # and --job worker --task 0, --job worker --task 1

With ``--master http://HOST:PORT`` a worker's client runs through that HTTP master instead of
hosting a Server: the tasks are then ``python -m services.ps`` / ``services.worker`` processes.

Each worker prints ``worker I step S global G loss L`` and, at the end,
``worker I done: N steps, global step G, loss FIRST -> LAST, accuracy A``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from launch import Process, exit_on_sigterm, free_port
from mlp import CLASSES, FEATURES, SAMPLES, batch, classification_data

import tensorgrid as tf

WORKER_TIMEOUT_S = 300.0
DONE_WAIT_S = 120.0
RUN_DEADLINE = tf.RunOptions(timeout_in_ms=60_000)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["async", "sync"], default="async")
    parser.add_argument("--ps", help="the ps task's HOST:PORT (default: a free loopback port)")
    parser.add_argument("--workers", help="the workers' HOST:PORT,HOST:PORT "
                                          "(default: two free loopback ports)")
    parser.add_argument("--job", choices=["ps", "worker"],
                        help="the role of this process; without it, launch every role")
    parser.add_argument("--task", type=int, default=0, help="task index in the job (0)")
    parser.add_argument("--master", default="",
                        help="with --job worker: run the client through this master "
                             "(http://HOST:PORT) instead of hosting a tf.train.Server")
    parser.add_argument("--last-step", type=int, default=200,
                        help="stop when the global step reaches this (default: 200)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=16, help="hidden units")
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--log-every", type=int, default=10, help="print every N local steps")
    return parser


def cluster_of(args: argparse.Namespace) -> tf.train.ClusterSpec:
    return tf.train.ClusterSpec({"ps": [args.ps], "worker": args.workers.split(",")})


def dense(x: tf.Tensor, n_in: int, n_out: int, name: str, seed: int) -> tf.Tensor:
    """``x @ W + b`` with the layer's variables made here (the device setter puts them on a ps)."""
    with tf.variable_scope(name):
        w = tf.Variable(tf.truncated_normal([n_in, n_out], stddev=0.3, seed=seed),
                        name="weights")
        b = tf.Variable(tf.zeros([n_out]), name="biases")
    return tf.matmul(x, w) + b


def run_ps(cluster: tf.train.ClusterSpec, task: int) -> int:
    """Serve the variables until the process is stopped."""
    server = tf.train.Server(cluster, job_name="ps", task_index=task)
    print(f"ps {task} serving on {cluster.task_address('ps', task)}", flush=True)
    server.join()
    return 0


def run_worker(args: argparse.Namespace) -> int:
    """One replica: its graph, its shard, its client; trains until the global step's last step."""
    cluster = cluster_of(args)
    task, replicas = args.task, cluster.num_tasks("worker")
    is_chief = task == 0
    server = None
    target = args.master
    if not target:
        server = tf.train.Server(cluster, job_name="worker", task_index=task)
        target = server.target
    x_all, labels_all = classification_data(SAMPLES)
    x_data, label_data = x_all[task::replicas], labels_all[task::replicas]

    with tf.device(tf.train.replica_device_setter(worker_device=f"/job:worker/task:{task}",
                                                  cluster=cluster)):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, FEATURES], name="x")
        labels = tf.placeholder(tf.int32, [None], name="labels")
        hidden = tf.nn.relu(dense(x, FEATURES, args.hidden, "hidden", seed=1))
        logits = dense(hidden, args.hidden, CLASSES, "logits", seed=2)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="loss")
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), labels)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name="accuracy")
        opt: Any = tf.train.GradientDescentOptimizer(args.learning_rate)
        hooks: list[Any] = [tf.train.StopAtStepHook(last_step=args.last_step)]
        if args.mode == "sync":
            opt = tf.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=replicas,
                                                 total_num_replicas=replicas)
            hooks.append(opt.make_session_run_hook(is_chief))
        train_op = opt.minimize(loss, global_step=global_step)
        # how many replicas finished: the chief of a sync run waits for the others before it
        # stops the update loop that their last steps wait on
        workers_done = tf.Variable(0, trainable=False, name="workers_done")
        mark_done = tf.assign_add(workers_done, 1)

    losses: list[float] = []
    with tf.train.MonitoredTrainingSession(master=target, is_chief=is_chief, hooks=hooks,
                                           max_wait_secs=120, log_step_count_steps=None) as sess:
        while not sess.should_stop():
            xb, yb = batch(x_data, label_data, len(losses), args.batch_size)
            _, value, step = sess.run([train_op, loss, global_step],
                                      feed_dict={x: xb, labels: yb}, options=RUN_DEADLINE)
            losses.append(float(value))
            if len(losses) % args.log_every == 0 or len(losses) == 1:
                print(f"worker {task} step {len(losses)} global {step} loss {value:.4f}",
                      flush=True)
        with tf.Session(target) as plain:
            final_loss, acc, step = plain.run([loss, accuracy, global_step],
                                              feed_dict={x: x_data, labels: label_data})
            plain.run(mark_done)
            if is_chief and args.mode == "sync":
                wait_for(plain, workers_done, replicas, DONE_WAIT_S)
    print(f"worker {task} done: {len(losses)} steps, global step {step}, "
          f"loss {losses[0]:.4f} -> {final_loss:.4f}, accuracy {acc:.3f}", flush=True)
    if server is not None:
        server.stop()
    return 0


def wait_for(sess: tf.Session, counter: Any, value: int, timeout: float) -> None:
    """Poll ``counter`` until it reaches ``value``.

    Raises:
        TimeoutError: it did not within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while int(sess.run(counter)) < value:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other workers did not finish within {timeout:.0f}s")
        time.sleep(0.1)


def launch(args: argparse.Namespace) -> int:
    """Run the ps and both workers as processes of this script; returns 0 when both workers do."""
    exit_on_sigterm()
    ps_address = args.ps or f"127.0.0.1:{free_port()}"
    workers = args.workers or ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    common = [sys.executable, __file__, "--ps", ps_address, "--workers", workers,
              "--mode", args.mode, "--last-step", str(args.last_step),
              "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
              "--learning-rate", str(args.learning_rate), "--log-every", str(args.log_every)]
    logs = tempfile.mkdtemp(prefix="tensorgrid-data-parallel-")
    ps = Process("ps0", [*common, "--job", "ps", "--task", "0"], log_dir=logs)
    procs: list[Process] = []
    statuses: list[int] = []
    try:
        ps.wait_for_output("serving on")
        # the workers' output goes straight to ours
        procs = [Process(f"worker{i}", [*common, "--job", "worker", "--task", str(i)])
                 for i in range(len(workers.split(",")))]
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        statuses = [p.wait(max(1.0, deadline - time.monotonic())) for p in procs]
    finally:
        for p in procs:
            p.stop()
        ps.stop()
    if any(statuses):
        print(f"a worker failed (statuses {statuses}); the ps log:\n{ps.log_tail()}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.job is None:
        return launch(args)
    if not (args.ps and args.workers):
        build_parser().error("--job needs --ps and --workers")
    if args.job == "ps":
        return run_ps(cluster_of(args), args.task)
    return run_worker(args)


if __name__ == "__main__":
    sys.exit(main())
