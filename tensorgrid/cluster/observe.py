"""Reading a running cluster from outside, through its HTTP master: what every task counted
(``GET /metrics/tasks``) and traced steps of a session (``POST /v1/sessions/{id}/run`` with a
trace level). The command line (``tensorgrid status``, ``tensorgrid trace``) prints what these
return."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from google.protobuf import json_format
from prometheus_client.parser import text_string_to_metric_families

from tensorgrid.client.step_stats import FULL_TRACE
from tensorgrid.pb import step_stats_pb2

__all__ = ["metrics_rows", "task_metrics", "trace_steps"]


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def task_metrics(master_url: str, token: str | None, timeout: float, verify: Any = True
                 ) -> tuple[dict[str, dict[str, float]] | None, str]:
    """Each task's metrics from the master's ``/metrics/tasks``, summed per task and series name
    over the other labels (``steps_ok``/``steps_failed`` split the step counter; buckets left
    out); ``(None, why)`` when the master cannot give them. ``verify``: how an ``https`` master
    is verified (``ClientSettings.http_verify()``)."""
    try:
        r = httpx.get(f"{master_url.rstrip('/')}/metrics/tasks", headers=_headers(token),
                      timeout=timeout, verify=verify)
    except httpx.HTTPError as exc:
        return None, str(exc)
    if r.status_code != 200:
        return None, f"HTTP {r.status_code}"
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            task = sample.labels.get("task")
            name = sample.name
            if task is None or name.endswith(("_bucket", "_created")):
                continue
            if name == "tensorgrid_task_steps_total":
                name = f"steps_{sample.labels.get('outcome', '')}"
            row = out.setdefault(task, {})
            row[name] = row.get(name, 0.0) + float(sample.value)
    return out, ""


def _size(nbytes: float) -> str:
    if nbytes < 1024:
        return f"{nbytes:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        nbytes /= 1024
        if nbytes < 1024 or unit == "GiB":
            break
    return f"{nbytes:.1f} {unit}"


def metrics_rows(metrics: dict[str, dict[str, float]]) -> list[tuple[str, ...]]:
    """A table of ``task_metrics``: a header, then per task whether it answered, its steps (ok,
    failed), mean step time, kernels run, bytes received and tensors sent."""
    rows: list[tuple[str, ...]] = [
        ("TASK", "UP", "STEPS", "FAILED", "MEAN STEP", "KERNELS", "RECEIVED", "SENDS")]
    for task, m in metrics.items():
        count = m.get("tensorgrid_task_step_seconds_count", 0.0)
        mean = f"{1000 * m.get('tensorgrid_task_step_seconds_sum', 0.0) / count:.2f} ms" \
            if count else "-"
        rows.append((task, "yes" if m.get("tensorgrid_task_up") else "no",
                     f"{m.get('steps_ok', 0):.0f}", f"{m.get('steps_failed', 0):.0f}", mean,
                     f"{m.get('tensorgrid_task_kernels_total', 0):.0f}",
                     _size(m.get("tensorgrid_task_recv_bytes_total", 0.0)),
                     f"{m.get('tensorgrid_task_sends_total', 0):.0f}"))
    return rows


def trace_steps(master_url: str, token: str | None, session: str, body: dict[str, Any],
                steps: int, timeout: float,
                on_step: Callable[[int, Any, step_stats_pb2.StepStats], None] | None = None,
                verify: Any = True) -> step_stats_pb2.StepStats:
    """Run ``steps`` traced steps of an open session (``body``: the run route's JSON: feeds,
    fetches, targets, timeout_ms) and return all their rows in one ``StepStats``.

    ``on_step(index, step_id, stats)`` hears of each step as it ends; ``verify`` is how an
    ``https`` master is verified.

    Raises:
        RuntimeError: the master is unreachable or refused a step (its error message).
    """
    url = f"{master_url.rstrip('/')}/v1/sessions/{session}/run"
    merged = step_stats_pb2.StepStats()
    for i in range(steps):
        try:
            r = httpx.post(url, json={**body, "trace_level": FULL_TRACE},
                           headers=_headers(token), timeout=timeout, verify=verify)
        except httpx.HTTPError as exc:
            raise RuntimeError(f"the master at {master_url} is unreachable: {exc}") from None
        try:
            doc = r.json()
        except ValueError:
            doc = {}
        if r.status_code >= 400:
            err = doc.get("error", {}) if isinstance(doc, dict) else {}
            raise RuntimeError(f"{err.get('code', r.status_code)}: "
                               f"{err.get('message') or r.text[:500]}")
        stats = json_format.ParseDict(doc.get("step_stats", {}), step_stats_pb2.StepStats())
        if on_step is not None:
            on_step(i, doc.get("step_id"), stats)
        merged.dev_stats.extend(stats.dev_stats)
    return merged
