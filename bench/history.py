"""Which run each figure of the report comes from.

A run of some parts only (``make bench BENCH=loops``) writes a raw file with those parts' rows.
Its report keeps the other parts' figures too: for every unit the run did not include, the rows
of the newest earlier raw file (in the same folder, or the one given) whose run included it. Only
runs of the same kind count (a quick smoke run never lends figures to a full one, nor the
reverse), and only runs up to the rendered one's date, so re-rendering an older raw file gives
the report it had. Stdlib only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# the last part of a cross-host unit or figure that names a lossless wire codec: the codec, then
# ``_pulls`` (only what workers pull), then ``_L<level>`` (``xhost.....1gbit.zstd_pulls_L3``)
CODEC_SUFFIX = re.compile(r"^((lz4|lz4hc|zstd|zlib)(_pulls)?|delta(_lz4|_zstd)?)(_L[1-9])?$")


@dataclass
class Run:
    """One raw results file: its ``meta`` line, result rows and ``end`` line."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    end: dict[str, Any] = field(default_factory=dict)

    @property
    def date(self) -> str:
        """The run's start, ISO 8601 (local time, as ``run.py`` writes it)."""
        return str(self.meta.get("date", ""))

    @property
    def quick(self) -> bool:
        return bool((self.meta.get("settings") or {}).get("quick"))

    @property
    def units(self) -> list[str]:
        return list(self.meta.get("units") or [])


def read_run(path: Path) -> Run:
    """The run of a raw file (blank lines skipped; lines that are not JSON are an error).

    Raises:
        ValueError: a line is not JSON (named by file and line number).
    """
    run = Run(path)
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{n}: not a JSON line ({exc})") from None
        kind = obj.get("kind")
        if kind == "meta":
            run.meta = obj
        elif kind == "end":
            run.end = obj
        elif "bench" in obj:
            run.rows.append(obj)
    return run


def _split_suffixes(name: str) -> tuple[str, tuple[str, ...]]:
    """Cross-host names carry the link rate, ``bf16`` and a wire codec as suffixes after the
    figure (``xhost.train.wide.async.worker0_own.1gbit.bf16.lz4``): (the name without them,
    them)."""
    parts = name.split(".")
    tail: list[str] = []
    if parts[0] == "xhost":
        if len(parts) > 2 and CODEC_SUFFIX.match(parts[-1]):
            tail.insert(0, parts.pop())
        if len(parts) > 2 and parts[-1] == "bf16":
            tail.insert(0, parts.pop())
        if len(parts) > 2 and parts[-1].endswith("bit"):
            tail.insert(0, parts.pop())
    return ".".join(parts), tuple(tail)


def unit_of(bench: str, units: list[str]) -> str | None:
    """The unit of ``units`` that produced figure ``bench`` (the longest that matches), or None.

    A unit matches a figure named after it: ``dist.seed`` -> ``dist.seed.mts``, ``local.chain`` ->
    ``local.chain100.per_op``, ``xhost.transfer.1gbit`` -> ``xhost.transfer.ps_to_worker.1MB.1gbit``.
    """
    base, tail = _split_suffixes(bench)
    best: str | None = None
    for unit in units:
        ubase, utail = _split_suffixes(unit)
        if utail != tail:
            continue
        rest = base[len(ubase):]
        if base.startswith(ubase) and (not rest or rest[0] == "." or rest[0].isdigit()) \
                and (best is None or len(unit) > len(best)):
            best = unit
    return best


def earlier_runs(current: Run, folder: Path) -> list[Run]:
    """The raw files of ``folder`` that may lend figures to ``current``: of the same kind (quick
    or not), dated no later, newest first; unreadable files are left out."""
    out = []
    for path in folder.glob("raw-*.jsonl"):
        if path.resolve() == current.path.resolve():
            continue
        try:
            run = read_run(path)
        except (OSError, ValueError):
            continue
        if run.quick == current.quick and run.date and run.date <= current.date:
            out.append(run)
    return sorted(out, key=lambda r: (r.date, r.path.name), reverse=True)


def merge(current: Run, folder: Path | None) -> list[tuple[dict[str, Any], Run]]:
    """Every row of ``current``, then, for each unit it did not include, the rows of the newest
    earlier run in ``folder`` (default: ``current``'s folder) that did; each with its run."""
    out: list[tuple[dict[str, Any], Run]] = [(row, current) for row in current.rows]
    covered = set(current.units)
    for run in earlier_runs(current, folder if folder is not None else current.path.parent):
        # a unit counts when the run has rows of it (an interrupted run may have none)
        rows_of: dict[str, list[dict[str, Any]]] = {}
        for row in run.rows:
            unit = unit_of(row["bench"], run.units)
            if unit is not None and unit not in covered:
                rows_of.setdefault(unit, []).append(row)
        covered.update(rows_of)
        out += [(row, run) for rows in rows_of.values() for row in rows]
    # the units in the suite's order: as the run listing the most of them ran them
    order: list[str] = []
    for run in sorted({id(r): r for _, r in out}.values(), key=lambda r: -len(r.units)):
        order += [u for u in run.units if u not in order]
    rank = {u: i for i, u in enumerate(order)}
    out.sort(key=lambda pair: rank.get(unit_of(pair[0]["bench"], pair[1].units) or "", len(rank)))
    return out
