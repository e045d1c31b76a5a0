"""The reference for the cross-host transfer rows: plain Python TCP between two simulated hosts
(``tensorgrid.cluster.simhosts``), the sender ``sendall``-ing one array's memory and the receiver
``recv_into``-ing a buffer it reuses, so nothing but the kernel copies a byte. What the data plane
reaches is best read as a fraction of this figure, measured in the same sitting.

    python bench/xhost_tcp.py [--mb 16] [--reps 20] [--rate 1gbit]

Row: ``xhost.tcp.raw.<MB>MB[.<rate>]`` in GB/s (median over ``--reps`` messages of ``--mb``
MB), with each end's CPU seconds per GB.
Needs root; without it the row is reported as skipped with the reason.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import struct
import subprocess
import sys
import time

from common import emit, status_row

from tensorgrid.cluster.simhosts import SimulatedHosts, unavailable_reason

PORT = 2299


def serve(nbytes: int, reps: int) -> None:
    """The sending host: one connection, ``reps`` messages of ``nbytes`` each."""
    payload = memoryview(bytearray(b"\x01" * nbytes))
    with socket.create_server(("0.0.0.0", PORT)) as srv:
        conn, _ = srv.accept()
        cpu0 = time.process_time()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(reps):
                if not conn.recv(1):  # the receiver asks for each message
                    return
                conn.sendall(payload)
            # the sender's CPU per GB, for the receiver to print (sent after the last message)
            conn.sendall(struct.pack("<d", (time.process_time() - cpu0) / (nbytes * reps / 1e9)))


def fetch(host: str, nbytes: int, reps: int) -> None:
    """The receiving host: times each message and prints the rates (GB/s) as one line."""
    buf = memoryview(bytearray(nbytes))
    deadline = time.monotonic() + 30
    while True:
        try:
            sock = socket.create_connection((host, PORT))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    rates = []
    cpu0 = time.process_time()
    with sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(reps):
            t0 = time.perf_counter()
            sock.sendall(b"x")
            got = 0
            while got < nbytes:
                n = sock.recv_into(buf[got:])
                if not n:
                    raise ConnectionError("the sender closed early")
                got += n
            rates.append(nbytes / (time.perf_counter() - t0) / 1e9)
        cpu = (time.process_time() - cpu0) / (nbytes * reps / 1e9)
        sender = bytearray(8)
        got = 0
        while got < 8:
            n = sock.recv_into(memoryview(sender)[got:])
            if not n:
                raise ConnectionError("the sender closed early")
            got += n
    rates += [cpu, *struct.unpack("<d", sender)]
    print("RATES " + struct.pack(f"<{len(rates)}d", *rates).hex(), flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=16)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rate", default=None, help="shape each host's egress (e.g. 1gbit)")
    p.add_argument("--mtu", type=int, default=None, help="the simulated links' MTU")
    p.add_argument("--role", choices=["server", "client"], help=argparse.SUPPRESS)
    p.add_argument("--peer", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    nbytes = a.mb << 20
    if a.role == "server":
        serve(nbytes, a.reps)
        return 0
    if a.role == "client":
        fetch(a.peer, nbytes, a.reps)
        return 0
    name = f"xhost.tcp.raw.{a.mb}MB" + (f".{a.rate}" if a.rate else "") + \
        (f".mtu{a.mtu}" if a.mtu else "")
    why = unavailable_reason()
    if why is not None:
        emit(status_row(name, "python", "skipped", why))
        return 0
    me = [sys.executable, __file__, "--mb", str(a.mb), "--reps", str(a.reps)]
    with SimulatedHosts(2, rate=a.rate, mtu=a.mtu) as hosts:
        server = hosts.popen(0, [*me, "--role", "server"])
        client = hosts.popen(1, [*me, "--role", "client", "--peer", hosts.address(0)],
                             stdout=subprocess.PIPE, text=True)
        out, _ = client.communicate(timeout=300)
        hosts.stop(server)
    lines = [ln for ln in out.splitlines() if ln.startswith("RATES ")]
    if client.returncode != 0 or not lines:
        emit(status_row(name, "python", "error", f"the receiver exited {client.returncode}"))
        return 1
    raw = bytes.fromhex(lines[-1].split()[1])
    rates = list(struct.unpack(f"<{len(raw) // 8}d", raw))
    rates, (receiver_cpu, sender_cpu) = rates[1:-2], rates[-2:]  # the first warms the path
    emit({"bench": name, "framework": "python", "status": "ok", "unit": "GB/s",
          "better": "higher", "median": statistics.median(rates), "min": min(rates),
          "max": max(rates), "n": len(rates), "bytes": nbytes,
          "link": a.rate or "unshaped veth", "mtu": a.mtu or 1500,
          # CPU per GB moved (user and system, whole process): the kernel's own cost, to set
          # beside ``xhost_wire.py``'s
          "receiver_cpu_s_per_gb": receiver_cpu, "sender_cpu_s_per_gb": sender_cpu})
    return 0


if __name__ == "__main__":
    sys.exit(main())
