"""Between-graph replication on real ``train.Server``s in this process (loopback only): the seed
example under ``MonitoredTrainingSession``, two workers training one linear regression
asynchronously on shared ps variables, and recovery of a chief's session."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client import train
from tensorgrid.client.train.device_setter import replica_device_setter
from tensorgrid.client.train.hooks import SessionRunHook, StopAtStepHook
from tensorgrid.client.train.monitored_session import MonitoredTrainingSession
from tensorgrid.client.train.server import ClusterSpec, Server, free_port
from tensorgrid.core import errors

JOIN_TIMEOUT_S = 120.0


class Cluster:
    """One ps and ``workers`` workers, each a Server of this process on 127.0.0.1."""

    def __init__(self, workers: int) -> None:
        self.spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}"],
                                 "worker": [f"127.0.0.1:{free_port()}" for _ in range(workers)]})
        self.servers: list[Server] = []
        try:
            self.ps = self._start("ps", 0)
            self.workers = [self._start("worker", i) for i in range(workers)]
        except BaseException:
            self.stop()
            raise

    def _start(self, job: str, index: int) -> Server:
        server = Server(self.spec, job, index)
        self.servers.append(server)
        return server

    def restart_ps(self) -> None:
        """Stop the ps and start a new one on the same address (a new incarnation)."""
        self.ps.stop()
        self.servers.remove(self.ps)
        self.ps = self._start("ps", 0)

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()
        self.servers.clear()


@pytest.fixture
def cluster1() -> Iterator[Cluster]:
    c = Cluster(workers=1)
    yield c
    c.stop()


@pytest.fixture
def cluster2() -> Iterator[Cluster]:
    c = Cluster(workers=2)
    yield c
    c.stop()


def _seed_model(cluster: Cluster) -> tuple[tf.Tensor, tf.Tensor]:
    """The seed example under replica_device_setter: matmul of two ps variables on the worker,
    and the global step's increment."""
    setter = replica_device_setter(cluster=cluster.spec, worker_device="/job:worker/task:0")
    with tf.device(setter):
        global_step = train.get_or_create_global_step()
        x = tf.Variable([[1.0, 2.0, 3.0, 4.0]], name="x")
        w = tf.Variable([[2.0], [2.0], [2.0], [2.0]], name="w")
        product = tf.matmul(x, w)
        increment = tf.assign_add(global_step, 1)
    return product, increment


def test_seed_example_runs_to_the_last_step(cluster1: Cluster) -> None:
    product, increment = _seed_model(cluster1)
    assert product.op.device == "/job:worker/task:0"
    assert {op.device for op in tf.get_default_graph().get_operations()
            if op.type == "VariableV2"} == {"/job:ps/task:0"}
    values, steps = [], []
    with MonitoredTrainingSession(master=cluster1.workers[0].target, is_chief=True,
                                  hooks=[StopAtStepHook(last_step=200)]) as sess:
        while not sess.should_stop():
            value, step = sess.run([product, increment])
            values.append(value)
            steps.append(int(step))
    assert steps == list(range(1, 201))
    np.testing.assert_array_equal(np.stack(values), np.full((200, 1, 1), 20.0, np.float32))


class _Ready(SessionRunHook):
    """Sets an event once the monitored session has a ready session."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def after_create_session(self, session, coord) -> None:
        self.event.set()


def _train_linear_regression(cluster: Cluster, index: int, x_data: np.ndarray,
                             y_data: np.ndarray, last_step: int, ready: _Ready,
                             out: dict) -> None:
    """One worker's client: its own graph, its own Server's master, the ps variables by name."""
    try:
        graph = tf.Graph()
        with graph.as_default():
            setter = replica_device_setter(cluster=cluster.spec,
                                           worker_device=f"/job:worker/task:{index}")
            with tf.device(setter):
                global_step = train.get_or_create_global_step()
                w = tf.Variable(tf.zeros([x_data.shape[1], 1]), name="w")
                b = tf.Variable(0.0, name="b")
                x = tf.constant(x_data, name="x")
                y = tf.constant(y_data, name="y")
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
                train_op = train.GradientDescentOptimizer(0.1).minimize(
                    loss, global_step=global_step)
            losses = []
            with MonitoredTrainingSession(
                    master=cluster.workers[index].target, is_chief=index == 0,
                    hooks=[StopAtStepHook(last_step=last_step), ready], max_wait_secs=60,
                    recovery_wait_secs=0.05) as sess:
                while not sess.should_stop():
                    value, _ = sess.run([loss, train_op])
                    losses.append(float(value))
            out[index] = losses
    except BaseException as exc:  # handed to the test's thread
        out[index] = exc


def test_two_workers_train_asynchronously_on_shared_ps_variables(cluster2: Cluster) -> None:
    rng = np.random.default_rng(0)
    x_data = rng.standard_normal((64, 3)).astype(np.float32)
    y_data = (x_data @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    out: dict = {}
    ready = [_Ready(), _Ready()]
    threads = [threading.Thread(target=_train_linear_regression, name=f"worker{i}",
                                args=(cluster2, i, x_data[i::2], y_data[i::2], 100, ready[i],
                                      out))
               for i in range(2)]
    # the non-chief starts first and waits: nothing initializes the ps variables yet
    threads[1].start()
    assert not ready[1].event.wait(1.0), "the non-chief did not wait for the chief"
    assert 1 not in out, f"the non-chief ended early: {out.get(1)!r}"
    threads[0].start()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a worker did not finish in time"
    for i in range(2):
        if isinstance(out[i], BaseException):
            raise out[i]
    chief, worker = out[0], out[1]
    assert chief and worker, "both workers ran training steps"
    # the global step on the ps counts every step of both workers
    with tf.device("/job:ps/task:0"):
        global_step = train.get_or_create_global_step()
    with tf.Session(cluster2.workers[0].target) as sess:
        final_step = int(sess.run(global_step))
    assert final_step == len(chief) + len(worker)
    assert final_step >= 100
    for losses in (chief, worker):
        assert losses[-1] < 0.01 * losses[0]


class _FailOnce(SessionRunHook):
    """Makes the run at ``step`` fail as if a task had become unreachable."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.runs = 0
        self.sessions = 0

    def after_create_session(self, session, coord) -> None:
        self.sessions += 1

    def after_run(self, run_context, run_values) -> None:
        self.runs += 1
        if self.runs == self.step:
            raise errors.UnavailableError("Task /job:ps/replica:0/task:0 is unreachable (test)")


def test_chief_recovers_and_keeps_the_surviving_ps_state(cluster1: Cluster) -> None:
    _, increment = _seed_model(cluster1)
    hook = _FailOnce(step=5)
    steps = []
    with MonitoredTrainingSession(master=cluster1.workers[0].target,
                                  hooks=[StopAtStepHook(last_step=12), hook]) as sess:
        while not sess.should_stop():
            steps.append(int(sess.run(increment)))
    assert hook.sessions == 2
    # the failed run had incremented the step (5) before it failed: the retry makes it 6; the
    # variables survived on the ps, so the chief kept them instead of re-initializing
    assert steps == [1, 2, 3, 4] + list(range(6, 13))


def test_chief_reinitializes_after_the_ps_restarts(cluster1: Cluster) -> None:
    _, increment = _seed_model(cluster1)
    steps = []
    t0 = time.monotonic()
    with MonitoredTrainingSession(master=cluster1.workers[0].target,
                                  hooks=[StopAtStepHook(last_step=8)],
                                  max_recovery_attempts=4, max_recovery_secs=20) as sess:
        while not sess.should_stop():
            steps.append(int(sess.run(increment)))
            if len(steps) == 5:
                cluster1.restart_ps()
    assert time.monotonic() - t0 < 60
    # the ps lost its variables: the chief initialized them again (no checkpoint to restore)
    assert steps == [1, 2, 3, 4, 5] + list(range(1, 9))
