// The dashboard's live views of the selected session: the scalars its client logs, drawn as one
// chart per tag (/v1/dashboard/sessions/{id}/scalars), and its latest traced step as a timeline
// (/v1/dashboard/sessions/{id}/timeline): a row per device of every task, a bar per node, a red
// line per transfer between tasks. Plain SVG; app.js calls renderLive() on every poll.
"use strict";

const LANE_H = 14, ROW_GAP = 6, LABEL_W = 300, AXIS_H = 20;
const live = {
  session: null,      // the session the views show
  scalarsLogged: -1,  // the master's count of logged values when the charts were drawn
  timelineKey: null,  // the key of the traced step drawn
};

function svgNode(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function fmtMicros(us) {
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 100000 ? 0 : 2)} ms` : `${us} us`;
}

function fmtValue(v) {
  if (v === null || v === undefined) return "n/a";
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : Number(v.toPrecision(5)).toString();
}

// ------------------------------------------------------------------ scalars
function drawScalarChart(tag, points) {
  const width = Math.max(260, Math.round(
    document.getElementById("scalars").getBoundingClientRect().width / 2) - 16);
  const H = 160, pad = 34, left = 64;  // room on the left for the value ticks
  const svg = svgNode("svg", {class: "chart scalar-chart", "data-tag": tag,
                              "data-points": points.length, viewBox: `0 0 ${width} ${H}`,
                              role: "img", "aria-label": tag});
  const finite = points.filter((p) => p[2] !== null);
  const steps = points.map((p) => p[0]);
  const x0 = Math.min(...steps), x1 = Math.max(...steps, x0 + 1);
  let lo = Math.min(...finite.map((p) => p[2])), hi = Math.max(...finite.map((p) => p[2]));
  if (!finite.length) { lo = 0; hi = 1; }
  if (hi === lo) { hi += Math.abs(hi) * 0.05 || 1; lo -= Math.abs(lo) * 0.05 || 1; }
  const x = (s) => left + (width - left - pad) * ((s - x0) / (x1 - x0));
  const y = (v) => H - pad + 10 - (H - 2 * pad) * ((v - lo) / (hi - lo));
  const last = finite.length ? finite[finite.length - 1][2] : null;
  svg.append(
    svgNode("line", {class: "axis", x1: left, y1: H - pad + 10, x2: width - pad, y2: H - pad + 10}),
    svgNode("line", {class: "axis", x1: left, y1: pad - 10, x2: left, y2: H - pad + 10}),
    svgNode("text", {class: "chart-title", x: left, y: 14}, `${tag}: ${fmtValue(last)}`),
    svgNode("text", {class: "tick", x: left - 4, y: pad - 6, "text-anchor": "end"}, fmtValue(hi)),
    svgNode("text", {class: "tick", x: left - 4, y: H - pad + 10, "text-anchor": "end"}, fmtValue(lo)),
    svgNode("text", {class: "tick", x: left, y: H - 6}, `step ${x0}`),
    svgNode("text", {class: "tick", x: width - pad, y: H - 6, "text-anchor": "end"}, `step ${x1}`));
  // a null (a value that was not finite) breaks the line
  let d = "", pen = "M";
  for (const p of points) {
    if (p[2] === null) { pen = "M"; continue; }
    d += `${pen}${x(p[0]).toFixed(1)},${y(p[2]).toFixed(1)} `;
    pen = "L";
  }
  svg.append(svgNode("path", {class: "line", d: d.trim()}));
  if (finite.length === 1) {
    svg.append(svgNode("circle", {class: "dot", cx: x(finite[0][0]), cy: y(finite[0][2]), r: 3}));
  }
  return svg;
}

async function renderScalars(session) {
  const box = document.getElementById("scalars");
  const note = document.getElementById("scalars-note");
  if (!session || !session.scalar_tags.length) {
    box.replaceChildren();
    live.scalarsLogged = -1;
    note.textContent = session ? `Session ${session.session_id} has logged no scalar ` +
      "(log_scalars or DashboardScalarsHook; see docs/observability.md)." : "";
    return;
  }
  const data = await getJSON(`/v1/dashboard/sessions/${encodeURIComponent(session.session_id)}` +
                             "/scalars");
  if (data.logged === live.scalarsLogged && box.childElementCount) return;
  live.scalarsLogged = data.logged;
  note.textContent = `of session ${session.session_id}, by step (the latest 1000 points a tag)`;
  box.replaceChildren(...Object.entries(data.tags).map(([tag, points]) =>
    drawScalarChart(tag, points)));
}

// ------------------------------------------------------------------ timeline
function drawTimeline(view, target) {
  const lanes = view.rows.map(() => new Map());  // row -> tid -> lane index
  for (const s of view.slices) {
    const m = lanes[s.row];
    if (!m.has(s.tid)) m.set(s.tid, m.size);
  }
  const tops = [];
  let top = AXIS_H;
  for (const m of lanes) { tops.push(top); top += Math.max(1, m.size) * LANE_H + ROW_GAP; }
  const W = Math.max(600, Math.round(target.getBoundingClientRect().width) - 4 || 1200);
  const span = Math.max(1, view.duration_us);
  const x = (us) => LABEL_W + (W - LABEL_W - 10) * (us / span);
  const svg = svgNode("svg", {class: "timeline", width: W, height: top + 4,
                              viewBox: `0 0 ${W} ${top + 4}`});
  for (let i = 0; i <= 4; i++) {
    const us = Math.round(span * i / 4);
    svg.append(svgNode("line", {class: "grid", x1: x(us), y1: AXIS_H - 4, x2: x(us), y2: top}),
               svgNode("text", {class: "tick", x: x(us), y: 12,
                                "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle"},
                       fmtMicros(us)));
  }
  // the tasks' colours follow their order (as the placement's legend does); the master is grey
  const taskOf = (name) => name.replace(/\/device:.*$/, "");
  const isMaster = (name) => name.endsWith("/master");
  const tasks = [...new Set(view.rows.filter((r) => !isMaster(r.name)).map((r) => taskOf(r.name)))];
  view.rows.forEach((row, i) => {
    const h = Math.max(1, lanes[i].size) * LANE_H;
    const g = svgNode("g", {class: "trow", "data-row": row.name, "data-slices": row.slices});
    g.append(svgNode("rect", {class: "trow-bg", x: 0, y: tops[i], width: W, height: h}),
             svgNode("text", {class: "trow-label", x: 4, y: tops[i] + 11}, row.name));
    svg.append(g);
  });
  for (const s of view.slices) {
    const lane = lanes[s.row].get(s.tid);
    const rowName = view.rows[s.row].name;
    const colour = isMaster(rowName) ? "#8a949e"
      : PALETTE[tasks.indexOf(taskOf(rowName)) % PALETTE.length];
    const transfer = s.op === "_Send" || s.op === "_Recv";
    const bar = svgNode("rect", {class: transfer ? "slice transfer" : "slice",
                                 x: x(s.ts).toFixed(1), y: tops[s.row] + lane * LANE_H + 1,
                                 width: Math.max(1, x(s.ts + s.dur) - x(s.ts)).toFixed(1),
                                 height: LANE_H - 2, fill: colour, "data-op": s.op});
    bar.append(svgNode("title", {}, `${s.name} (${s.op})\n${fmtMicros(s.dur)}` +
                       (s.bytes ? `\n${fmtBytes(s.bytes)}` : "")));
    svg.append(bar);
  }
  for (const t of view.transfers) {
    const line = svgNode("line", {class: "transfer-line", x1: x(t.from_ts),
                                  y1: tops[t.from] + LANE_H / 2, x2: x(t.to_ts),
                                  y2: tops[t.to] + LANE_H / 2});
    line.append(svgNode("title", {}, `${t.tensor}: ${fmtBytes(t.bytes)}\n` +
                        `${view.rows[t.from].name} -> ${view.rows[t.to].name}`));
    svg.append(line);
  }
  target.replaceChildren(svg);
}

async function renderTimeline(session) {
  const title = document.getElementById("timeline-title");
  const target = document.getElementById("timeline");
  const button = document.getElementById("trace-next");
  const link = document.getElementById("trace-download");
  if (!session) {
    title.textContent = "(no session)";
    target.replaceChildren();
    button.disabled = true;
    link.hidden = true;
    live.timelineKey = null;
    return;
  }
  const sid = encodeURIComponent(session.session_id);
  button.disabled = false;
  const known = live.timelineKey && target.childElementCount ? live.timelineKey : "";
  const view = await getJSON(`/v1/dashboard/sessions/${sid}/timeline?known=${encodeURIComponent(known)}`);
  button.textContent = view.pending ? "next step will be traced" : "trace the next step";
  if (view.unchanged) return;
  if (!view.rows.length) {
    title.textContent = `of session ${session.session_id}: no traced step yet`;
    target.replaceChildren();
    link.hidden = true;
    live.timelineKey = null;
    return;
  }
  live.timelineKey = view.key;
  link.hidden = false;
  link.href = `/v1/sessions/${sid}/trace?show_memory=true`;
  link.setAttribute("download", `trace-${session.session_id}.json`);
  title.textContent = `of session ${session.session_id}: ${view.slices.length} nodes on ` +
    `${view.rows.length} rows, ${view.transfers.length} transfers between tasks, ` +
    `${fmtMicros(view.duration_us)}` + (view.dropped ? ` (${view.dropped} shortest not drawn)` : "");
  drawTimeline(view, target);
}

async function traceNext() {
  const session = live.session;
  if (!session) return;
  const response = await fetch(`/v1/dashboard/sessions/${encodeURIComponent(session)}/trace`,
                               {method: "POST", credentials: "same-origin"});
  document.getElementById("trace-next").textContent = response.ok
    ? "next step will be traced" : `could not ask: ${response.status}`;
}

// ------------------------------------------------------------------ entry point
async function renderLive(sessions, selected) {
  const session = sessions.find((s) => s.session_id === selected) ||
    sessions.find((s) => s.scalar_tags.length || s.has_trace) || sessions[0] || null;
  if ((session && session.session_id) !== live.session) {
    live.session = session ? session.session_id : null;
    live.scalarsLogged = -1;
    live.timelineKey = null;
  }
  // a session closed between two requests must not turn the whole page red: say it here
  const [scalars, timeline] = await Promise.allSettled([renderScalars(session),
                                                        renderTimeline(session)]);
  if (scalars.status === "rejected") {
    document.getElementById("scalars-note").textContent = `Scalars: ${scalars.reason.message}`;
  }
  if (timeline.status === "rejected") {
    document.getElementById("timeline-title").textContent = `: ${timeline.reason.message}`;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("trace-next").addEventListener("click", traceNext);
});
