"""Cross-host benchmarks: the ps and the 2 workers each in a simulated host of their own (a network
namespace with its own hostname and /dev/shm on a bridge; ``tensorgrid.cluster.simhosts``), so no
shared memory and no loopback: real TCP between addresses, optionally through a shaped link.

Units (fresh hosts and a fresh cluster of one framework for each):
  transfer               reduce_sum on worker 0 of a float32 variable of 1/16/64/256 MB on the ps,
                         unshaped veth link with jumbo frames (MTU 65000) (GB/s)
  transfer.mtu1500       the same unshaped with standard 1500-byte frames (the kernel's default)
  transfer.1gbit         the same through links shaped to 1 Gbit/s (tbf)
  train.wide.async.1gbit between-graph MLP 784-1024-10 with Adam (3.2 MB pulled and pushed per
                         step), 2 workers async, every host's egress shaped to 1 Gbit/s (tbf)
  train.wide.async.1gbit.bf16  the same with bfloat16 on the wire
                         (graph_options.enable_bfloat16_sendrecv, honoured by both frameworks)
  train.wide.async.1gbit.lz4   the same with the lossless wire codec (LZ4 after a bit shuffle) on
                         every cross-host tensor of 64 KB or more (tensorgrid only: TensorFlow has
                         no fast lossless codec; its row is the unit without the suffix)
  train.wide.async.1gbit.bf16.lz4  bfloat16 on the wire, then LZ4
  train.wide.async.1gbit.delta     the weights workers pull sent as XOR deltas of the version
                         each worker already holds (shuffle + LZ4; tensorgrid only, like lz4)
  train.wide.async.1gbit.bf16.delta  bfloat16 on the wire, pulled as deltas of the bfloat16 value
  train.wide_fresh.async.1gbit[.bf16][.delta]  the same four on a new random batch every step:
                         the fixed batch above is fitted within a few hundred steps, after which
                         Adam's updates shrink and deltas of the weights with them; here every
                         update stays as large as the first ones (a delta's least favourable case)

A codec suffix is ``lz4``, ``lz4hc``, ``zstd`` or ``zlib``, optionally ``_pulls`` (only the
tensors workers pull: the ps's egress carries them to both workers, the workers' own egress only
their pushes) and ``_L<level>`` (``zstd_pulls_L3``), or ``delta`` with an optional codec and
level (``delta_zstd``, ``delta_lz4_L3``); the units above are the ones ``run.py`` runs. Train rows
carry ``ps_egress_bytes_per_step``: the bytes the ps's link sent during the run over the updates
applied (start-up and warm-up included).

Needs root (ip netns, unshare, tc); without it every row is reported as skipped with the reason.

    python bench/xhost.py [--units transfer,train.wide.async.1gbit] [--quick]

Where a training step's time goes: ``--trace-steps N`` has the chief run N traced steps after its
windows, and the train rows of tensorgrid carry ``phases_ms``, the median pull, compute, push,
apply and tail of a step (``bench/step_phases.py``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import dist
from common import Settings, emit, info, parse_unit_args, status_row
from dist_roles import unit_figures
from history import CODEC_SUFFIX

from tensorgrid.cluster.simhosts import SimulatedHosts, unavailable_reason

UNITS = ("transfer", "transfer.mtu1500", "transfer.1gbit", "train.wide.async.1gbit",
         "train.wide.async.1gbit.bf16", "train.wide.async.1gbit.lz4",
         "train.wide.async.1gbit.bf16.lz4", "train.wide.async.1gbit.delta",
         "train.wide.async.1gbit.bf16.delta", "train.wide_fresh.async.1gbit",
         "train.wide_fresh.async.1gbit.delta", "train.wide_fresh.async.1gbit.bf16",
         "train.wide_fresh.async.1gbit.bf16.delta")

HOSTS = 3
# the MTU of the unshaped simulated network (ours to choose: it exists only on this machine):
# fewer, bigger packets per GB raised both the kernel's figure and the data plane's by a third
# or more on a 2-core VM (bench/xhost_iperf.py, bench/xhost_wire.py --mtu); shaped links keep
# the kernel's default, as a real 1 Gbit link would
UNSHAPED_MTU = 65000


def split_unit(unit: str) -> tuple[str, str | None, bool, str]:
    """``train.wide.async.1gbit.bf16.lz4`` -> (``train.wide.async``, ``1gbit``, True, ``lz4``):
    the dist unit, the link (a rate, ``mtuN`` for an unshaped link of that MTU, None: unshaped
    with ``UNSHAPED_MTU``), whether bfloat16 goes on the wire and the codec suffix ("": none)."""
    parts = unit.split(".")
    codec = parts.pop() if CODEC_SUFFIX.match(parts[-1]) else ""
    bf16 = parts[-1] == "bf16"
    if bf16:
        parts.pop()
    rate = parts.pop() if parts[-1].endswith("bit") or parts[-1].startswith("mtu") else None
    return ".".join(parts), rate, bf16, codec


def figure_name(dist_figure: str, rate: str | None, bf16: bool = False, codec: str = "") -> str:
    """``dist.train.wide.async`` -> ``xhost.train.wide.async.1gbit[.bf16][.lz4]``."""
    name = "xhost." + dist_figure.split(".", 1)[1]
    name = f"{name}.{rate}" if rate else name
    name = f"{name}.bf16" if bf16 else name
    return f"{name}.{codec}" if codec else name


def codec_variant(unit: str) -> bool:
    """Whether ``unit`` is a listed train unit with another codec suffix (``...1gbit.zstd_pulls``)."""
    base, _, last = unit.rpartition(".")
    return base in UNITS and base.startswith("train.") and bool(CODEC_SUFFIX.match(last))


def wire_label(bf16: bool, codec: str) -> str:
    """What travels on the wire, for the rows."""
    parts = (["bfloat16"] if bf16 else []) + ([codec] if codec else [])
    return " + ".join(parts) or "as is"


def tx_bytes(hosts: SimulatedHosts, host: int) -> int:
    """The bytes host ``host``'s link has sent so far (its namespace's interface counter)."""
    out = subprocess.run(["ip", "netns", "exec", hosts.namespaces[host], "cat",
                          "/sys/class/net/eth0/statistics/tx_bytes"],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def run(s: Settings, frameworks: list[str], units: list[str], log_dir: Path,
        probes: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run each unit for each framework, each run on freshly made hosts."""
    probes = dict(probes or {})
    why = unavailable_reason()
    rows: list[dict[str, Any]] = []
    for unit in units:
        inner, rate, bf16, codec = split_unit(unit)
        for fw in frameworks:
            figures = [figure_name(f, rate, bf16, codec) for f in unit_figures(inner, s)]
            if why:
                rows += [status_row(f, fw, "skipped", why) for f in figures]
                continue
            if codec and fw != "tensorgrid":
                continue  # no lossless tensor codec to compare: the peer is the plain unit
            if fw not in probes:
                probes[fw] = dist.probe(fw, log_dir)
            if "error" in probes[fw]:
                rows += [status_row(f, fw, "skipped", probes[fw]["error"]) for f in figures]
                continue
            info(f"{fw}: xhost.{unit}")
            # a folder per unit: the shaped and unshaped runs of one dist unit have the same
            # process names, and a rows file of an earlier unit must not be read as this one's
            unit_dir = log_dir / unit
            unit_dir.mkdir(parents=True, exist_ok=True)
            shaped = rate if rate and rate.endswith("bit") else None
            mtu = int(rate[3:]) if rate and not shaped else None if shaped else UNSHAPED_MTU
            with SimulatedHosts(HOSTS, rate=shaped, mtu=mtu) as hosts:
                sent0 = tx_bytes(hosts, 0)
                got = dist.run_cluster(fw, inner, s, unit_dir, hosts, bf16, codec)
                ps_sent = tx_bytes(hosts, 0) - sent0
            for row in got:
                row["bench"] = figure_name(row["bench"], rate, bf16, codec)
                row["link"] = shaped or "unshaped veth"
                row["mtu"] = mtu or 1500
                row["wire"] = wire_label(bf16, codec)
                steps = row.get("checks", {}).get("global_step")
                if inner.startswith("train.") and steps:
                    row["ps_egress_bytes_per_step"] = round(ps_sent / steps)
            rows += got
    return rows


def main(argv: list[str] | None = None) -> int:
    settings, frameworks, units = parse_unit_args(__doc__, UNITS, argv, known=codec_variant)
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_xhost_"))
    for row in run(settings, frameworks, units, log_dir):
        emit(row)
    info(f"logs in {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
