"""Caps per client (issue 9, item 4): one client that fills its share of the stored graphs,
the sessions or the live steps gets a 429 ``client_quota``, while another client goes on. A
client is its ``X-Tensorgrid-Client`` header, else its address."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from service_helpers import assert_error, graph_json, small_graph

import tensorgrid as tf
from tensorgrid.checkpoint.redis_server import RedisProcess, start_redis
from tensorgrid.client.train.server import free_port
from tensorgrid.core import serde
from tensorgrid.master.quotas import CLIENT_HEADER
from tensorgrid.pb import master_pb2, master_pb2_grpc

WORKER = "/job:worker/task:0"
FEEDS = {"x": {"dtype": "float32", "shape": [2], "values": [1, 2]}}


def _as(name: str) -> dict[str, str]:
    return {CLIENT_HEADER: name}


def _quota_error(r: httpx.Response, setting: str) -> None:
    err = assert_error(r, 429, "RESOURCE_EXHAUSTED", "client_quota")
    assert setting in err["message"], err


def test_a_client_over_its_graph_share_does_not_lock_out_another(tasks, make_master) -> None:
    m = make_master(tasks.spec, max_graphs_per_client=2)
    kept = [m.http.post("/v1/graphs", json=small_graph(), headers=_as("alice"))
            for _ in range(2)]
    assert [r.status_code for r in kept] == [201, 201]
    _quota_error(m.http.post("/v1/graphs", json=small_graph(), headers=_as("alice")),
                 "max_graphs_per_client")
    assert m.http.post("/v1/graphs", json=small_graph(), headers=_as("bob")).status_code == 201
    # alice frees one of hers and has room again
    assert m.http.delete(f"/v1/graphs/{kept[0].json()['graph_id']}").status_code == 204
    assert m.http.post("/v1/graphs", json=small_graph(), headers=_as("alice")).status_code == 201
    assert m.counts()["graphs"] == 3


def test_graph_bytes_are_counted_per_client(tasks, make_master) -> None:
    one = len(httpx.Request("POST", "http://x", json=small_graph()).content)
    m = make_master(tasks.spec, max_graph_store_bytes_per_client=one * 2 + one // 2)
    for _ in range(2):
        assert m.http.post("/v1/graphs", json=small_graph(), headers=_as("alice")).status_code \
            == 201
    _quota_error(m.http.post("/v1/graphs", json=small_graph(), headers=_as("alice")),
                 "max_graph_store_bytes_per_client")
    assert m.http.post("/v1/graphs", json=small_graph(), headers=_as("bob")).status_code == 201


def test_a_client_over_its_session_share_does_not_lock_out_another(tasks, make_master) -> None:
    m = make_master(tasks.spec, max_sessions_per_client=2, max_sessions=10)
    opened = [m.http.post("/v1/sessions", json={"graph": small_graph()}, headers=_as("alice"))
              for _ in range(2)]
    assert [r.status_code for r in opened] == [201, 201]
    _quota_error(m.http.post("/v1/sessions", json={"graph": small_graph()},
                             headers=_as("alice")), "max_sessions_per_client")
    # /v1/run opens a session too: alice's share holds there as well
    _quota_error(m.http.post("/v1/run", json={"graph": small_graph(), "fetches": ["y"],
                                              "feeds": FEEDS}, headers=_as("alice")),
                 "max_sessions_per_client")
    bob = m.http.post("/v1/sessions", json={"graph": small_graph()}, headers=_as("bob"))
    assert bob.status_code == 201
    handle = bob.json()["session_id"]
    assert m.http.get(f"/v1/sessions/{handle}").json()["client"] == "bob"
    r = m.http.post(f"/v1/sessions/{handle}/run", json={"feeds": FEEDS, "fetches": ["y"]},
                    headers=_as("alice"))  # anyone with the secret may run any session
    assert r.status_code == 200 and r.json()["results"]["y"]["values"] == [2.0, 3.0]
    first = opened[0].json()["session_id"]
    assert m.http.delete(f"/v1/sessions/{first}").status_code == 204
    assert m.http.post("/v1/sessions", json={"graph": small_graph()},
                       headers=_as("alice")).status_code == 201


def test_the_global_cap_stays_the_last_defence(tasks, make_master) -> None:
    m = make_master(tasks.spec, max_sessions_per_client=5, max_sessions=2)
    for name in ("alice", "bob"):
        assert m.http.post("/v1/sessions", json={"graph": small_graph()},
                           headers=_as(name)).status_code == 201
    r = m.http.post("/v1/sessions", json={"graph": small_graph()}, headers=_as("carol"))
    assert_error(r, 413, "RESOURCE_EXHAUSTED", "too_large")


def _blocking_graph() -> dict[str, Any]:
    def build() -> None:
        with tf.device(WORKER):
            q = tf.FIFOQueue(1, tf.float32, shared_name="never_filled_client_caps")
            q.dequeue(name="wait")
    return graph_json(build)


def test_a_client_over_its_live_step_share_does_not_lock_out_another(tasks,
                                                                      make_master) -> None:
    m = make_master(tasks.spec, max_live_steps_per_client=1)
    body = {"graph": _blocking_graph(), "fetches": ["wait"], "timeout_ms": 3000}
    first: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: first.setdefault(
        "r", m.http.post("/v1/run", json=body, headers=_as("alice"))))
    runner.start()
    deadline = time.monotonic() + 10
    while m.http.get("/v1/cluster").json()["master"]["live_steps"] != 1:
        assert time.monotonic() < deadline, "the first step never started"
        time.sleep(0.05)
    small = {"graph": small_graph(), "fetches": ["y"], "feeds": FEEDS}
    _quota_error(m.http.post("/v1/run", json=small, headers=_as("alice")),
                 "max_live_steps_per_client")
    r = m.http.post("/v1/run", json=small, headers=_as("bob"))
    assert r.status_code == 200, r.text
    runner.join(30)
    assert first["r"].status_code == 504, first["r"].text  # alice's step ran to its deadline
    assert m.http.post("/v1/run", json=small, headers=_as("alice")).status_code == 200


def test_without_the_header_the_address_is_the_client(tasks, make_master) -> None:
    m = make_master(tasks.spec, max_graphs_per_client=1)
    assert m.http.post("/v1/graphs", json=small_graph()).status_code == 201
    r = m.http.post("/v1/graphs", json=small_graph())
    err = assert_error(r, 429, "RESOURCE_EXHAUSTED", "client_quota")
    assert "peer:127.0.0.1" in err["message"]
    # a header may not take an address's name, and bad names are refused
    for bad in ("peer:127.0.0.1", "", "x" * 129, "a b"):
        assert_error(m.http.post("/v1/graphs", json=small_graph(), headers=_as(bad)), 400,
                     "INVALID_ARGUMENT", "invalid_argument")


def test_the_sdk_names_its_process(tasks, make_master, monkeypatch) -> None:
    m = make_master(tasks.spec)
    g = tf.Graph()
    with g.as_default(), tf.device(WORKER):
        y = tf.constant(1.0) + 1.0
    monkeypatch.setenv("TENSORGRID_CLIENT_ID", "trainer-7")
    with tf.Session(m.url, graph=g) as sess:
        assert sess.run(y) == 2.0
        described = m.http.get(f"/v1/sessions/{sess._backend.handle}").json()
    assert described["client"] == "trainer-7", described
    monkeypatch.delenv("TENSORGRID_CLIENT_ID")
    with tf.Session(m.url, graph=g) as sess:
        sess.run(y)
        name = m.http.get(f"/v1/sessions/{sess._backend.handle}").json()["client"]
    assert name.split("-")[-2].isdigit(), name  # <host>-<pid>-<random>


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    srv: RedisProcess = start_redis(tmp_path / "redis")
    try:
        yield srv.url
    finally:
        srv.stop()


def test_restored_sessions_count_for_the_client_that_opened_them(tasks, make_master,
                                                                  redis_url) -> None:
    first = make_master(tasks.spec, redis_url=redis_url)
    handle = first.http.post("/v1/sessions", json={"graph": small_graph()},
                             headers=_as("alice")).json()["session_id"]
    second = make_master(tasks.spec, redis_url=redis_url, max_sessions_per_client=1)
    assert second.http.post("/v1/sessions", json={"graph": small_graph()},
                            headers=_as("alice")).status_code == 201
    # alice's restored session would be her second: refused, whoever asks for it
    _quota_error(second.http.get(f"/v1/sessions/{handle}", headers=_as("bob")),
                 "max_sessions_per_client")
    assert second.counts()["sessions"] == 1


def test_the_grpc_master_service_caps_per_client_too(tasks, make_master) -> None:
    port = free_port()
    make_master(tasks.spec, grpc_port=port, max_sessions_per_client=1)
    g = tf.Graph()
    with g.as_default(), tf.device(WORKER):
        tf.constant(1.0, name="c")
    req = master_pb2.CreateSessionRequest(graph_def=serde.graph_to_proto(g.as_graph_def()))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = master_pb2_grpc.MasterServiceStub(channel)

        def create(name: str | None) -> Any:
            meta = [(CLIENT_HEADER.lower(), name)] if name else None
            return stub.CreateSession(req, metadata=meta, timeout=30)

        assert create("alice").session_handle
        with pytest.raises(grpc.RpcError) as info:
            create("alice")
        assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "max_sessions_per_client" in info.value.details()
        assert create("bob").session_handle
        assert create(None).session_handle  # named by its address
        with pytest.raises(grpc.RpcError):
            create(None)
