"""The benchmark report (``bench/report.py``, ``bench/history.py``): which raw file each part's
figures come from when a run included only some parts, and the goals of the new parts."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> Any:
    """The bench modules (stdlib only), imported as ``bench/run.py`` imports them."""
    sys.path.insert(0, str(BENCH_DIR))
    try:
        yield {name: importlib.import_module(name) for name in ("common", "history", "report")}
    finally:
        sys.path.remove(str(BENCH_DIR))


def write_raw(folder: Path, stamp: str, units: list[str], rows: list[dict[str, Any]],
              quick: bool = False) -> Path:
    """A raw file as ``run.py`` writes it: meta line, rows, end line."""
    date = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:{stamp[13:15]}"
    meta = {"kind": "meta", "date": date, "command": f"make bench BENCH={','.join(units)}",
            "units": units, "settings": {"reps": 3, "quick": quick},
            "machine": {"cpus": 2, "loadavg": "0.10 0.10 0.10"}}
    path = folder / f"raw-{stamp}.jsonl"
    lines = [meta, *rows, {"kind": "end", "elapsed_s": 1.0}]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def rows_of(bench: Any, figure: str, tg: float, tf: float | None = None) -> list[dict[str, Any]]:
    s = bench["common"].summarize
    out = [s(figure, "tensorgrid", [tg], "us/iter", "lower", iters=10_000)]
    if tf is not None:
        out.append(s(figure, "tensorflow", [tf], "us/iter", "lower", iters=10_000))
    return out


def section(text: str, title_start: str) -> str:
    part = text.split(f"## {title_start}", 1)[1]
    return part.split("\n## ", 1)[0]


def test_unit_of_matches_figures_to_the_units_that_made_them(bench: Any) -> None:
    unit_of = bench["history"].unit_of
    units = ["local.chain", "local.seed", "dist.train.mlp.async", "xhost.transfer",
             "xhost.transfer.1gbit", "xhost.train.wide.async.1gbit",
             "xhost.train.wide.async.1gbit.bf16", "xhost.train.wide.async.1gbit.lz4",
             "xhost.train.wide.async.1gbit.bf16.lz4", "scale", "loops.local", "loops.dist",
             "checkpoint"]
    assert unit_of("local.chain100.per_op", units) == "local.chain"
    assert unit_of("dist.train.mlp.async.worker0_own", units) == "dist.train.mlp.async"
    assert unit_of("xhost.transfer.ps_to_worker.64MB", units) == "xhost.transfer"
    assert unit_of("xhost.transfer.ps_to_worker.64MB.1gbit", units) == "xhost.transfer.1gbit"
    assert unit_of("xhost.train.wide.async.worker0_own.1gbit", units) \
        == "xhost.train.wide.async.1gbit"
    assert unit_of("xhost.train.wide.async.1gbit.bf16", units) \
        == "xhost.train.wide.async.1gbit.bf16"
    assert unit_of("xhost.train.wide.async.worker0_own.1gbit.bf16.lz4", units) \
        == "xhost.train.wide.async.1gbit.bf16.lz4"
    assert unit_of("xhost.train.wide.async.1gbit.lz4", units) == "xhost.train.wide.async.1gbit.lz4"
    assert unit_of("scale.1000.step", units) == "scale"
    assert unit_of("loops.dist.per_iter", units) == "loops.dist"
    assert unit_of("checkpoint.plain_write_direct", units) == "checkpoint"
    assert unit_of("dist.seed.session", units) is None
    assert unit_of("local.seeds.run", units) is None


def test_a_partial_run_keeps_the_newest_earlier_figures_of_the_other_parts(
        bench: Any, tmp_path: Path) -> None:
    report = bench["report"]
    full = write_raw(tmp_path, "20261101-100000", ["loops.local", "loops.dist"],
                     rows_of(bench, "loops.local.per_iter", 9.0, 3.0)
                     + rows_of(bench, "loops.dist.per_iter", 900.0, 300.0))
    write_raw(tmp_path, "20261102-100000", ["loops.dist"],  # interrupted: no rows
              [])
    write_raw(tmp_path, "20261103-100000", ["loops.dist"],
              rows_of(bench, "loops.dist.per_iter", 500.0, 400.0))
    write_raw(tmp_path, "20261103-110000", ["loops.local"],  # a smoke run lends nothing
              rows_of(bench, "loops.local.per_iter", 99.0, 1.0), quick=True)
    current = write_raw(tmp_path, "20261104-100000", ["loops.local"],
                        rows_of(bench, "loops.local.per_iter", 4.0, 2.0))
    write_raw(tmp_path, "20261105-100000", ["loops.dist"],  # later than the rendered run
              rows_of(bench, "loops.dist.per_iter", 7.0, 7.0))

    text = report.render(current)
    loops = section(text, "Control flow")
    assert "Figures from several runs:" in loops
    assert "raw-20261104-100000.jsonl" in loops and "raw-20261103-100000.jsonl" in loops
    assert "raw-20261101" not in loops and "raw-20261105" not in loops
    assert "| 4.00 (4.00-4.00) | 2.00 (2.00-2.00) | 2.00x | <= 5.00 | yes |" in loops
    # the dist row and its TensorFlow peer come from the same run: 500 / 400
    assert "| 500 (500-500) | 400 (400-400) | 1.25x | slowdown <= 2.00x | yes |" in loops
    assert "come from 1 earlier run(s)" in text

    old = report.render(full)  # re-rendering the older file shows that run alone
    assert "every figure below comes from that run" in old
    assert "| 9.00 (9.00-9.00) | 3.00 (3.00-3.00) | 3.00x | <= 5.00 | **no** |" in old
    assert "| 900 (900-900) | 300 (300-300) | 3.00x | slowdown <= 2.00x | **no** |" in old
    assert "raw-20261103" not in old


def test_checkpoint_reference_rows_and_a_missing_peer(bench: Any, tmp_path: Path) -> None:
    s = bench["common"].summarize
    rows = [s("checkpoint.save", "tensorgrid", [1.2, 1.0], "GB/s per shard", "higher",
              mb=1024, shards=2, max_to_keep=2, checks={"bundle_files": True}),
            s("checkpoint.plain_write_direct", "baseline", [2.0], "GB/s per shard", "higher"),
            *rows_of(bench, "loops.dist.per_iter", 500.0)]
    text = bench["report"].render(write_raw(tmp_path, "20261101-100000",
                                            ["checkpoint", "loops.dist"], rows))
    ckpt = section(text, "Checkpoint")
    assert ("save of 1,024 MiB of float32 variables over 2 ps shards, steady state: periodic "
            "saves with max_to_keep=2") in ckpt
    assert "| >= 1.00 | yes | ok |" in ckpt
    assert "| 2.00 (2.00-2.00) | 55% | - |" in ckpt  # tensorgrid's save: 1.1 of 2.0
    assert "not measured (no TensorFlow figure)" in section(text, "Control flow")
