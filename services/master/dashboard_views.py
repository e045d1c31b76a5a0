"""What the dashboard's live views compute from the master's state: a traced step as timeline rows
for the page to draw, and each task's memory read from its Prometheus metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tensorgrid.client.timeline import Timeline
from tensorgrid.master.step import StepTrace

# a timeline of more slices than this keeps the longest ones (the page draws SVG elements)
MAX_SLICES = 3000
# the task metrics the tasks table shows as memory
MEMORY_SERIES = {"tensorgrid_task_resident_bytes": "rss_bytes",
                 "tensorgrid_task_shm_pool_bytes": "shm_pool_bytes",
                 "tensorgrid_task_rendezvous_bytes": "rendezvous_bytes"}


def trace_key(trace: StepTrace) -> str:
    """An id of a traced step, read without building its ``StepStats``: the trace object's
    identity and the start of the master's first span (a later traced step starts later)."""
    first = trace.master.node_stats[0].all_start_micros if trace.master.node_stats else 0
    return f"{id(trace):x}-{first}"


def timeline_view(trace: StepTrace, max_slices: int = MAX_SLICES) -> dict[str, Any]:
    """A traced step as the page's timeline (``key``: its ``trace_key``): ``rows`` (one per device of every task,
    the master's first, each with its ``threads``), ``slices`` (``row``, ``tid``, ``name``,
    ``op``, ``ts`` and ``dur`` in microseconds from the step's start, ``bytes``) and
    ``transfers`` (``from``/``to`` rows, ``from_ts``/``to_ts``, ``tensor``, ``bytes``: a
    ``_Send`` to its ``_Recv``), ``duration_us``, and ``dropped`` (slices left out, the shortest
    first, past ``max_slices``). The same events as the Chrome trace, reshaped."""
    events = Timeline(trace.step_stats()).trace_events(show_dataflow=True, show_memory=False)
    events = events["traceEvents"]
    rows: list[dict[str, Any]] = []
    row_of: dict[int, int] = {}
    for ev in events:
        if ev["ph"] == "M" and ev["name"] == "process_name":
            row_of[ev["pid"]] = len(rows)
            rows.append({"name": ev["args"]["name"], "threads": {}})
    for ev in events:
        if ev["ph"] == "M" and ev["name"] == "thread_name" and ev["pid"] in row_of:
            rows[row_of[ev["pid"]]]["threads"][str(ev["tid"])] = ev["args"]["name"]
    slices = [ev for ev in events if ev["ph"] == "X"]
    start = min((ev["ts"] for ev in slices), default=0)
    end = max((ev["ts"] + ev["dur"] for ev in slices), default=0)
    dropped = 0
    if len(slices) > max_slices:
        dropped = len(slices) - max_slices
        slices = sorted(slices, key=lambda ev: ev["dur"], reverse=True)[:max_slices]
    out_slices = [{"row": row_of[ev["pid"]], "tid": ev["tid"], "name": ev["args"]["name"],
                   "op": ev["name"], "ts": ev["ts"] - start, "dur": ev["dur"],
                   "bytes": ev["args"].get("bytes")} for ev in slices]
    starts = {ev["id"]: ev for ev in events if ev["ph"] == "s"}
    transfers = []
    for ev in events:
        if ev["ph"] != "f" or ev["id"] not in starts or "bytes" not in ev["args"]:
            continue  # only the transfers between tasks (a Send and its Recv) carry bytes
        src = starts[ev["id"]]
        transfers.append({"from": row_of[src["pid"]], "to": row_of[ev["pid"]],
                          "from_ts": src["ts"] - start, "to_ts": ev["ts"] - start,
                          "tensor": ev["args"]["tensor"], "bytes": ev["args"]["bytes"]})
    for row in rows:
        row["slices"] = sum(1 for s in out_slices if rows[s["row"]] is row)
    return {"key": trace_key(trace), "rows": rows, "slices": out_slices,
            "transfers": transfers, "duration_us": end - start, "dropped": dropped}


def task_memory(metrics_text: str) -> dict[str, float]:
    """The memory series of one task's Prometheus exposition, by short name (``rss_bytes``,
    ``shm_pool_bytes``, ``rendezvous_bytes``); a series the task does not export is absent."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        key = MEMORY_SERIES.get(family.name)
        if key is not None:
            for sample in family.samples:
                out[key] = sample.value
    return out
