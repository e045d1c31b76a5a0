"""Render ``bench/RESULTS.md`` from a raw results file (JSON lines written by ``run.py``).

    python bench/report.py bench/results/raw-<stamp>.jsonl [--out bench/RESULTS.md]
        [--history DIR]

Every number in the report comes from raw files; the goals are the only constants here. The parts
the given run did not include come from the newest earlier raw file (of ``--history``, default
the given file's folder) that has them (``history.py``); each section names its run.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from common import BENCH_DIR, REPO_ROOT
from history import CODEC_SUFFIX, Run, merge, read_run, unit_of

# figure -> (comparison, target). Latencies must stay at or under, rates at or over the target.
GOALS: dict[str, tuple[str, float]] = {
    "local.chain100.per_op": ("<=", 2.0),
    "local.seed.run": ("<=", 150.0),
    "local.mlp.train": (">=", 100_000.0),
    "dist.seed.session": ("<=", 1500.0),
    "dist.transfer.ps_to_worker.64MB": (">=", 3.0),
    "dist.train.mlp.async": (">=", 45_000.0),
    "xhost.transfer.ps_to_worker.256MB": (">=", 2.5),
    "recovery.worker.detect_s": ("<=", 2.0),
    "recovery.worker.resume_s": ("<=", 3.0),
    "recovery.ps.detect_s": ("<=", 2.0),
    "recovery.ps.resume_s": ("<=", 3.0),
    "loops.local.per_iter": ("<=", 5.0),
    "checkpoint.save": (">=", 1.0),
    "checkpoint.restore": (">=", 1.0),
}
# figure -> the largest slowdown against TensorFlow in the same run (tensorgrid's median)
RATIO_GOALS: dict[str, float] = {
    "local.cnn.train": 1 / 0.7,
    "loops.dist.per_iter": 2.0,
}

TITLES: dict[str, str] = {
    "local.chain100.per_run": "chain of 100 scalar adds, per session.run (folding off)",
    "local.chain100.per_op": "chain of 100 scalar adds, per add (folding off)",
    "local.seed.run": "seed matmul, per session.run",
    "local.mlp.train": "MLP 784-256-10 b128 training, one process",
    "local.linreg.train": "linreg 1000 features b256 training, one process (reference)",
    "local.cnn.train": "CNN conv5x5x32-pool-conv5x5x64-pool-fc1024-10 b64 training, one process",
    "dist.seed.session": "seed matmul, vars on ps, plain Session from worker 0",
    "dist.seed.mts": "seed step (matmul + global_step += 1), MonitoredTrainingSession",
    "recovery.worker.detect_s": "worker killed: kill -> master reports it dead or a step fails",
    "recovery.worker.verdict_s": "worker killed: kill -> master reports it dead",
    "recovery.worker.resume_s": "worker killed: kill -> next successful training step",
    "recovery.worker.steps_lost": "worker killed: global steps done again",
    "recovery.ps.detect_s": "ps killed: kill -> master reports it dead or a step fails",
    "recovery.ps.verdict_s": "ps killed: kill -> master reports it dead",
    "recovery.ps.resume_s": "ps killed: kill -> next successful step (after the restore)",
    "recovery.ps.steps_lost": "ps killed: global steps done again (since the last checkpoint)",
    "loops.local.per_iter": "tf.while_loop of {iters:,} scalar iterations (i = i + 1), one "
                            "process, per iteration",
    "loops.dist.per_iter": "tf.while_loop of {iters:,} scalar iterations, the add on the ps, "
                           "loop and client on the worker, per iteration",
    "checkpoint.save_first": "first save of {mb:,} MiB of float32 variables over {shards} ps "
                             "shards, into an empty directory",
    "checkpoint.save": "save of {mb:,} MiB of float32 variables over {shards} ps shards, steady "
                       "state: periodic saves with max_to_keep={max_to_keep}",
    "checkpoint.save_sync": "the same with Saver(sync=True): every file fsynced before the "
                            "commit",
    "checkpoint.restore": "restore of the same (files in the page cache)",
    "checkpoint.restore_cold": "restore of the same, files dropped from the page cache first",
    "checkpoint.plain_write": "two threads writing the same bytes through the page cache",
    "checkpoint.plain_write_direct": "two threads writing the same bytes with O_DIRECT, 16 MiB "
                                     "blocks",
}


def figure_title(bench: str, row: dict[str, Any] | None = None) -> str:
    """A human name for a figure id (its ``{field}``s filled from a row of it, when given)."""
    if bench in TITLES:
        try:
            return TITLES[bench].format(**(row or {}))
        except (KeyError, ValueError, IndexError):
            return re.sub(r"\{[^}]*\}", "N", TITLES[bench])
    parts = bench.split(".")
    if parts[0] == "scale" and len(parts) == 3:
        what = {"heartbeat": "handling one heartbeat", "plan": "a new session's first step "
                "(plan + register)", "step": "a cached step (fan-out, transfers, fan-in)"}
        return f"{parts[1]} tasks: {what.get(parts[2], parts[2])}"
    if parts[0] == "xhost":
        codec = parts.pop() if CODEC_SUFFIX.match(parts[-1]) else ""
        bf16 = parts[-1] == "bf16"
        rest = parts[1:-1] if bf16 else parts[1:]
        tail = rest[-1]
        named = tail.endswith("bit") or tail.startswith("mtu")
        mtu = tail[3:] if tail.startswith("mtu") else (row or {}).get("mtu")
        link = tail if tail.endswith("bit") else f"unshaped, MTU {mtu}" if mtu else "unshaped"
        inner = figure_title(".".join(["dist", *(rest[:-1] if named else rest)]))
        wire = ", bfloat16 on the wire" if bf16 else ""
        if codec.startswith("delta"):
            wire += ", variables pulled as deltas of the reader's version"
        else:
            wire += f", {codec} lossless codec on the wire" if codec else ""
        return f"{inner}; across simulated hosts, {link} link{wire}"
    if parts[:2] == ["dist", "transfer"]:
        where = "ps -> worker 0" if parts[2] == "ps_to_worker" else "worker 0 local (baseline)"
        return f"reduce_sum of a {'.'.join(parts[3:])} float32 variable, {where}"
    if parts[:2] == ["dist", "train"]:
        model = {"mlp": "MLP 784-256-10 b128", "wide": "MLP 784-1024-10 b64 Adam",
                 "wide_fresh": "MLP 784-1024-10 b64 Adam on a new random batch each step"}.get(
            parts[2], "linreg 1000 features b256")
        own = ", worker 0's own steps" if parts[-1] == "worker0_own" else ", overall"
        return f"{model}, 2 workers {parts[3]}{own}"
    return bench


def fmt(v: float | None) -> str:
    """A number with a sensible count of digits."""
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_row(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    if row.get("status") != "ok":
        return row.get("status", "?")
    return f"{fmt(row['median'])} ({fmt(row['min'])}-{fmt(row['max'])})"


def slowdown(tg: dict[str, Any] | None, tf: dict[str, Any] | None) -> float | None:
    """How many times slower tensorgrid is than TensorFlow (> 1: slower).

    tensorgrid / TF for latencies (lower is better), TF / tensorgrid for rates.
    """
    if not tg or not tf or tg.get("status") != "ok" or tf.get("status") != "ok":
        return None
    a, b = tg["median"], tf["median"]
    if tg.get("better") == "higher":
        a, b = b, a
    return a / b if b else None


def goal_cell(bench: str, tg: dict[str, Any] | None,
              tf: dict[str, Any] | None = None) -> tuple[str, str]:
    """(goal, met) for tensorgrid's median (or its slowdown against ``tf``'s, for a ratio goal)."""
    if bench in RATIO_GOALS:
        limit = RATIO_GOALS[bench]
        goal = f"slowdown <= {limit:.2f}x"
        ratio = slowdown(tg, tf)
        if ratio is None:
            no_tf = tg and tg.get("status") == "ok"
            return goal, "not measured (no TensorFlow figure)" if no_tf else "not measured"
        return goal, "yes" if ratio <= limit else "**no**"
    if bench not in GOALS:
        return "", ""
    op, target = GOALS[bench]
    goal = f"{op} {fmt(target)}"
    if not tg or tg.get("status") != "ok":
        return goal, "not measured"
    value = tg["median"]
    met = value <= target if op == "<=" else value >= target
    return goal, "yes" if met else "**no**"


def checks_cell(row: dict[str, Any] | None) -> str:
    """'ok', or the names of failed checks, plus a loss trajectory when there is one."""
    if not row or row.get("status") != "ok":
        return ""
    checks = row.get("checks") or {}
    failed = [k for k, v in checks.items() if isinstance(v, bool) and not v]
    text = "**FAILED: " + ", ".join(failed) + "**" if failed else "ok"
    if "loss_first" in checks:
        text += f" (loss {checks['loss_first']:.3g} -> {checks['loss_last']:.3g})"
    if checks.get("executed_nodes"):
        text += f" ({checks['executed_nodes']} nodes ran)"
    return text


def _ordered(benches: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for b in benches:
        if b not in seen:
            seen.append(b)
    return seen


# (title, figure prefix) of the sections of framework-against-framework tables, in order
SECTIONS = (
    ("Engine (one process)", "local."),
    ("Distributed runtime (ps + 2 workers on 127.0.0.1)", "dist."),
    ("Across hosts (ps + 2 workers, each in its own network namespace with its own /dev/shm; "
     "`tensorgrid.cluster.simhosts`)", "xhost."),
    ("The master as the cluster grows (simulated tasks in one process; `bench/scale.py`)",
     "scale."),
    ("Recovery (LocalCluster: Redis, master, 1 ps, 2 workers; kill -9)", "recovery."),
    ("Control flow: `tf.while_loop` (`bench/while_loop.py`, `bench/while_loop_dist.py`)",
     "loops."),
    ("Checkpoint I/O (`bench/checkpoint_io.py`)", "checkpoint."),
)


def _load(meta: dict[str, Any]) -> str:
    return str(meta.get("machine", {}).get("loadavg", "?"))


def source_lines(current: Run, mine: list[tuple[dict[str, Any], Run]]) -> list[str]:
    """Which run(s) a section's rows come from: raw file, date, command (and for another run
    than the rendered one, its load average and repetitions); with several, each one's units."""
    def one(run: Run) -> str:
        text = f"`{_rel(run.path)}` ({run.date or '?'}, `{run.meta.get('command', '?')}`"
        if run is not current:
            reps = (run.meta.get("settings") or {}).get("reps", "?")
            text += f"; not this report's run: load average {_load(run.meta)}, {reps} " \
                    "repetitions"
        return text + ")"

    units: dict[int, list[str]] = {}
    runs: dict[int, Run] = {}
    for row, run in mine:
        runs[id(run)] = run
        unit = unit_of(row["bench"], run.units) or row["bench"]
        if unit not in units.setdefault(id(run), []):
            units[id(run)].append(unit)
    if len(runs) == 1:
        return [f"Figures from {one(next(iter(runs.values())))}.", ""]
    return ["Figures from several runs:",
            *(f"- {', '.join(f'`{u}`' for u in units[k])}: {one(run)}" for k, run in runs.items()),
            ""]


def figure_table(rows: list[dict[str, Any]]) -> list[str]:
    """The tensorgrid / TensorFlow table of a section's rows."""
    by = {(r["bench"], r["framework"]): r for r in rows}
    out = ["| figure | unit | tensorgrid | TensorFlow | slowdown | goal | met | checks "
           "(tensorgrid) |", "|---|---|---|---|---|---|---|---|"]
    for b in _ordered(r["bench"] for r in rows if r["framework"] != "baseline"):
        tg, tf = by.get((b, "tensorgrid")), by.get((b, "tensorflow"))
        unit = next((r.get("unit") for r in (tg, tf) if r and r.get("unit")), "")
        ratio = slowdown(tg, tf)
        goal, met = goal_cell(b, tg, tf)
        out.append(f"| {figure_title(b, tg or tf)} (`{b}`) | {unit} | {fmt_row(tg)} | "
                   f"{fmt_row(tf)} | {'-' if ratio is None else f'{ratio:.2f}x'} | {goal} | "
                   f"{met} | {checks_cell(tg)} |")
    return [*out, ""]


def render(raw_path: Path, history: Path | None = None) -> str:
    """The Markdown report of one raw results file, with the parts it did not run taken from
    the newest earlier raw file of ``history`` (default: its folder) that has them."""
    current = read_run(raw_path)
    meta, end = current.meta, current.end
    pairs = merge(current, history)
    rows = [r for r, _ in pairs]
    m = meta.get("machine", {})
    probes = meta.get("probes", {})
    lent = _ordered(run.path.name for _, run in pairs if run is not current)
    out: list[str] = ["# Benchmark results", ""]
    out.append("Generated by `bench/report.py` from "
               f"`{_rel(raw_path)}`"
               + ("; every figure below comes from that run." if not lent else
                  f"; the parts that run did not include come from {len(lent)} earlier "
                  "run(s), the newest that had each part: every section names its run.")
               + " Regenerate with `make bench` (see `bench/README.md`).")
    out.append("")
    out.append(f"- command: `{meta.get('command', '?')}`")
    out.append(f"- date: {meta.get('date', '?')}, total {fmt(end.get('elapsed_s'))} s, "
               f"parts: {', '.join(meta.get('units', [])) or '?'}")
    out.append(f"- machine: {m.get('cpus', '?')} CPUs ({m.get('cpu_model', '?')}), "
               f"{m.get('mem_gib', '?')} GiB RAM, {m.get('platform', '?')}; "
               f"load average at start {m.get('loadavg', '?')}")
    try:
        load1 = float(str(m.get("loadavg", "")).split()[0])
    except (IndexError, ValueError):
        load1 = 0.0
    if m.get("cpus") and load1 > 0.5 * m["cpus"]:
        out.append(f"- **the machine was busy when the run started (load {load1:.2f} on "
                   f"{m['cpus']} CPUs): these figures are not representative**")
    for fw, pr in probes.items():
        if "error" in pr:
            out.append(f"- {fw}: not available ({pr['error']})")
        else:
            out.append(f"- {fw} {pr.get('version')}: python {pr.get('python')}, numpy "
                       f"{pr.get('numpy')}, grpcio {pr.get('grpcio')}")
    if meta.get("tf_note"):
        out.append(f"- TensorFlow: {meta['tf_note']}")
    s = meta.get("settings", {})
    out.append(f"- settings: {s.get('reps')} repetitions per figure, ~{s.get('rep_s')} s per "
               f"latency repetition, training windows {s.get('window_s')} s after "
               f"{s.get('warm_s')} s warm-up{' (QUICK smoke run: not figures)' if s.get('quick') else ''}")
    if m.get("blas_env"):
        out.append(f"- BLAS/OpenMP thread settings in the environment: {m['blas_env']}")
    if meta.get("git"):
        out.append(f"- tensorgrid source: {meta['git']}")
    if lent:
        out.append("- the lines above describe this run; a section from another run names it, "
                   "with its load average")
    out += ["", "Each cell is the median (min-max) over the repetitions. **Slowdown** is how many "
            "times slower tensorgrid is than TensorFlow in the same run: tensorgrid/TF for "
            "latencies, TF/tensorgrid for rates; below 1 means tensorgrid is faster. The goal "
            "applies to tensorgrid's median (a slowdown goal, to that ratio).", ""]
    for title, prefix in SECTIONS:
        mine = [(r, run) for r, run in pairs if r["bench"].startswith(prefix)]
        if not mine:
            continue
        section_rows = [r for r, _ in mine]
        out += [f"## {title}", "", *source_lines(current, mine)]
        if prefix == "recovery.":
            out += recovery_table(section_rows)
        else:
            out += figure_table(section_rows)
        if prefix == "checkpoint.":
            out += checkpoint_reference(section_rows)
    not_run = [r for r in rows if r.get("status") != "ok"]
    if not_run:
        out += ["## Not measured", "", "| figure | framework | status | why |", "|---|---|---|---|"]
        for r in not_run:
            reason = str(r.get("reason", "")).replace("|", "/").replace("\n", " ")
            out.append(f"| `{r['bench']}` | {r['framework']} | {r['status']} | {reason} |")
        out.append("")
    tf_failed = [r for r in rows if r["framework"] == "tensorflow" and r.get("status") == "ok"
                 and any(isinstance(v, bool) and not v for v in (r.get("checks") or {}).values())]
    if tf_failed:
        out.append("TensorFlow rows with a failed check: " +
                   ", ".join(f"`{r['bench']}`" for r in tf_failed))
        out.append("")
    fallbacks = (probes.get("tensorgrid") or {}).get("fallbacks")
    if fallbacks:
        out += ["Names not exported by `tensorgrid` itself, taken from their defining modules: "
                + ", ".join(f"`tf.{n}`" for n in fallbacks) + ".", ""]
    out.append(f"Logs of the child processes were in `{meta.get('log_dir', '?')}`.")
    return "\n".join(out) + "\n"


def recovery_table(mine: list[dict[str, Any]]) -> list[str]:
    """The recovery figures (tensorgrid only: kill -9 on a LocalCluster, ``recovery.py``)."""
    settings = next((r.get("settings") for r in mine if r.get("settings")), {}) or {}
    out = ["`bench/recovery.py` trains an MLP (variables on the ps, compute on both workers) "
           "under `MonitoredTrainingSession` with a checkpoint every "
           f"{settings.get('save_checkpoint_steps', '?')} steps and kills a worker, then the "
           "ps, with SIGKILL while a step runs, once the victim has run "
           f"{settings.get('victim_min_uptime_s', '?')} s (no crash-loop backoff). Heartbeat "
           f"every {settings.get('heartbeat_interval_s', '?')} s, dead after "
           f"{settings.get('heartbeat_timeout_s', '?')} s of silence or two refused polls. "
           "Each cell is the median (min-max) over the kills.", "",
           "| figure | unit | tensorgrid | kills | goal | met | checks |",
           "|---|---|---|---|---|---|---|"]
    for r in mine:
        goal, met = goal_cell(r["bench"], r)
        n = r.get("n", "-") if r.get("status") == "ok" else "-"
        out.append(f"| {figure_title(r['bench'])} (`{r['bench']}`) | {r.get('unit', '')} | "
                   f"{fmt_row(r)} | {n} | {goal} | {met} | {checks_cell(r)} |")
    out.append("")
    return out


def checkpoint_reference(mine: list[dict[str, Any]]) -> list[str]:
    """The plain writes of the checkpoint's bytes (no framework), and each framework's save as
    a share of them."""
    base = [r for r in mine if r["framework"] == "baseline"]
    if not base:
        return []
    saves = {r["framework"]: r for r in mine
             if r["bench"] == "checkpoint.save" and r.get("status") == "ok"}
    out = ["Reference: the same bytes written from numpy by two threads at once, as the two ps "
           "do, no checksum (before tensorgrid and again after TensorFlow, both runs in one "
           "row); each framework's save as a share of it.", "",
           "| reference | unit | plain write | tensorgrid save | TensorFlow save |",
           "|---|---|---|---|---|"]
    for r in base:
        shares = []
        for fw in ("tensorgrid", "tensorflow"):
            save = saves.get(fw)
            ok = save is not None and r.get("status") == "ok" and r["median"]
            shares.append(f"{save['median'] / r['median']:.0%}" if ok and save else "-")
        out.append(f"| {figure_title(r['bench'], r)} (`{r['bench']}`) | {r.get('unit', '')} | "
                   f"{fmt_row(r)} | {shares[0]} | {shares[1]} |")
    out.append("")
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("raw", type=Path)
    p.add_argument("--out", type=Path, default=BENCH_DIR / "RESULTS.md")
    p.add_argument("--history", type=Path, default=None,
                   help="where earlier raw files are (default: the raw file's folder)")
    a = p.parse_args(argv)
    a.out.write_text(render(a.raw, a.history))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
