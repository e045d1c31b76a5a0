"""Distributed-runtime benchmarks: a ps and 2 workers as separate processes on 127.0.0.1.

Units (a fresh cluster of one framework for each unit, stopped by PID at its end):
  seed                 (a) seed matmul, x and w on the ps (replica_device_setter), from worker 0's
                           server.target: plain Session, and MonitoredTrainingSession with
                           StopAtStepHook (step = matmul + assign_add(global_step, 1))
  transfer             (b) reduce_sum on worker 0 of a float32 variable of 1/16/64/256 MB on the
                           ps (GB/s), and of one held on worker 0 (the baseline)
  train.<model>.<mode> (c) between-graph data parallelism, 2 workers, variables on the ps;
                           model mlp | linreg, mode async | sync (SyncReplicasOptimizer)

    python bench/dist.py [--units seed,transfer,train.mlp.async] [--quick]

Before any cluster starts, each framework is probed once (``frameworks.py --probe``): a unit that
needs a name the framework lacks is reported as skipped, naming what is missing.
"""

from __future__ import annotations

import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import (
    Proc,
    Settings,
    child_env,
    emit,
    free_ports,
    info,
    log_tail,
    parse_unit_args,
    python_for,
    start_process,
    status_row,
    stop_process,
    wait_for_log,
    wait_process,
)
from dist_roles import READY_MARKER, unit_figures
from frameworks import lacks_reason

from tensorgrid.cluster.simhosts import SimulatedHosts

UNITS = ("seed", "transfer", "train.mlp.async", "train.mlp.sync", "train.linreg.async",
         "train.linreg.sync")
ROLES = Path(__file__).resolve().parent / "dist_roles.py"


def unit_needs(unit: str) -> str:
    """The key of ``frameworks.NEEDS`` that gates a unit as a whole."""
    if unit == "seed":
        return "dist.seed.session"
    if unit == "transfer":
        return "dist.transfer"
    return f"dist.train.{unit.rsplit('.', 1)[1]}"


def unit_timeout(unit: str, s: Settings) -> float:
    """How long worker 0 may take for a unit, start-up included."""
    startup = 180.0
    if unit == "seed":
        return startup + (2 * s.reps + 2) * s.rep_s * 4 + 120
    if unit == "transfer":
        return startup + 8 * s.reps * s.rep_s * 3 + 120
    return startup + s.warm_s + s.reps * s.window_s * 3 + 120


def probe(framework: str, log_dir: Path) -> dict[str, Any]:
    """Import ``framework`` in its own Python and report its versions and missing names.

    Returns:
        ``frameworks.Api.describe()``, or ``{"error": why}`` when the framework is unusable.
    """
    from common import run_child

    py = python_for(framework)
    if py is None:
        return {"framework": framework, "error": "no Python for this framework"}
    argv = [py, str(Path(__file__).resolve().parent / "frameworks.py"), "--probe", framework]
    rc, rows, text = run_child(f"probe-{framework}", argv, log_dir, 300, child_env(framework))
    for row in rows:
        if row.get("kind") == "probe":
            return row
    return {"framework": framework, "error": f"probe exited rc={rc}: {log_tail(text)}"}


def run_cluster(framework: str, unit: str, s: Settings, log_dir: Path,
                hosts: SimulatedHosts | None = None, bf16_wire: bool = False,
                wire_codec: str = "") -> list[dict[str, Any]]:
    """Start ps0, worker0 and worker1 for one unit, collect worker 0's rows, stop all by PID.

    Args:
        hosts: three simulated hosts to run the ps, worker 0 and worker 1 in (one each), or None
            for all three on 127.0.0.1 of this host.
        bf16_wire: train units send cross-task float32 tensors as bfloat16.
        wire_codec: train units encode cross-host tensors with this lossless codec (a suffix
            of ``xhost.CODEC_SUFFIX``: ``lz4``, ``zstd_pulls``...; tensorgrid only).
    """
    py = python_for(framework)
    assert py is not None
    ports = free_ports(3) if hosts is None else [2222, 2223, 2224]
    tag = (f"{framework}-{'xhost_' if hosts else ''}{unit.replace('.', '_')}"
           f"{'_bf16' if bf16_wire else ''}{'_' + wire_codec if wire_codec else ''}")
    base = [py, str(ROLES), "--framework", framework, "--ports", ",".join(map(str, ports)),
            "--unit", unit, *s.as_args()]
    if hosts is not None:
        base += ["--hosts", ",".join(hosts.address(i) for i in range(3))]
    if bf16_wire:
        base.append("--bf16-wire")
    if wire_codec:
        base += ["--wire-codec", wire_codec]
    env = child_env(framework)
    if hosts is not None and framework == "tensorgrid":
        # a task that listens on an address other than loopback needs the cluster's secret
        env["TENSORGRID_TOKEN"] = secrets.token_hex(16)
    procs: dict[str, Proc] = {}

    def spawn(role: str, task: int) -> None:
        name = f"{role}{task}"
        argv = [*base, "--role", role, "--task", str(task)]
        if hosts is not None:  # ps0 on host 0, worker 0 on host 1, worker 1 on host 2
            argv = hosts.command(0 if role == "ps" else 1 + task, argv)
        procs[name] = start_process(f"{tag}-{name}", argv, log_dir, env)

    timeout = unit_timeout(unit, s)
    rc: int | None = None
    note = ""
    try:
        spawn("ps", 0)
        spawn("worker", 0)
        # worker 1's MonitoredTrainingSession waits for the chief to initialise the model; TF's
        # polls only every 30 s, so it starts once the chief's session exists.
        if unit.startswith("train.") and not wait_for_log(procs["worker0"], READY_MARKER, 240):
            note = "worker 0's session was not ready within 240 s; "
        spawn("worker", 1)
        rc = wait_process(procs["worker0"], timeout)
        if rc is None:
            note += f"worker 0 timed out after {timeout:.0f} s; "
        elif unit.startswith("train."):
            # async: worker 1 sees the stop flag within 20 steps; sync: its last step waits for
            # the chief until it times out, which is not worth waiting for
            wait_process(procs["worker1"], 30.0 if unit.endswith(".async") else 2.0)
    finally:
        for proc in procs.values():
            info(stop_process(proc))
    texts = {name: proc.log_text() for name, proc in procs.items()}
    got = procs["worker0"].rows() if "worker0" in procs else []
    startup = [r for r in got if r.get("kind") == "startup"]
    rows = dedupe([r for r in got if "bench" in r])
    seen = {r["bench"] for r in rows}
    for fig in unit_figures(unit, s):
        if fig not in seen:
            tails = "; ".join(f"{n}: {log_tail(t, 3)}" for n, t in texts.items())
            rows.append(status_row(fig, framework, "error",
                                   f"{note}no result (worker0 rc={rc}). Logs: {tails}"))
    for row in rows:
        row.setdefault("logs", str(log_dir))
        if startup:
            # Unavailable answers before the cluster ran a first step (see wait_for_cluster)
            row["startup_failed_attempts"] = startup[0]["failed_attempts"]
        if row.get("status") == "error" and note and not row["reason"].startswith(note):
            row["reason"] = note + row["reason"]
    return rows


def dedupe(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (figure, framework): a measurement wins over a failure reported later."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row.get("bench", "?"), row.get("framework", "?"))
        if key not in best or (best[key].get("status") != "ok" and row.get("status") == "ok"):
            best[key] = row
    return list(best.values())


def run(s: Settings, frameworks: list[str], units: list[str], log_dir: Path,
        probes: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Run each unit for each framework (the frameworks one after the other, per unit).

    Args:
        probes: ``probe()`` results by framework (probed here when not given).
    """
    probes = dict(probes or {})
    for fw in frameworks:
        if fw not in probes:
            probes[fw] = probe(fw, log_dir)
    rows: list[dict[str, Any]] = []
    for unit in units:
        for fw in frameworks:
            pr = probes[fw]
            figures = unit_figures(unit, s)
            if "error" in pr:
                rows += [status_row(f, fw, "skipped", pr["error"]) for f in figures]
                continue
            lacking = lacks_reason(pr.get("missing", {}), unit_needs(unit))
            if lacking:
                rows += [status_row(f, fw, "skipped", lacking) for f in figures]
                continue
            info(f"{fw}: dist.{unit}")
            rows += run_cluster(fw, unit, s, log_dir)
    return rows


def main(argv: list[str] | None = None) -> int:
    settings, frameworks, units = parse_unit_args(__doc__, UNITS, argv)
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_dist_"))
    rows = run(settings, frameworks, units, log_dir)
    for row in rows:
        emit(row)
    info(f"logs in {log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
