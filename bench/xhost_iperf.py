"""The kernel's own ceiling between two simulated hosts (``tensorgrid.cluster.simhosts``):
``iperf3`` (C, one process per end) with 1, 2 and 4 parallel TCP streams, on the same kind of
network the ``xhost.*`` rows use. No Python touches a byte, so this bounds what any framework
can reach on this machine; ``bench/xhost_tcp.py`` is the same for a Python socket pair.

    python bench/xhost_iperf.py [--streams 1,2,4] [--seconds 3] [--reps 3] [--mtu 65000]

Rows: ``xhost.iperf3.P<n>[.mtu<m>]`` in GB/s (median over ``--reps`` runs of ``--seconds``, bytes
received), with each end's CPU use as iperf3 reports it. Needs root and the ``iperf3`` command
(Debian: ``apt-get install iperf3``); without them the rows are reported as skipped with the
reason.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time

from common import emit, status_row

from tensorgrid.cluster.simhosts import SimulatedHosts, unavailable_reason

PORT = 5201


def one_run(hosts: SimulatedHosts, streams: int, seconds: float) -> dict:
    """One iperf3 client run from host 1 to the server on host 0: its JSON report's end."""
    server = hosts.popen(0, ["iperf3", "-s", "-1", "-p", str(PORT)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:  # the server may still be starting
            done = subprocess.run(
                hosts.command(1, ["iperf3", "-c", hosts.address(0), "-p", str(PORT), "-J",
                                  "-t", str(seconds), "-P", str(streams)]),
                capture_output=True, text=True, timeout=seconds + 60)
            report = json.loads(done.stdout or "{}")
            if "end" in report and not report.get("error"):
                return report["end"]  # type: ignore[no-any-return]
            if time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 failed: {report.get('error') or done.stderr}")
            time.sleep(0.2)
    finally:
        hosts.stop(server)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", default="1,2,4")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--mtu", type=int, default=None, help="the simulated links' MTU")
    a = p.parse_args(argv)
    counts = [int(n) for n in a.streams.split(",") if n]
    names = {n: f"xhost.iperf3.P{n}" + (f".mtu{a.mtu}" if a.mtu else "") for n in counts}
    why = unavailable_reason() or (None if shutil.which("iperf3") else
                                   "the iperf3 command is not installed")
    if why is not None:
        for name in names.values():
            emit(status_row(name, "iperf3", "skipped", why))
        return 0
    runs: dict[int, list[dict]] = {n: [] for n in counts}
    with SimulatedHosts(2, mtu=a.mtu) as hosts:
        for _ in range(a.reps):  # interleaved, so a burst of load hits every count alike
            for n in counts:
                runs[n].append(one_run(hosts, n, a.seconds))
    for n, ends in runs.items():
        rates = [e["sum_received"]["bits_per_second"] / 8e9 for e in ends]
        emit({"bench": names[n], "framework": "iperf3", "status": "ok", "unit": "GB/s",
              "better": "higher", "median": statistics.median(rates), "min": min(rates),
              "max": max(rates), "n": len(rates), "values": rates, "streams": n,
              "link": "unshaped veth", "mtu": a.mtu or 1500,
              "sender_cpu_percent": statistics.median(
                  e["cpu_utilization_percent"]["host_total"] for e in ends),
              "receiver_cpu_percent": statistics.median(
                  e["cpu_utilization_percent"]["remote_total"] for e in ends)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
