"""A task process given ``--tls-cert/--tls-key/--tls-ca`` on its command line (``tensorgrid
worker``, ``tensorgrid ps``, ``python -m services.ps``) serves mutual-TLS gRPC only: a client with
a certificate of the cluster's CA is answered, a plaintext one refused (issue 9, item 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest
from conftest import ROOT, START_TIMEOUT, STOP_TIMEOUT, stop_process

from tensorgrid.client.train.server import free_port
from tensorgrid.pb import worker_pb2, worker_pb2_grpc
from tensorgrid.transport.certs import make_certs


@pytest.mark.parametrize("command", [("tensorgrid.cli", "worker"), ("tensorgrid.cli", "ps"),
                                     ("services.ps",)])
def test_a_task_started_with_tls_flags_serves_mutual_tls_only(
        tmp_path: Path, command: tuple[str, ...]) -> None:
    job = "ps" if "ps" in command[-1] else "worker"
    address = f"127.0.0.1:{free_port()}"
    spec = {job: [address]}
    files = make_certs(spec, tmp_path / "tls")
    mine = files[f"{job}-0"]
    # the flags alone carry the files: no TENSORGRID_TLS_* in the environment
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORGRID_TLS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", *command, "--cluster", json.dumps(spec), "--task", "0",
         "--tls-cert", str(mine.cert), "--tls-key", str(mine.key), "--tls-ca", str(mine.ca)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        assert line and "serving" in line[0], line
        with grpc.secure_channel(address, files["client"].channel_credentials()) as channel:
            answer = worker_pb2_grpc.WorkerServiceStub(channel).GetStatus(
                worker_pb2.GetStatusRequest(), timeout=10)
            assert answer.incarnation
        with grpc.insecure_channel(address) as plain, pytest.raises(grpc.RpcError) as info:
            worker_pb2_grpc.WorkerServiceStub(plain).GetStatus(worker_pb2.GetStatusRequest(),
                                                               timeout=5)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(STOP_TIMEOUT) == 0
    finally:
        stop_process(proc)
