"""Attr types checked against the op, over the master's HTTP API and its gRPC ``MasterService``:
a node whose attr is of the wrong type, or one its op does not take, is a 400 (``bad_attr``) /
``INVALID_ARGUMENT`` naming the node, the attr, the expected and the given type; the master keeps
nothing of the request."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
import numpy as np
import pytest
from service_helpers import assert_error, graph_json

import tensorgrid as tf
from tensorgrid.client.train.server import free_port
from tensorgrid.core import serde
from tensorgrid.master.cluster import ClusterState
from tensorgrid.master.core import MasterCore
from tensorgrid.master.inprocess import InProcessTaskClient
from tensorgrid.pb import master_pb2, master_pb2_grpc
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.status import from_rpc_error

WORKER = "/job:worker/task:0"
MATMUL_MESSAGE = "Node 'y' (op MatMul) attr 'transpose_a' expects bool, got string"


def _matmul_graph() -> dict[str, Any]:
    """y = x @ eye(2) on the worker, with x: float32[None, 2]."""
    def build() -> None:
        with tf.device(WORKER):
            x = tf.placeholder(tf.float32, [None, 2], name="x")
            tf.matmul(x, tf.constant(np.eye(2, dtype=np.float32)), name="y")
    return graph_json(build)


def _with_attr(graph: dict[str, Any], node: str, attr: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(graph)
    for n in out["node"]:
        if n["name"] == node:
            n.setdefault("attr", {})[attr] = value
    return out


BAD_MATMUL = _with_attr(_matmul_graph(), "y", "transpose_a", {"s": "eWVz"})  # b"yes"


def _pool_graph() -> dict[str, Any]:
    def build() -> None:
        with tf.device(WORKER):
            x = tf.placeholder(tf.float32, [1, 4, 4, 1], name="x")
            tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="pool")
    return graph_json(build)


@pytest.mark.parametrize("path", ["/v1/graphs", "/v1/sessions", "/v1/run"])
def test_wrong_attr_type_is_a_400_naming_node_attr_and_types(master, path) -> None:
    before = master.counts()
    body: dict[str, Any] = {"graph": BAD_MATMUL}
    if path == "/v1/graphs":
        r = master.http.post(path, json=BAD_MATMUL)
    else:
        if path == "/v1/run":
            body["fetches"] = ["y"]
        r = master.http.post(path, json=body)
    err = assert_error(r, 400, "INVALID_ARGUMENT", "bad_attr", node="y")
    assert err["message"] == MATMUL_MESSAGE
    assert err["op"] == "MatMul"
    assert master.counts() == before


def test_the_binary_graphdef_is_checked_too(master) -> None:
    pb = serde.graph_to_bytes(serde.graph_from_json(json.dumps(BAD_MATMUL)))
    r = master.http.post("/v1/graphs", content=pb,
                         headers={"Content-Type": "application/x-protobuf"})
    err = assert_error(r, 400, "INVALID_ARGUMENT", "bad_attr", node="y")
    assert err["message"] == MATMUL_MESSAGE


@pytest.mark.parametrize("node, attr, value, message", [
    ("pool", "strides", {"list": {"s": ["MQ==", "MQ==", "MQ==", "MQ=="]}},
     "Node 'pool' (op MaxPool) attr 'strides' expects list(int), got list(string)"),
    ("pool", "ksize", {"i": "2"}, "Node 'pool' (op MaxPool) attr 'ksize' expects list(int), got int"),
    ("x", "shape", {"list": {"i": ["1", "4", "4", "1"]}},
     "Node 'x' (op Placeholder) attr 'shape' expects shape, got list(int)"),
    ("x", "dtype", {"s": "ZmxvYXQzMg=="},
     "Node 'x' (op Placeholder) attr 'dtype' expects type, got string"),
    ("pool", "foo", {"i": "1"}, "Node 'pool' (op MaxPool) has attr 'foo', which op MaxPool "
     "does not take"),
])
def test_list_shape_and_unknown_attrs(master, node, attr, value, message) -> None:
    r = master.http.post("/v1/graphs", json=_with_attr(_pool_graph(), node, attr, value))
    err = assert_error(r, 400, "INVALID_ARGUMENT", "bad_attr", node=node)
    assert err["message"].startswith(message), err


def test_exporter_attrs_and_good_graphs_are_accepted(master) -> None:
    graph = _with_attr(_pool_graph(), "pool", "_output_shapes",
                       {"list": {"shape": [{"dim": [{"size": "1"}, {"size": "2"},
                                                    {"size": "2"}, {"size": "1"}]}]}})
    graph = _with_attr(graph, "pool", "_class", {"list": {"s": ["bG9jOkB4"]}})
    r = master.http.post("/v1/graphs", json=graph)
    assert r.status_code == 201, r.text
    assert master.http.delete(f"/v1/graphs/{r.json()['graph_id']}").status_code == 204


def test_extend_checks_the_new_nodes(master) -> None:
    r = master.http.post("/v1/sessions", json={"graph": _matmul_graph()})
    assert r.status_code == 201, r.text
    sid, version = r.json()["session_id"], r.json()["graph_version"]
    try:
        extra = _with_attr(_matmul_graph(), "y", "transpose_b", {"i": "1"})
        extra["node"] = [dict(n, name="y2", input=["x", "Const"]) for n in extra["node"]
                         if n["name"] == "y"]
        r = master.http.post(f"/v1/sessions/{sid}/extend",
                             json={"graph": extra, "current_version": version})
        err = assert_error(r, 400, "INVALID_ARGUMENT", "bad_attr", node="y2")
        assert err["message"] == "Node 'y2' (op MatMul) attr 'transpose_b' expects bool, got int"
    finally:
        master.http.delete(f"/v1/sessions/{sid}")


@pytest.fixture
async def grpc_master() -> AsyncIterator[str]:
    """A worker task hosting a master (as a ``train.Server`` does), serving on a free port."""
    task = "/job:worker/replica:0/task:0"
    worker = WorkerCore(task)
    address = f"127.0.0.1:{free_port()}"
    state = ClusterState({"worker": [address]})
    state.observe(task, worker.incarnation)
    master = MasterCore(state, lambda ts: InProcessTaskClient(worker), client_task=task)
    server = TaskServer(address, worker=worker, master=master)
    await server.start()
    try:
        yield address
    finally:
        await server.stop(0)


async def test_grpc_create_session_is_invalid_argument_with_the_same_message(grpc_master) -> None:
    graph = serde.graph_to_proto(serde.graph_from_json(json.dumps(BAD_MATMUL)))
    async with grpc.aio.insecure_channel(grpc_master) as channel:
        stub = master_pb2_grpc.MasterServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.CreateSession(master_pb2.CreateSessionRequest(graph_def=graph), timeout=10)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert MATMUL_MESSAGE in caught.value.details()
        err = from_rpc_error(caught.value)
        assert err.node_name == "y" and err.op_type == "MatMul"
        # the same graph with a bool there opens a session
        good = serde.graph_to_proto(serde.graph_from_json(json.dumps(
            _with_attr(BAD_MATMUL, "y", "transpose_a", {"b": False}))))
        created = await stub.CreateSession(master_pb2.CreateSessionRequest(graph_def=good),
                                           timeout=10)
        assert created.session_handle
