"""``tensorgrid local --tls``: a local cluster with TLS on every port. The master answers HTTPS
to clients that trust the cluster's CA (the SDK trains through it), and every port refuses a
plaintext client: the master's HTTP, each task's gRPC, and each task's data plane.

Every process started here is stopped by pid.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Iterator
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.checkpoint.redis_server import pid_alive
from tensorgrid.cluster import LocalCluster
from tensorgrid.cluster.probes import grpc_healthy
from tensorgrid.pb import worker_pb2, worker_pb2_grpc
from tensorgrid.settings import ClientSettings
from tensorgrid.transport.frames import HELLO

WAIT_S = 60.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(workers=1, ps=1, port=0, state_dir=tmp_path / "tg", start_timeout=WAIT_S,
                     tls=True)
    c.start()
    pids = [p.pid for p in c.processes()]
    try:
        yield c
    finally:
        c.stop()
    assert not [pid for pid in pids if pid and pid_alive(pid)], "processes outlived stop()"


async def _plaintext_data_plane_refused(address: str, token: str) -> bool:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        hello = json.dumps({"stream": "recv", "token": token}).encode()
        writer.write(struct.pack("<IB", len(hello), HELLO) + hello)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10.0) == b""
    except ConnectionError:
        return True
    finally:
        writer.close()


def test_a_tls_local_cluster_speaks_tls_on_every_port(
        cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cluster.url.startswith("https://")
    client = cluster.tls_dir
    for name, value in (("CA", "ca.pem"), ("CERT", "client.pem"), ("KEY", "client.key")):
        monkeypatch.setenv(f"TENSORGRID_TLS_{name}", str(client / value))
    settings = ClientSettings()
    token = settings.token_value or ""
    auth = {"Authorization": f"Bearer {token}"}
    # the master: HTTPS with the CA; plaintext HTTP refused
    doc = httpx.get(f"{cluster.url}/v1/cluster", headers=auth, verify=settings.http_verify(),
                    timeout=10.0).json()
    assert {t["state"] for t in doc["tasks"]} == {"alive"}
    with pytest.raises(httpx.TransportError):
        httpx.get(cluster.url.replace("https://", "http://") + "/healthz", timeout=5.0)
    credentials = settings.channel_credentials()
    for info in cluster.processes():
        if info.role not in ("ps", "worker"):
            continue
        # gRPC: mutual TLS only
        assert not grpc_healthy(info.address, timeout=3.0)
        assert grpc_healthy(info.address, timeout=5.0, credentials=credentials)
        with grpc.secure_channel(info.address, credentials) as channel:
            status = worker_pb2_grpc.WorkerServiceStub(channel).GetStatus(
                worker_pb2.GetStatusRequest(), metadata=[("authorization", f"Bearer {token}")],
                timeout=10.0)
        # the data plane: on, and TLS only
        assert status.data_address, info.name
        assert asyncio.run(_plaintext_data_plane_refused(status.data_address, token)), info.name
    # the SDK trains through the HTTPS master, tensors moving over the TLS data plane
    with tf.device("/job:ps/task:0"):
        w = tf.Variable(np.zeros((256, 4), np.float32), name="w")
    with tf.device("/job:worker/task:0"):
        x = tf.constant(np.ones((8, 256), np.float32))
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        train = tf.train.GradientDescentOptimizer(0.001).minimize(loss)
    with tf.Session(cluster.url) as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(5):
            sess.run(train)
        assert sess.run(loss) < first
