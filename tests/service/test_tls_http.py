"""HTTPS for the master (issue 9, item 2): given its certificate the HTTP master speaks only TLS;
clients that trust the cluster's CA (the SDK, the command line) work over ``https``, a plaintext
client and one that does not trust the CA are refused, and with ``tls_http_client_certs`` a
client without a certificate of the CA is refused too. The tasks behind it speak mutual TLS."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from conftest import LoopThread, MasterServer, TaskHandle
from typer.testing import CliRunner

import tensorgrid as tf
from tensorgrid.cli import app
from tensorgrid.client.train.server import free_port
from tensorgrid.settings import ClientSettings
from tensorgrid.transport.certs import make_certs
from tensorgrid.transport.tls import TlsFiles, client_ssl_context


class TlsTasks:
    """A ps and a worker task, each serving mutual TLS with its own certificate."""

    def __init__(self, directory: Path) -> None:
        self.spec = {"ps": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
        self.files = make_certs(self.spec, directory)
        self.runner = LoopThread("tls-tasks")
        self.tasks: list[TaskHandle] = []
        try:
            for job in ("ps", "worker"):
                own = self.files[f"{job}-0"]
                self.tasks.append(TaskHandle(
                    self.runner, f"/job:{job}/task:0", self.spec[job][0], self.spec,
                    tls_cert=own.cert, tls_key=own.key, tls_ca=own.ca))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for handle in self.tasks:
            handle.stop()
        self.runner.close()


@pytest.fixture(scope="module")
def tls_tasks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsTasks]:
    tasks = TlsTasks(tmp_path_factory.mktemp("tls"))
    yield tasks
    tasks.close()


def _tls(files: TlsFiles) -> dict[str, Any]:
    return {"tls_cert": files.cert, "tls_key": files.key, "tls_ca": files.ca}


@pytest.fixture
def https_master(tls_tasks: TlsTasks, make_master: Callable[..., MasterServer]
                 ) -> MasterServer:
    return make_master(tls_tasks.spec, **_tls(tls_tasks.files["master"]))


def _wait_alive(master: MasterServer, verify: Any) -> dict[str, Any]:
    """The master's /v1/cluster once it counts both tasks alive (it polls them over gRPC TLS)."""
    deadline = time.monotonic() + 20.0
    while True:
        doc = httpx.get(f"{master.url}/v1/cluster", verify=verify, timeout=5.0).json()
        if all(t["state"] == "alive" for t in doc["tasks"]) or time.monotonic() > deadline:
            return doc  # type: ignore[no-any-return]
        time.sleep(0.1)


def test_https_master_answers_clients_of_the_ca_and_refuses_others(
        https_master: MasterServer, tls_tasks: TlsTasks) -> None:
    assert https_master.url.startswith("https://")
    ca_only = client_ssl_context(tls_tasks.files["client"].ca)
    doc = _wait_alive(https_master, ca_only)
    assert sorted(t["state"] for t in doc["tasks"]) == ["alive", "alive"], doc
    plain = https_master.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{plain}/healthz", timeout=5.0)  # plaintext HTTP on the TLS port
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{https_master.url}/healthz", timeout=5.0)  # the system's CAs only


def test_a_session_and_the_cli_work_over_https(https_master: MasterServer, tls_tasks: TlsTasks,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    client = tls_tasks.files["client"]
    monkeypatch.setenv("TENSORGRID_TLS_CA", str(client.ca))
    _wait_alive(https_master, ClientSettings().http_verify())
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.full((64, 64), 0.5, np.float32), name="w")
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [1, 64], name="x")
            y = tf.matmul(x, w)
        init = tf.global_variables_initializer()
    with tf.Session(https_master.url, graph=g) as sess:
        sess.run(init)
        got = sess.run(y, {x: np.ones((1, 64), np.float32)})
    np.testing.assert_allclose(got, np.full((1, 64), 32.0))
    result = CliRunner().invoke(app, ["status", "--master", https_master.url, "--json"])
    assert result.exit_code == 0, result.output
    tasks = json.loads(result.output)["tasks"]
    assert {t["task"] for t in tasks} == {"/job:ps/replica:0/task:0",
                                          "/job:worker/replica:0/task:0"}


def test_mutual_tls_http_refuses_a_client_without_a_certificate(
        tls_tasks: TlsTasks, make_master: Callable[..., MasterServer]) -> None:
    master = make_master(tls_tasks.spec, tls_http_client_certs=True,
                         **_tls(tls_tasks.files["master"]))
    client = tls_tasks.files["client"]
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{master.url}/healthz", verify=client_ssl_context(client.ca), timeout=5.0)
    with_cert = ClientSettings(**_tls(client)).http_verify()
    assert httpx.get(f"{master.url}/healthz", verify=with_cert, timeout=5.0).status_code == 200
    other = make_certs(tls_tasks.spec, Path(str(client.ca.parent) + "-other"))["client"]
    foreign = client_ssl_context(client.ca, other.cert, other.key)  # another CA's certificate
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{master.url}/healthz", verify=foreign, timeout=5.0)


def test_health_probes_tls_targets_with_the_ca(https_master: MasterServer,
                                                tls_tasks: TlsTasks) -> None:
    client = tls_tasks.files["client"]
    runner = CliRunner()
    ok = runner.invoke(app, ["health", https_master.url, "--tls-ca", str(client.ca)])
    assert (ok.exit_code, ok.output.strip()) == (0, "SERVING"), ok.output
    assert runner.invoke(app, ["health", https_master.url]).exit_code == 1  # no CA: unverified
    task = tls_tasks.spec["ps"][0]
    mutual = runner.invoke(app, ["health", task, "--tls-ca", str(client.ca), "--tls-cert",
                                 str(client.cert), "--tls-key", str(client.key)])
    assert (mutual.exit_code, mutual.output.strip()) == (0, "SERVING"), mutual.output
    plain = runner.invoke(app, ["health", task])
    assert (plain.exit_code, plain.output.strip()) == (1, "UNREACHABLE")


def test_the_dashboard_cookie_is_secure_over_https(
        tls_tasks: TlsTasks, make_master: Callable[..., MasterServer]) -> None:
    master = make_master(tls_tasks.spec, token="s3cret", **_tls(tls_tasks.files["master"]))
    verify = client_ssl_context(tls_tasks.files["client"].ca)
    r = httpx.get(f"{master.url}/?token=s3cret", verify=verify, timeout=5.0)
    assert r.status_code == 303, r.text
    cookie = r.headers["set-cookie"].lower()
    assert "secure" in cookie.split("; ") and "httponly" in cookie.split("; "), cookie
