"""One task of a cross-host test cluster, run inside a simulated host by ``test_cross_host.py``.

    python xhost_task.py --cluster JSON --job ps|worker --task N --scenario transfer|train|delta

The ps serves until it is stopped. A worker serves and runs the scenario's client through its own
``server.target`` (TF1 between-graph style), then prints one ``RESULT {json}`` line and exits.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

import numpy as np

import tensorgrid as tf
from tensorgrid.client import train

TRANSFER_ELEMENTS = 8 << 20  # 32 MB of float32
TRAIN_STEPS = 40
RETRY_S = 60.0


def wait_for_cluster(target: str, devices: list[str]) -> None:
    """Run a scalar through every device until the whole cluster answers (bounded)."""
    g = tf.Graph()
    with g.as_default():
        total = tf.constant(0.0)
        for d in devices:
            with tf.device(d):
                total = total + 1.0
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            with tf.Session(target, graph=g) as sess:
                sess.run(total)
            return
        except tf.errors.UnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def transfer(target: str) -> dict:
    """A 32 MB variable on the ps, read by ops on this worker."""
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(tf.cast(tf.range(TRANSFER_ELEMENTS), tf.float32) * 0.5, name="big")
        with tf.device("/job:worker/task:0"):
            pulled = tf.identity(v)
        with tf.Session(target) as sess:
            sess.run(tf.global_variables_initializer())
            got = sess.run(pulled)
    return {"n": int(got.size), "dtype": str(got.dtype), "sum": float(got.astype(np.float64).sum()),
            "head": got[:4].tolist(), "tail": got[-2:].tolist()}


def deltas(target: str, server: train.Server) -> dict:
    """A 256 KB variable on the ps, changed a little by the ps between pulls and pulled by this
    worker with deltas on (their default: cross-host edges only): every pull must be exact."""
    rng = np.random.default_rng(0)
    start = rng.uniform(-1, 1, (256, 256)).astype(np.float32)
    bump = rng.uniform(-1e-3, 1e-3, (256, 256)).astype(np.float32)
    cfg = tf.ConfigProto(graph_options=tf.GraphOptions(
        wire_compression=tf.WireCompression(dtype="", delta="lz4")))
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(start, name="moving")
            change = tf.assign_add(v, tf.constant(bump))
        with tf.device("/job:worker/task:0"):
            pulled = tf.identity(v)
        with tf.Session(target, config=cfg) as sess:
            sess.run(tf.global_variables_initializer())
            want, exact = start.copy(), 0
            for _ in range(TRAIN_STEPS):
                exact += sess.run(pulled).tobytes() == want.tobytes()
                sess.run(change)
                want = want + bump
            marks = [r["reason"] for s in server.master.sessions.values()
                     for reg in s.plans.values() for r in reg.plan.explain()
                     if r["reason"].startswith("wire_delta")]
    # the pulls this task decoded from deltas (the first one is whole)
    decoded = server.worker.remote.deltas.decoded
    return {"pulls": TRAIN_STEPS, "exact": exact, "marks": marks, "decoded": decoded}


def training(target: str, cluster: train.ClusterSpec, task: int) -> dict:
    """Linear regression, variables on the ps, this worker's replica; async updates."""
    rng = np.random.default_rng(task)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    y = (x @ np.arange(64, dtype=np.float32)[:, None] / 64.0).astype(np.float32)
    with tf.Graph().as_default():
        with tf.device(train.replica_device_setter(cluster=cluster,
                                                   worker_device=f"/job:worker/task:{task}")):
            gs = train.get_or_create_global_step()
            w = tf.Variable(tf.zeros([64, 1]), name="w")
            loss = tf.reduce_mean(tf.square(tf.matmul(tf.constant(x), w) - tf.constant(y)))
            step = train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
        with tf.Session(target) as sess:
            if task == 0:
                sess.run(tf.global_variables_initializer())
            else:  # wait (bounded) for the chief to initialise the shared variables
                deadline = time.monotonic() + RETRY_S
                while len(sess.run(tf.report_uninitialized_variables())):
                    assert time.monotonic() < deadline, "the chief never initialised the model"
                    time.sleep(0.1)
            first = float(sess.run(loss))
            for _ in range(TRAIN_STEPS):
                sess.run(step)
            last = float(sess.run(loss))
            steps = int(sess.run(gs))
    return {"loss_first": first, "loss_last": last, "global_step": steps}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cluster", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--scenario", default="transfer")
    a = p.parse_args()
    spec = train.ClusterSpec(json.loads(a.cluster))
    server = train.Server(spec, job_name=a.job, task_index=a.task)
    print(f"SERVING {a.job}{a.task} on {socket.gethostname()}", flush=True)
    if a.job == "ps":
        server.join()
        return 0
    wait_for_cluster(server.target, ["/job:ps/task:0", f"/job:worker/task:{a.task}"])
    if a.scenario == "transfer":
        out = transfer(server.target)
    elif a.scenario == "delta":
        out = deltas(server.target, server)
    else:
        out = training(server.target, spec, a.task)
    out["hostname"] = socket.gethostname()
    print("RESULT " + json.dumps(out), flush=True)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
