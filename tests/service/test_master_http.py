"""The HTTP master over real task servers: the SDK's protobuf protocol, the JSON API, metrics."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest
from conftest import ROOT, STOP_TIMEOUT, stop_process
from pydantic import ValidationError
from service_helpers import assert_error, graph_bytes, graph_json, small_graph, tensor

import tensorgrid as tf
from tensorgrid.client.train.server import free_port
from tensorgrid.core import serde
from tensorgrid.pb import master_pb2
from tensorgrid.settings import MasterSettings as Settings
from tensorgrid.transport import tensors

PROTO = {"Content-Type": "application/x-protobuf", "Accept": "application/x-protobuf"}


def _ps_worker_model() -> tuple[tf.Tensor, tf.Tensor, tf.Operation, tf.Operation]:
    """w (on the ps) and y = x @ w (on the worker), an initializer and an update of w."""
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.arange(4, dtype=np.float32).reshape(2, 2), name="sdk_w")
        bump = tf.assign_add(w, tf.ones((2, 2)), name="bump")
    with tf.device("/job:worker/task:0"):
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.matmul(x, w, name="y")
    return x, y, tf.global_variables_initializer(), bump


def test_healthz_docs_and_openapi(master):
    assert master.http.get("/healthz").json() == {"status": "ok"}
    assert master.http.get("/docs").status_code == 200
    paths = master.http.get("/openapi.json").json()["paths"]
    for path in ("/v1/graphs", "/v1/graphs/{graph_id}", "/v1/sessions",
                 "/v1/sessions/{session_id}/extend", "/v1/sessions/{session_id}/run",
                 "/v1/sessions/{session_id}", "/v1/sessions/{session_id}/placement", "/v1/run",
                 "/v1/reset", "/v1/cluster", "/healthz", "/metrics"):
        assert path in paths


def test_sdk_session_over_http(master):
    """tf.Session("http://...") with a variable on the ps and ops on the worker."""
    x, y, init, bump = _ps_worker_model()
    feed = np.array([[1.0, 2.0]], np.float32)
    with tf.Session(master.url) as sess:
        sess.run(init)
        np.testing.assert_allclose(sess.run(y, {x: feed}), feed @ np.arange(4).reshape(2, 2))
        sess.run(bump)
        expected = feed @ (np.arange(4).reshape(2, 2) + 1)
        np.testing.assert_allclose(sess.run(y, {x: feed}), expected)
        np.testing.assert_allclose(sess.run(y, {x: feed}), expected)
        # the graph grows: the SDK extends the session with the new ops only
        with tf.device("/job:worker/task:0"):
            z = tf.reduce_sum(y, name="z")
        assert sess.run(z, {x: feed}) == pytest.approx(expected.sum())
        assert "/job:ps/replica:0/task:0/device:CPU:0" in sess.list_devices()

        handle = sess._backend.handle
        stats = master.http.get(f"/v1/sessions/{handle}").json()
        assert stats["graph_version"] == 2
        assert stats["plan_cache_hits"] >= 1 and stats["plan_cache_misses"] >= 3
        placement = {p["node"]: p for p in
                     master.http.get(f"/v1/sessions/{handle}/placement").json()}
        assert placement["sdk_w"]["device"].startswith("/job:ps/replica:0/task:0")
        assert placement["y"]["device"].startswith("/job:worker/replica:0/task:0")
        assert all(p["reason"] for p in placement.values())
    assert master.http.get(f"/v1/sessions/{handle}").status_code == 404


def test_json_graph_session_lifecycle(master):
    def build() -> None:
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [None, 3], name="x")
            k = tf.placeholder(tf.int32, [], name="k")
            tf.multiply(x, tf.cast(k, tf.float32), name="y")
    before = master.counts()
    r = master.http.post("/v1/graphs", json=graph_json(build))
    assert r.status_code == 201, r.text
    report = r.json()
    assert report["nodes"] == 4
    assert report["ops"] == {"Cast": 1, "Mul": 1, "Placeholder": 2}
    assert sorted(report["inputs"]) == ["k", "x"]
    assert report["report"]["placeholders"]["x"] == {"dtype": "float32", "shape": [None, 3]}
    assert master.http.get(f"/v1/graphs/{report['graph_id']}").json() == report
    assert master.counts()["graphs"] == before["graphs"] + 1

    r = master.http.post("/v1/sessions", json={"graph_id": report["graph_id"],
                                               "config": {"disable_cse": True}})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    assert r.json()["graph_version"] == 1

    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    b64 = {"dtype": "float32", "shape": [2, 3], "b64": base64.b64encode(xs.tobytes()).decode()}
    for feed_x in (tensor(xs), b64):
        r = master.http.post(f"/v1/sessions/{sid}/run", json={
            "feeds": {"x": feed_x, "k:0": tensor(np.int32(3))}, "fetches": ["y:0"]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["results"]["y:0"] == {"dtype": "float32", "shape": [2, 3],
                                          "values": (xs * 3).tolist()}
        assert isinstance(body["step_id"], int) and body["step_id"] > 0

    r = master.http.post(f"/v1/sessions/{sid}/run", json={
        "feeds": {"x": tensor(xs), "k": tensor(np.int32(2))}, "fetches": ["y"],
        "encoding": "b64"})
    out = r.json()["results"]["y"]
    got = np.frombuffer(base64.b64decode(out["b64"]), np.float32).reshape(out["shape"])
    np.testing.assert_array_equal(got, xs * 2)

    def extension() -> None:
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        k = tf.placeholder(tf.int32, [], name="k")
        y = tf.multiply(x, tf.cast(k, tf.float32), name="y")
        with tf.device("/job:worker/task:0"):
            tf.reduce_sum(y, name="total")
    new_nodes = [n for n in graph_json(extension)["node"] if n["name"] not in ("x", "k", "y")]
    new_nodes = [n for n in new_nodes if n["op"] != "Cast"]
    r = master.http.post(f"/v1/sessions/{sid}/extend",
                         json={"graph": {"node": new_nodes}, "current_version": 1})
    assert r.status_code == 200, r.text
    assert r.json() == {"graph_version": 2}
    r = master.http.post(f"/v1/sessions/{sid}/run", json={
        "feeds": {"x": tensor(xs), "k": tensor(np.int32(1))}, "fetches": ["total"]})
    assert r.json()["results"]["total"]["values"] == pytest.approx(xs.sum())

    stats = master.http.get(f"/v1/sessions/{sid}").json()
    assert stats["session_id"] == sid and stats["graph_version"] == 2
    assert stats["plan_cache_hits"] == 1 and stats["plan_cache_misses"] == 3
    assert stats["steps"] == 4
    assert master.http.delete(f"/v1/sessions/{sid}").status_code == 204
    assert_error(master.http.get(f"/v1/sessions/{sid}"), 404, "NOT_FOUND", "not_found")
    assert master.counts()["sessions"] == before["sessions"]


def test_an_integer_written_as_a_float_is_an_integer(master):
    """JSON Schema's integer is a number with no fractional part: 5557.0 is accepted where an
    integer is asked for (as the OpenAPI document says), 5557.5 and "5557" are refused."""
    def build() -> None:
        with tf.device("/job:worker/task:0"):
            tf.add(tf.placeholder(tf.float32, [], name="a"), 1.0, name="b")
    gid = master.http.post("/v1/graphs", json=graph_json(build)).json()["graph_id"]
    r = master.http.post("/v1/sessions", json={"graph_id": gid,
                                               "config": {"operation_timeout_ms": 30000.0}})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    r = master.http.post(f"/v1/sessions/{sid}/run", json={
        "feeds": {"a": tensor(np.float32(2))}, "fetches": ["b"], "timeout_ms": 30000.0})
    assert r.status_code == 200 and r.json()["results"]["b"]["values"] == 3.0, r.text
    r = master.http.post(f"/v1/sessions/{sid}/scalars",
                         json={"scalars": {"loss": 0.5}, "step": 5557.0})
    assert r.status_code == 200 and r.json()["step"] == 5557, r.text
    for bad in (5557.5, "5557", True):
        r = master.http.post(f"/v1/sessions/{sid}/scalars",
                             json={"scalars": {"loss": 0.5}, "step": bad})
        assert_error(r, 400, "INVALID_ARGUMENT", "invalid_json")
    assert master.http.delete(f"/v1/sessions/{sid}").status_code == 204


def test_protobuf_bodies(master):
    """The master.proto messages, as the SDK sends them."""
    def build() -> None:
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float64, [2], name="x")
            tf.square(x, name="sq")
    r = master.http.post("/v1/graphs", content=graph_bytes(build), headers=PROTO)
    assert r.status_code == 201, r.text
    assert r.json()["ops"] == {"Placeholder": 1, "Square": 1}

    g = serde.graph_from_bytes(graph_bytes(build))
    req = master_pb2.CreateSessionRequest(graph_def=serde.graph_to_proto(g))
    r = master.http.post("/v1/sessions", content=req.SerializeToString(), headers=PROTO)
    assert r.status_code == 201 and r.headers["content-type"] == "application/x-protobuf"
    created = master_pb2.CreateSessionResponse.FromString(r.content)
    run = master_pb2.RunStepRequest(
        session_handle=created.session_handle, fetch=["sq:0"],
        feed=[master_pb2.NamedTensor(name="x:0", tensor=tensors.to_proto(np.array([3.0, 4.0])))])
    r = master.http.post(f"/v1/sessions/{created.session_handle}/run",
                         content=run.SerializeToString(), headers=PROTO)
    assert r.status_code == 200, r.content[:300]
    resp = master_pb2.RunStepResponse.FromString(r.content)
    assert resp.step_id > 0 and resp.tensor[0].name == "sq:0"
    np.testing.assert_array_equal(tensors.from_proto(resp.tensor[0].tensor), [9.0, 16.0])
    # protobuf in, JSON out when Accept says so
    r = master.http.post(f"/v1/sessions/{created.session_handle}/run",
                         content=run.SerializeToString(),
                         headers={"Content-Type": "application/x-protobuf",
                                  "Accept": "application/json"})
    assert r.json()["results"]["sq:0"]["values"] == [9.0, 16.0]
    assert master.http.delete(f"/v1/sessions/{created.session_handle}").status_code == 204


def test_one_shot_run_keeps_no_session(master):
    before = master.counts()
    r = master.http.post("/v1/run", json={
        "graph": small_graph(), "feeds": {"x": tensor(np.float32([1.5, -1]))},
        "fetches": ["y"]})
    assert r.status_code == 200, r.text
    assert r.json()["results"]["y"]["values"] == [2.5, 0.0]
    assert master.counts() == before


def test_non_finite_and_string_tensors(master):
    def build() -> None:
        with tf.device("/job:worker/task:0"):
            tf.identity(tf.placeholder(tf.float32, [3], name="f"), name="f_out")
            tf.identity(tf.placeholder(tf.string, [2], name="s"), name="s_out")
    r = master.http.post("/v1/run", json={
        "graph": graph_json(build),
        "feeds": {"f": {"dtype": "float32", "shape": [3], "values": ["NaN", "-Infinity", 1]},
                  "s": {"dtype": "string", "shape": [2], "values": ["héllo", ""]}},
        "fetches": ["f_out", "s_out"]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results["f_out"]["values"] == ["NaN", "-Infinity", 1.0]
    assert results["s_out"] == {"dtype": "string", "shape": [2], "values": ["héllo", ""]}


def test_a_session_with_wire_delta_pulls_a_variable_as_deltas(master):
    """config.wire_delta: the worker's read of a ps variable is marked in the placement report,
    and every pull, the first whole and the next as deltas, gives the variable's exact bits."""
    value = np.random.default_rng(1).uniform(-1, 1, (128, 256)).astype(np.float32)
    step = np.float32(1e-3)

    def build() -> None:
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(value, name="delta_w")
            tf.assign_add(w, tf.fill([128, 256], step), name="delta_bump")
        with tf.device("/job:worker/task:0"):
            tf.identity(w, name="delta_y")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build), "config": {
        "wire_delta": "lz4", "wire_delta_cross_host_only": False}})
    assert r.status_code == 201, r.text
    handle = r.json()["session_id"]
    try:
        run = f"/v1/sessions/{handle}/run"
        assert master.http.post(run, json={"targets": ["delta_w/Assign"]}).status_code == 200
        want = value.copy()
        for i in range(4):
            r = master.http.post(run, json={"fetches": ["delta_y"]})
            assert r.status_code == 200, r.text
            got = np.float32(r.json()["results"]["delta_y"]["values"])
            assert got.tobytes() == want.tobytes()
            if i == 0:  # the placement report is the newest plan's: this fetch's
                rows = master.http.get(f"/v1/sessions/{handle}/placement").json()
                marks = [p for p in rows if p["reason"].startswith("wire_delta")]
                assert len(marks) == 1, rows
                assert "float32 variable read as deltas" in marks[0]["reason"]
            assert master.http.post(run, json={"targets": ["delta_bump"]}).status_code == 200
            want = want + step
    finally:
        master.http.delete(f"/v1/sessions/{handle}")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build),
                                                "config": {"wire_delta": "zlib"}})
    assert r.status_code in (400, 422), r.text


def test_reset_clears_variables(master):
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(np.float32(5.0), name="reset_me")
    with tf.Session(master.url) as sess:
        sess.run(v.initializer)
        assert sess.run(v) == 5.0
        r = master.http.post("/v1/reset", json={})
        assert r.status_code == 200, r.text
        with pytest.raises(tf.errors.FailedPreconditionError):
            sess.run(v)


def test_cluster_reports_tasks(master, tasks):
    body = master.http.get("/v1/cluster").json()
    by_name = {t["task"]: t for t in body["tasks"]}
    assert set(by_name) == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
    for name, handle in (("/job:ps/replica:0/task:0", tasks.tasks["/job:ps/task:0"]),
                         ("/job:worker/replica:0/task:0", tasks.tasks["/job:worker/task:0"])):
        t = by_name[name]
        assert t["address"] == handle.address
        assert t["state"] == "alive" and t["incarnation"]
        assert t["devices"][0] == f"{name}/device:CPU:0"
    assert body["master"]["jobs"] == {"ps": 1, "worker": 1}


def test_metrics(master):
    r = master.http.post("/v1/run", json={
        "graph": small_graph(), "feeds": {"x": tensor(np.float32([0, 0]))}, "fetches": ["y"]})
    assert r.status_code == 200
    text = master.http.get("/metrics").text
    values = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert values["tensorgrid_steps_total"] >= 1
    assert values["tensorgrid_plan_cache_misses_total"] >= 1
    assert "tensorgrid_failed_steps_total" in values
    assert "tensorgrid_sessions" in values
    assert any('route="/v1/run"' in k for k in values if k.startswith(
        "tensorgrid_http_request_duration_seconds_count"))


def test_bearer_token(tasks, make_master, monkeypatch):
    secured = make_master(tasks.spec, token="s3cret")
    assert secured.http.get("/healthz").status_code == 200
    assert_error(secured.http.get("/v1/cluster"), 401, "UNAUTHENTICATED", "unauthenticated")
    assert_error(secured.http.get("/v1/cluster", headers={"Authorization": "Bearer nope"}),
                 401, "UNAUTHENTICATED", "unauthenticated")
    ok = secured.http.get("/v1/cluster", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200
    with tf.device("/job:worker/task:0"):
        y = tf.constant(2.0) * 3.0
    monkeypatch.setenv("TENSORGRID_TOKEN", "s3cret")
    with tf.Session(secured.url) as sess:
        assert sess.run(y) == 6.0
    monkeypatch.delenv("TENSORGRID_TOKEN")
    with pytest.raises(tf.errors.UnauthenticatedError), tf.Session(secured.url) as sess:
        sess.run(y)


def test_master_stops_cleanly(tasks, make_master):
    extra = make_master(tasks.spec)
    r = extra.http.post("/v1/sessions", json={"graph": small_graph()})
    assert r.status_code == 201
    extra.stop()
    assert not extra.thread.is_alive()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{extra.url}/healthz", timeout=2.0)


def test_settings_from_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker": ["127.0.0.1:1"]}))
    monkeypatch.setenv("TENSORGRID_CLUSTER", str(path))
    monkeypatch.setenv("TENSORGRID_MAX_NODES", "7")
    monkeypatch.setenv("TENSORGRID_TOKEN", "t0k")
    settings = Settings()
    assert settings.cluster == {"worker": ["127.0.0.1:1"]}
    assert settings.max_nodes == 7 and settings.token_value == "t0k"
    assert settings.graph_limits().max_nodes == 7
    monkeypatch.setenv("TENSORGRID_CLUSTER", '{"ps": {"3": "127.0.0.1:2"}}')
    assert Settings().cluster == {"ps": {"3": "127.0.0.1:2"}}
    for bad in (str(tmp_path / "missing.json"), '{"ps": ["no-port"]}', "{}"):
        monkeypatch.setenv("TENSORGRID_CLUSTER", bad)
        with pytest.raises(ValidationError):
            Settings()


def test_python_m_services_master(tasks):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TENSORGRID_CLUSTER": json.dumps(tasks.spec),
           "TENSORGRID_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "services.master", "--log-level", "warning"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "master did not start"
            time.sleep(0.1)
        tasks_seen = {t["task"] for t in httpx.get(f"{url}/v1/cluster").json()["tasks"]}
        assert tasks_seen == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
        proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert proc.wait(STOP_TIMEOUT) in (0, -signal.SIGTERM)
    finally:
        stop_process(proc)


def test_an_op_that_gives_up_waiting_counts_as_timed_out_not_failed(master):
    from tensorgrid.framework.data_flow_ops import ConditionalAccumulator

    def counters() -> dict[str, float]:
        text = master.http.get("/metrics").text
        return {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines()
                if line and not line.startswith("#")}

    with tf.device("/job:ps/task:0"):
        acc = ConditionalAccumulator(tf.float32, shape=[2], shared_name="metrics_poll")
        wait = acc.wait_for_grads(1, timeout_ms=50, fail_on_timeout=True, name="metrics_poll")
    with tf.Session(master.url) as sess:
        before = counters()
        with pytest.raises(tf.errors.DeadlineExceededError, match="0 of 1 gradients"):
            sess.run(wait)
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(wait, {wait.op.inputs[1]: np.int32(0)})  # a real failure
        after = counters()
    assert after["tensorgrid_timed_out_steps_total"] - before["tensorgrid_timed_out_steps_total"] == 1
    assert after["tensorgrid_failed_steps_total"] - before["tensorgrid_failed_steps_total"] == 1



def test_metrics_labels_stay_bounded_under_made_up_methods_and_paths(master):
    """Requests with invented methods and random paths add no series: the method label falls
    back to "other" and unmatched paths share one route label."""
    def series() -> set[str]:
        return {line.split(" ")[0] for line in master.http.get("/metrics").text.splitlines()
                if line.startswith("tensorgrid_http_request_duration_seconds_count")}

    for i in range(3):  # every series this test can make exists after the first round
        master.http.request(f"M{i}XYZ", f"/no/such/path/{i}")
        master.http.get(f"/random/{i}")
    before = series()
    for i in range(3, 60):
        r = master.http.request(f"M{i}XYZ", f"/no/such/path/{i}")
        assert r.status_code in (404, 405)
        master.http.get(f"/random/{i}")
    after = series()
    assert after == before
    assert not any("XYZ" in s or "/random/" in s or "/no/such" in s for s in after)


def test_a_session_with_wire_compression_narrows_cross_task_edges(master):
    """config.wire_dtype: the ps -> worker edge travels as bfloat16 (values rounded to it), and
    the placement report lists the cast pair."""
    def build() -> None:
        with tf.device("/job:ps/task:0"):
            # 1 KB: smaller tensors (hyperparameters) always travel as float32
            w = tf.constant(np.float32([[1.0 + 2**-12] + [3.0] * 255]), name="wire_w")
        with tf.device("/job:worker/task:0"):
            tf.identity(w, name="wire_y")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build), "config": {
        "wire_dtype": "bfloat16", "disable_constant_folding": True}})
    assert r.status_code == 201, r.text
    handle = r.json()["session_id"]
    try:
        r = master.http.post(f"/v1/sessions/{handle}/run", json={"fetches": ["wire_y"]})
        assert r.status_code == 200, r.text
        # 1 + 2^-12 is not a bfloat16 (8 bits of mantissa): it arrives rounded to 1.0
        assert r.json()["results"]["wire_y"]["values"] == [[1.0] + [3.0] * 255]
        rows = master.http.get(f"/v1/sessions/{handle}/placement").json()
        casts = {p["node"]: p["reason"] for p in rows if p["reason"].startswith("wire_cast")}
        assert len(casts) == 2, rows
        assert any("float32 -> bfloat16" in why for why in casts.values())
    finally:
        master.http.delete(f"/v1/sessions/{handle}")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build),
                                                "config": {"wire_dtype": "int8"}})
    assert r.status_code in (400, 422), r.text


def test_a_session_with_the_wire_codec_encodes_cross_task_edges_losslessly(master):
    """config.wire_codec: the ps -> worker edge travels encoded (the tasks share a host here,
    so cross_host_only is off), arrives bit for bit, and the placement report lists the pair."""
    value = np.random.default_rng(0).uniform(-1, 1, (128, 256)).astype(np.float32)

    def build() -> None:
        with tf.device("/job:ps/task:0"):
            w = tf.constant(value, name="codec_w")
        with tf.device("/job:worker/task:0"):
            tf.identity(w, name="codec_y")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build), "config": {
        "wire_codec": "zstd", "wire_codec_level": 3, "wire_codec_cross_host_only": False,
        "disable_constant_folding": True}})
    assert r.status_code == 201, r.text
    handle = r.json()["session_id"]
    try:
        r = master.http.post(f"/v1/sessions/{handle}/run", json={"fetches": ["codec_y"]})
        assert r.status_code == 200, r.text
        assert np.array_equal(np.float32(r.json()["results"]["codec_y"]["values"]), value)
        rows = master.http.get(f"/v1/sessions/{handle}/placement").json()
        codec = [p["reason"] for p in rows if p["reason"].startswith("wire_codec")]
        assert len(codec) == 2 and any("zstd-3" in why for why in codec), rows
    finally:
        master.http.delete(f"/v1/sessions/{handle}")
    r = master.http.post("/v1/sessions", json={"graph": graph_json(build),
                                                "config": {"wire_codec": "brotli"}})
    assert r.status_code in (400, 422), r.text
