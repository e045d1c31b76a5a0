"""Checkpoint save and restore speed, tensorgrid and TensorFlow side by side in one run.

The model is ``--mb`` MiB of float32 variables (default 1024) split evenly over two shards, each
written and read in parallel by its own device:

* tensorgrid: two ps ``train.Server`` tasks and a worker in one process (on 127.0.0.1), a
  ``Saver`` whose save op runs on each ps (tensor bundle files, tracked by a private Redis);
* TensorFlow (optional, ``TENSORGRID_TF_PYTHON`` or ``.venv-tf``): TF1 graph mode, the variables
  on two logical CPU devices, ``Saver(sharded=True)`` (one ``SaveV2`` per device, then a merge).

Both write to the same directory (``--dir``, default a fresh temporary one on the disk under
``/tmp``; files are overwritten, not accumulated). A repetition is one ``save`` or one
``restore``; the figure is GB/s per shard (shard bytes / wall seconds; 1 GB = 1e9 bytes) and the
total, median (min-max) over ``--reps``. Each framework runs in its own child process, tensorgrid
first, then TensorFlow, so both meet the same machine state; neither calls fsync.

``restore`` reads a checkpoint that one untimed restore has just read (the page cache holds it);
``restore_cold`` first drops the checkpoint's files from the page cache (``fsync`` then
``posix_fadvise(DONTNEED)``, untimed), so the bytes come from the disk.

The baseline, run before tensorgrid and again after TensorFlow: two threads each writing one
shard's bytes (the same arrays) to a fresh file at once, as the two ps do, from numpy with no
checksum: ``plain_write`` through the page cache (``file.write(array.data)``), and
``plain_write_direct`` with ``O_DIRECT`` in 16 MiB blocks (what ``dd oflag=direct`` does).

    .venv/bin/python bench/checkpoint_io.py [--mb 1024] [--reps 5] [--json out.json]
        [--no-baseline] [--no-cold]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULT = "RESULT "
SHARDS = 2
VARS_PER_SHARD = 4


def _summary(name: str, framework: str, times: list[float], shard_bytes: int) -> dict[str, Any]:
    per_shard = [shard_bytes / t / 1e9 for t in times]
    return {"bench": name, "framework": framework, "reps": len(times),
            "seconds": times, "shard_bytes": shard_bytes,
            "gbps_per_shard": statistics.median(per_shard),
            "gbps_per_shard_min": min(per_shard), "gbps_per_shard_max": max(per_shard),
            "gbps_total": statistics.median(per_shard) * SHARDS}


def _elements(mb: int) -> int:
    return mb * 1024 * 1024 // 4 // (SHARDS * VARS_PER_SHARD)


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


def _restores(restore: Any, directory: str, reps: int, cold: bool) -> tuple[list[float], list[float]]:
    """Timed restores with the page cache warm (after one untimed restore), then cold."""
    restore()
    warm = []
    for _ in range(reps):
        t0 = time.perf_counter()
        restore()
        warm.append(time.perf_counter() - t0)
    colds = []
    for _ in range(reps if cold else 0):
        _drop_cache(directory)
        t0 = time.perf_counter()
        restore()
        colds.append(time.perf_counter() - t0)
    return warm, colds


def _rows(framework: str, saves: list[float], warm: list[float], cold: list[float],
          shard_bytes: int) -> None:
    rows = [_summary("save", framework, saves, shard_bytes),
            _summary("restore", framework, warm, shard_bytes)]
    if cold:
        rows.append(_summary("restore_cold", framework, cold, shard_bytes))
    for row in rows:
        print(RESULT + json.dumps(row), flush=True)


# ----------------------------------------------------------------------------- baseline


def child_baseline(mb: int, reps: int, directory: str) -> None:
    import mmap
    import threading

    import numpy as np

    n = _elements(mb)
    shards = [[np.full(n, float(i * 10 + j), np.float32) for j in range(VARS_PER_SHARD)]
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

    shard_bytes = n * 4 * VARS_PER_SHARD
    kinds = [("plain_write", buffered)]
    if hasattr(os, "O_DIRECT"):
        kinds.append(("plain_write_direct", direct))
    for bench, write in kinds:
        times = []
        for rep in range(reps):
            paths = [os.path.join(out, f"{bench}-{rep}-{i}") for i in range(SHARDS)]
            threads = [threading.Thread(target=write, args=(i, paths[i])) for i in range(SHARDS)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            times.append(time.perf_counter() - t0)
            for path in paths:
                os.remove(path)
        print(RESULT + json.dumps(_summary(bench, "baseline", times, shard_bytes)), flush=True)
    shutil.rmtree(out, ignore_errors=True)


# ----------------------------------------------------------------------------- tensorgrid


def child_tensorgrid(mb: int, reps: int, directory: str, cold: bool) -> None:
    sys.path.insert(0, str(REPO_ROOT))
    import numpy as np

    import tensorgrid as tf
    from tensorgrid.checkpoint.redis_server import start_redis
    from tensorgrid.client.train.saver import Saver
    from tensorgrid.client.train.server import ClusterSpec, Server, free_port

    srv = start_redis(Path(tempfile.mkdtemp(prefix="tg-bench-redis-")))
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
        variables = []
        for i in range(SHARDS):
            with tf.device(f"/job:ps/task:{i}"):
                for j in range(VARS_PER_SHARD):
                    variables.append(tf.Variable(tf.fill([n], float(i * 10 + j)),
                                                 name=f"ps{i}/v{j}"))
        saver = Saver(max_to_keep=1)
        prefix = os.path.join(directory, "tg", "model.ckpt")
        with tf.Session(servers[-1].target) as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, prefix)  # warm-up: connections, plans, files
            saves = []
            for _ in range(reps):
                t0 = time.perf_counter()
                saver.save(sess, prefix)
                saves.append(time.perf_counter() - t0)
            warm, colds = _restores(lambda: saver.restore(sess, prefix),
                                    os.path.dirname(prefix), reps, cold)
            probe = sess.run(variables[-1])
            assert float(probe[0]) == float((SHARDS - 1) * 10 + VARS_PER_SHARD - 1)
            assert np.all(probe == probe[0])
        _rows("tensorgrid", saves, warm, colds, n * 4 * VARS_PER_SHARD)
    finally:
        for s in reversed(servers):
            s.stop()
        srv.kill()


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
    variables = []
    for i in range(SHARDS):
        with tf.device(f"/cpu:{i}"):
            for j in range(VARS_PER_SHARD):
                variables.append(tf1.Variable(tf.fill([n], float(i * 10 + j)),
                                              name=f"ps{i}/v{j}"))
    saver = tf1.train.Saver(sharded=True, max_to_keep=1)
    prefix = os.path.join(directory, "tf", "model.ckpt")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        saver.save(sess, prefix, write_meta_graph=False)
        saves = []
        for _ in range(reps):
            t0 = time.perf_counter()
            saver.save(sess, prefix, write_meta_graph=False)
            saves.append(time.perf_counter() - t0)
        warm, colds = _restores(lambda: saver.restore(sess, prefix), os.path.dirname(prefix),
                                reps, cold)
        probe = sess.run(variables[-1])
        assert float(probe[0]) == float((SHARDS - 1) * 10 + VARS_PER_SHARD - 1)
    _rows("tensorflow", saves, warm, colds, n * 4 * VARS_PER_SHARD)


# ----------------------------------------------------------------------------- orchestration


def _tf_python() -> str | None:
    env = os.environ.get("TENSORGRID_TF_PYTHON")
    if env:
        return env if os.path.exists(env) else None
    candidates = [REPO_ROOT / ".venv-tf" / "bin" / "python"]
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute",
                                 "--git-common-dir"], cwd=REPO_ROOT, capture_output=True,
                                text=True, check=True).stdout.strip()
        candidates.append(Path(common).parent / ".venv-tf" / "bin" / "python")
    except (OSError, subprocess.CalledProcessError):
        pass
    return next((str(c) for c in candidates if c.exists()), None)


def _run_child(python: str, framework: str, args: argparse.Namespace,
               directory: str) -> list[dict[str, Any]]:
    argv = [python, str(Path(__file__).resolve()), "--child", framework, "--mb", str(args.mb),
            "--reps", str(args.reps), "--dir", directory] + (["--no-cold"] if args.no_cold else [])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout, env=env,
                          check=False)
    rows = [json.loads(line[len(RESULT):]) for line in proc.stdout.splitlines()
            if line.startswith(RESULT)]
    if proc.returncode != 0 or not rows:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        print(f"{framework} failed (exit {proc.returncode}):\n{tail}", file=sys.stderr)
    return rows


def _merge_baselines(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per baseline kind, from the runs before and after the frameworks."""
    out = [r for r in rows if r["framework"] != "baseline"]
    kinds: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["framework"] == "baseline":
            kinds.setdefault(r["bench"], []).append(r)
    for bench, runs in kinds.items():
        times = [t for r in runs for t in r["seconds"]]
        out.append(_summary(bench, "baseline", times, runs[0]["shard_bytes"]))
    return out


def _cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "-"
    return f"{r['gbps_per_shard']:.2f} ({r['gbps_per_shard_min']:.2f}-{r['gbps_per_shard_max']:.2f})"


def _report(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    by = {(r["bench"], r["framework"]): r for r in rows}
    print(f"checkpoint I/O: {args.mb} MiB in {SHARDS} shards, {args.reps} reps, median (min-max)"
          " GB/s per shard")
    print(f"{'':13} {'tensorgrid':>24} {'tensorflow':>24} {'tg/tf':>7}")
    for bench in ("save", "restore", "restore_cold"):
        tg, tf_ = by.get((bench, "tensorgrid")), by.get((bench, "tensorflow"))
        if tg is None and tf_ is None:
            continue
        ratio = f"{tg['gbps_per_shard'] / tf_['gbps_per_shard']:.2f}" if tg and tf_ else "-"
        print(f"{bench:13} {_cell(tg):>24} {_cell(tf_):>24} {ratio:>7}")
    for bench in ("plain_write", "plain_write_direct"):
        base = by.get((bench, "baseline"))
        if base is None:
            continue
        shares = []
        for fw in ("tensorgrid", "tensorflow"):
            save = by.get(("save", fw))
            if save is not None:
                shares.append(f"{fw} save = {save['gbps_per_shard'] / base['gbps_per_shard']:.0%}")
        print(f"{bench:19} {_cell(base):>18}   " + ", ".join(shares))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=1024, help="model size in MiB (default 1024)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where the checkpoints go")
    parser.add_argument("--child", choices=("tensorgrid", "tensorflow", "baseline"), default=None)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--no-baseline", action="store_true", help="skip the plain writes")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold restores")
    args = parser.parse_args()
    if args.child == "tensorgrid":
        child_tensorgrid(args.mb, args.reps, args.dir, not args.no_cold)
        return 0
    if args.child == "tensorflow":
        child_tensorflow(args.mb, args.reps, args.dir, not args.no_cold)
        return 0
    if args.child == "baseline":
        child_baseline(args.mb, args.reps, args.dir)
        return 0
    directory = args.dir or tempfile.mkdtemp(prefix="tg-ckpt-bench-", dir="/tmp")
    rows: list[dict[str, Any]] = []
    try:
        if not args.no_baseline:
            rows += _run_child(sys.executable, "baseline", args, directory)
        rows += _run_child(sys.executable, "tensorgrid", args, directory)
        tf_python = _tf_python()
        if tf_python is None:
            print("TensorFlow peer not found (TENSORGRID_TF_PYTHON or .venv-tf): tensorgrid alone",
                  file=sys.stderr)
        else:
            rows += _run_child(tf_python, "tensorflow", args, directory)
        if not args.no_baseline:
            rows += _run_child(sys.executable, "baseline", args, directory)
    finally:
        if args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)
    rows = _merge_baselines(rows)
    _report(rows, args)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if any(r["framework"] == "tensorgrid" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
