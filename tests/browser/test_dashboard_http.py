"""The dashboard without a browser: ``GET /`` serves the page and its files, the JSON views it
reads answer what the master holds, and ``/?token=`` logs in with a cookie the API accepts."""

# ruff: noqa: F811  (the fixtures imported from dashboard_fixtures are parameters here)
from __future__ import annotations

import re

import httpx
import pytest
from dashboard_fixtures import make_master, master, tasks, trained_session  # noqa: F401 (fixtures)

from services.master.deps import DASHBOARD_COOKIE
from services.master.routers.dashboard import histogram_quantiles
from tensorgrid.client.train.server import free_port


def test_page_links_its_files_and_they_are_served(master):
    page = master.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    styles = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.text)
    assert scripts == ["/dashboard/graph.js", "/dashboard/live.js", "/dashboard/app.js"]
    assert styles == ["/dashboard/style.css"]
    assert "http://" not in page.text and "https://" not in page.text  # nothing off the machine
    for path in scripts:
        served = master.http.get(path)
        assert served.status_code == 200
        assert served.headers["content-type"].startswith("text/javascript")
        assert "https://" not in served.text
    css = master.http.get(styles[0])
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    for view in ("tasks", "sessions", "placement", "rate-chart", "checkpoints", "scalars",
                 "timeline"):
        assert f'id="{view}"' in page.text
    missing = master.http.get("/dashboard/secret.py")
    assert missing.status_code == 404 and "app.js" in missing.json()["error"]["message"]
    assert master.http.get("/dashboard/..%2Fmain.py").status_code == 404


def test_sessions_and_tasks_views_count_steps(tasks, make_master):
    fresh = make_master(tasks.spec)

    def steps_run() -> dict[str, int]:
        own = fresh.http.get("/v1/dashboard/tasks").json()["tasks"]
        return {task: status["steps_run"] for task, status in own.items()}

    before = steps_run()
    with trained_session(fresh.url, steps=4) as (_, loss):
        assert loss < 4.0
        view = fresh.http.get("/v1/dashboard/sessions").json()
        [session] = view["sessions"]
        # the initializer is one plan, the training step another: 1 + 4 steps, 2 misses
        assert session["steps"] == 5
        assert session["plan_cache_misses"] == 2 and session["plan_cache_hits"] == 3
        assert session["has_plan"]
        # each task counts the steps it ran itself: the initializer ran on the ps only
        after = steps_run()
        assert {task: after[task] - before[task] for task in after} == {
            "/job:ps/replica:0/task:0": 5, "/job:worker/replica:0/task:0": 4}
        own = fresh.http.get("/v1/dashboard/tasks").json()["tasks"]
        assert all(status["graphs"] >= 1 and status["uptime_s"] > 0 for status in own.values())
        latency = view["step_latency"]
        assert latency["count"] == 5
        assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"]

        plan = fresh.http.get(f"/v1/dashboard/sessions/{session['session_id']}/plan").json()
        assert set(plan["tasks"]) == {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"}
        names = {n["name"]: n for n in plan["nodes"]}
        assert names["w"]["task"] == "/job:ps/replica:0/task:0"
        assert names["loss"]["task"] == "/job:worker/replica:0/task:0"
        cross = [e for e in plan["edges"] if e["cross"]]
        assert len(cross) == plan["cross_edges"] > 0
        for edge in cross:
            assert names[edge["from"]]["op"] == "_Send" and names[edge["to"]]["op"] == "_Recv"
            assert names[edge["from"]]["task"] != names[edge["to"]]["task"]
        # w (1x1 float32) travels to the worker and its gradient back: 4 bytes each way
        assert any(e["bytes"] == 4 for e in cross)
        assert plan["cross_bytes"] == sum(e["bytes"] or 0 for e in cross)
        again = fresh.http.get(f"/v1/dashboard/sessions/{session['session_id']}/plan",
                               params={"known": plan["digest"]}).json()
        assert again == {"digest": plan["digest"], "unchanged": True}
        stale = fresh.http.get(f"/v1/dashboard/sessions/{session['session_id']}/plan",
                               params={"known": "0" * 16}).json()
        assert stale == plan
    missing = fresh.http.get("/v1/dashboard/sessions/nope/plan")
    assert missing.status_code == 404


def test_tasks_view_names_a_task_that_does_not_answer(tasks, make_master):
    # a cluster spec with a task nobody serves: its row says why, the others still answer
    spec = {**tasks.spec, "worker": [*tasks.spec["worker"], f"127.0.0.1:{free_port()}"]}
    partial = make_master(spec)
    own = partial.http.get("/v1/dashboard/tasks").json()["tasks"]
    assert own["/job:worker/replica:0/task:0"]["steps_run"] >= 0
    assert "error" in own["/job:worker/replica:0/task:1"]
    assert own["/job:worker/replica:0/task:1"]["error"]


def test_token_login_sets_a_cookie_the_api_accepts(tasks, make_master):
    secured = make_master(tasks.spec, token="s3cret")
    assert secured.http.get("/").status_code == 401
    assert secured.http.get("/v1/dashboard/sessions").status_code == 401
    assert secured.http.get("/?token=wrong").status_code == 401
    assert secured.http.get("/dashboard/app.js").status_code == 200  # code, no data
    with httpx.Client(base_url=secured.url, timeout=30.0) as browser:
        login = browser.get("/?token=s3cret")
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert "s3cret" not in cookie
        assert browser.get("/").status_code == 200
        assert browser.get("/v1/dashboard/sessions").status_code == 200
        assert browser.get("/v1/cluster").json()["tasks"]
    # the cookie must be the one derived from the token: the token itself is refused
    with httpx.Client(base_url=secured.url, timeout=30.0,
                      cookies={DASHBOARD_COOKIE: "s3cret"}) as forged:
        assert forged.get("/v1/cluster").status_code == 401


def test_histogram_quantiles_interpolate_inside_buckets():
    inf = float("inf")
    buckets = [(0.1, 0.0), (0.2, 10.0), (0.4, 20.0), (inf, 20.0)]
    q = histogram_quantiles(buckets, (0.25, 0.5, 0.75, 1.0))
    assert q == pytest.approx({"p25": 0.15, "p50": 0.2, "p75": 0.3, "p100": 0.4})
    assert histogram_quantiles([(0.1, 0.0), (inf, 0.0)], (0.5,)) == {"p50": None}
    assert histogram_quantiles([(0.1, 1.0), (inf, 3.0)], (0.9,)) == {"p90": 0.1}
