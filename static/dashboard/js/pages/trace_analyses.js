// The trace page's analyses: flame, timeline with the critical path (windows asked from the server on
// zoom and pan), critical-path table, event details, correlation, device metrics around a
// capture. Everything is read from the trace's stored analyses through the API. A finding's
// link ("trace:show-evidence") opens the timeline at its window with its events highlighted.
import { errorMessage, fetchJSON } from "../lib/http.js";
import { afterBreakdownDrawn, cell, loadPlotly, pct, plotConfig, row, us } from "../lib/trace_kit.js";

const views = document.getElementById("trace-views");
const base = views.dataset.apiBase;
const isCapture = views.dataset.isCapture === "1";
const $ = (id) => document.getElementById(id);
const COLOURS = { host: "#3b7dd8", device: "#2e9e5b", merged: "#9aa3b2", critical: "#d62728", edge: "#8b0000", evidence: "#ff7f0e" };
const state = { flame: null, side: "host", span: null, t0: 0, steps: [], requests: 0, bars: null, names: [], rows: [], highlight: new Set() };
let firstWindow = null; // resolves once the timeline has been drawn

// -- flame -----------------------------------------------------------------------------
function drawFlame() {
  const tree = state.flame[state.side];
  const term = $("flame-search").value.trim().toLowerCase();
  const matches = term ? tree.labels.map((l) => l.toLowerCase().includes(term)) : null;
  const colours = matches ? matches.map((m) => (m ? COLOURS.critical : "#dfe4ec")) : undefined;
  $("flame-matches").textContent = matches ? `${matches.filter(Boolean).length} matching` : "";
  const custom = tree.ids.map((_, i) => [tree.values_us[i], tree.self_us[i], tree.counts[i]]);
  const trace = {
    type: "icicle", ids: tree.ids, labels: tree.labels, parents: tree.parents, values: tree.self_us,
    branchvalues: "remainder", customdata: custom, marker: colours ? { colors: colours } : {},
    tiling: { orientation: "v", flip: "y" }, root: { color: "#f6f7f9" },
    hovertemplate: "<b>%{label}</b><br>total %{customdata[0]:,.1f} µs<br>self %{customdata[1]:,.1f} µs<br>count %{customdata[2]:,}<extra></extra>",
  };
  const chart = $("flame-chart");
  Plotly.react(chart, [trace], { margin: { t: 10, l: 10, r: 10, b: 10 }, height: 460 }, plotConfig);
  chart.dataset.side = state.side;
  chart.dataset.nodes = String(tree.ids.length);
}

async function loadFlame() {
  const { ok, data } = await fetchJSON(`${base}flame/`);
  if (!ok) return showError("flame-chart", data);
  state.flame = data;
  drawFlame();
  const chart = $("flame-chart");
  chart.on("plotly_click", (event) => {
    const point = event.points && event.points[0];
    if (point) chart.dataset.zoomedTo = point.label; // the icicle zooms into it by itself
  });
}

// -- timeline ----------------------------------------------------------------------------
const ms = (usValue) => (usValue - state.t0) / 1000;

function barTraces(data) {
  const b = data.bars;
  const groups = { host: [], device: [], merged: [], critical: [], evidence: [] };
  for (let i = 0; i < b.row.length; i++) {
    const side = data.rows[b.row[i]].is_device ? "device" : "host";
    const key = b.count[i] === 1 && state.highlight.has(b.event[i]) ? "evidence"
      : b.critical[i] > 0 ? "critical" : b.count[i] > 1 ? "merged" : side;
    groups[key].push(i);
  }
  if (!groups.evidence.length) delete groups.evidence;
  const traces = Object.entries(groups).map(([key, idx]) => ({
    type: "bar", orientation: "h", name: key === "critical" ? "critical path" : key === "evidence" ? "finding's events" : key,
    y: idx.map((i) => b.row[i]), base: idx.map((i) => ms(b.start_us[i])),
    x: idx.map((i) => Math.max((b.end_us[i] - b.start_us[i]) / 1000, 1e-6)),
    customdata: idx, marker: { color: COLOURS[key] }, width: 0.8,
    text: idx.map((i) => barLabel(data, i)), hoverinfo: "text", textposition: "none",
  }));
  const e = data.edges;
  const ex = [], ey = [];
  for (let k = 0; k < e.src.length; k++) ex.push(ms(e.src_us[k]), ms(e.dst_us[k]), null), ey.push(e.src_row[k], e.dst_row[k], null);
  traces.push({ type: "scatter", mode: "lines", name: "path edges", x: ex, y: ey, line: { color: COLOURS.edge, width: 1.5 }, hoverinfo: "skip" });
  return traces;
}

function barLabel(data, i) {
  const b = data.bars;
  const name = data.names[b.name[i]];
  const dur = us(b.end_us[i] - b.start_us[i]);
  if (b.count[i] === 1) return `${name}<br>${dur} µs${b.critical[i] ? " · on the critical path" : ""}`;
  return `${b.count[i].toLocaleString("en-US")} events (longest ${name})<br>busy ${us(b.busy_us[i])} of ${dur} µs` +
    (b.critical[i] ? `<br>${b.critical[i]} on the critical path` : "");
}

// Asks for the bars of a window and draws them (once `drawAfter`, if given, resolves).
async function loadWindow(startUs, endUs, drawAfter = null) {
  const chart = $("timeline-chart");
  const width = Math.max(200, Math.round(chart.clientWidth || 1200));
  const params = new URLSearchParams({ width_px: width });
  if (startUs !== undefined) params.set("start_us", startUs), params.set("end_us", endUs);
  state.requests += 1;
  const [{ ok, data }] = await Promise.all([fetchJSON(`${base}timeline/?${params}`), drawAfter]);
  if (!ok) return showError("timeline-chart", data);
  if (!state.span) {
    state.span = data.span_us;
    state.t0 = data.span_us[0];
  }
  state.bars = data;
  const layout = {
    barmode: "overlay", showlegend: true, legend: { orientation: "h", y: 1.08 }, dragmode: "zoom",
    margin: { t: 30, l: 230, r: 10, b: 40 }, height: Math.max(260, 26 * data.rows.length + 90),
    xaxis: { title: { text: "ms from the trace's first event" }, range: [ms(data.start_us), ms(data.end_us)] },
    yaxis: { tickvals: data.rows.map((_, i) => i), ticktext: data.rows.map((r) => r.label), autorange: "reversed", fixedrange: true },
  };
  await Plotly.react(chart, barTraces(data), layout, plotConfig);
  Object.assign(chart.dataset, {
    requests: String(state.requests), windowStartUs: String(data.start_us), windowEndUs: String(data.end_us),
    bars: String(data.bars.row.length), criticalBars: String(data.bars.critical.filter((c) => c > 0).length),
    events: String(data.events_in_window),
    highlighted: String(data.bars.event.filter((e, i) => data.bars.count[i] === 1 && state.highlight.has(e)).length),
  });
  $("timeline-info").textContent = `${data.bars.row.length.toLocaleString("en-US")} bars for ` +
    `${data.events_in_window.toLocaleString("en-US")} events · ${data.merged_bars.toLocaleString("en-US")} merged · ` +
    `${data.edges_total.toLocaleString("en-US")} path edges in view`;
}

let pending = null;
function onRelayout(event) {
  let range = null;
  if (event["xaxis.range[0]"] !== undefined) range = [event["xaxis.range[0]"], event["xaxis.range[1]"]];
  else if (event["xaxis.range"]) range = event["xaxis.range"];
  else if (event["xaxis.autorange"]) range = "all";
  if (!range) return;
  clearTimeout(pending);
  pending = setTimeout(() => {
    if (range === "all") return loadWindow();
    const start = state.t0 + range[0] * 1000, end = state.t0 + range[1] * 1000;
    if (end > start) loadWindow(start, end);
  }, 150);
}

async function showEvent(index) {
  const box = $("event-detail");
  const { ok, data } = await fetchJSON(`${base}events/${index}/`);
  box.hidden = false;
  box.replaceChildren();
  if (!ok) return (box.textContent = errorMessage(data));
  const h = document.createElement("h3");
  h.textContent = `${data.name}${data.critical ? " — on the critical path" : ""}`;
  const facts = document.createElement("p");
  facts.textContent = `${data.kind} · ${data.lane} · start ${us(ms(data.start_us) * 1000)} µs from the first event · ${us(data.dur_us)} µs` +
    (data.correlation >= 0 ? ` · correlation ${data.correlation}` : "");
  box.append(h, facts);
  for (const role of ["launched_by", "launched"]) {
    if (!data[role]) continue;
    const p = document.createElement("p");
    const a = document.createElement("a");
    a.href = "#";
    a.textContent = data[role].name;
    a.addEventListener("click", (e) => (e.preventDefault(), showEvent(data[role].index)));
    p.append(role === "launched_by" ? "Launched by " : "Launched ", a);
    box.append(p);
  }
  if (Array.isArray(data.args.request_ids) && data.args.request_ids.length) {
    // An engine step: the requests of its batch, each a link to its request page.
    const p = document.createElement("p");
    p.id = "event-requests";
    p.append("Requests in this step: ");
    data.args.request_ids.forEach((rid, i) => {
      const a = document.createElement("a");
      a.href = `${location.pathname}requests/${encodeURIComponent(rid)}/`;
      a.textContent = rid;
      p.append(i ? ", " : "", a);
    });
    box.append(p);
  }
  const args = document.createElement("pre");
  args.textContent = JSON.stringify(data.args, null, 2);
  box.append(args);
  box.dataset.event = String(index);
}

function onBarClick(event) {
  const point = event.points && event.points[0];
  if (!point || point.customdata === undefined) return;
  const b = state.bars.bars, i = point.customdata;
  if (b.count[i] === 1) return showEvent(b.event[i]);
  const box = $("event-detail");
  box.hidden = false;
  box.textContent = `${b.count[i].toLocaleString("en-US")} events merged here (busy ${us(b.busy_us[i])} µs, ` +
    `${b.critical[i]} on the critical path): drag across them to zoom in.`;
}

// A finding's evidence: its window, its events highlighted (until the next finding).
async function showEvidence(event) {
  const { focus_us: focus, events } = event.detail;
  if (!focus) return;
  await firstWindow;
  state.highlight = new Set(events || []);
  $("step-select").value = "";
  $("timeline-card").scrollIntoView({ block: "start" });
  await loadWindow(focus[0], focus[1]);
  $("timeline-chart").dataset.evidence = event.detail.rule || "";
}
document.addEventListener("trace:show-evidence", showEvidence);

// -- critical path -------------------------------------------------------------------------
async function loadPath(step) {
  const params = step ? `?step=${encodeURIComponent(step)}` : "";
  const { ok, data } = await fetchJSON(`${base}critical-path/${params}`);
  if (!ok) return showError("path-table", data);
  if (!state.steps.length && data.steps.length) fillSteps(data);
  const t = data.table;
  if (!t) return ($("path-summary").textContent = "no work events to build a path from");
  $("path-summary").textContent = `${data.step || "whole trace"} · ${us(t.length_us)} µs · ` +
    `host ${us(t.by_side.host_us)} µs, accelerator ${us(t.by_side.device_us)} µs`;
  $("path-table").tBodies[0].replaceChildren(...t.rows.map((r) => row([
    cell(r.op), cell(r.side), cell(r.on_path.toLocaleString("en-US"), "num"), cell(us(r.path_us), "num"),
    cell(pct(r.share), "num"), cell(r.off_path.toLocaleString("en-US"), "num"),
    cell(us(r.min_slack_us), "num"), cell(us(r.median_slack_us), "num"),
  ])));
  const slack = t.least_slack_by_op;
  $("slack-summary").textContent = slack.zero_length_hidden
    ? `(${slack.zero_length_hidden.toLocaleString("en-US")} zero-length events hidden)` : "";
  $("slack-table").tBodies[0].replaceChildren(...slack.rows.map((r) => {
    const tr = row([cell(r.name), cell(r.events.toLocaleString("en-US"), "num"), cell(us(r.slack_us), "num"), cell(us(r.dur_us), "num")]);
    tr.className = "clickable";
    tr.addEventListener("click", () => showEvent(r.index));
    return tr;
  }));
}

function fillSteps(data) {
  state.steps = data.steps;
  const select = $("step-select");
  for (const name of data.valid_steps) select.append(new Option(name, name));
  $("steps-listed").textContent = `${data.steps.length.toLocaleString("en-US")} steps in the trace; ` +
    `critical paths stored for ${data.valid_steps.length} of them (listed in the step selector).`;
}

function onStep() {
  const name = $("step-select").value;
  loadPath(name);
  const step = state.steps.find((s) => s.name === name);
  if (step) loadWindow(step.start_us, step.end_us);
  else loadWindow();
}

// -- correlation and metrics ------------------------------------------------------------
async function loadCorrelation() {
  const { ok, data } = await fetchJSON(`${base}correlation/`);
  if (!ok) return showError("states-chart", data);
  const over = data.states_over_time;
  const x = over.edges_us.slice(0, -1).map((e, i) => ms((e + over.edges_us[i + 1]) / 2));
  const colours = { device_bound: "#d62728", device_busy: "#2e9e5b", host_bound: "#3b7dd8", idle: "#c7ccd6" };
  const series = Object.keys(colours).map((k) => ({
    type: "scatter", mode: "lines", stackgroup: "states", name: k.replace("_", "-"), x, y: over[k], line: { width: 0, color: colours[k] },
  }));
  Plotly.react($("states-chart"), series, {
    title: { text: "Bound / idle over time", font: { size: 14 } }, margin: { t: 36, l: 50, r: 10, b: 40 }, height: 260,
    yaxis: { tickformat: ".0%", range: [0, 1] }, xaxis: { title: { text: "ms from the trace's first event" } },
  }, plotConfig);
  const h = data.launch_latency_histogram;
  Plotly.react($("latency-chart"), [{
    type: "bar", x: h.edges_us.slice(0, -1).map((e, i) => (e + h.edges_us[i + 1]) / 2), y: h.counts, marker: { color: "#3b7dd8" },
  }], {
    title: { text: `Launch → start latency (${data.matched.toLocaleString("en-US")} launches, p50 ${us(data.launch_latency.p50_us)} µs)`, font: { size: 14 } },
    margin: { t: 36, l: 50, r: 10, b: 40 }, height: 240, xaxis: { title: { text: "µs" } }, yaxis: { title: { text: "launches" } },
  }, plotConfig);
  $("gaps-table").tBodies[0].replaceChildren(...data.idle_gaps.map((g) => row([
    cell(g.label), cell(pct(g.utilization), "num"), cell(us(g.busy_us), "num"), cell(us(g.idle_us), "num"),
    cell(g.gaps.count.toLocaleString("en-US"), "num"), cell(us(g.gaps.p50_us), "num"), cell(us(g.gaps.max_us), "num"),
  ])));
}

async function loadMetrics() {
  const { ok, data } = await fetchJSON(`${base}metrics/`);
  if (!ok) return;
  $("metrics-card").hidden = false;
  if (!Object.values(data.series).some((points) => points.length)) {
    const p = document.createElement("p");
    p.className = data.unavailable ? "chart-empty history-unavailable" : "chart-empty";
    p.textContent = data.unavailable || "No samples of the device around this capture.";
    $("metrics-chart").replaceChildren(p);
    return;
  }
  const names = { device_utilization: ["Utilization", 100, "%"], temperature_c: ["Temperature", 1, "°C"], power_w: ["Power", 1, "W"], memory_used_bytes: ["Memory", 1 / 2 ** 30, "GiB"] };
  const keys = Object.keys(names);
  const traces = keys.map((k, i) => ({
    type: "scatter", mode: "lines+markers", name: `${names[k][0]} (${names[k][2]})`, yaxis: i ? `y${i + 1}` : "y",
    x: data.series[k].map((p) => ms(p[0])), y: data.series[k].map((p) => p[1] * names[k][1]),
  }));
  const layout = { height: 420, margin: { t: 20, l: 60, r: 10, b: 40 }, xaxis: { title: { text: "ms from the trace's first event" } },
    grid: { rows: keys.length, columns: 1, pattern: "coupled" },
    shapes: [{ type: "rect", xref: "x", yref: "paper", x0: ms(data.capture_us[0]), x1: ms(data.capture_us[1]), y0: 0, y1: 1, fillcolor: "#d62728", opacity: 0.08, line: { width: 0 } }] };
  keys.forEach((k, i) => (layout[i ? `yaxis${i + 1}` : "yaxis"] = { title: { text: names[k][2], font: { size: 11 } } }));
  Plotly.react($("metrics-chart"), traces, layout, plotConfig);
  $("metrics-chart").dataset.points = String(traces.reduce((n, t) => n + t.x.length, 0));
}

function showError(id, data) {
  const el = $(id);
  const p = document.createElement("p");
  p.className = "error";
  p.textContent = errorMessage(data);
  el.replaceChildren(p);
}

// -- start when the trace is ready ---------------------------------------------------------
let started = false;
async function start() {
  if (started) return;
  started = true;
  views.hidden = false;
  document.querySelectorAll("#flame-tabs button").forEach((button) => button.addEventListener("click", () => {
    document.querySelectorAll("#flame-tabs button").forEach((b) => b.classList.toggle("active", b === button));
    state.side = button.dataset.side;
    if (state.flame) drawFlame();
  }));
  $("flame-search").addEventListener("input", () => state.flame && drawFlame());
  $("step-select").addEventListener("change", onStep);
  $("timeline-reset").addEventListener("click", () => (($("step-select").value = ""), onStep()));
  // The first window is asked for at once and drawn after the breakdown chart.
  // A link from a request's page opens the timeline at its time: #window=<start_us>,<end_us>.
  const asked = /^#window=(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)$/.exec(location.hash);
  firstWindow = loadWindow(asked ? Number(asked[1]) : undefined, asked ? Number(asked[2]) : undefined,
    Promise.all([loadPlotly(), afterBreakdownDrawn()]));
  await firstWindow;
  performance.mark("timeline-drawn"); // (benchmarks read these marks)
  const chart = $("timeline-chart");
  chart.on("plotly_relayout", onRelayout);
  chart.on("plotly_click", onBarClick);
  await Promise.all([loadFlame(), loadPath(""), loadCorrelation(), isCapture ? loadMetrics() : null]);
  views.dataset.loaded = "1";
  performance.mark("views-drawn");
}

function whenReady() {
  const root = document.getElementById("trace");
  if (root.dataset.status === "ready") return start();
  new MutationObserver(() => root.dataset.status === "ready" && start()).observe(root, { attributes: true, attributeFilter: ["data-status"] });
}

whenReady();
