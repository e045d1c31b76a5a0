"""Cross-host paths on one machine: each task in a simulated host of its own (network namespace,
own hostname, own /dev/shm; ``tensorgrid.cluster.simhosts``), so tensors cross by TCP between
addresses, never by shared memory or loopback. Needs root; skipped with the reason otherwise."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tensorgrid.cluster.simhosts import SimulatedHosts, unavailable_reason

TASK = Path(__file__).with_name("xhost_task.py")
ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 120.0
# tasks listening on a non-loopback address need the cluster's secret (one per test run)
TASK_ENV = {**os.environ, "TENSORGRID_TOKEN": secrets.token_hex(16)}

_why = unavailable_reason()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


def _cluster(hosts: SimulatedHosts, workers: int) -> dict[str, list[str]]:
    return {"ps": [f"{hosts.address(0)}:2222"],
            "worker": [f"{hosts.address(1 + i)}:2223" for i in range(workers)]}


def _start(hosts: SimulatedHosts, host: int, cluster: dict, job: str, task: int, scenario: str,
           log_dir: Path) -> tuple[subprocess.Popen, Path]:
    log = log_dir / f"{job}{task}.log"
    argv = [sys.executable, str(TASK), "--cluster", json.dumps(cluster), "--job", job,
            "--task", str(task), "--scenario", scenario]
    with open(log, "wb") as out:
        proc = hosts.popen(host, argv, stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT),
                           env=TASK_ENV)
    return proc, log


def _result(hosts: SimulatedHosts, proc: subprocess.Popen, log: Path) -> dict:
    """The RESULT line of a worker that has to finish within RUN_TIMEOUT_S."""
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        hosts.stop(proc)
    text = log.read_text(errors="replace")
    lines = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"{log.name} printed no result (rc={proc.returncode}):\n{text[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def _hostname(log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for ln in log.read_text(errors="replace").splitlines():
            if ln.startswith("SERVING "):
                return ln.rsplit(" ", 1)[1]
        time.sleep(0.1)
    raise AssertionError(f"{log.name} never served:\n{log.read_text(errors='replace')[-2000:]}")


def _link_mtu(hosts: SimulatedHosts, host: int) -> int:
    """The MTU of a simulated host's own end of its link, as the kernel reports it."""
    out = subprocess.run(["ip", "-n", hosts.namespaces[host], "-o", "link", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split(" mtu ", 1)[1].split()[0])


@pytest.mark.parametrize("mtu", [None, 65000], ids=["mtu1500", "jumbo"])
def test_a_32mb_variable_crosses_hosts_intact(mtu: int | None) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="tg-xhost-"))
    with SimulatedHosts(2, mtu=mtu) as hosts:
        assert _link_mtu(hosts, 0) == _link_mtu(hosts, 1) == (mtu or 1500)
        cluster = _cluster(hosts, 1)
        _, ps_log = _start(hosts, 0, cluster, "ps", 0, "transfer", log_dir)
        worker, log = _start(hosts, 1, cluster, "worker", 0, "transfer", log_dir)
        got = _result(hosts, worker, log)
        assert _hostname(ps_log) == "host0"
    n = 8 << 20
    assert got["hostname"] == "host1"
    assert (got["n"], got["dtype"]) == (n, "float32")
    assert got["head"] == [0.0, 0.5, 1.0, 1.5]
    assert got["tail"] == [(n - 2) * 0.5, (n - 1) * 0.5]
    assert got["sum"] == pytest.approx(0.5 * n * (n - 1) / 2, rel=1e-12)


def test_two_workers_train_across_a_shaped_link() -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="tg-xhost-"))
    with SimulatedHosts(3, rate="1gbit") as hosts:
        cluster = _cluster(hosts, 2)
        _start(hosts, 0, cluster, "ps", 0, "train", log_dir)
        chief, chief_log = _start(hosts, 1, cluster, "worker", 0, "train", log_dir)
        other, other_log = _start(hosts, 2, cluster, "worker", 1, "train", log_dir)
        results = [_result(hosts, chief, chief_log), _result(hosts, other, other_log)]
    for r in results:
        assert r["loss_last"] < 0.5 * r["loss_first"], r
    # both replicas' updates reached the one global step on the ps
    assert max(r["global_step"] for r in results) >= 2 * 40 - 1
    assert {r["hostname"] for r in results} == {"host1", "host2"}


def test_a_changing_variable_pulled_as_deltas_across_hosts_is_exact() -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="tg-xhost-"))
    with SimulatedHosts(2, rate="1gbit") as hosts:
        cluster = _cluster(hosts, 1)
        _start(hosts, 0, cluster, "ps", 0, "delta", log_dir)
        worker, log = _start(hosts, 1, cluster, "worker", 0, "delta", log_dir)
        got = _result(hosts, worker, log)
    assert got["exact"] == got["pulls"] and got["decoded"] == got["pulls"] - 1, got
    # the hosts differ: the default (cross-host edges only) marks the read
    assert len(got["marks"]) == 1 and "float32 variable read as deltas" in got["marks"][0], got


WIRE = Path(__file__).with_name("xhost_wire.py")


@pytest.mark.parametrize("mode, error, what", [
    ("huge", "ResourceExhaustedError", "over the limit"),
    ("kind", "DataLossError", "unexpected frame kind 77"),
])
def test_a_bad_header_from_another_host_is_refused_naming_the_peer(mode: str, error: str,
                                                                   what: str) -> None:
    log_dir = Path(tempfile.mkdtemp(prefix="tg-xhost-"))
    with SimulatedHosts(2) as hosts:
        with open(log_dir / "peer.log", "wb") as out:
            hosts.popen(0, [sys.executable, str(WIRE), "--role", "peer", "--mode", mode],
                        stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
        log = log_dir / "client.log"
        with open(log, "wb") as out:
            client = hosts.popen(1, [sys.executable, str(WIRE), "--role", "client", "--address",
                                     f"{hosts.address(0)}:2230"],
                                 stdout=out, stderr=subprocess.STDOUT, cwd=str(ROOT))
        got = _result(hosts, client, log)
    assert got["error"] == error, got
    assert what in got["message"] and "/job:ps/replica:0/task:0" in got["message"], got
