"""The dashboard: ``GET /`` serves a page (static HTML, JS and CSS shipped in the package, no CDN)
that polls the master's JSON; ``/v1/dashboard/...`` adds the read-only views the other routers
do not give: every session at once, the steps each task ran, step latency percentiles, and a
session's latest plan as a graph with its cross-task edges.

``/?token=T`` logs in once, as Jupyter does: the token is checked, a cookie derived from it is set
(HttpOnly, SameSite=Strict) and the browser is sent back to ``/``; ``deps.require_token`` accepts
the cookie wherever it accepts the bearer token.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
from collections import defaultdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from services.master.dashboard_views import task_memory
from services.master.deps import DASHBOARD_COOKIE, Authorized, State, dashboard_cookie
from services.master.schemas import error_responses
from tensorgrid.compiler.plan import Plan
from tensorgrid.core import errors
from tensorgrid.core.ir import parse_input
from tensorgrid.master.core import MasterCore

ASSETS = Path(__file__).resolve().parent.parent / "dashboard"
# the files the page loads, and their media types: nothing else under ASSETS is served
_ASSET_TYPES = {"app.js": "text/javascript; charset=utf-8",
                "graph.js": "text/javascript; charset=utf-8",
                "live.js": "text/javascript; charset=utf-8",
                "style.css": "text/css; charset=utf-8"}
# the HTTP routes whose latency is a step's latency (a session's run, or a one-shot run)
STEP_ROUTES = ("/v1/sessions/{session_id}/run", "/v1/run")
# the longest wait for a task's status on the dashboard's behalf (a dead task must not stall it)
STATUS_TIMEOUT_S = 1.0
# a plan bigger than this is listed, not drawn: a layered SVG of thousands of nodes says nothing
MAX_DRAWN_NODES = 400

router = APIRouter(tags=["dashboard"])
api = APIRouter(prefix="/v1/dashboard", tags=["dashboard"], dependencies=[Authorized],
                responses=error_responses(401))

_LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>tensorgrid master: log in</title><link rel="stylesheet" href="/dashboard/style.css">
</head><body><main class="login"><h1>tensorgrid master</h1><p>{message}</p>
<p>Open <code>/?token=&lt;token&gt;</code> once (the master's <code>TENSORGRID_TOKEN</code>);
the browser then keeps a cookie for this master.</p></main></body></html>"""


@router.get("/", include_in_schema=False)
async def index(request: Request, state: State,
                token: Annotated[str | None, Query()] = None) -> Response:
    """The dashboard page; with ``?token=`` a login that sets the cookie and redirects to ``/``.

    Without a configured token the page is served to anyone who can reach the master. With one,
    a missing or wrong token or cookie gets a 401 page saying how to log in."""
    expected = state.settings.token_value
    if expected is None:
        return FileResponse(ASSETS / "index.html", media_type="text/html; charset=utf-8",
                            headers={"Cache-Control": "no-cache"})
    if token is not None:
        if not hmac.compare_digest(token.encode(), expected.encode()):
            return HTMLResponse(_LOGIN_PAGE.format(message="That token is wrong."), 401)
        # 303 to a URL without the token, so it leaves the address bar and the history
        response = RedirectResponse("/", status_code=303)
        # over HTTPS the cookie is Secure: a browser never sends it over plain HTTP
        response.set_cookie(DASHBOARD_COOKIE, dashboard_cookie(expected), httponly=True,
                            samesite="strict", path="/", secure=request.url.scheme == "https")
        return response
    cookie = request.cookies.get(DASHBOARD_COOKIE, "")
    if not hmac.compare_digest(cookie.encode(), dashboard_cookie(expected).encode()):
        return HTMLResponse(_LOGIN_PAGE.format(message="This master needs a token."), 401)
    return FileResponse(ASSETS / "index.html", media_type="text/html; charset=utf-8",
                        headers={"Cache-Control": "no-cache"})


@router.get("/dashboard/{name}", include_in_schema=False)
async def asset(name: str) -> Response:
    """One of the page's static files (code and style only; the data needs the token)."""
    media_type = _ASSET_TYPES.get(name)
    if media_type is None:
        raise errors.NotFoundError(f"The dashboard has no file {name!r} "
                                   f"(files: {', '.join(sorted(_ASSET_TYPES))})")
    return FileResponse(ASSETS / name, media_type=media_type,
                        headers={"Cache-Control": "no-cache"})


def histogram_quantiles(buckets: list[tuple[float, float]], quantiles: tuple[float, ...]
                        ) -> dict[str, float | None]:
    """Quantiles of a cumulative histogram ``[(upper bound, count <= bound)]`` sorted by bound
    (the last bound +Inf), by linear interpolation inside the bucket, as Prometheus'
    ``histogram_quantile`` does. A quantile in the +Inf bucket is the last finite bound."""
    total = buckets[-1][1] if buckets else 0.0
    out: dict[str, float | None] = {}
    for q in quantiles:
        key = f"p{round(q * 100):d}"
        if total <= 0:
            out[key] = None
            continue
        rank = q * total
        lower_bound, lower_count = 0.0, 0.0
        for bound, count in buckets:
            if count >= rank:
                if math.isinf(bound):
                    out[key] = lower_bound
                elif count == lower_count:
                    out[key] = bound
                else:
                    out[key] = lower_bound + (bound - lower_bound) * (
                        (rank - lower_count) / (count - lower_count))
                break
            lower_bound, lower_count = bound, count
    return out


def step_latency(state: Any) -> dict[str, Any]:
    """Percentiles of the HTTP step requests' latency (successful runs), from the master's
    request histogram: the master records no per-step duration of its own, so this includes
    decoding the request and encoding the answer, and misses steps run over gRPC."""
    merged: dict[float, float] = defaultdict(float)
    count, total = 0.0, 0.0
    for metric in state.metrics.registry.collect():
        if metric.name != "tensorgrid_http_request_duration_seconds":
            continue
        for sample in metric.samples:
            labels = sample.labels
            if labels.get("route") not in STEP_ROUTES or labels.get("status") != "200":
                continue
            if sample.name.endswith("_bucket"):
                merged[float(labels["le"])] += sample.value
            elif sample.name.endswith("_count"):
                count += sample.value
            elif sample.name.endswith("_sum"):
                total += sample.value
    quantiles = histogram_quantiles(sorted(merged.items()), (0.5, 0.9, 0.99))
    return {"count": int(count), "mean_s": total / count if count else None, **quantiles,
            "source": "HTTP latency of " + " and ".join(STEP_ROUTES)}


async def _task_status(core: MasterCore, task: str, timeout: float) -> dict[str, Any]:
    try:
        # the status call with the task's metrics, whose memory gauges the table shows
        status, metrics = await asyncio.wait_for(asyncio.gather(
            core.client(task).get_status(timeout), core.client(task).metrics(timeout)),
            timeout + 0.5)
    except Exception as exc:  # noqa: BLE001 - a task that does not answer is shown, not raised
        return {"error": f"{type(exc).__name__}: {exc}"}
    return {**{key: status[key] for key in ("steps_run", "graphs", "live_steps", "uptime_s")},
            **task_memory(metrics)}


@api.get("/tasks", summary="What each task says of itself")
async def tasks(state: State) -> dict[str, Any]:
    """Each task's own counts, asked now with its status call (at most ``STATUS_TIMEOUT_S``):
    ``steps_run`` (steps it finished since it started, for any master or session), ``graphs``
    (partitions registered on it), ``live_steps``, ``uptime_s``, and from its metrics
    ``rss_bytes`` (resident memory), ``shm_pool_bytes`` (its shared-memory segments for
    tensors sent to tasks on its host) and ``rendezvous_bytes`` (tensors its steps sent that
    were not received yet) when it exports them; ``{"error"}`` for a task that
    did not answer. Read only: the cluster's health is the monitor's, not changed here."""
    core = state.core
    timeout = min(state.settings.rpc_timeout_s, STATUS_TIMEOUT_S)
    names = list(core.cluster.tasks)
    answers = await asyncio.gather(*(_task_status(core, t, timeout) for t in names))
    return {"tasks": dict(zip(names, answers))}


@api.get("/sessions", summary="Every open session, step latency")
async def sessions(state: State) -> dict[str, Any]:
    """The open sessions (graph version, nodes, plans, plan cache hits and misses, steps, times)
    and step latency percentiles."""
    core = state.core
    rows = [{**s.describe(), "session_id": s.handle, "created": s.created,
             "last_used": s.last_used, "has_plan": s.last_plan is not None,
             "has_trace": s.last_trace is not None, "step_time": s.step_times.summary(),
             "scalar_tags": s.scalars.tags()}
            for s in core.sessions.values()]
    rows.sort(key=lambda r: r["last_used"], reverse=True)
    return {"sessions": rows, "step_latency": step_latency(state)}


def _edge_bytes(plan: Plan, tensor: str) -> int | None:
    """Bytes of one transfer of ``tensor`` ("node:i") when its shape is static, else None."""
    node, index, _ = parse_input(tensor)
    specs = plan.specs.get(node)
    if specs is None or index >= len(specs):
        return None
    elements = specs[index].shape.num_elements()
    return None if elements is None else int(elements) * specs[index].dtype.size


def plan_graph(plan: Plan) -> dict[str, Any]:
    """A plan as nodes (name, op, task, device) and edges (from, to, control, cross, bytes).

    A ``_Send``/``_Recv`` pair becomes one cross-task edge from the Send to the Recv, carrying
    the bytes of the tensor sent when its shape is static."""
    nodes: list[dict[str, str]] = []
    edges: list[dict[str, Any]] = []
    sends: dict[str, dict[str, Any]] = {}
    recvs: dict[str, str] = {}
    for task, part in plan.partitions.items():
        for n in part:
            nodes.append({"name": n.name, "op": n.op, "task": task, "device": n.device})
            for inp in n.inputs:
                src, _, ctrl = parse_input(inp)
                edges.append({"from": src, "to": n.name, "control": ctrl, "cross": False,
                              "bytes": None})
            if n.op == "_Send":
                sends[n.name.removesuffix("/_send")] = {
                    "name": n.name, "bytes": _edge_bytes(plan, str(n.attrs["tensor_name"]))}
            elif n.op == "_Recv":
                recvs[n.name.removesuffix("/_recv")] = n.name
    for base, send in sends.items():
        if base in recvs:
            edges.append({"from": send["name"], "to": recvs[base], "control": False,
                          "cross": True, "bytes": send["bytes"]})
    return {"tasks": list(plan.partitions), "nodes": nodes, "edges": edges,
            "cross_edges": sum(1 for e in edges if e["cross"]),
            "cross_bytes": sum(e["bytes"] or 0 for e in edges if e["cross"]),
            "drawable": len(nodes) <= MAX_DRAWN_NODES, "digest": plan_digest(plan)}


def plan_digest(plan: Plan) -> str:
    """A short id of a plan: what it runs and how many nodes each task holds (a new plan of the
    same signature with the same partition sizes draws the same)."""
    shape = (plan.feeds, plan.fetches, plan.targets,
             tuple(sorted((t, len(p)) for t, p in plan.partitions.items())))
    return hashlib.sha256(repr(shape).encode()).hexdigest()[:16]


@api.get("/sessions/{session_id}/plan", summary="A session's latest plan as a graph",
         responses=error_responses(404))
async def session_plan(
        session_id: str, state: State,
        known: Annotated[str | None, Query(description="the digest of the plan the caller has "
                                           "drawn: when it is still the latest, only "
                                           "{digest, unchanged} comes back")] = None
) -> dict[str, Any]:
    """The nodes of the session's latest plan by task, and its edges with the cross-task ones
    (and their bytes per step); ``{"nodes": []}`` before the session's first step."""
    plan = (await state.core.find_session(session_id)).last_plan
    if plan is not None and known and plan_digest(plan) == known:
        return {"digest": plan_digest(plan), "unchanged": True}
    if plan is None:
        return {"tasks": [], "nodes": [], "edges": [], "cross_edges": 0, "cross_bytes": 0,
                "drawable": True, "digest": ""}
    return plan_graph(plan)


router.include_router(api)
