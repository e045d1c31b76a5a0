"""Checkpoint save and restore speed, tensorgrid and TensorFlow side by side in one run.

The model is ``--mb`` MiB of float32 variables (default 1024) split evenly over two shards, each
written and read in parallel by its own device:

* tensorgrid: two ps ``train.Server`` tasks and a worker in one process (on 127.0.0.1), a
  ``Saver`` whose save op runs on each ps (tensor bundle files, tracked by a private Redis);
* TensorFlow (optional, ``TENSORGRID_TF_PYTHON`` or ``.venv-tf``): TF1 graph mode, the variables
  on two logical CPU devices, ``Saver(sharded=True)`` (one ``SaveV2`` per device, then a merge).

Both write under the same directory (``--dir``, default a fresh temporary one on the disk under
``/tmp``, removed at the end). A repetition is one ``save`` or one ``restore``; its figure is GB/s
per shard (shard bytes / wall seconds; 1 GB = 1e9 bytes); the rows (``checkpoint.<kind>``,
``common.summarize``) give the median, min and max over ``--reps``. Each framework runs in its
own child process, tensorgrid first, then TensorFlow, so both meet the same machine state;
neither calls fsync (tensorgrid's default ``sync=False``, TensorFlow's only behaviour).

``save_first`` is a first save: each repetition saves into a new, empty directory (after one
untimed save elsewhere builds the save's plans), so every file is new. ``save`` is the steady
state of periodic saves, as ``MonitoredTrainingSession`` and the ``Supervisor`` save: a
``global_step`` each time into one directory with ``max_to_keep=2``, so each save also retires
the oldest checkpoint (its time is in the save, for both frameworks); ``MAX_TO_KEEP + 1`` untimed
saves come first, so every timed save retires one. The saves run back to back (no training step
between them), the hardest case for a disk still writing the previous save back. ``save_sync``
is the same with tensorgrid's ``Saver(sync=True)`` (every file ``fsync``ed before the commit;
TensorFlow has no such choice: skipped). Before the
restores every variable is set to zero (untimed), and after them each must hold its saved value
again (the ``restored_values`` check). ``restore`` reads the latest checkpoint, which one untimed
restore has just read (the page cache holds it); ``restore_cold`` first drops the checkpoint's
files from the page cache (``fsync`` then ``posix_fadvise(DONTNEED)``, untimed), so the bytes
come from the disk.

The baseline (framework ``baseline``), run before tensorgrid and again after TensorFlow, one row
per kind over both runs: two threads each writing one shard's bytes (the same arrays) to a fresh
file at once, as the two ps do, from numpy with no checksum: ``plain_write`` through the page
cache (``file.write(array.data)``), and ``plain_write_direct`` with ``O_DIRECT`` in 16 MiB blocks
(what ``dd oflag=direct`` does).

    .venv/bin/python bench/checkpoint_io.py [--mb 1024] [--reps 5] [--json out.json]
        [--no-baseline] [--no-cold]
    make bench BENCH=checkpoint                  # through the runner: RESULTS.md
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    REPO_ROOT,
    Settings,
    child_env,
    emit,
    error_reason,
    info,
    missing_rows,
    python_for,
    run_child,
    status_row,
    summarize,
)

SHARDS = 2
VARS_PER_SHARD = 4
MB = 1024
QUICK_MB = 128  # 64 MiB per shard: the same O_DIRECT path as the full size
KINDS = ("save_first", "save", "save_sync", "restore", "restore_cold")
MAX_TO_KEEP = 2  # the steady-state saves' max_to_keep
BASELINES = ("plain_write", "plain_write_direct")
UNIT = "GB/s per shard"
CHILD_TIMEOUT_S = 600.0
_emitted: set[str] = set()  # the figures this child has reported


def _emit(row: dict[str, Any]) -> None:
    _emitted.add(row["bench"])
    emit(row)


def figure(kind: str) -> str:
    """The figure id of a kind: ``save`` -> ``checkpoint.save``."""
    return f"checkpoint.{kind}"


def _row(kind: str, framework: str, times: list[float], mb: int, **extra: Any) -> dict[str, Any]:
    """The row of one kind: GB/s per shard of each repetition (``times`` in seconds)."""
    shard_bytes = _elements(mb) * 4 * VARS_PER_SHARD
    row = summarize(figure(kind), framework, [shard_bytes / t / 1e9 for t in times], UNIT,
                    "higher", seconds=times, mb=mb, shards=SHARDS, shard_bytes=shard_bytes,
                    **extra)
    row["gbps_total"] = row["median"] * SHARDS
    return row


def _elements(mb: int) -> int:
    return mb * 1024 * 1024 // 4 // (SHARDS * VARS_PER_SHARD)


def _fill_value(shard: int, var: int) -> float:
    return float(shard * 10 + var)


def _drop_cache(directory: str) -> None:
    """Write back and drop from the page cache every file under ``directory`` (no root needed:
    ``posix_fadvise`` drops the clean pages of a file one can open)."""
    for root, _, names in os.walk(directory):
        for name in names:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _timed(fn: Callable[[], Any], reps: int, before: Callable[[], Any] | None = None
           ) -> list[float]:
    """Seconds of each of ``reps`` calls of ``fn`` (``before`` runs untimed ahead of each)."""
    times = []
    for _ in range(reps):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _steady(save: Callable[[str, int | None], str], prefix: str, reps: int
            ) -> tuple[list[float], str]:
    """Seconds of ``reps`` periodic saves of ``prefix`` (after ``MAX_TO_KEEP + 1`` untimed
    ones, so each timed save retires the oldest), and the last checkpoint's path."""
    step = 0
    for _ in range(MAX_TO_KEEP + 1):
        step += 1
        save(prefix, step)
    times = []
    for _ in range(reps):
        step += 1
        t0 = time.perf_counter()
        latest = save(prefix, step)
        times.append(time.perf_counter() - t0)
    return times, latest


def _measure(framework: str, save: Callable[[str, int | None], str], restore: Callable[[str], Any],
             zero: Callable[[], Any], values_ok: Callable[[], bool], directory: str, mb: int,
             reps: int, cold: bool,
             save_sync: Callable[[str, int | None], str] | None = None) -> None:
    """Time first saves, steady-state saves (also with ``save_sync`` when given), then restores
    (warm, then cold), check the files and the restored values, and emit a row per kind.
    ``save(prefix, global_step)`` returns the checkpoint's path."""
    save(os.path.join(directory, "warmup", "model.ckpt"), None)  # connections, plans
    firsts = []
    for rep in range(reps):
        fresh = os.path.join(directory, f"first{rep}", "model.ckpt")
        t0 = time.perf_counter()
        save(fresh, None)
        firsts.append(time.perf_counter() - t0)
    prefix = os.path.join(directory, "steady", "model.ckpt")
    saves, latest = _steady(save, prefix, reps)
    if save_sync is not None:
        syncs, _ = _steady(save_sync, os.path.join(directory, "steady_sync", "model.ckpt"), reps)
    kept = glob.glob(f"{glob.escape(prefix)}-*.index")
    files_ok = (os.path.exists(latest + ".index") and len(kept) == MAX_TO_KEEP
                and len(glob.glob(f"{glob.escape(latest)}.data-*-of-{SHARDS:05d}")) == SHARDS)
    zero()  # the restores must bring the saved values back
    restore(latest)
    warm = _timed(lambda: restore(latest), reps)
    steady = os.path.dirname(prefix)
    colds = _timed(lambda: restore(latest), reps, lambda: _drop_cache(steady)) if cold else []
    checks = {"bundle_files": files_ok, "restored_values": values_ok()}
    _emit(_row("save_first", framework, firsts, mb))
    _emit(_row("save", framework, saves, mb, checks={"bundle_files": files_ok},
               max_to_keep=MAX_TO_KEEP))
    if save_sync is not None:
        _emit(_row("save_sync", framework, syncs, mb, max_to_keep=MAX_TO_KEEP))
    else:
        _emit(status_row(figure("save_sync"), framework, "skipped",
                         "no durable-save choice in this framework's Saver"))
    _emit(_row("restore", framework, warm, mb, checks=checks))
    if colds:
        _emit(_row("restore_cold", framework, colds, mb, checks=checks))


def _all_restored(values: list[Any]) -> bool:
    """Every variable (shard-major order) holds its fill value everywhere."""
    return all(bool((v == _fill_value(k // VARS_PER_SHARD, k % VARS_PER_SHARD)).all())
               for k, v in enumerate(values))


# ----------------------------------------------------------------------------- baseline


def child_baseline(mb: int, reps: int, directory: str) -> None:
    import mmap
    import threading

    import numpy as np

    n = _elements(mb)
    shards = [[np.full(n, _fill_value(i, j), np.float32) for j in range(VARS_PER_SHARD)]
              for i in range(SHARDS)]
    block = 16 << 20
    staging = [np.frombuffer(mmap.mmap(-1, block), np.uint8) for _ in range(SHARDS)]
    for buf in staging:
        buf[:] = 0
    out = os.path.join(directory, "plain")
    os.makedirs(out, exist_ok=True)

    def buffered(i: int, path: str) -> None:
        with open(path, "wb") as f:
            for arr in shards[i]:
                f.write(arr.data)

    def direct(i: int, path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        try:
            buf, fill, offset = staging[i], 0, 0
            for arr in shards[i]:
                src = arr.view(np.uint8)
                pos = 0
                while pos < src.nbytes:
                    m = min(src.nbytes - pos, block - fill)
                    buf[fill:fill + m] = src[pos:pos + m]
                    fill, pos = fill + m, pos + m
                    if fill == block:
                        offset += os.pwrite(fd, buf.data, offset)
                        fill = 0
            if fill:
                os.pwrite(fd, buf[:-(-fill // 4096) * 4096].data, offset)
                os.ftruncate(fd, offset + fill)
        finally:
            os.close(fd)

    kinds: list[tuple[str, Callable[[int, str], None]]] = [("plain_write", buffered)]
    if hasattr(os, "O_DIRECT"):
        kinds.append(("plain_write_direct", direct))
    for kind, write in kinds:
        times = []
        for rep in range(reps):
            paths = [os.path.join(out, f"{kind}-{rep}-{i}") for i in range(SHARDS)]
            threads = [threading.Thread(target=write, args=(i, paths[i])) for i in range(SHARDS)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            times.append(time.perf_counter() - t0)
            for path in paths:
                os.remove(path)
        _emit(_row(kind, "baseline", times, mb))
    shutil.rmtree(out, ignore_errors=True)


# ----------------------------------------------------------------------------- tensorgrid


def child_tensorgrid(mb: int, reps: int, directory: str, cold: bool) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    import tensorgrid as tf
    from tensorgrid.checkpoint.redis_server import start_redis
    from tensorgrid.client.train.saver import Saver
    from tensorgrid.client.train.server import ClusterSpec, Server, free_port

    redis_dir = tempfile.mkdtemp(prefix="tgbench-ckpt-redis-")
    srv = start_redis(Path(redis_dir))
    os.environ["REDIS_URL"] = srv.url
    spec = ClusterSpec({"ps": [f"127.0.0.1:{free_port()}" for _ in range(SHARDS)],
                        "worker": [f"127.0.0.1:{free_port()}"]})
    servers = [Server(spec, "ps", i) for i in range(SHARDS)] + [Server(spec, "worker", 0)]
    try:
        deadline = time.monotonic() + 60
        while any(t["state"] != "alive" for s in servers for t in s.master.cluster.describe()):
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not come up")
            time.sleep(0.05)
        n = _elements(mb)
        variables, zeroes = [], []
        for i in range(SHARDS):
            with tf.device(f"/job:ps/task:{i}"):  # the zeroes too: no transfer to the ps
                for j in range(VARS_PER_SHARD):
                    v = tf.Variable(tf.fill([n], _fill_value(i, j)), name=f"ps{i}/v{j}")
                    variables.append(v)
                    zeroes.append(v.assign(tf.zeros([n])))
        zero_op = tf.group(*zeroes)
        saver = Saver(max_to_keep=MAX_TO_KEEP)
        durable = Saver(max_to_keep=MAX_TO_KEEP, sync=True, name="save_sync")
        with tf.Session(servers[-1].target) as sess:
            sess.run(tf.global_variables_initializer())
            _measure("tensorgrid", lambda p, step: saver.save(sess, p, global_step=step),
                     lambda p: saver.restore(sess, p), lambda: sess.run(zero_op),
                     lambda: _all_restored(sess.run(variables)), os.path.join(directory, "tg"),
                     mb, reps, cold,
                     save_sync=lambda p, step: durable.save(sess, p, global_step=step))
    finally:
        for s in reversed(servers):
            s.stop()
        srv.kill()
        shutil.rmtree(redis_dir, ignore_errors=True)


# ----------------------------------------------------------------------------- TensorFlow


def child_tensorflow(mb: int, reps: int, directory: str, cold: bool) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(SHARDS)])
    n = _elements(mb)
    variables, zeroes = [], []
    for i in range(SHARDS):
        with tf.device(f"/cpu:{i}"):
            for j in range(VARS_PER_SHARD):
                v = tf1.Variable(tf.fill([n], _fill_value(i, j)), name=f"ps{i}/v{j}")
                variables.append(v)
                zeroes.append(v.assign(tf.zeros([n])))
    zero_op = tf.group(*zeroes)
    saver = tf1.train.Saver(sharded=True, max_to_keep=MAX_TO_KEEP)

    def save(prefix: str, step: int | None) -> str:
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        return str(saver.save(sess, prefix, global_step=step, write_meta_graph=False))

    with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        _measure("tensorflow", save, lambda p: saver.restore(sess, p), lambda: sess.run(zero_op),
                 lambda: _all_restored(sess.run(variables)), os.path.join(directory, "tf"), mb,
                 reps, cold)


# ----------------------------------------------------------------------------- orchestration


def _figures(framework: str, cold: bool) -> list[str]:
    if framework == "baseline":
        return [figure(k) for k in BASELINES if k != "plain_write_direct" or hasattr(os, "O_DIRECT")]
    return [figure(k) for k in KINDS if k != "restore_cold" or cold]


def _child(name: str, framework: str, python: str, mb: int, reps: int, directory: str,
           cold: bool, log_dir: Path) -> list[dict[str, Any]]:
    """One child (bounded in time, stopped by PID): its rows, and an error row for each figure it
    did not report."""
    argv = [python, str(Path(__file__).resolve()), "--child", framework, "--mb", str(mb),
            "--reps", str(reps), "--dir", directory] + ([] if cold else ["--no-cold"])
    env = child_env("tensorflow" if framework == "tensorflow" else "tensorgrid")
    rc, got, text = run_child(name, argv, log_dir, CHILD_TIMEOUT_S, env)
    return got + missing_rows(_figures(framework, cold), framework, got, rc, text,
                              f"checkpoint_io {framework}")


def _merge_baselines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per baseline kind over its runs before and after the frameworks (an error row
    only when no run measured it)."""
    out = [r for r in rows if r["framework"] != "baseline"]
    for bench in _ordered_benches(r for r in rows if r["framework"] == "baseline"):
        runs = [r for r in rows if r["bench"] == bench and r["framework"] == "baseline"]
        ok = [r for r in runs if r.get("status") == "ok"]
        if not ok:
            out.append(runs[0])
            continue
        times = [t for r in ok for t in r["seconds"]]
        out.append(_row(bench.split(".", 1)[1], "baseline", times, ok[0]["mb"],
                        baseline_runs=len(ok)))
    return out


def _ordered_benches(rows: Any) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r["bench"] not in seen:
            seen.append(r["bench"])
    return seen


def run(s: Settings, frameworks: list[str], log_dir: Path, mb: int | None = None,
        reps: int | None = None, cold: bool = True, baseline: bool = True,
        directory: str | None = None) -> list[dict[str, Any]]:
    """The whole benchmark: the baseline, tensorgrid, TensorFlow, the baseline again, each a child
    process; the checkpoints go to ``directory`` (default a fresh folder, removed at the end).

    Returns:
        A row per figure and framework (measurement, skipped or error); one per baseline kind.
    """
    mb = mb if mb is not None else (QUICK_MB if s.quick else MB)
    reps = reps if reps is not None else s.reps
    cold = cold and hasattr(os, "posix_fadvise")
    tg_py = python_for("tensorgrid")
    assert tg_py is not None
    where = directory or tempfile.mkdtemp(prefix="tgbench-ckpt-", dir="/tmp")
    rows: list[dict[str, Any]] = []
    try:
        if baseline:
            rows += _child("checkpoint-baseline-before", "baseline", tg_py, mb, reps, where,
                           cold, log_dir)
        for fw in frameworks:
            py = python_for(fw)
            if py is None:
                rows += [status_row(f, fw, "skipped", "no Python for this framework")
                         for f in _figures(fw, cold)]
                continue
            rows += _child(f"checkpoint-{fw}", fw, py, mb, reps, where, cold, log_dir)
        if baseline:
            rows += _child("checkpoint-baseline-after", "baseline", tg_py, mb, reps, where, cold,
                           log_dir)
    finally:
        if directory is None:
            shutil.rmtree(where, ignore_errors=True)
    return _merge_baselines(rows)


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    if r.get("status") != "ok":
        return str(r.get("status"))
    return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


def _ok(r: dict[str, Any] | None) -> bool:
    return r is not None and r.get("status") == "ok"


def _report(rows: list[dict[str, Any]], mb: int, reps: int) -> None:
    by = {(r["bench"], r["framework"]): r for r in rows}
    print(f"checkpoint I/O: {mb} MiB in {SHARDS} shards, {reps} reps, median (min-max)"
          " GB/s per shard")
    print(f"{'':13} {'tensorgrid':>24} {'tensorflow':>24} {'tg/tf':>7}  checks (tensorgrid)")
    for kind in KINDS:
        tg, tf_ = by.get((figure(kind), "tensorgrid")), by.get((figure(kind), "tensorflow"))
        if tg is None and tf_ is None:
            continue
        ratio = f"{tg['median'] / tf_['median']:.2f}" if _ok(tg) and _ok(tf_) else "-"
        checks = (tg or {}).get("checks", "")
        print(f"{kind:13} {_cell(tg):>24} {_cell(tf_):>24} {ratio:>7}  {checks}")
    for kind in BASELINES:
        base = by.get((figure(kind), "baseline"))
        if base is None:
            continue
        shares = []
        for fw in ("tensorgrid", "tensorflow"):
            save = by.get((figure("save"), fw))
            if _ok(save) and _ok(base):
                shares.append(f"{fw} save = {save['median'] / base['median']:.0%}")
        print(f"{kind:19} {_cell(base):>18}   " + ", ".join(shares))
    for r in rows:
        if r.get("status") != "ok":
            print(f"{r['bench']} {r['framework']}: {r['status']}: {r.get('reason', '')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=MB, help=f"model size in MiB (default {MB})")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the checkpoints go")
    parser.add_argument("--child", choices=("tensorgrid", "tensorflow", "baseline"), default=None)
    parser.add_argument("--frameworks", default="tensorgrid,tensorflow")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--no-baseline", action="store_true", help="skip the plain writes")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold restores")
    args = parser.parse_args()
    if args.child:
        # a SIGTERM from the runner (its time bound) still stops the servers and Redis
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        children = {"tensorgrid": lambda: child_tensorgrid(args.mb, args.reps, args.dir,
                                                           not args.no_cold),
                    "tensorflow": lambda: child_tensorflow(args.mb, args.reps, args.dir,
                                                           not args.no_cold),
                    "baseline": lambda: child_baseline(args.mb, args.reps, args.dir)}
        try:
            children[args.child]()
        except Exception as exc:  # reported as the error of the figures not yet emitted
            reason = error_reason(exc)
            for fig in _figures(args.child, not args.no_cold):
                if fig not in _emitted:
                    _emit(status_row(fig, args.child, "error", reason))
            return 1
        return 0
    log_dir = Path(tempfile.mkdtemp(prefix="tgbench_checkpoint_"))
    frameworks = [f for f in args.frameworks.split(",") if f]
    if python_for("tensorflow") is None and "tensorflow" in frameworks:
        info("TensorFlow peer not found (TENSORGRID_TF_PYTHON or .venv-tf): tensorgrid alone")
        frameworks.remove("tensorflow")
    rows = run(Settings(reps=args.reps), frameworks, log_dir, args.mb, args.reps,
               not args.no_cold, not args.no_baseline, args.dir)
    _report(rows, args.mb, args.reps)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    info(f"logs in {log_dir}")
    return 0 if any(_ok(r) and r["framework"] == "tensorgrid" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
