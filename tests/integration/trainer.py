"""One task of a between-graph training run, as a process of its own: what the fault-tolerance
tests (``test_faults.py``) start, kill with SIGKILL, and watch.

    python tests/integration/trainer.py --cluster JSON --job ps --task 0
    python tests/integration/trainer.py --cluster JSON --job worker --task I --mode async|sync \\
        [--last-step N] [--max-seconds S]

A ps hosts a ``tf.train.Server`` and serves until SIGTERM. A worker hosts a ``tf.train.Server``
and runs its own client through ``server.target`` (TensorFlow 1.x between-graph replication): the
regression of ``faults_helpers.build_replica`` (variables on the ps by ``replica_device_setter``)
under ``MonitoredTrainingSession`` (worker 0 is the chief), async or with
``SyncReplicasOptimizer(replicas_to_aggregate=2)``. It stops at ``--last-step``, after
``--max-seconds``, or on SIGTERM (after the step in flight).

A worker reports on stdout, one ``TRAINER {json}`` line per event (``faults_helpers.read_events``
parses them): ``ready`` once its session exists; ``step`` for every successful step (wall-clock
start and end, the global step, the loss); ``failure`` for every failed attempt that the
monitored session recovered from (its retry warnings); ``error`` when the loop ends by an
exception; ``done`` at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faults_helpers import EVENT_PREFIX, RETRY_LOGGER, build_replica  # noqa: E402

import tensorgrid as tf  # noqa: E402

STEP_DEADLINE = tf.RunOptions(timeout_in_ms=30_000)


def emit(event: str, **fields: Any) -> None:
    """Print one event line (one write, so lines of two threads never mix)."""
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": event, "t": time.time(), **fields})
                     + "\n")
    sys.stdout.flush()


class _Failures(logging.Handler):
    """Turns each retry warning of the monitored session into a ``failure`` event."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "while trying to" in message:
            emit("failure", at=record.created, error=message[:500])


def run_ps(spec: tf.train.ClusterSpec, task: int) -> int:
    """Serve the variables until SIGTERM."""
    server = tf.train.Server(spec, job_name="ps", task_index=task)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    emit("serving", job="ps", task=task)
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


def run_worker(spec: tf.train.ClusterSpec, args: argparse.Namespace) -> int:
    """Train until the last step, the time limit or SIGTERM; report every step."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = tf.train.Server(spec, job_name="worker", task_index=args.task)
    logging.getLogger(RETRY_LOGGER).addHandler(_Failures())
    replica = build_replica(spec, args.task, args.mode)
    hooks: list[Any] = [tf.train.StopAtStepHook(last_step=args.last_step), *replica.hooks]
    deadline = time.monotonic() + args.max_seconds
    steps = 0
    try:
        with tf.train.MonitoredTrainingSession(
                master=server.target, is_chief=args.task == 0, hooks=hooks, max_wait_secs=60,
                log_step_count_steps=None) as sess:
            emit("ready", worker=args.task)
            while not sess.should_stop() and not stop.is_set() and \
                    time.monotonic() < deadline:
                t0 = time.time()
                _, loss, step = sess.run([replica.train_op, replica.loss, replica.global_step],
                                         options=STEP_DEADLINE)
                steps += 1
                emit("step", worker=args.task, t0=t0, t1=time.time(), global_step=int(step),
                     loss=float(loss))
    except Exception as exc:  # noqa: BLE001 - reported, then the exit status says it
        emit("error", worker=args.task, error=f"{type(exc).__name__}: {exc}"[:1000])
        return 1
    finally:
        server.stop()
    emit("done", worker=args.task, steps=steps)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster", required=True, help='{"ps": [...], "worker": [...]} as JSON')
    p.add_argument("--job", choices=["ps", "worker"], required=True)
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--mode", choices=["async", "sync"], default="async")
    p.add_argument("--last-step", type=int, default=1_000_000)
    p.add_argument("--max-seconds", type=float, default=120.0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    spec = tf.train.ClusterSpec(json.loads(args.cluster))
    if args.job == "ps":
        return run_ps(spec, args.task)
    return run_worker(spec, args)


if __name__ == "__main__":
    sys.exit(main())
