"""A cluster of processes on 127.0.0.1: ``python -m services.ps``, two ``python -m
services.worker`` and the HTTP master ``python -m services.master``, driven by
``tf.Session("http://...")`` from this process, by example clients in processes of their own, and
by ``tf.train.Server`` clients. Every wait is bounded and every process is stopped by its PID
(``procs.py``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.core import serde

from .procs import (
    NUMBER,
    LocalCluster,
    cluster,
    example_module,
    loopback_cluster,
    metric,
    numbers,
    run_examples,
    start_task,
)

in_graph_replication = example_module("in_graph_replication")
model_parallel = example_module("model_parallel")
mlp = example_module("mlp")

HTTP_TIMEOUT_S = 60.0
PS0, WORKER0, WORKER1 = "/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"


@pytest.fixture(scope="module")
def shared_procs() -> Iterator[LocalCluster]:
    """ps:0, worker:0 and worker:1 as ``services.*`` processes, and the HTTP master."""
    with cluster(ps=1, workers=2) as c:
        yield c


@pytest.fixture
def procs(shared_procs: LocalCluster) -> LocalCluster:
    """The shared cluster with no variables left by an earlier test (they live on the ps by
    name, shared by every session, as in TensorFlow)."""
    tf.Session.reset(shared_procs.master_url)
    return shared_procs


def _handle(sess: tf.Session) -> str:
    """The master's id of an HTTP session."""
    return sess._backend.handle


def _get(url: str) -> Any:
    r = httpx.get(url, timeout=HTTP_TIMEOUT_S)
    assert r.status_code == 200, r.text
    return r.json()


def _placement(master_url: str, sess: tf.Session) -> dict[str, str]:
    """node -> the task it ran on ('/job:worker/task:1'), in the session's latest plan."""
    rows = _get(f"{master_url}/v1/sessions/{_handle(sess)}/placement")
    return {r["node"]: _task(r["device"]) for r in rows}


def _task(device: str) -> str:
    """'/job:worker/replica:0/task:1/device:CPU:0' -> '/job:worker/task:1'."""
    parts = dict(p.split(":", 1) for p in device.strip("/").split("/") if ":" in p)
    return f"/job:{parts['job']}/task:{parts['task']}"


# ----------------------------------------------------------------------- data parallel
def _data_parallel_clients(mode: str, spec: dict[str, list[str]], master: str = "",
                           last_step: int = 40) -> list[tuple[int, int, int, float, float, float]]:
    """Run both replicas of ``examples/data_parallel.py`` as client processes (through the HTTP
    master, or each hosting its ``tf.train.Server`` when ``master`` is ''); returns their
    'done' lines: (worker, steps, global step, first loss, final loss, accuracy)."""
    common = ["--mode", mode, "--last-step", str(last_step), "--ps", spec["ps"][0],
              "--workers", ",".join(spec["worker"]), "--job", "worker"]
    if master:
        common += ["--master", master]
    runs = run_examples([("data_parallel.py", [*common, "--task", str(i)]) for i in range(2)])
    done = []
    for i, run in enumerate(runs):
        run.check()
        (line,) = numbers(run.output, rf"^worker {i} done: (\d+) steps, global step (\d+), "
                                      rf"loss {NUMBER} -> {NUMBER}, accuracy {NUMBER}$")
        done.append((i, *line))
    return done


def _check_converged(done: list[tuple[Any, ...]], last_step: int = 40) -> None:
    initial = max(d[3] for d in done)  # a late replica starts from a partly trained model
    for _, steps, global_step, _, last, accuracy in done:
        assert steps >= 1 and global_step >= last_step, done
        assert last < 0.5 * initial and accuracy > 0.85, done


@pytest.mark.parametrize("mode", ["async", "sync"])
def test_data_parallel_mlp_converges_through_the_http_master(procs: LocalCluster,
                                                              mode: str) -> None:
    steps_before = metric(procs.master_url, "tensorgrid_steps_total")
    done = _data_parallel_clients(mode, procs.spec, procs.master_url)
    _check_converged(done)
    if mode == "async":  # one global step per local step of either replica
        assert max(d[2] for d in done) == sum(d[1] for d in done), done
    assert metric(procs.master_url, "tensorgrid_steps_total") - steps_before >= 40
    assert metric(procs.master_url, "tensorgrid_failed_steps_total") == 0


def test_sync_data_parallel_with_server_clients_on_a_ps_process() -> None:
    """The TF1 layout: the ps is a ``services.ps`` process, each worker process hosts a
    ``tf.train.Server`` and runs its own client against it."""
    spec = loopback_cluster(ps=1, workers=2)
    ps = start_task(spec, "ps", 0, tempfile.mkdtemp(prefix="tensorgrid-ps-"))
    try:
        done = _data_parallel_clients("sync", spec)
    except BaseException:
        print(ps.log_tail(), file=sys.stderr)
        raise
    finally:
        ps.stop()
    _check_converged(done)


# ------------------------------------------------- model parallel and in-graph replication
def _train_and_place(example: Any, master_url: str) -> tuple[float, float, dict[str, str]]:
    """Build an example's model in this process, train it for 40 steps through the HTTP master,
    then run one more training step; returns the final loss and accuracy, and where the master
    placed the nodes of that training step."""
    args = example.build_parser().parse_args(["--steps", "40", "--log-every", "10"])
    model = example.build(args)
    x_data, label_data = mlp.classification_data(64)
    with tf.Session(master_url) as sess:
        loss, accuracy = mlp.fit(sess, model, args.steps, args.batch_size, args.log_every)
        assert int(sess.run(model.global_step)) == 40
        sess.run(model.train_op, model.feed_dict(x_data, label_data))
        placed = _placement(master_url, sess)
    return loss, accuracy, placed


def test_model_parallel_splits_the_layers_across_workers_and_converges(
        procs: LocalCluster) -> None:
    loss, accuracy, placed = _train_and_place(model_parallel, procs.master_url)
    assert loss < 0.3 and accuracy > 0.9, (loss, accuracy)
    # every op with a task in its device ran there: layer 1 on worker 0, layers 2 and 3 on
    # worker 1, the variables and their updates on the ps
    requested = {op.name: _task(op.device) for op in tf.get_default_graph().get_operations()
                 if "/job:" in op.device}
    for name, task in requested.items():
        if name in placed:
            assert placed[name] == task, (name, placed[name], task)
    assert {placed[n] for n in ("MatMul", "Relu")} == {WORKER0}
    assert {placed[n] for n in ("MatMul_1", "MatMul_2", "loss")} == {WORKER1}
    # colocate_gradients_with_ops: each layer's backward pass runs on its forward pass's worker
    assert placed["gradients/MatMul_grad/MatMul_1"] == WORKER0
    assert placed["gradients/MatMul_1_grad/MatMul"] == WORKER1
    updates = {placed[n] for n in placed if n.endswith("ApplyGradientDescent")}
    assert updates == {PS0}


def test_in_graph_replication_runs_a_tower_per_worker_and_converges(
        procs: LocalCluster) -> None:
    loss, accuracy, placed = _train_and_place(in_graph_replication, procs.master_url)
    assert loss < 0.3 and accuracy > 0.9, (loss, accuracy)
    for i, task in enumerate((WORKER0, WORKER1)):
        tower = {placed[n] for n in placed if n.startswith(f"tower_{i}/")}
        assert tower == {task}, (i, tower)
    # the towers' gradients are averaged and applied on the ps
    averaging = {placed[n] for n in placed if n.startswith(("AddN", "truediv"))}
    updates = {placed[n] for n in placed if n.endswith("ApplyGradientDescent")}
    assert averaging == updates == {PS0}, (averaging, updates)


# ------------------------------------------------------------------------ a large tensor
ROWS, COLS = 75_000, 1_000  # 75M float32: 300 MB


def _pattern() -> np.ndarray:
    """x[r * COLS + c] = r - c: every value an integer that float32 holds exactly."""
    rows = np.arange(ROWS, dtype=np.float32)[:, None]
    return (rows - np.arange(COLS, dtype=np.float32)[None, :]).reshape(-1)


@pytest.fixture(scope="module")
def big_procs() -> Iterator[LocalCluster]:
    """ps:0 and worker:0 as processes and the HTTP master, with the default heartbeat timeout
    (3 s): big results travel over the data plane, so a task moving 300 MB stays responsive."""
    with cluster(ps=1, workers=1) as c:
        yield c


def test_a_300mb_tensor_crosses_tasks_intact(big_procs: LocalCluster) -> None:
    with tf.device(PS0):
        pattern = tf.reshape(tf.range(ROWS, dtype=tf.float32)[:, None]
                             - tf.range(COLS, dtype=tf.float32)[None, :], [ROWS * COLS])
        big = tf.Variable(pattern, name="big")
    with tf.device(WORKER0):
        exact = tf.cast(big, tf.float64)  # integer sums below 2**53 are exact in float64
        total = tf.reduce_sum(exact)
        row_sums = tf.reduce_sum(tf.reshape(exact, [ROWS, COLS]), axis=1)
    deadline = tf.RunOptions(timeout_in_ms=240_000)
    with tf.Session(big_procs.master_url) as sess:
        sess.run(big.initializer, options=deadline)
        got_total, got_rows = sess.run([total, row_sums], options=deadline)
        placed = _placement(big_procs.master_url, sess)
        assert placed["big"] == PS0 and placed[total.op.name] == WORKER0, placed
        # sum over c of (r - c) = COLS * r - COLS * (COLS - 1) / 2, and its sum over r
        expected_rows = COLS * np.arange(ROWS, dtype=np.float64) - COLS * (COLS - 1) / 2
        assert got_total == expected_rows.sum() == 2_775_000_000_000
        np.testing.assert_array_equal(got_rows, expected_rows)
        fetched = sess.run(big, options=deadline)
    assert fetched.dtype == np.float32 and fetched.shape == (ROWS * COLS,)
    np.testing.assert_array_equal(fetched, _pattern())


# ------------------------------------------------------------ plan cache and a bad request
def test_repeated_steps_hit_the_plan_cache(procs: LocalCluster) -> None:
    with tf.device(PS0):
        w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
    with tf.device(WORKER1):
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        y = tf.matmul(x, w)
    hits_before = metric(procs.master_url, "tensorgrid_plan_cache_hits_total")
    with tf.Session(procs.master_url) as sess:
        sess.run(w.initializer)
        for i in range(5):
            feed = np.full((2, 3), float(i), np.float32)
            np.testing.assert_allclose(sess.run(y, {x: feed}),
                                       feed @ np.arange(6, dtype=np.float32).reshape(3, 2))
        stats = _get(f"{procs.master_url}/v1/sessions/{_handle(sess)}")
    # one plan for the initializer, one for y; y's four later steps reuse its plan
    assert stats["plan_cache_misses"] == 2 and stats["plan_cache_hits"] == 4, stats
    assert metric(procs.master_url, "tensorgrid_plan_cache_hits_total") - hits_before >= 4


def test_a_wrong_feed_shape_is_a_400_naming_the_placeholder(procs: LocalCluster) -> None:
    graph = tf.Graph()
    with graph.as_default(), tf.device(WORKER0):
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        tf.multiply(x, 2.0, name="y")
    body = {"graph": json.loads(serde.graph_to_json(graph.as_graph_def(), indent=None))}
    with httpx.Client(base_url=procs.master_url, timeout=HTTP_TIMEOUT_S) as http:
        r = http.post("/v1/sessions", json=body)
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        bad = {"dtype": "float32", "shape": [3], "values": [1, 2, 3]}
        r = http.post(f"/v1/sessions/{sid}/run", json={"feeds": {"x": bad}, "fetches": ["y"]})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert (err["code"], err["reason"], err["node"]) == ("INVALID_ARGUMENT", "bad_feed", "x")
        assert err["retryable"] is False
        # the session is unharmed: a good feed runs
        good = {"dtype": "float32", "shape": [1, 2], "values": [[1, 2]]}
        r = http.post(f"/v1/sessions/{sid}/run", json={"feeds": {"x": good}, "fetches": ["y"]})
        assert r.status_code == 200, r.text
        assert r.json()["results"]["y"]["values"] == [[2.0, 4.0]]
        assert http.delete(f"/v1/sessions/{sid}").status_code == 204
