"""Simulated hosts on one machine: network namespaces on a bridge, each with its own hostname and
its own /dev/shm, optionally with its egress shaped by a token bucket (``tc tbf``).

Tasks started in two such hosts share no shared-memory segments and no loopback: they talk over
real TCP between addresses, through a link that can be rate-limited, so the cross-host paths of the
data plane are exercised and timed on a single machine. Needs root (``ip netns``, ``unshare``);
``unavailable_reason()`` says why it cannot run here, for a test's skip message.

    with SimulatedHosts(3, rate="1gbit") as hosts:
        proc = hosts.popen(0, [sys.executable, "-m", "services.ps", ...], stdout=log)
        addr = hosts.address(0)          # '10.213.7.2'

Every process it starts is stopped by its PID on exit (SIGTERM, then SIGKILL), and the
namespaces, veth pairs and the bridge it created are deleted, even after a failure.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Sequence
from typing import Any

from tensorgrid.runtime.threads import fair_share

NAME_PREFIX = "tgsim"
STOP_GRACE_S = 5.0
_COMMAND_TIMEOUT_S = 20.0


def unavailable_reason() -> str | None:
    """Why simulated hosts cannot be made on this machine, or None when they can."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "simulated hosts need Linux network namespaces"
    if os.geteuid() != 0:
        return "simulated hosts need root (ip netns, unshare)"
    for tool in ("ip", "unshare", "tc"):
        if shutil.which(tool) is None:
            return f"simulated hosts need the '{tool}' command"
    probe = f"{NAME_PREFIX}probe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True,
                          timeout=_COMMAND_TIMEOUT_S)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=_COMMAND_TIMEOUT_S)
    return None


def _run(*argv: str) -> None:
    """Run one setup command; raise with its stderr when it fails."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


class SimulatedHosts:
    """``count`` hosts on one bridge, addresses ``10.213.<subnet>.2`` upwards.

    Args:
        count: how many hosts.
        rate: the egress rate of every host's link for ``tc tbf`` (e.g. ``"1gbit"``), or None for
            an unshaped link.
        shm_bytes: the size of each host's own /dev/shm.
        mtu: the MTU of every link of the simulated network (bridge, veth pairs), or None for
            the kernel's default (1500). A veth link takes up to 65535: jumbo frames of a
            network that exists only on this machine.
    """

    def __init__(self, count: int, rate: str | None = None, shm_bytes: int = 1 << 30,
                 mtu: int | None = None) -> None:
        if count < 1:
            raise ValueError(f"a simulated cluster needs at least one host, got {count}")
        if mtu is not None and not 68 <= mtu <= 65535:
            raise ValueError(f"a link's MTU must be between 68 and 65535, got {mtu}")
        self.count = count
        self.rate = rate
        self.mtu = mtu
        self.shm_bytes = shm_bytes
        tag = uuid.uuid4().hex[:6]
        self._bridge = f"{NAME_PREFIX}br{tag}"
        self._subnet = int(tag[:2], 16)
        self.namespaces = [f"{NAME_PREFIX}-{tag}-{i}" for i in range(count)]
        self.hostnames = [f"host{i}" for i in range(count)]
        self._veths = [f"{NAME_PREFIX}{tag}v{i}" for i in range(count)]
        self._procs: list[subprocess.Popen[Any]] = []
        self._made: list[tuple[str, str]] = []  # ("netns"|"link", name), to undo in reverse

    def address(self, host: int) -> str:
        """The IPv4 address of host ``host`` on the bridge."""
        return f"10.213.{self._subnet}.{host + 2}"

    def __enter__(self) -> SimulatedHosts:
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _setup(self) -> None:
        _run("ip", "link", "add", self._bridge, "type", "bridge")
        self._made.append(("link", self._bridge))
        _run("ip", "link", "set", self._bridge, "up")
        if self.mtu:
            _run("ip", "link", "set", self._bridge, "mtu", str(self.mtu))
        for i, (ns, veth) in enumerate(zip(self.namespaces, self._veths, strict=True)):
            _run("ip", "netns", "add", ns)
            self._made.append(("netns", ns))
            _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self._made.append(("link", veth))
            if self.mtu:
                _run("ip", "link", "set", veth, "mtu", str(self.mtu))
                _run("ip", "-n", ns, "link", "set", "eth0", "mtu", str(self.mtu))
            _run("ip", "link", "set", veth, "master", self._bridge, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")
            if self.rate:
                # the burst must hold a few full-size segments at this rate, or tbf throttles
                # below its rate; 50 ms of queue bounds the latency that shaping adds
                _run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf",
                     "rate", self.rate, "burst", "512kb", "latency", "50ms")

    def command(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` wrapped to run in host ``host``: its namespace, hostname and /dev/shm.

        The simulated hosts share this machine's cores, which a task cannot see from its
        address (each host has its own), so each gets a fair share of BLAS threads
        (``TENSORGRID_BLAS_THREADS``, unless the caller set it): uncapped, every task's BLAS
        spins a thread per core and the tasks' matmuls run several times slower, which a
        cross-host figure would then wrongly charge to the network.
        """
        blas = fair_share(self.count)
        setup = (f"export TENSORGRID_BLAS_THREADS=\"${{TENSORGRID_BLAS_THREADS:-{blas}}}\" && "
                 f"hostname {self.hostnames[host]} && "
                 f"mount -t tmpfs -o size={self.shm_bytes} tmpfs /dev/shm && exec \"$@\"")
        return ["ip", "netns", "exec", self.namespaces[host], "unshare", "--uts", "--mount",
                "sh", "-c", setup, "sh", *argv]

    def popen(self, host: int, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` in host ``host`` (``subprocess.Popen`` keyword arguments pass through);
        it is stopped by its PID when the hosts are closed."""
        proc = subprocess.Popen(self.command(host, argv), **kwargs)
        self._procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[Any]) -> None:
        """Stop a process this object started: SIGTERM, then SIGKILL after a grace period."""
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_GRACE_S)

    def close(self) -> None:
        """Stop every process started here, then delete what was created, newest first."""
        for proc in reversed(self._procs):
            try:
                self.stop(proc)
            except (OSError, subprocess.SubprocessError):
                pass
        self._procs.clear()
        for kind, name in reversed(self._made):
            argv = ["ip", "netns", "del", name] if kind == "netns" else ["ip", "link", "del", name]
            subprocess.run(argv, capture_output=True, timeout=_COMMAND_TIMEOUT_S)
        self._made.clear()
