"""The dashboard in a real headless Chromium (Playwright driving Debian's /usr/bin/chromium):
after a training run through the HTTP master that logs its loss, the page names every task with
its state and memory, shows the steps run and each session's step time percentiles, charts the
loss, draws the plan coloured by task and, after its button asks for one, the traced step's
timeline; and it logs in with ``/?token=``. A screenshot of the page is kept under the test's
tmp dir.

Needs ``apt-get install -y chromium`` and ``pip install playwright`` (no ``playwright install``:
the system Chromium is used); skipped with that message when either is missing.
"""

# ruff: noqa: F811  (the fixtures imported from dashboard_fixtures are parameters here)
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dashboard_fixtures import make_master, tasks, trained_session  # noqa: F401 (fixtures)

from tensorgrid.checkpoint.redis_server import start_redis
from tensorgrid.client.dashboard import log_scalars
from tensorgrid.client.train.saver import Saver

PS, WORKER = "/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0"
CHROMIUM = os.environ.get("TENSORGRID_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# set to a path (e.g. docs/dashboard.png) to keep the screenshot there as well
SCREENSHOT_COPY = os.environ.get("TENSORGRID_DASHBOARD_SCREENSHOT")
WAIT_MS = 15_000

sync_api = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser test needs Playwright for Python: pip install playwright "
           "(and apt-get install -y chromium; playwright install is not needed)")
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(f"the browser test needs Chromium at {CHROMIUM}: apt-get install -y chromium",
                allow_module_level=True)


@pytest.fixture(autouse=True)
def redis_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A Redis of the test's own for checkpoints (the page lists them; without ``REDIS_URL``
    the master would start the shared embedded server and leave it running)."""
    server = start_redis(tmp_path / "redis")
    monkeypatch.setenv("REDIS_URL", server.url)  # the master's router and the Saver read it
    yield server
    server.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    return page


def test_dashboard_shows_tasks_states_and_steps(browser, tasks, make_master, tmp_path: Path):
    master = make_master(tasks.spec)
    ckdir = f"{tmp_path}/runs/dashboard"  # the page lists directories by absolute path
    with trained_session(master.url, steps=6) as (step, loss):
        assert loss < 4.0
        # a checkpoint to list; the Saver's ops extend the graph, and the next training step
        # plans again, so that the latest plan is the training step's (ps and worker)
        saved = Saver().save(step.session, f"{ckdir}/model.ckpt", global_step=6)
        step()
        view = master.http.get("/v1/dashboard/sessions").json()
        [session] = view["sessions"]
        total = master.http.get("/v1/cluster").json()["master"]["steps"]
        own = master.http.get("/v1/dashboard/tasks").json()["tasks"]
        # the initializer, 6 training steps, the save and one more training step
        assert session["steps"] == 9 and total == 9

        page = _page(browser)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(master.url + "/")
        for task, job in (("/job:ps/replica:0/task:0", "ps"),
                          ("/job:worker/replica:0/task:0", "worker")):
            row = page.locator(f'#tasks tr[data-task="{task}"]')
            sync_api.expect(row).to_contain_text(job)
            sync_api.expect(row.locator(".state")).to_have_text("alive")
            sync_api.expect(row.locator('td[data-col="steps_run"]')).to_have_text(
                str(own[task]["steps_run"]))
        assert own["/job:worker/replica:0/task:0"]["steps_run"] >= 7  # every training step
        row = page.locator(f'#sessions tr[data-session="{session["session_id"]}"]')
        sync_api.expect(row.locator('td[data-col="steps"]')).to_have_text("9")
        sync_api.expect(page.locator('#master-summary dd[data-key="steps"]')).to_have_text("9")
        checkpoint = page.locator(f'#checkpoints tr[data-directory="{ckdir}"]')
        sync_api.expect(checkpoint).to_contain_text(saved)
        sync_api.expect(checkpoint.locator("td").nth(3)).to_have_text("6")
        # the plan drawn: nodes of both tasks, and the cross-task edges with their bytes
        sync_api.expect(page.locator('#placement g.node[data-task="/job:ps/replica:0/task:0"]')
                        ).not_to_have_count(0)
        sync_api.expect(page.locator(
            '#placement g.node[data-task="/job:worker/replica:0/task:0"]')).not_to_have_count(0)
        sync_api.expect(page.locator("#placement path.edge.cross")).not_to_have_count(0)
        sync_api.expect(page.locator("#latency")).to_contain_text("p50")
        sync_api.expect(page.locator("#status")).to_contain_text("updated")
        # the page follows a run that goes on: counts and the step rate move without a reload,
        # and the loss the client logs is charted
        for i in range(20):
            log_scalars(step.session, {"loss": step()}, step=i)
            page.wait_for_timeout(100)
        sync_api.expect(page.locator('#master-summary dd[data-key="steps"]')).to_have_text("29")
        sync_api.expect(row.locator('td[data-col="steps"]')).to_have_text("29")
        sync_api.expect(page.locator("#rate-chart path.line")).to_have_count(1)
        rate = page.locator('#master-summary dd[data-key="step-rate"]').text_content() or ""
        assert rate.endswith("/s"), rate
        chart = page.locator('#scalars svg.scalar-chart[data-tag="loss"]')
        sync_api.expect(chart).to_have_attribute("data-points", "20")
        sync_api.expect(chart.locator("path.line")).to_have_attribute("d", re.compile(
            r"^M[\d.]+,[\d.]+( L[\d.]+,[\d.]+){19}$"))
        # step time percentiles of this session, and each task's resident memory
        for q in ("p50", "p90", "p99"):
            sync_api.expect(row.locator(f'td[data-col="{q}"]')).to_have_text(re.compile(r" ms$"))
        for task in (PS, WORKER):
            sync_api.expect(page.locator(f'#tasks tr[data-task="{task}"] td[data-col="memory"]')
                            ).to_have_text(re.compile(r"^\d+\.\d MiB"))
        # the timeline: none yet; the button has the master trace the next step
        sync_api.expect(page.locator("#timeline-title")).to_contain_text("no traced step yet")
        page.locator("#trace-next").click()
        sync_api.expect(page.locator("#trace-next")).to_have_text("next step will be traced")
        step()
        for task in (PS, WORKER):
            sync_api.expect(page.locator(f'#timeline g.trow[data-row^="{task}/"]')
                            ).not_to_have_count(0)
        sync_api.expect(page.locator('#timeline g.trow[data-row$="/master"]')).to_have_count(1)
        sync_api.expect(page.locator('#timeline rect.slice[data-op="MatMul"]')).not_to_have_count(0)
        sync_api.expect(page.locator("#timeline line.transfer-line")).not_to_have_count(0)
        sync_api.expect(page.locator("#trace-next")).to_have_text("trace the next step")
        download = page.locator("#trace-download")
        sync_api.expect(download).to_be_visible()
        trace = master.http.get(download.get_attribute("href") or "").json()
        assert any(e.get("name") == "MatMul" for e in trace["traceEvents"])
        shot = tmp_path / "dashboard.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        if SCREENSHOT_COPY:
            shutil.copyfile(shot, SCREENSHOT_COPY)
        assert errors == [], errors
        page.context.close()


def test_dashboard_token_login_in_the_browser(browser, tasks, make_master):
    secured = make_master(tasks.spec, token="s3cret")
    page = _page(browser)
    response = page.goto(secured.url + "/")
    assert response is not None and response.status == 401
    sync_api.expect(page.locator("body")).to_contain_text("token")
    page.goto(secured.url + "/?token=s3cret")
    assert page.url == secured.url + "/"  # the token left the address bar
    sync_api.expect(page.locator('#tasks tr[data-task="/job:ps/replica:0/task:0"] .state')
                    ).to_have_text("alive")
    [cookie] = page.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # the page's scripts cannot read it
    page.context.close()
