"""Recovery benchmark (tensorgrid only): how long a self-healing ``LocalCluster`` takes to get
training going again after ``kill -9`` of a worker and of the parameter server.

One LocalCluster (Redis, the HTTP master, 1 ps, 2 workers; default health settings: heartbeat
every 0.5 s, dead after 3 s of silence or two refused polls) trains the MLP of
``tests/integration/faults_helpers.py`` (variables on the ps, each worker computing half of the
batch) under ``MonitoredTrainingSession(checkpoint_dir=..., save_checkpoint_steps=10)``. A killer
thread sends SIGKILL first to a worker ``--kills`` times (worker 0 and worker 1 in turn), then to
the ps ``--kills`` times, each time at a random moment of a training step, once the victim has run
for ``QUICK_EXIT_S`` (so the supervisor restarts it after its normal 0.25 s, not the longer
backoff it gives a process that keeps dying young). Per kill, from the client's records:

* ``detect_s``: kill -> the master reports the task dead (``GET /v1/cluster``, polled every
  20 ms) or the client's step fails, whichever comes first (``verdict_s``: the master's report
  alone, what a kill between two steps waits for);
* ``resume_s``: kill -> the end of the first successful training step after that failure;
* ``steps_lost``: the global step before the kill minus the step training resumed from (a ps kill
  loses the steps since the last checkpoint; a worker kill loses nothing: the ps survived).

The rows (median, min and max over the kills of each kind, and every kill's details) are JSON
lines in the suite's format (``common.summarize``)::

    python bench/recovery.py [--kills 5] [--quick]     # prints RESULT lines
    python bench/run.py --parts recovery                # through the runner: RESULTS.md

Goals (``report.GOALS``): detection <= 2 s, resumed <= 3 s after the kill.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from common import (
    REPO_ROOT,
    Settings,
    add_settings_args,
    child_env,
    emit,
    error_reason,
    info,
    log_tail,
    python_for,
    run_child,
    settings_from_args,
    status_row,
    summarize,
)

KINDS = ("worker", "ps")
MEASURES = (("detect_s", "s", "detected_s"), ("verdict_s", "s", "master_verdict_s"),
            ("resume_s", "s", "resumed_s"), ("steps_lost", "steps", "lost"))
FIGURES = tuple(f"recovery.{kind}.{name}" for kind in KINDS for name, _, _ in MEASURES)
SAVE_STEPS = 10
HEARTBEAT_INTERVAL_S, HEARTBEAT_TIMEOUT_S = 0.5, 3.0  # LocalCluster's defaults
STEPS_AFTER_LAST_KILL = 20
CLUSTER_START_S = 120.0


def _helpers() -> Any:
    """``tests/integration/faults_helpers.py`` (the model, the killer, the arithmetic), imported
    as a top-level module as ``trainer.py`` does."""
    path = str(REPO_ROOT / "tests" / "integration")
    if path not in sys.path:
        sys.path.insert(0, path)
    import faults_helpers

    return faults_helpers


def plan(kills: int, seed: int = 7) -> list[tuple[int, str]]:
    """``(at least this global step, victim)``: workers 0 and 1 in turn, then the ps; about 40
    steps apart at least (the victims' minimum uptime spaces them further), at a random offset
    from the checkpoint steps."""
    rng = random.Random(seed)
    victims = [f"worker{i % 2}" for i in range(kills)] + ["ps0"] * kills
    return [(25 + 40 * i + rng.randrange(SAVE_STEPS), v) for i, v in enumerate(victims)]


def measure(kills: int, min_uptime_s: float) -> list[dict[str, Any]]:
    """Run the kills on a fresh LocalCluster; the rows of every figure."""
    fh = _helpers()
    from tensorgrid.cluster import LocalCluster

    state = Path(tempfile.mkdtemp(prefix="tgrec-"))  # short: the Redis socket path must fit
    cluster = LocalCluster(workers=2, ps=1, port=0, state_dir=state,
                           heartbeat_interval=HEARTBEAT_INTERVAL_S,
                           heartbeat_timeout=HEARTBEAT_TIMEOUT_S, start_timeout=CLUSTER_START_S,
                           log_level="warning")
    ok = False
    try:
        cluster.start()
        os.environ["REDIS_URL"] = cluster.redis_url
        info(f"cluster up: {cluster.url}, logs in {cluster.log_dir}")
        model = fh.build_model()
        checkpoint_dir = str(state / f"ckpt-{uuid.uuid4().hex[:8]}")  # removed with the state
        killer = fh.Killer(cluster, plan(kills), checkpoint_dir=checkpoint_dir, seed=7,
                           min_uptime_s=min_uptime_s, jitter_steps=SAVE_STEPS, timeout_s=60.0 + 2 * kills * (
                               min_uptime_s + 15.0))

        def until(run: Any) -> bool:
            if not killer.done.is_set() or not killer.kills:
                return False
            last = killer.kills[-1].t
            return sum(1 for s in run.steps if s.t0 > last) >= STEPS_AFTER_LAST_KILL

        started = time.time()
        run = fh.train(cluster.url, model, checkpoint_dir, 10**9, save_steps=SAVE_STEPS,
                       killer=killer, until=until, timeout_s=killer.timeout_s + 60.0)
        if killer.error is not None:
            raise killer.error
        info(f"{len(run.kills)} kills, {len(run.steps)} steps in {time.time() - started:.0f} s")
        rows = rows_of(run, fh.outcomes(run), kills, min_uptime_s)
        ok = True
        return rows
    finally:
        cluster.stop()
        if ok:
            shutil.rmtree(state, ignore_errors=True)
        else:
            info(f"the cluster's logs are kept in {cluster.log_dir}")


def rows_of(run: Any, outcomes: list[Any], kills: int, min_uptime_s: float
            ) -> list[dict[str, Any]]:
    """The figures of each kind of victim, with every kill's details and the checks made."""
    rows: list[dict[str, Any]] = []
    kill_of = {k.t: k for k in run.kills}
    settings = {"heartbeat_interval_s": HEARTBEAT_INTERVAL_S,
                "heartbeat_timeout_s": HEARTBEAT_TIMEOUT_S, "save_checkpoint_steps": SAVE_STEPS,
                "victim_min_uptime_s": min_uptime_s, "loadavg": _loadavg()}
    for kind in KINDS:
        mine = [o for o in outcomes if o.victim.startswith(kind)]
        kills_of_kind = [k for k in run.kills if k.victim.startswith(kind)]
        details = [{k: round(v, 3) if isinstance(v, float) else v
                    for k, v in o.as_dict().items() if k != "at"} for o in mine]
        checks: dict[str, Any] = {
            "kills": len(kills_of_kind), "kills_planned": kills,
            "every_kill_recovered": len(mine) == len(kills_of_kind) == kills,
            "lost_within_checkpoint_interval": all(o.lost <= SAVE_STEPS for o in mine),
            "every_kill_detected": all(o.detected_s is not None for o in mine),
        }
        if kind == "ps":
            # the restarted ps is empty: training must resume from a committed checkpoint
            checks["resumed_from_a_committed_checkpoint"] = all(
                o.resumed_from in kill_of[o.at].committed for o in mine)
        for name, unit, attr in MEASURES:
            bench = f"recovery.{kind}.{name}"
            values = [getattr(o, attr) for o in mine if getattr(o, attr) is not None]
            if not values:
                rows.append(status_row(bench, "tensorgrid", "error",
                                       f"no {kind} kill recovered ({len(kills_of_kind)} sent)"))
                continue
            rows.append(summarize(bench, "tensorgrid", [float(v) for v in values], unit,
                                  "lower", checks=checks, kills=details, settings=settings))
    return rows


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# ----------------------------------------------------------------------------- orchestrator side
def run(s: Settings, frameworks: list[str], log_dir: Path, kills: int | None = None
        ) -> list[dict[str, Any]]:
    """Run the benchmark in a child process (bounded in time, stopped by PID); tensorgrid only.

    Returns:
        A row per figure: a measurement, or a skipped / error row.
    """
    if "tensorgrid" not in frameworks:
        return [status_row(f, "tensorgrid", "skipped", "tensorgrid is not among the frameworks")
                for f in FIGURES]
    n = kills if kills is not None else (2 if s.quick else 5)
    py = python_for("tensorgrid")
    assert py is not None
    argv = [py, str(Path(__file__).resolve()), "--child", "--kills", str(n), *s.as_args()]
    budget = CLUSTER_START_S + 120.0 + 2 * n * 40.0
    rc, got, text = run_child("recovery", argv, log_dir, budget, child_env("tensorgrid"))
    seen = {r.get("bench") for r in got}
    rows = list(got)
    for fig in FIGURES:
        if fig not in seen:
            why = "timed out" if rc is None else f"exited rc={rc}"
            rows.append(status_row(fig, "tensorgrid", "error",
                                   f"recovery child {why} without this figure: {log_tail(text)}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kills", type=int, default=None,
                   help="kills of each kind (default 5; 2 with --quick)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_settings_args(p)
    a = p.parse_args(argv)
    s = settings_from_args(a)
    kills = a.kills if a.kills is not None else (2 if s.quick else 5)
    if not a.child:  # run the child as the suite does, and print its rows
        log_dir = Path(tempfile.mkdtemp(prefix="tgbench_recovery_"))
        for row in run(s, ["tensorgrid"], log_dir, kills):
            emit(row)
        info(f"logs in {log_dir}")
        return 0
    from tensorgrid.cluster.local import QUICK_EXIT_S

    # a quick run does not wait for the victims to age: its figures include restart backoffs
    min_uptime = 0.0 if s.quick else QUICK_EXIT_S + 0.5
    try:
        rows = measure(kills, min_uptime)
    except Exception as exc:  # reported as the figures' error
        rows = [status_row(f, "tensorgrid", "error", error_reason(exc)) for f in FIGURES]
    for row in rows:
        emit(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
