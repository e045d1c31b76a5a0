"""The framed data plane under TLS (issue 9, item 2): with certificates from ``tensorgrid certs``
tensors still take the data plane (RAW frames, not the gRPC fallback), over TLS; the plane refuses
a plaintext client, a certificate of another CA, and a certificate of the cluster's CA that names
no task of the cluster (the clients'). ``tf.train.Server`` tasks given certificates speak TLS
too. Real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import ssl
import struct
from pathlib import Path

import numpy as np
import pytest

import tensorgrid as tf
from tensorgrid.client.train.server import free_port
from tensorgrid.cluster.probes import grpc_healthy
from tensorgrid.master.cluster import ClusterState
from tensorgrid.master.core import MasterCore
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.settings import ClientSettings
from tensorgrid.transport.certs import make_certs
from tensorgrid.transport.channels import ChannelPool
from tensorgrid.transport.frames import HELLO
from tensorgrid.transport.server import TaskServer
from tensorgrid.transport.tls import TlsFiles
from tensorgrid.transport.worker_client import GrpcRemoteRecv, GrpcTaskClient

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"


async def _tls_cluster(files: dict[str, TlsFiles]):
    """A ps that reports another host than its consumer's (so tensors cross by socket, not
    shared memory) and a worker, each with its own certificate, and a master with its own."""
    servers, cores, ports, pools = {}, {}, {}, []
    for task, cert, host_id in ((PS, "ps-0", "another-host"), (WORKER, "worker-0", "")):
        core = WorkerCore(task)
        srv = TaskServer("127.0.0.1:0", worker=core, host_id=host_id, tls=files[cert])
        ports[task] = await srv.start()
        servers[task], cores[task] = srv, core
    spec = {"ps": [f"127.0.0.1:{ports[PS]}"], "worker": [f"127.0.0.1:{ports[WORKER]}"]}
    for task, cert in ((PS, "ps-0"), (WORKER, "worker-0")):
        pool = ChannelPool(files[cert].channel_credentials())
        pools.append(pool)
        cores[task].remote = GrpcRemoteRecv(cores[task], pool, None,
                                            ssl_context=files[cert].client_ssl_context())
    master_pool = ChannelPool(files["master"].channel_credentials())
    pools.append(master_pool)
    master_ssl = files["master"].client_ssl_context()
    master = MasterCore(ClusterState(spec), lambda ts: GrpcTaskClient(
        ts.name, ts.address, master_pool, None, ssl_context=master_ssl))
    return servers, cores, master, pools


async def _close(servers, master, pools) -> None:
    master.close_clients()
    for srv in servers.values():
        srv.worker.remote.close()
        await srv.stop(0.5)
    for pool in pools:
        await pool.close()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, TlsFiles]:
    # a task's certificate names the task and 127.0.0.1: the ports do not matter
    return make_certs({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, tmp_path / "tls")


async def test_tensors_cross_the_tls_data_plane_intact(files: dict[str, TlsFiles]) -> None:
    servers, cores, master, pools = await _tls_cluster(files)
    a0 = np.arange(3 * (1 << 20) + 5, dtype=np.float64)  # ~24 MB: several RAW pieces
    try:
        data_plane = servers[PS].data_plane
        assert data_plane is not None and data_plane.ssl_context is not None
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                a = tf.Variable(a0, name="a")
                x = tf.Variable([[1.0, 2.0, 3.0, 4.0]], name="x")
            with tf.device("/job:worker/task:0"):
                total, last = tf.reduce_sum(a), a[-1]
                y = tf.matmul(x, tf.ones([4, 1]))
            init = tf.global_variables_initializer()
        s = await master.create_session(g.as_graph_def().nodes)
        await s.run([], [], [init.name])
        for _ in range(2):
            got = await s.run([], [total.name, last.name, y.name], [])
            assert got[0] == pytest.approx(float(a0.sum()), rel=1e-12)
            assert float(got[1]) == float(a0[-1])
            np.testing.assert_allclose(got[2], [[10.0]])
        # the ps's TLS data plane carried the tensor's bytes (RAW frames): not the gRPC
        # fallback, and not shared memory
        assert data_plane.raw_bytes >= 2 * a0.nbytes
        assert data_plane.streams >= 2  # the master's RunGraph and the worker's RecvTensor
        ps_pool = servers[PS].worker_servicer.pool
        assert ps_pool is None or ps_pool.total == 0
    finally:
        await _close(servers, master, pools)


async def _refused(host: str, port: int, context: ssl.SSLContext | None) -> bool:
    """Whether the data plane at host:port refuses a connection that says a valid hello (no
    token is configured) and asks for a stream: closed without an answer, or no handshake."""
    try:
        reader, writer = await asyncio.open_connection(
            host, port, ssl=context, server_hostname=host if context else None)
    except (ssl.SSLError, ConnectionError):
        return True
    try:
        hello = json.dumps({"stream": "recv", "token": ""}).encode()
        writer.write(struct.pack("<IB", len(hello), HELLO) + hello)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), 10.0) == b""
    except (ssl.SSLError, ConnectionError):
        return True
    finally:
        writer.close()


async def test_the_tls_data_plane_refuses_plaintext_and_strangers(
        files: dict[str, TlsFiles], tmp_path: Path) -> None:
    servers, cores, master, pools = await _tls_cluster(files)
    other = make_certs({"worker": ["127.0.0.1:2"]}, tmp_path / "other")
    try:
        # the master registers the graph, so the ps knows the cluster's tasks
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable([1.0, 2.0], name="v")
            with tf.device("/job:worker/task:0"):
                out = v * 2.0
            init = tf.global_variables_initializer()
        s = await master.create_session(g.as_graph_def().nodes)
        await s.run([], [], [init.name])
        np.testing.assert_allclose((await s.run([], [out.name], []))[0], [2.0, 4.0])
        data_plane = servers[PS].data_plane
        assert data_plane is not None
        host, _, port = servers[PS].worker_servicer.data_address.rpartition(":")
        served = data_plane.streams
        strangers = {
            "plaintext": None,
            "another CA's task certificate": other["worker-0"].client_ssl_context(),
            "the clients' certificate": files["client"].client_ssl_context(),
        }
        for what, context in strangers.items():
            assert await _refused(host, int(port), context), what
        assert data_plane.streams == served  # none of them got a stream
        # a task of the cluster is served
        reader, writer = await asyncio.open_connection(
            host, int(port), ssl=files["worker-0"].client_ssl_context(), server_hostname=host)
        hello = json.dumps({"stream": "recv", "token": ""}).encode()
        writer.write(struct.pack("<IB", len(hello), HELLO) + hello)
        await writer.drain()
        for _ in range(100):
            if data_plane.streams > served:
                break
            await asyncio.sleep(0.02)
        assert data_plane.streams == served + 1
        writer.close()
    finally:
        await _close(servers, master, pools)


def test_train_servers_given_certificates_speak_tls(tmp_path: Path) -> None:
    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    certs = make_certs(spec, tmp_path / "tls")

    def settings(name: str) -> ClientSettings:
        own = certs[name]
        return ClientSettings(tls_cert=own.cert, tls_key=own.key, tls_ca=own.ca)

    ps = tf.train.Server(spec, "ps", 0, settings=settings("ps-0"))
    worker = tf.train.Server(spec, "worker", 0, settings=settings("worker-0"))
    try:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(np.arange(1 << 16, dtype=np.float32), name="v")
            with tf.device("/job:worker/task:0"):
                total = tf.reduce_sum(v)
            init = tf.global_variables_initializer()
        with tf.Session(worker.target, graph=g) as sess:
            sess.run(init)
            assert float(sess.run(total)) == pytest.approx(float(np.arange(1 << 16).sum()))
        data_plane = ps._server.data_plane
        assert data_plane is not None and data_plane.ssl_context is not None
        assert data_plane.streams >= 2  # the worker's master ran steps, its task pulled tensors
        assert not grpc_healthy(spec["ps"][0], timeout=2.0)  # plaintext gRPC is refused
    finally:
        worker.stop()
        ps.stop()
