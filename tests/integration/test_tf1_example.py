"""examples/tf1_supervisor_cnn.py (tf.app, tf.flags, tf.data, tf.layers, Supervisor) in one
process, and between-graph replicated over a ps process and two worker processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import tensorgrid as tf
from tensorgrid.client.train.server import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "examples" / "tf1_supervisor_cnn.py")
TIMEOUT_S = 120
FINAL = re.compile(r"^final loss ([0-9.]+) accuracy ([0-9.]+)", re.MULTILINE)
STEP = re.compile(r"^step (\d+) loss ([0-9.]+)$", re.MULTILINE)


def _start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, SCRIPT, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen) -> str:
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"still running after {TIMEOUT_S} s:\n{out}") from None
    assert proc.returncode == 0, out
    return out


def test_in_one_process_the_loss_falls_and_the_model_learns(tmp_path) -> None:
    # the Supervisor's first summary comes one interval after the start, as in TensorFlow: the
    # interval must be well under the ~0.5 s the 40 steps take on a fast machine
    out = _finish(_start("--train_steps", "40", "--logdir", str(tmp_path), "--summary_secs",
                         "0.05"))
    losses = [float(loss) for _, loss in STEP.findall(out)]
    assert losses and losses[-1] < 0.5 * losses[0], out
    ((_, accuracy),) = FINAL.findall(out)
    assert float(accuracy) > 0.8, out
    (events,) = tmp_path.glob("events.out.tfevents.*")  # the chief's TensorBoard file
    tags = {v.tag for e in tf.train.summary_iterator(str(events)) for v in e.summary.value}
    assert {"loss", "eval_accuracy", "global_step/sec"} <= tags


def test_between_graph_replication_with_a_chief_and_a_waiting_worker(tmp_path) -> None:
    ps = f"127.0.0.1:{free_port()}"
    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    common = ["--ps_hosts", ps, "--worker_hosts", ",".join(workers), "--train_steps", "40"]
    ps_proc = _start("--job_name", "ps", "--task_index", "0", *common)
    procs = []
    try:
        # the non-chief first: it must wait for the chief's initialization
        procs = [_start("--job_name", "worker", "--task_index", str(i), *common,
                        "--logdir", str(tmp_path) if i == 0 else "") for i in (1, 0)]
        chief_out = _finish(procs[1])  # a failing chief shows its own output
        outs = [chief_out, _finish(procs[0])]
    finally:
        for proc in [*procs, ps_proc]:  # the ps serves until stopped, as in TensorFlow
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    for out in outs:
        ((_, accuracy),) = FINAL.findall(out)
        assert float(accuracy) > 0.5, out
    # both workers advanced one global step on the shared ps variables
    done = [int(m) for out in outs for m in re.findall(r"^done at step (\d+)$", out, re.M)]
    assert len(done) == 2 and min(done) >= 40, outs
