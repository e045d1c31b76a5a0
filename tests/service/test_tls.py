"""Mutual TLS on the gRPC control plane (issue 9, item 2): ``tensorgrid certs`` makes a CA and a
certificate per process; a task given its certificate serves only TLS, answers a client with a
certificate of the cluster's CA, and refuses a plaintext client, one without a certificate and
one whose certificate another CA signed."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import grpc
import pytest
from typer.testing import CliRunner

from tensorgrid.cli import app
from tensorgrid.client.train.server import free_port
from tensorgrid.master.cluster import ClusterState
from tensorgrid.master.core import MasterCore
from tensorgrid.pb import master_pb2, master_pb2_grpc, worker_pb2, worker_pb2_grpc
from tensorgrid.runtime.worker import WorkerCore
from tensorgrid.settings import TaskSettings
from tensorgrid.transport.certs import make_certs
from tensorgrid.transport.server import TaskServer

WORKER = "/job:worker/replica:0/task:0"


def test_certs_command_makes_a_ca_and_owner_only_keys(tmp_path: Path) -> None:
    spec = {"ps": ["127.0.0.1:2222"], "worker": ["10.0.0.5:2222"]}
    result = CliRunner().invoke(app, ["certs", "--out", str(tmp_path / "tls"),
                                      "--cluster", json.dumps(spec)])
    assert result.exit_code == 0, result.output
    names = {p.name for p in (tmp_path / "tls").iterdir()}
    assert {"ca.pem", "ca.key", "master.pem", "client.pem", "ps-0.pem", "worker-0.key"} <= names
    for key in (tmp_path / "tls").glob("*.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


async def test_a_tls_task_refuses_plaintext_and_foreign_clients(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    files = make_certs({"worker": [address]}, tmp_path / "tls")
    other = make_certs({"worker": [address]}, tmp_path / "other")
    server = TaskServer(address, worker=WorkerCore(WORKER), tls=files["worker-0"])
    assert server.use_data_plane  # the framed data plane speaks TLS too
    await server.start()
    try:
        secure = grpc.aio.secure_channel(address, files["client"].channel_credentials())
        async with secure:
            answer = await worker_pb2_grpc.WorkerServiceStub(secure).GetStatus(
                worker_pb2.GetStatusRequest(), timeout=10)
            assert answer.incarnation
        cert, key, ca = files["client"].read()
        refused = {
            "plaintext": grpc.aio.insecure_channel(address),
            "no client certificate": grpc.aio.secure_channel(
                address, grpc.ssl_channel_credentials(root_certificates=ca)),
            "another CA's certificate": grpc.aio.secure_channel(
                address, grpc.ssl_channel_credentials(
                    root_certificates=ca, private_key=other["client"].key.read_bytes(),
                    certificate_chain=other["client"].cert.read_bytes())),
        }
        for what, channel in refused.items():
            async with channel:
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await worker_pb2_grpc.WorkerServiceStub(channel).GetStatus(
                        worker_pb2.GetStatusRequest(), timeout=5)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE, what
    finally:
        await server.stop(0)


def test_tls_settings_need_all_three_files_and_keep_the_data_plane(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="TLS needs all"):
        TaskSettings(tls_cert=tmp_path / "a.pem").tls_files()
    files = make_certs({"worker": ["127.0.0.1:1"]}, tmp_path / "tls")["worker-0"]
    settings = TaskSettings(tls_cert=files.cert, tls_key=files.key, tls_ca=files.ca)
    assert settings.tls_files() == files and settings.use_data_plane
    assert settings.data_plane_ssl() is not None


async def test_under_tls_a_heartbeat_for_a_task_is_accepted_only_from_that_task(
        tmp_path: Path) -> None:
    spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    files = make_certs(spec, tmp_path / "tls")
    address = f"127.0.0.1:{free_port()}"
    core = MasterCore(ClusterState(spec), lambda ts: None)  # type: ignore[arg-type,return-value]
    server = TaskServer(address, master=core, tls=files["master"])
    await server.start()
    ps, worker = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
    try:
        for cert, task, ok in (("worker-0", worker, True), ("worker-0", ps, False),
                               ("client", ps, False), ("ps-0", ps, True)):
            channel = grpc.aio.secure_channel(address, files[cert].channel_credentials())
            async with channel:
                call = master_pb2_grpc.MasterServiceStub(channel).Heartbeat(
                    master_pb2.HeartbeatRequest(task=task, incarnation=7), timeout=10)
                if ok:
                    await call
                else:
                    with pytest.raises(grpc.aio.AioRpcError) as info:
                        await call
                    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED, (cert, task)
        assert core.cluster.task(worker).incarnation == 7
        assert core.cluster.task(ps).incarnation == 7  # only from ps-0's own heartbeat
    finally:
        await server.stop(0)
