"""Run the benchmark suite: tensorgrid and TensorFlow side by side, then write the report.

    python bench/run.py [--parts all|local|dist|local.mlp|dist.train.mlp|loops|checkpoint|...]
        [--quick]
    make bench [BENCH=local,dist.seed]

Writes the raw rows to ``bench/results/raw-<date>.jsonl`` (a ``meta`` line first, an ``end`` line
last) and regenerates ``bench/RESULTS.md`` from them (the parts not run keep the figures of the
newest earlier raw file that has them: ``history.py``). TensorFlow runs when its venv exists
(``.venv-tf/bin/python`` or ``TENSORGRID_TF_PYTHON``); otherwise tensorgrid runs alone and the report
says so. Each part runs in child processes with bounded time, stopped by PID.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import checkpoint_io
import dist
import local
import recovery
import report
import scale
import while_loop
import while_loop_dist
import xhost
from common import BENCH_DIR, FRAMEWORKS, REPO_ROOT, RESULTS_DIR, Settings, info, tf_python

UNITS = ([f"local.{b}" for b in local.BENCHES] + [f"dist.{u}" for u in dist.UNITS]
         + [f"xhost.{u}" for u in xhost.UNITS] + ["scale", "recovery", "loops.local",
                                                   "loops.dist", "checkpoint"])
# the loop across processes: ~1 ms per iteration on 2 loaded cores, so 10,000 iterations take
# ~10 s a repetition; 5 repetitions keep the part near two minutes for both frameworks
LOOPS_DIST_REPS = 5
LOOPS_DIST_QUICK_ITERS = 1000


def select_units(selectors: str) -> list[str]:
    """The units named by comma-separated selectors: ``all``, a part (``local``, ``dist``) or any
    prefix of a unit at a dot boundary (``dist.train``, ``dist.train.mlp``, ``local.seed``).

    Raises:
        ValueError: a selector that matches no unit.
    """
    chosen: list[str] = []
    for sel in (x.strip() for x in selectors.split(",")):
        if not sel:
            continue
        hits = [u for u in UNITS if sel == "all" or u == sel or u.startswith(sel + ".")]
        if not hits:
            raise ValueError(f"BENCH selector {sel!r} matches nothing; units: {', '.join(UNITS)}")
        chosen += [u for u in hits if u not in chosen]
    return [u for u in UNITS if u in chosen]


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, platform, load and BLAS thread settings of this machine."""
    out: dict[str, Any] = {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu_model"] = line.split(":", 1)[1].strip()
                break
        mem_kb = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                      if ln.startswith("MemTotal"))
        out["mem_gib"] = round(mem_kb / (1 << 20), 1)
        out["loadavg"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except (OSError, StopIteration, ValueError):
        pass
    blas = {k: v for k, v in os.environ.items()
            if k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    if blas:
        out["blas_env"] = blas
    return out


def git_state() -> str:
    """``<commit>`` plus ``+ N changed files`` when the tree is dirty (read-only git calls)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, text=True,
                               capture_output=True, timeout=10).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"commit {head}" + (f" + {len(dirty)} uncommitted changes" if dirty else "")


def write_rows(f: IO[str], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        f.write(json.dumps(row) + "\n")
    f.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--parts", default="all", help="comma-separated selectors (default all)")
    p.add_argument("--quick", action="store_true", default=bool(os.environ.get("BENCH_QUICK")),
                   help="a smoke run: checks, not figures (or BENCH_QUICK=1)")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--report", type=Path, default=BENCH_DIR / "RESULTS.md")
    p.add_argument("--command", default=None, help="the command to record (make passes its own)")
    a = p.parse_args(argv)
    try:
        units = select_units(a.parts)
    except ValueError as exc:
        p.error(str(exc))
    s = Settings.make(a.quick)
    frameworks = [f for f in a.frameworks.split(",") if f]
    tf_py, tf_how = tf_python()
    tf_note = (f"{tf_py} (found via {tf_how})" if tf_py
               else f"not run, tensorgrid ran alone: {tf_how}")
    if "tensorflow" in frameworks and tf_py is None:
        info(f"TensorFlow peer venv not found ({tf_how}): running tensorgrid alone")
        frameworks.remove("tensorflow")
    started = time.perf_counter()
    now = dt.datetime.now()
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_"))
    if s.quick:
        # a smoke run's figures mean nothing: keep them out of bench/results and RESULTS.md
        a.results_dir, a.report = log_dir, log_dir / "RESULTS.md"
    a.results_dir.mkdir(parents=True, exist_ok=True)
    raw_path = a.results_dir / f"raw-{now:%Y%m%d-%H%M%S}.jsonl"
    command = a.command or shlex.join(
        [os.path.relpath(sys.executable, REPO_ROOT), os.path.relpath(__file__, REPO_ROOT),
         *(argv if argv is not None else sys.argv[1:])])
    env_knobs = [f"{k}={shlex.quote(os.environ[k])}" for k in
                 ("BENCH_QUICK", "BENCH_REPS", "BENCH_WINDOW_S", "TENSORGRID_TF_PYTHON")
                 if os.environ.get(k)]
    command = " ".join([*env_knobs, command])
    info(f"units: {', '.join(units)}; frameworks: {', '.join(frameworks)}; logs in {log_dir}")
    probes = {fw: dist.probe(fw, log_dir) for fw in frameworks}
    meta = {"kind": "meta", "date": now.isoformat(timespec="seconds"), "command": command,
            "units": units, "frameworks": frameworks, "settings": vars(s),
            "machine": machine_info(), "probes": probes, "tf_note": tf_note, "git": git_state(),
            "log_dir": str(log_dir)}
    with open(raw_path, "w") as f:
        write_rows(f, [meta])
        local_units = [u.split(".", 1)[1] for u in units if u.startswith("local.")]
        if local_units:
            t0 = time.perf_counter()
            write_rows(f, local.run(s, frameworks, local_units, log_dir))
            info(f"local part: {time.perf_counter() - t0:.0f} s")
        dist_units = [u.split(".", 1)[1] for u in units if u.startswith("dist.")]
        if dist_units:
            t0 = time.perf_counter()
            write_rows(f, dist.run(s, frameworks, dist_units, log_dir, probes))
            info(f"dist part: {time.perf_counter() - t0:.0f} s")
        xhost_units = [u.split(".", 1)[1] for u in units if u.startswith("xhost.")]
        if xhost_units:
            t0 = time.perf_counter()
            write_rows(f, xhost.run(s, frameworks, xhost_units, log_dir, probes))
            info(f"cross-host part: {time.perf_counter() - t0:.0f} s")
        if "scale" in units:  # tensorgrid only: hundreds of simulated tasks in one process
            t0 = time.perf_counter()
            write_rows(f, scale.run(s, frameworks, log_dir))
            info(f"scale part: {time.perf_counter() - t0:.0f} s")
        if "recovery" in units:  # tensorgrid only: kill -9 on a self-healing LocalCluster
            t0 = time.perf_counter()
            write_rows(f, recovery.run(s, frameworks, log_dir))
            info(f"recovery part: {time.perf_counter() - t0:.0f} s")
        if "loops.local" in units:  # tf.while_loop, one process
            t0 = time.perf_counter()
            write_rows(f, while_loop.run(s, frameworks, log_dir))
            info(f"loops.local part: {time.perf_counter() - t0:.0f} s")
        if "loops.dist" in units:  # tf.while_loop whose body spans a ps and a worker
            t0 = time.perf_counter()
            iters = LOOPS_DIST_QUICK_ITERS if s.quick else while_loop_dist.ITERS
            write_rows(f, while_loop_dist.run(s, frameworks, log_dir, iters,
                                              min(s.reps, LOOPS_DIST_REPS)))
            info(f"loops.dist part: {time.perf_counter() - t0:.0f} s")
        if "checkpoint" in units:  # save and restore of 1 GB over 2 ps, and plain writes
            t0 = time.perf_counter()
            write_rows(f, checkpoint_io.run(s, frameworks, log_dir))
            info(f"checkpoint part: {time.perf_counter() - t0:.0f} s")
        write_rows(f, [{"kind": "end", "elapsed_s": time.perf_counter() - started}])
    a.report.write_text(report.render(raw_path))
    info(f"raw results: {raw_path}")
    info(f"report: {a.report} ({time.perf_counter() - started:.0f} s in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
