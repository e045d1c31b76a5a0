"""Shared helpers of the benchmark suite: timing, result rows, ports, processes, the TF peer venv.

This module uses only the standard library, so it runs in tensorgrid's venv and in the TensorFlow
venv alike (the benchmark children of both frameworks import it).

A result row is one JSON object. Measurements are printed by children as ``RESULT {json}`` lines
and collected by the orchestrator, which writes them, one per line, to the raw results file.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
RESULT_PREFIX = "RESULT "
RESULTS_ENV = "TGBENCH_RESULTS"  # where a child appends its rows
FRAMEWORKS = ("tensorgrid", "tensorflow")


# ----------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Settings:
    """How much to measure. ``quick`` is a smoke run (correctness, not figures).

    Attributes:
        reps: repetitions per figure (the median, min and max are over these).
        rep_s: the wall time one repetition of a latency loop aims at (runs per rep are calibrated
            to it, within each benchmark's fixed bounds).
        warm_s: warm-up of the training benchmarks before the first window.
        window_s: length of one training window.
        trace_steps: training units: traced steps the chief runs after its windows, to report
            where a step's time goes (``step_phases``); 0: none.
    """

    reps: int = 7
    rep_s: float = 1.0
    warm_s: float = 2.0
    window_s: float = 2.0
    quick: bool = False
    trace_steps: int = 0

    @staticmethod
    def make(quick: bool) -> Settings:
        """The default settings, or the quick ones; ``BENCH_REPS`` / ``BENCH_WINDOW_S`` override."""
        base = Settings(reps=3, rep_s=0.2, warm_s=0.5, window_s=0.5, quick=True) if quick \
            else Settings()
        reps = int(os.environ.get("BENCH_REPS", base.reps))
        window = float(os.environ.get("BENCH_WINDOW_S", base.window_s))
        return Settings(reps=max(1, reps), rep_s=base.rep_s, warm_s=base.warm_s,
                        window_s=max(0.1, window), quick=base.quick)

    def as_args(self) -> list[str]:
        """Command-line arguments that rebuild these settings in a child."""
        return ["--reps", str(self.reps), "--rep-s", str(self.rep_s), "--warm-s", str(self.warm_s),
                "--window-s", str(self.window_s)] + (["--quick"] if self.quick else []) + \
            (["--trace-steps", str(self.trace_steps)] if self.trace_steps else [])


def add_settings_args(parser: Any) -> None:
    """Add the arguments that ``Settings.as_args`` writes to an argparse parser."""
    parser.add_argument("--reps", type=int, default=None, help="repetitions per figure")
    parser.add_argument("--rep-s", type=float, default=None, help="target seconds per repetition")
    parser.add_argument("--warm-s", type=float, default=None, help="training warm-up seconds")
    parser.add_argument("--window-s", type=float, default=None, help="training window seconds")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few, short reps")
    parser.add_argument("--trace-steps", type=int, default=0,
                        help="training units: traced steps after the windows, reported as the "
                             "median phases of a step (tensorgrid)")


def parse_unit_args(doc: str | None, units: Sequence[str], argv: list[str] | None,
                    known: Callable[[str], bool] | None = None
                    ) -> tuple[Settings, list[str], list[str]]:
    """Parse a bench's command line (``--framework``, ``--units`` and the settings): the settings,
    the frameworks and the units asked for; a unit neither in ``units`` nor ``known`` (a variant
    the bench can run but does not list) is a usage error."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--framework", default="tensorgrid,tensorflow")
    p.add_argument("--units", default=",".join(units))
    add_settings_args(p)
    a = p.parse_args(argv)
    asked = [u for u in a.units.split(",") if u]
    unknown = [u for u in asked if u not in units and not (known and known(u))]
    if unknown:
        p.error(f"unknown unit(s) {unknown}; choose from {list(units)}")
    return settings_from_args(a), a.framework.split(","), asked


def settings_from_args(args: Any) -> Settings:
    """The settings of ``add_settings_args``'s arguments; those not given take the defaults."""
    base = Settings.make(args.quick)
    return Settings(
        reps=args.reps if args.reps is not None else base.reps,
        rep_s=args.rep_s if args.rep_s is not None else base.rep_s,
        warm_s=args.warm_s if args.warm_s is not None else base.warm_s,
        window_s=args.window_s if args.window_s is not None else base.window_s,
        quick=args.quick, trace_steps=max(0, getattr(args, "trace_steps", 0) or 0))


# ----------------------------------------------------------------------------- rows
def summarize(bench: str, framework: str, values: Sequence[float], unit: str, better: str,
              **extra: Any) -> dict[str, Any]:
    """A measurement row: median, min and max of ``values``.

    Args:
        bench: the figure's id, e.g. ``local.seed.run``.
        framework: ``tensorgrid`` or ``tensorflow``.
        values: one value per repetition.
        unit: what a value is, e.g. ``us/run``.
        better: ``lower`` (latencies) or ``higher`` (rates).
        extra: anything else worth keeping (runs per rep, checks made).
    """
    if not values:
        raise ValueError(f"{bench}: no values to summarize")
    return {"bench": bench, "framework": framework, "status": "ok", "unit": unit,
            "better": better, "median": statistics.median(values), "min": min(values),
            "max": max(values), "n": len(values), "values": list(values), **extra}


def status_row(bench: str, framework: str, status: str, reason: str,
               **extra: Any) -> dict[str, Any]:
    """A row for a figure that was not measured: ``status`` is ``skipped`` or ``error``."""
    return {"bench": bench, "framework": framework, "status": status, "reason": reason, **extra}


def error_reason(exc: BaseException) -> str:
    """One line naming the exception and where it was raised (the innermost frame)."""
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
    msg = " ".join(str(exc).split())
    if len(msg) > 400:
        msg = msg[:400] + "..."
    return f"{type(exc).__name__}: {msg}{where}"


def emit(row: dict[str, Any]) -> None:
    """Report a row: appended to the file named by ``TGBENCH_RESULTS`` (what the orchestrator
    reads; one ``write`` per row, so other output of the process cannot garble it), and printed
    as a ``RESULT`` line on stdout for people reading the log."""
    line = json.dumps(row)
    path = os.environ.get(RESULTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    sys.stdout.write(RESULT_PREFIX + line + "\n")
    sys.stdout.flush()


def info(msg: str) -> None:
    """A progress line on stderr (kept out of the result stream)."""
    sys.stderr.write(f"# {msg}\n")
    sys.stderr.flush()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a results file (a missing file has none; a garbled line is skipped)."""
    rows = []
    try:
        text = path.read_text()
    except OSError:
        return rows
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


# ----------------------------------------------------------------------------- timing
def time_loop(fn: Callable[[], Any], runs: int) -> float:
    """Seconds per call of ``fn``, averaged over ``runs`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - t0) / runs


def calibrate_runs(fn: Callable[[], Any], target_s: float, min_runs: int, max_runs: int,
                   warmup: int) -> int:
    """How many calls of ``fn`` take about ``target_s``, within [min_runs, max_runs].

    Runs ``warmup`` calls first (at least one), then times a few more to estimate one call.
    """
    warmup = max(1, warmup)
    deadline = time.perf_counter() + max(2.0, 5 * target_s)
    for _ in range(warmup):
        fn()
        if time.perf_counter() > deadline:
            break
    probe = max(1, min(20, min_runs))
    per_call = time_loop(fn, probe)
    runs = int(target_s / per_call) if per_call > 0 else max_runs
    return max(min_runs, min(max_runs, runs))


def repeat_timed(fn: Callable[[], Any], reps: int, runs: int) -> list[float]:
    """``reps`` repetitions of ``runs`` calls: the seconds per call of each repetition."""
    return [time_loop(fn, runs) for _ in range(reps)]


class Deadline:
    """A wall-clock bound for a loop: ``while not deadline.passed(): ...``."""

    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def passed(self) -> bool:
        return time.perf_counter() >= self.end

    def left(self) -> float:
        return max(0.0, self.end - time.perf_counter())


# ----------------------------------------------------------------------------- ports
def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free TCP ports on ``host`` (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_for_ports(addresses: Iterable[str], timeout_s: float) -> None:
    """Wait until every ``host:port`` accepts a TCP connection.

    Raises:
        TimeoutError: one did not within ``timeout_s`` (named).
    """
    deadline = Deadline(timeout_s)
    for addr in addresses:
        host, port = addr.rsplit(":", 1)
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=1.0):
                    break
            except OSError:
                if deadline.passed():
                    raise TimeoutError(f"{addr} did not accept connections within "
                                       f"{timeout_s:.0f} s") from None
                time.sleep(0.1)


# ----------------------------------------------------------------------------- processes
@dataclass
class Proc:
    """A child process started by this suite, with the log file it writes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log: IO[bytes]
    results_path: Path

    @property
    def pid(self) -> int:
        return int(self.popen.pid)

    def rows(self) -> list[dict[str, Any]]:
        """The rows the process has reported so far."""
        return read_rows(self.results_path)

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def child_env(framework: str) -> dict[str, str]:
    """The environment of a benchmark child: unbuffered, TF's C++ logging quiet."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if framework == "tensorflow":
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    return env


def start_process(name: str, argv: Sequence[str], log_dir: Path,
                  env: dict[str, str] | None = None) -> Proc:
    """Start ``argv`` with stdout and stderr going to ``log_dir/<name>.log`` and its result rows
    to ``log_dir/<name>.rows.jsonl``."""
    log_path = log_dir / f"{name}.log"
    results_path = log_dir / f"{name}.rows.jsonl"
    env = dict(env if env is not None else os.environ)
    env[RESULTS_ENV] = str(results_path)
    log = open(log_path, "wb")  # noqa: SIM115 - closed by stop_process
    try:
        popen = subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT, env=env,
                                 cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL)
    except BaseException:
        log.close()
        raise
    info(f"started {name} pid={popen.pid}")
    return Proc(name, popen, log_path, log, results_path)


def wait_process(proc: Proc, timeout_s: float) -> int | None:
    """Wait at most ``timeout_s`` for ``proc`` to exit; its return code, or None if it still runs."""
    try:
        return proc.popen.wait(timeout=max(0.0, timeout_s))
    except subprocess.TimeoutExpired:
        return None


def stop_process(proc: Proc, grace_s: float = 5.0) -> str:
    """Stop ``proc`` by its PID: SIGTERM, then SIGKILL after ``grace_s``; always bounded.

    Returns:
        What happened, for the log (``exited rc=0``, ``terminated``, ``killed``).
    """
    try:
        p = proc.popen
        if p.poll() is not None:
            return f"{proc.name} pid={proc.pid} exited rc={p.returncode}"
        p.terminate()
        try:
            p.wait(timeout=grace_s)
            how = "terminated"
        except subprocess.TimeoutExpired:
            p.kill()
            try:
                p.wait(timeout=grace_s)
                how = "killed"
            except subprocess.TimeoutExpired:
                how = "kill sent, still not reaped"
        return f"{proc.name} pid={proc.pid} {how}"
    finally:
        proc.log.close()


def wait_for_log(proc: Proc, marker: str, timeout_s: float) -> bool:
    """Wait until ``marker`` appears in ``proc``'s log; False on timeout or when it exited."""
    deadline = Deadline(timeout_s)
    while not deadline.passed():
        if marker in proc.log_text():
            return True
        if proc.popen.poll() is not None:
            return marker in proc.log_text()
        time.sleep(0.1)
    return False


def log_tail(text: str, lines: int = 6) -> str:
    """The last non-empty lines of a log, joined by `` | `` (for a reason field)."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(kept[-lines:])[-800:]


def run_child(name: str, argv: Sequence[str], log_dir: Path, timeout_s: float,
              env: dict[str, str] | None = None) -> tuple[int | None, list[dict[str, Any]], str]:
    """Run one child to its end (or ``timeout_s``), stopping it by PID in any case.

    Returns:
        (return code or None on timeout, its result rows, its log text).
    """
    proc = start_process(name, argv, log_dir, env)
    try:
        rc = wait_process(proc, timeout_s)
    finally:
        info(stop_process(proc))
    return rc, proc.rows(), proc.log_text()


def missing_rows(figures: Iterable[str], framework: str, got: list[dict[str, Any]],
                 rc: int | None, log: str, child: str) -> list[dict[str, Any]]:
    """An error row for each of ``figures`` that a child's rows ``got`` lack for ``framework``,
    naming how the child ended (``rc``; None: timed out) and the tail of its ``log``."""
    seen = {(r.get("bench"), r.get("framework")) for r in got}
    why = "timed out" if rc is None else f"exited rc={rc}"
    return [status_row(fig, framework, "error",
                       f"{child} child {why} without this figure: {log_tail(log)}")
            for fig in figures if (fig, framework) not in seen]


# ----------------------------------------------------------------------------- pythons
def tg_python() -> str:
    """The Python of tensorgrid's venv: the one running the orchestrator."""
    return sys.executable


def tf_python() -> tuple[str | None, str]:
    """The TensorFlow peer's Python, from ``TENSORGRID_TF_PYTHON`` or ``.venv-tf/bin/python``.

    Returns:
        (path or None, how it was found or why there is none).
    """
    env = os.environ.get("TENSORGRID_TF_PYTHON")
    if env:
        if Path(env).exists():
            return env, "TENSORGRID_TF_PYTHON"
        return None, f"TENSORGRID_TF_PYTHON={env} does not exist"
    default = REPO_ROOT / ".venv-tf" / "bin" / "python"
    if default.exists():
        return str(default), ".venv-tf"
    # a git worktree shares the main checkout's (gitignored) peer venv
    try:
        common_dir = subprocess.run(["git", "rev-parse", "--path-format=absolute",
                                     "--git-common-dir"], cwd=REPO_ROOT, capture_output=True,
                                    text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        common_dir = ""
    if common_dir:
        shared = Path(common_dir).parent / ".venv-tf" / "bin" / "python"
        if shared.exists() and shared.parent.parent.parent != REPO_ROOT:
            return str(shared), f"the main checkout's .venv-tf ({shared.parent.parent.parent})"
    return None, "no .venv-tf/bin/python and TENSORGRID_TF_PYTHON is not set"


def python_for(framework: str) -> str | None:
    """The interpreter that runs ``framework``'s children, or None when it is absent."""
    return tg_python() if framework == "tensorgrid" else tf_python()[0]
