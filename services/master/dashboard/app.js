// The dashboard's polling loop: reads the master's JSON (/v1/cluster, /v1/dashboard/tasks,
// /v1/dashboard/sessions, /v1/dashboard/sessions/{id}/plan, /v1/checkpoints) and renders it;
// live.js draws the selected session's scalars and timeline. The token, when the master has
// one, travels in the HttpOnly cookie that /?token= set; this code never sees it.
"use strict";

const POLL_MS = 1500;
const CHECKPOINT_POLL_MS = 10000;
const RATE_WINDOW_S = 120;

const view = {
  selected: null,      // the session whose plan is drawn
  planDigest: null,    // the digest of the plan drawn now (redraw only when it changes)
  samples: [],         // [{t: seconds, steps: master step counter}] for the rate chart
  lastCheckpoints: 0,
};

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ""));
  return node;
}

async function getJSON(path) {
  const response = await fetch(path, {credentials: "same-origin",
                                      headers: {"Accept": "application/json"}});
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try { message = (await response.json()).error.message || message; } catch (_) { /* text */ }
    const error = new Error(`${path}: ${message}`);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

function fmtAge(s) {
  if (s === null || s === undefined) return "never";
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "?";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

function fmtTime(epoch) {
  return epoch ? new Date(epoch * 1000).toLocaleTimeString() : "";
}

function fmtSeconds(s) {
  if (s === null || s === undefined) return "n/a";
  return s < 1 ? `${(s * 1000).toFixed(1)} ms` : `${s.toFixed(2)} s`;
}

function renderSummary(master) {
  const rate = currentRate();
  const items = [
    ["incarnation", master.incarnation], ["uptime", fmtAge(master.uptime_s)],
    ["steps", master.steps], ["failed steps", master.failed_steps],
    ["live steps", master.live_steps], ["sessions", master.sessions],
    ["graphs", master.graphs], ["plan cache hits", master.plan_cache_hits],
    ["plan cache misses", master.plan_cache_misses],
    ["step rate", rate === null ? "n/a" : `${rate.toFixed(2)}/s`],
  ];
  const dl = document.getElementById("master-summary");
  dl.replaceChildren(...items.flatMap(([k, v]) => [
    el("dt", {}, k), el("dd", {"data-key": k.replace(/ /g, "-")}, v)]));
}

function statusCell(status, key, fmt) {
  if (!status) return el("td", {}, "?");
  if (status.error) return el("td", {class: "note", title: status.error}, "no answer");
  return el("td", {"data-col": key}, fmt ? fmt(status[key]) : status[key]);
}

function memoryCell(status) {
  // resident memory of the task's process, and its shared-memory pool when it has one
  if (!status || status.error || status.rss_bytes === undefined) return statusCell(status, "rss_bytes");
  const pool = status.shm_pool_bytes ? ` + ${fmtBytes(status.shm_pool_bytes)} shm` : "";
  const waiting = status.rendezvous_bytes
    ? ` (${fmtBytes(status.rendezvous_bytes)} sent, not received)` : "";
  return el("td", {"data-col": "memory",
                   title: "resident set, shared-memory pool, tensors sent and not received yet"},
            `${fmtBytes(status.rss_bytes)}${pool}${waiting}`);
}

function renderTasks(tasks, taskStatus) {
  const rows = tasks.map((t) => el("tr", {"data-task": t.task},
    el("td", {class: "mono"}, t.task), el("td", {}, t.job), el("td", {class: "mono"}, t.address),
    el("td", {}, el("span", {class: `state state-${t.state}`}, t.state)),
    el("td", {class: "mono"}, t.incarnation ?? "none yet"),
    el("td", {}, fmtAge(t.heartbeat_age_s)), el("td", {}, t.restarts),
    statusCell(taskStatus[t.task], "steps_run"), statusCell(taskStatus[t.task], "graphs"),
    statusCell(taskStatus[t.task], "live_steps"),
    statusCell(taskStatus[t.task], "uptime_s", fmtAge), memoryCell(taskStatus[t.task]),
    el("td", {class: "mono"}, (t.devices || []).join(" "))));
  document.querySelector("#tasks tbody").replaceChildren(...rows);
}

function renderSessions(sessions) {
  const rows = sessions.map((s) => {
    const row = el("tr", {"data-session": s.session_id,
                          class: s.session_id === view.selected ? "selected" : ""},
      el("td", {class: "mono"}, s.session_id), el("td", {}, s.graph_version),
      el("td", {}, s.nodes), el("td", {}, s.plans), el("td", {}, s.plan_cache_hits),
      el("td", {}, s.plan_cache_misses), el("td", {"data-col": "steps"}, s.steps),
      el("td", {}, s.failed_steps), el("td", {}, s.timed_out_steps),
      ...["p50", "p90", "p99"].map((q) => el("td", {"data-col": q}, s.step_time[q] === null
        ? "n/a" : fmtSeconds(s.step_time[q]))),
      el("td", {}, fmtTime(s.last_used)));
    row.addEventListener("click", () => { view.selected = s.session_id; view.planDigest = null;
                                          poll(); });
    return row;
  });
  if (!rows.length) {
    rows.push(el("tr", {}, el("td", {colSpan: 13, class: "note"}, "no open session")));
  }
  document.querySelector("#sessions tbody").replaceChildren(...rows);
}

function renderLatency(latency) {
  const p = document.getElementById("latency");
  if (!latency || !latency.count) {
    p.textContent = "Step time: no step has run over HTTP yet.";
    return;
  }
  p.textContent = `Step time over ${latency.count} steps: p50 ${fmtSeconds(latency.p50)}, ` +
    `p90 ${fmtSeconds(latency.p90)}, p99 ${fmtSeconds(latency.p99)}, ` +
    `mean ${fmtSeconds(latency.mean_s)} (${latency.source}).`;
}

function recordSteps(steps) {
  const now = performance.now() / 1000;
  view.samples.push({t: now, steps});
  while (view.samples.length && view.samples[0].t < now - RATE_WINDOW_S) view.samples.shift();
}

function rates() {
  // steps/s between consecutive polls; a counter that went down (a new master) restarts at 0
  const out = [];
  for (let i = 1; i < view.samples.length; i++) {
    const a = view.samples[i - 1], b = view.samples[i];
    const dt = b.t - a.t;
    if (dt > 0) out.push({t: b.t, rate: Math.max(0, b.steps - a.steps) / dt});
  }
  return out;
}

function currentRate() {
  const r = rates();
  return r.length ? r[r.length - 1].rate : null;
}

function renderRateChart() {
  const svg = document.getElementById("rate-chart");
  // drawn at the element's own width, so that the text is not stretched
  const W = Math.max(200, Math.round(svg.getBoundingClientRect().width) || 800), H = 160, pad = 24;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const points = rates();
  const now = performance.now() / 1000;
  const top = Math.max(1, ...points.map((p) => p.rate)) * 1.1;
  const x = (t) => pad + (W - 2 * pad) * (1 - (now - t) / RATE_WINDOW_S);
  const y = (r) => H - pad - (H - 2 * pad) * (r / top);
  const parts = [
    `<line class="axis" x1="${pad}" y1="${H - pad}" x2="${W - pad}" y2="${H - pad}"/>`,
    `<line class="axis" x1="${pad}" y1="${pad}" x2="${pad}" y2="${H - pad}"/>`,
    `<text class="tick" x="${pad + 4}" y="${pad - 6}">${top.toFixed(1)}/s</text>`,
    `<text class="tick" x="${W - pad}" y="${H - 6}" text-anchor="end">now</text>`,
    `<text class="tick" x="${pad}" y="${H - 6}">-${RATE_WINDOW_S}s</text>`,
  ];
  if (points.length > 1) {
    const d = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.rate).toFixed(1)}`);
    parts.push(`<path class="line" d="${d.join(" ")}"/>`);
  }
  svg.innerHTML = parts.join("");
}

async function renderPlan(sessions) {
  const title = document.getElementById("placement-title");
  const target = document.getElementById("placement");
  if (!sessions.some((s) => s.session_id === view.selected)) {
    const first = sessions.find((s) => s.has_plan);
    view.selected = first ? first.session_id : null;
    view.planDigest = null;
  }
  if (view.selected === null) {
    title.textContent = "(no session has run a step)";
    target.replaceChildren();
    document.getElementById("placement-legend").replaceChildren();
    return;
  }
  // the plan comes back whole only when it changed since the one drawn
  const known = view.planDigest && target.childElementCount ? view.planDigest : "";
  const plan = await getJSON(`/v1/dashboard/sessions/${encodeURIComponent(view.selected)}` +
                             `/plan?known=${encodeURIComponent(known)}`);
  if (plan.unchanged) return;
  title.textContent = `of session ${view.selected}: ${plan.nodes.length} nodes on ` +
    `${plan.tasks.length} tasks, ${plan.cross_edges} cross-task edges, ` +
    `${fmtBytes(plan.cross_bytes)} per step across tasks`;
  view.planDigest = plan.digest;
  drawPlacement(plan, target, document.getElementById("placement-legend"));
}

function renderCheckpoints(data) {
  const rows = (data.directories || []).map((d) => el("tr", {"data-directory": d.directory},
    el("td", {class: "mono"}, d.directory), el("td", {}, d.checkpoints),
    el("td", {class: "mono"}, d.latest ?? "none intact"), el("td", {}, d.global_step ?? ""),
    el("td", {}, fmtBytes(d.bytes)), el("td", {}, fmtTime(d.time))));
  document.querySelector("#checkpoints tbody").replaceChildren(...rows);
  document.getElementById("checkpoints-note").textContent =
    rows.length ? "" : "No checkpoint has been saved to this master's Redis.";
}

async function pollCheckpoints() {
  const now = Date.now();
  if (now - view.lastCheckpoints < CHECKPOINT_POLL_MS) return;
  view.lastCheckpoints = now;
  try {
    renderCheckpoints(await getJSON("/v1/checkpoints"));
  } catch (error) {
    document.getElementById("checkpoints-note").textContent = `Checkpoints: ${error.message}`;
  }
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const [cluster, dash, own] = await Promise.all([getJSON("/v1/cluster"),
                                                    getJSON("/v1/dashboard/sessions"),
                                                    getJSON("/v1/dashboard/tasks")]);
    recordSteps(cluster.master.steps);
    renderSummary(cluster.master);
    renderTasks(cluster.tasks, own.tasks);
    renderSessions(dash.sessions);
    renderLatency(dash.step_latency);
    renderRateChart();
    await renderPlan(dash.sessions);
    await renderLive(dash.sessions, view.selected);
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    status.className = "status ok";
  } catch (error) {
    status.textContent = error.status === 401
      ? "Not logged in: open /?token=<token> once." : `Cannot read the master: ${error.message}`;
    status.className = "status error";
  }
  pollCheckpoints();
}

poll();
setInterval(poll, POLL_MS);
