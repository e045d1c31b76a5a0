"""The data plane alone between two simulated hosts (``tensorgrid.cluster.simhosts``): a
``DataPlaneServer`` on one host answers RecvTensor requests with RAW frames of one float32 array
(``tensors.encode``, as a worker's servicer does), and a ``FramedCall`` on the other receives them
into fresh tensors (``tensors.Assembler``), as a consumer does. No graph, no session, no
rendezvous: what is left is framing, the event loop and the kernel's TCP, so this row read beside
``xhost.tcp.raw`` (``bench/xhost_tcp.py``, plain sockets) says what the plane costs, and beside
``xhost.transfer`` what the rest of a step costs.

    python bench/xhost_wire.py [--mb 256] [--reps 10] [--rate 1gbit]

Row: ``xhost.wire.<MB>MB[.<rate>]`` in GB/s (median over ``--reps`` pulls, the first
dropped as warm-up); TLS is timed by ``bench/tls_transfer.py``. Needs root; without it the
row is reported as skipped with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
from common import emit, status_row

from tensorgrid.cluster.simhosts import SimulatedHosts, unavailable_reason
from tensorgrid.core import errors
from tensorgrid.pb import worker_pb2
from tensorgrid.transport import tensors
from tensorgrid.transport.frames import DataPlaneServer, FramedCall, RawFrame
from tensorgrid.transport.recvbuf import ReceiveBuffers

PORT_FILE = "port"
CPU_FILE = "server-cpu"
PEER = "/job:ps/replica:0/task:0"


class _OneArray:
    """A servicer whose RecvTensorStream answers every request with ``array``, as RAW pieces;
    after each answer is sent, the process's CPU seconds so far go to ``cpu_file``."""

    def __init__(self, array: np.ndarray, cpu_file: Path) -> None:
        self.array = array
        self.cpu_file = cpu_file
        self.cpu0 = time.process_time()  # imports and set-up are not the plane's

    async def RecvTensorStream(self, requests: AsyncIterator[Any],
                               context: Any) -> AsyncIterator[Any]:
        async for msg in requests:
            for chunk in tensors.encode(0, self.array, False, None, raw=True):
                if isinstance(chunk, tensors.RawChunk):
                    yield RawFrame(worker_pb2.RecvTensorStreamResponse(
                        request_id=msg.request_id, chunk=chunk.meta), chunk.payload)
                else:
                    yield worker_pb2.RecvTensorStreamResponse(request_id=msg.request_id,
                                                              chunk=chunk)
            self.cpu_file.write_text(str(time.process_time() - self.cpu0))


async def serve(nbytes: int, port_file: Path) -> None:
    """The producing host: serve until killed; the port is written to ``port_file``."""
    array = np.ones(nbytes // 4, np.float32)
    server = DataPlaneServer(_OneArray(array, port_file.with_name(CPU_FILE)), "0.0.0.0")
    port = await server.start()
    port_file.write_text(str(port))
    await asyncio.Event().wait()


async def fetch(address: str, nbytes: int, reps: int) -> tuple[list[float], float]:
    """The consuming host: ``reps`` pulls of the array, one at a time; GB/s of each, and the
    CPU seconds this process spent per GB received."""
    pending: dict[int, tuple[tensors.Assembler, asyncio.Future[Any]]] = {}

    def sink(msg: Any, n: int) -> memoryview | None:
        return pending[msg.request_id][0].target(msg.chunk, n)

    call = FramedCall(address, "recv", None, PEER, sink=sink)

    async def read() -> None:
        async for msg in call:
            asm, fut = pending[msg.message.request_id]
            done = asm.landed(msg.message.chunk, msg.nbytes)
            if done is not None:
                fut.set_result(done[1])
                done = None  # the pool reuses a tensor's memory once nothing holds it

    buffers = ReceiveBuffers()  # as a task's RecvTensor client has
    reader: asyncio.Task[None] | None = None
    rates = []
    cpu0 = time.process_time()
    for rid in range(1, reps + 1):
        fut = asyncio.get_running_loop().create_future()
        pending[rid] = (tensors.Assembler(peer=PEER, buffers=buffers), fut)
        t0 = time.perf_counter()
        await call.write(worker_pb2.RecvTensorStreamRequest(request_id=rid))
        if reader is None:
            reader = asyncio.ensure_future(read())
        value = await asyncio.wait_for(fut, 120)
        rates.append(nbytes / (time.perf_counter() - t0) / 1e9)
        if value.nbytes != nbytes or value[-1] != 1.0:
            raise errors.DataLossError(f"pull {rid} gave {value.nbytes} bytes")
        del pending[rid], fut, value
    call.cancel()
    return rates, (time.process_time() - cpu0) / (nbytes * reps / 1e9)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--rate", default=None, help="shape each host's egress (e.g. 1gbit)")
    p.add_argument("--mtu", type=int, default=None, help="the simulated links' MTU")
    p.add_argument("--role", choices=["server", "client"], help=argparse.SUPPRESS)
    p.add_argument("--peer", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    nbytes = a.mb << 20
    work = Path(a.dir) if a.dir else None
    if a.role == "server":
        assert work is not None
        asyncio.run(serve(nbytes, work / PORT_FILE))
        return 0
    if a.role == "client":
        rates, cpu = asyncio.run(fetch(a.peer, nbytes, a.reps))
        print("RATES " + json.dumps({"rates": rates, "cpu": cpu}), flush=True)
        return 0
    name = f"xhost.wire.{a.mb}MB" + (f".{a.rate}" if a.rate else "") + \
        (f".mtu{a.mtu}" if a.mtu else "")
    why = unavailable_reason()
    if why is not None:
        emit(status_row(name, "tensorgrid", "skipped", why))
        return 0
    with tempfile.TemporaryDirectory(prefix="tgbench_wire_") as d, \
            SimulatedHosts(2, rate=a.rate, mtu=a.mtu) as hosts:
        work = Path(d)
        me = [sys.executable, __file__, "--mb", str(a.mb), "--reps", str(a.reps), "--dir", d]
        server = hosts.popen(0, [*me, "--role", "server"])
        deadline = time.monotonic() + 60
        while not (work / PORT_FILE).exists() or not (work / PORT_FILE).read_text():
            if time.monotonic() > deadline or server.poll() is not None:
                emit(status_row(name, "tensorgrid", "error", "the serving host did not start"))
                return 1
            time.sleep(0.1)
        address = f"{hosts.address(0)}:{(work / PORT_FILE).read_text()}"
        client = hosts.popen(1, [*me, "--role", "client", "--peer", address],
                             stdout=subprocess.PIPE, text=True)
        out, _ = client.communicate(timeout=300)
        hosts.stop(server)
        server_cpu = float((work / CPU_FILE).read_text() or "nan")
    lines = [ln for ln in out.splitlines() if ln.startswith("RATES ")]
    if client.returncode != 0 or not lines:
        emit(status_row(name, "tensorgrid", "error", f"the receiver exited {client.returncode}"))
        return 1
    got = json.loads(lines[-1].split(" ", 1)[1])
    rates = got["rates"][1:]  # the first warms the path
    emit({"bench": name, "framework": "tensorgrid", "status": "ok", "unit": "GB/s",
          "better": "higher", "median": statistics.median(rates), "min": min(rates),
          "max": max(rates), "n": len(rates), "bytes": nbytes,
          "link": a.rate or "unshaped veth", "mtu": a.mtu or 1500,
          # CPU per GB moved (user and system, whole process, warm-up included): on a loaded
          # machine this says more about the plane's cost than the rate does
          "receiver_cpu_s_per_gb": got["cpu"],
          "sender_cpu_s_per_gb": server_cpu / (nbytes * a.reps / 1e9)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
