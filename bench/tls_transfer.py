"""The ps -> worker transfer over the framed data plane, with TLS on and off (issue 9, item 2).

A ps and a worker task run as processes of their own on 127.0.0.1, each reporting a host id of
its own, so the tensor crosses the socket (RAW frames) and never shared memory. The master runs
in this process and times ``reduce_sum`` on the worker of a float32 variable held on the ps.
Two such clusters run side by side, one plain and one with mutual TLS on every port
(certificates from ``tensorgrid certs``), and their repetitions alternate, so both see the same
machine state. Each repetition times several steps; the figure is GB/s of the variable's size.

    python bench/tls_transfer.py [--mb 64] [--reps 7] [--runs 4]

Prints one ``RESULT`` row per mode (median, min and max over the repetitions) and the ratio of
the medians (TLS / plain).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from common import (  # noqa: E402
    Proc,
    emit,
    free_ports,
    info,
    start_process,
    stop_process,
    summarize,
    wait_for_log,
)

import tensorgrid as tf  # noqa: E402
from tensorgrid.master.cluster import ClusterState  # noqa: E402
from tensorgrid.master.core import MasterCore  # noqa: E402
from tensorgrid.runtime.worker import WorkerCore  # noqa: E402
from tensorgrid.transport.certs import make_certs  # noqa: E402
from tensorgrid.transport.channels import ChannelPool  # noqa: E402
from tensorgrid.transport.server import TaskServer  # noqa: E402
from tensorgrid.transport.tls import TlsFiles  # noqa: E402
from tensorgrid.transport.worker_client import GrpcRemoteRecv, GrpcTaskClient  # noqa: E402

READY = "TASK READY"


def _files(tls_dir: str, name: str) -> TlsFiles | None:
    if not tls_dir:
        return None
    d = Path(tls_dir)
    return TlsFiles(d / f"{name}.pem", d / f"{name}.key", d / "ca.pem")


async def _serve(job: str, spec: dict[str, list[str]], tls_dir: str) -> None:
    """Serve task 0 of ``job`` (a host id of its own) until the process is terminated."""
    state = ClusterState(spec)
    name = state.task(f"/job:{job}/task:0").name
    files = _files(tls_dir, f"{job}-0")
    core = WorkerCore(name)
    addresses = state.addresses()
    core.cluster.update(addresses)
    pool = ChannelPool(files.channel_credentials() if files else None)
    core.remote = GrpcRemoteRecv(core, pool, None, addresses=addresses,
                                 ssl_context=files.client_ssl_context() if files else None)
    server = TaskServer(addresses[name], worker=core, host_id=f"bench-host-{job}", tls=files)
    await server.start()
    print(READY, flush=True)
    await asyncio.Event().wait()


def _start_cluster(mode: str, spec: dict[str, list[str]], tls_dir: str,
                   log_dir: Path) -> list[Proc]:
    procs = []
    for job in ("ps", "worker"):
        argv = [sys.executable, str(Path(__file__)), "--role", job, "--spec", json.dumps(spec),
                "--tls-dir", tls_dir]
        proc = start_process(f"{mode}-{job}", argv, log_dir)
        procs.append(proc)
        if not wait_for_log(proc, READY, 60.0):
            raise RuntimeError(f"{mode} {job} did not start: {proc.log_text()[-2000:]}")
    return procs


class _Cluster:
    """The master's side of one cluster: a session with the transfer graph."""

    def __init__(self, spec: dict[str, list[str]], tls_dir: str) -> None:
        files = _files(tls_dir, "master")
        self.pool = ChannelPool(files.channel_credentials() if files else None)
        ssl_context = files.client_ssl_context() if files else None
        self.core = MasterCore(ClusterState(spec), lambda ts: GrpcTaskClient(
            ts.name, ts.address, self.pool, None, ssl_context=ssl_context))
        self.session: Any = None

    async def open(self, n: int) -> str:
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                big = tf.Variable(tf.ones([n], tf.float32), name="big")
            with tf.device("/job:worker/task:0"):
                total = tf.reduce_sum(big)
            init = tf.global_variables_initializer()
        self.session = await self.core.create_session(g.as_graph_def().nodes)
        await self.session.run([], [], [init.name])
        return str(total.name)

    async def close(self) -> None:
        self.core.close_clients()
        await self.pool.close()


async def _measure(specs: dict[str, dict[str, list[str]]], tls_dirs: dict[str, str], mb: int,
                   reps: int, runs: int) -> dict[str, list[float]]:
    n = mb * (1 << 20) // 4
    clusters = {mode: _Cluster(specs[mode], tls_dirs[mode]) for mode in specs}
    fetch = {mode: await c.open(n) for mode, c in clusters.items()}
    try:
        for mode, c in clusters.items():  # warm-up, and the answer is right
            for _ in range(3):
                value = float((await c.session.run([], [fetch[mode]], []))[0])
                if value != n:
                    raise AssertionError(f"{mode}: the sum of {n} ones gave {value}")
        rates: dict[str, list[float]] = {mode: [] for mode in clusters}
        for rep in range(reps):
            order = list(clusters) if rep % 2 == 0 else list(reversed(clusters))
            for mode in order:
                c = clusters[mode]
                t0 = time.perf_counter()
                for _ in range(runs):
                    await c.session.run([], [fetch[mode]], [])
                secs = (time.perf_counter() - t0) / runs
                rates[mode].append(mb * (1 << 20) / secs / 1e9)
            info(f"rep {rep + 1}/{reps}: " + ", ".join(
                f"{m} {rates[m][-1]:.3f} GB/s" for m in clusters))
        return rates
    finally:
        for c in clusters.values():
            await c.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="size of the variable (MiB)")
    parser.add_argument("--reps", type=int, default=7, help="repetitions per mode")
    parser.add_argument("--runs", type=int, default=4, help="steps per repetition")
    parser.add_argument("--role", choices=("ps", "worker"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--tls-dir", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        asyncio.run(_serve(args.role, json.loads(args.spec), args.tls_dir))
        return 0
    with tempfile.TemporaryDirectory(prefix="tg-tls-bench-") as tmp:
        work = Path(tmp)
        ports = free_ports(4)
        specs = {"plain": {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]},
                 "tls": {"ps": [f"127.0.0.1:{ports[2]}"], "worker": [f"127.0.0.1:{ports[3]}"]}}
        make_certs(specs["tls"], work / "tls")
        tls_dirs = {"plain": "", "tls": str(work / "tls")}
        procs: list[Proc] = []
        try:
            for mode in specs:
                procs += _start_cluster(mode, specs[mode], tls_dirs[mode], work)
            rates = asyncio.run(_measure(specs, tls_dirs, args.mb, args.reps, args.runs))
        finally:
            for proc in procs:
                info(stop_process(proc))
    for mode, values in rates.items():
        emit(summarize(f"dist.transfer.ps_to_worker.{args.mb}MB.data_plane.{mode}", "tensorgrid",
                       values, "GB/s", "higher", runs_per_rep=args.runs, bytes=args.mb << 20))
    plain, tls = (statistics.median(rates[m]) for m in ("plain", "tls"))
    print(f"{args.mb} MB ps->worker over the data plane, median of {args.reps} reps x "
          f"{args.runs} steps: plain {plain:.3f} GB/s, TLS {tls:.3f} GB/s, "
          f"TLS/plain {tls / plain:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
