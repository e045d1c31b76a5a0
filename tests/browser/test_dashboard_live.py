"""The dashboard's live views without a browser: scalars a client logs (by hand and with the
``DashboardScalarsHook``), step time percentiles per session, the latest traced step as timeline
rows (traced on the dashboard's request, or one step in N), and each task's memory."""

# ruff: noqa: F811  (the fixtures imported from dashboard_fixtures are parameters here)
from __future__ import annotations

import math

import numpy as np
import pytest
from dashboard_fixtures import make_master, master, tasks, trained_session  # noqa: F401 (fixtures)

import tensorgrid as tf
from tensorgrid.client.dashboard import log_scalars
from tensorgrid.core import errors

PS = "/job:ps/replica:0/task:0"
WORKER = "/job:worker/replica:0/task:0"


def _session(master) -> dict:
    [row] = master.http.get("/v1/dashboard/sessions").json()["sessions"]
    return row


def test_scalars_logged_by_a_client_are_kept_per_tag_and_bounded(tasks, make_master):
    fresh = make_master(tasks.spec)
    with trained_session(fresh.url, steps=3) as (step, _):
        sess = step.session
        losses = [step() for _ in range(5)]
        for i, loss in enumerate(losses):
            log_scalars(sess, {"loss": loss, "lr": np.float32(0.1)}, step=10 + i)
        log_scalars(sess, {"loss": np.array([float("nan")])})  # a diverged value: a gap
        row = _session(fresh)
        assert row["scalar_tags"] == ["loss", "lr"]
        view = fresh.http.get(f"/v1/dashboard/sessions/{row['session_id']}/scalars").json()
        assert view["logged"] == 11
        points = view["tags"]["loss"]
        assert [p[0] for p in points[:5]] == [10, 11, 12, 13, 14]
        assert [p[2] for p in points[:5]] == pytest.approx(losses)
        # no step given: the master's step count of the session (initializer + 8 steps)
        assert points[5][0] == 9 and points[5][2] is None
        assert [p[2] for p in view["tags"]["lr"]] == pytest.approx([0.1] * 5)
        with pytest.raises(errors.InvalidArgumentError, match="single number"):
            log_scalars(sess, {"loss": np.zeros(3)})
        with pytest.raises(errors.ResourceExhaustedError, match="32 scalar tags"):
            log_scalars(sess, {f"tag{i}": 1.0 for i in range(40)})
        sid = row["session_id"]
        bad = fresh.http.post(f"/v1/sessions/{sid}/scalars", json={"scalars": {"x": "high"}})
        assert bad.status_code == 400
        empty = fresh.http.post(f"/v1/sessions/{sid}/scalars", json={"scalars": {}})
        assert empty.status_code == 400
        missing = fresh.http.post("/v1/sessions/nope/scalars", json={"scalars": {"x": 1.0}})
        assert missing.status_code == 404
    with pytest.raises(errors.UnimplementedError, match="HTTP master"):
        with tf.Graph().as_default(), tf.Session() as local:
            log_scalars(local, {"loss": 1.0})


def test_hook_logs_the_loss_at_the_global_step(tasks, make_master):
    fresh = make_master(tasks.spec)
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            gstep = tf.train.get_or_create_global_step()
            w = tf.Variable(np.float32(3.0), name="hook_w")
        with tf.device("/job:worker/task:0"):
            loss = tf.square(w - 1.0, name="hook_loss")
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gstep)
        hook = tf.train.DashboardScalarsHook({"loss": loss}, every_n_steps=2)
        seen = []
        with tf.train.MonitoredTrainingSession(master=fresh.url, hooks=[hook],
                                               save_checkpoint_secs=None,
                                               save_summaries_steps=None) as sess:
            for _ in range(6):
                seen.append(sess.run([loss, train])[0])
            row = _session(fresh)
            view = fresh.http.get(f"/v1/dashboard/sessions/{row['session_id']}/scalars").json()
    points = view["tags"]["loss"]
    # runs 0, 2, 4 log; the global step read with the run is the step before its increment
    assert [p[0] for p in points] == [0, 2, 4]
    assert [p[2] for p in points] == pytest.approx([seen[0], seen[2], seen[4]])
    assert points[0][2] > points[-1][2]


def test_step_time_percentiles_per_session(tasks, make_master):
    fresh = make_master(tasks.spec)
    with trained_session(fresh.url, steps=20) as _:
        row = _session(fresh)
        st = row["step_time"]
        assert st["count"] == 21 and st["window"] == 21  # the initializer and 20 steps
        assert 0 < st["p50"] <= st["p90"] <= st["p99"] <= st["max_s"]
        assert st["mean_s"] > 0
        with trained_session(fresh.url, steps=2) as _:
            rows = fresh.http.get("/v1/dashboard/sessions").json()["sessions"]
            counts = sorted(r["step_time"]["count"] for r in rows)
            assert counts == [3, 21]  # each session its own


def test_timeline_of_a_step_traced_on_request(tasks, make_master):
    fresh = make_master(tasks.spec)
    with trained_session(fresh.url, steps=2) as (step, _):
        sid = _session(fresh)["session_id"]
        empty = fresh.http.get(f"/v1/dashboard/sessions/{sid}/timeline").json()
        assert empty["rows"] == [] and not empty["pending"]
        assert fresh.http.get(f"/v1/sessions/{sid}/trace").status_code == 404
        asked = fresh.http.post(f"/v1/dashboard/sessions/{sid}/trace")
        assert asked.status_code == 202
        assert fresh.http.get(f"/v1/dashboard/sessions/{sid}/timeline").json()["pending"]
        step()  # the client asks for no trace; the master traces this step for the dashboard
        view = fresh.http.get(f"/v1/dashboard/sessions/{sid}/timeline").json()
        assert not view["pending"] and view["key"]
        names = [r["name"] for r in view["rows"]]
        assert names[0].endswith("/master")
        assert any(n.startswith(PS) for n in names) and any(n.startswith(WORKER) for n in names)
        ops = {s["op"] for s in view["slices"]}
        assert {"_Send", "_Recv", "MatMul"} <= ops
        assert all(0 <= s["ts"] and s["ts"] + s["dur"] <= view["duration_us"] + 1
                   for s in view["slices"])
        # w goes to the worker, its gradient comes back: transfers between the task rows
        assert view["transfers"]
        for t in view["transfers"]:
            assert names[t["from"]] != names[t["to"]] and t["bytes"] > 0
        again = fresh.http.get(f"/v1/dashboard/sessions/{sid}/timeline",
                               params={"known": view["key"]}).json()
        assert again["unchanged"]
        step()  # not traced: the timeline stays the same step's
        same = fresh.http.get(f"/v1/dashboard/sessions/{sid}/timeline",
                              params={"known": view["key"]}).json()
        assert same.get("unchanged")
        chrome = fresh.http.get(f"/v1/sessions/{sid}/trace", params={"show_memory": "true"})
        assert chrome.status_code == 200 and chrome.json()["traceEvents"]


def test_trace_every_n_steps_keeps_the_timeline_fresh(tasks, make_master):
    sampled = make_master(tasks.spec, trace_every_n_steps=3)
    with trained_session(sampled.url, steps=2) as (step, _):
        sid = _session(sampled)["session_id"]
        first = sampled.http.get(f"/v1/dashboard/sessions/{sid}/timeline").json()
        assert first["rows"]  # the third step (initializer + 2) was traced
        for _ in range(3):
            step()
        later = sampled.http.get(f"/v1/dashboard/sessions/{sid}/timeline",
                                 params={"known": first["key"]}).json()
        assert not later.get("unchanged") and later["rows"]


def test_tasks_view_shows_each_task_memory(master):
    own = master.http.get("/v1/dashboard/tasks").json()["tasks"]
    for task in (PS, WORKER):
        rss = own[task]["rss_bytes"]
        assert 10 * 2**20 < rss < 64 * 2**30 and math.isfinite(rss)
        assert own[task]["rendezvous_bytes"] == 0  # no step running: nothing waits
    text = master.http.get("/metrics/tasks").text
    assert f'tensorgrid_task_resident_bytes{{task="{PS}"}}' in text
    assert f'tensorgrid_task_rendezvous_bytes{{task="{WORKER}"}} 0.0' in text


def test_scalar_summaries_fetched_through_the_master_are_charted(tasks, make_master):
    fresh = make_master(tasks.spec)
    with tf.Graph().as_default():
        with tf.device("/job:worker/task:0"):
            x = tf.placeholder(tf.float32, [], name="sum_x")
            tf.summary.scalar("doubled", x * 2.0)
            tf.summary.scalar("squared", tf.square(x))
            tf.summary.histogram("hist", tf.stack([x, x]))
            merged = tf.summary.merge_all()
            alone = tf.summary.scalar("alone", x + 1.0)
        with tf.Session(fresh.url) as sess:
            for i in range(3):
                sess.run(merged, {x: float(i)})
            sess.run(alone, {x: 5.0})
            sess.run(x * 3.0, {x: 1.0})  # no summary fetched: nothing logged
            row = _session(fresh)
            view = fresh.http.get(f"/v1/dashboard/sessions/{row['session_id']}/scalars").json()
    tags = view["tags"]
    assert set(tags) == {"doubled", "squared", "alone"}  # the histogram is no scalar
    assert [p[0] for p in tags["doubled"]] == [1, 2, 3]  # at the session's step count
    assert [p[2] for p in tags["doubled"]] == [0.0, 2.0, 4.0]
    assert [p[2] for p in tags["squared"]] == [0.0, 1.0, 4.0]
    assert [(p[0], p[2]) for p in tags["alone"]] == [(4, 6.0)]
    assert view["logged"] == 7
