// Trace page: follow the trace's progress over the websocket; once ready, chart and table
// the operator breakdown; a click on an operator type opens its drill-down. A finding's link
// ("trace:show-evidence") filters the breakdown to the finding's operators.
import { connect } from "../lib/live.js";
import { errorMessage, fetchJSON } from "../lib/http.js";
import { cell, loadPlotly, pct, plotConfig, row, statusLabel, us } from "../lib/trace_kit.js";

const root = document.getElementById("trace");
const api = root.dataset.apiUrl;
const $ = (id) => document.getElementById(id);
// kind undefined: the side's default (framework operators on the host, so that Python frames
// never bury them); null: all kinds.
const state = { side: "host", kind: undefined, kinds: null, op: null, opKind: null, offset: 0, limit: 50, total: 0, only: null };

function showStatus(status, progress, events, error) {
  root.dataset.status = status;
  $("trace-status").textContent = status;
  $("trace-status").className = `badge status-${status}`;
  const pending = $("trace-pending");
  pending.hidden = status === "ready" || status === "failed";
  if (progress !== null && progress !== undefined) $("trace-progress").value = progress;
  let text = `${statusLabel(status)}…`;
  if (status === "capturing" && progress !== null && progress !== undefined) {
    text = `${statusLabel(status)} ${Math.round(progress * 100)}%` + (events !== null && events !== undefined ? ` · ${events.toLocaleString("en-US")} events` : "");
  }
  if (status === "analysing") text = "Capture stored; analysing…";
  $("trace-state").textContent = text;
  if (error) {
    $("trace-error").textContent = error;
    $("trace-error").hidden = false;
  }
}

function onMessage(message) {
  if (message.type === "trace.progress") {
    showStatus(message.status, message.progress, message.events, "");
  } else if (message.type === "trace.changed") {
    showStatus(message.status, message.progress, null, message.error);
    if (message.status === "ready") becameReady();
  }
}

let loaded = false;
async function becameReady() {
  if (loaded) return;
  loaded = true;
  const { ok, data } = await fetchJSON(api);
  if (ok && data.events !== null) {
    const facts = $("trace-size");
    if (!$("trace-events")) facts.append(` · ${data.events.toLocaleString("en-US")} events · span ${us(data.span_us)} µs`);
    if (data.iterations_run !== null && !$("trace-iterations")) facts.append(` · kept ${data.iterations_kept} of ${data.iterations_run} iterations`);
  }
  $("trace-results").hidden = false;
  await loadBreakdown();
}

async function loadBreakdown() {
  // The host side shows framework operators by default: asked for straight away, and only
  // if the trace has none, asked again for every kind.
  const kind = state.kind === undefined ? (state.side === "host" ? "host_op" : null) : state.kind;
  const params = new URLSearchParams({ side: state.side });
  if (kind) params.set("kind", kind);
  const [{ ok, data }] = await Promise.all([fetchJSON(`${api}breakdown/?${params}`), loadPlotly()]);
  if (state.kind === undefined) {
    state.kind = ok ? kind : null;
    if (!ok && kind && data.kind) return loadBreakdown();
  }
  if (!ok) {
    $("trace-error").textContent = errorMessage(data);
    $("trace-error").hidden = false;
    return;
  }
  fillKinds(data.kinds);
  const rows = state.only ? data.results.filter((r) => state.only.has(r.op)) : data.results;
  drawChart(rows);
  fillTable(rows);
  showFilter(rows.length);
}

// The breakdown filtered to a finding's operators (on their side, every kind).
function showFilter(shown) {
  const note = $("breakdown-filter");
  note.hidden = !state.only;
  $("breakdown-table").dataset.filtered = state.only ? "1" : "";
  if (!state.only) return;
  const all = document.createElement("a");
  all.href = "#trace-results";
  all.textContent = "show every operator";
  all.addEventListener("click", (event) => {
    event.preventDefault();
    state.only = null;
    loadBreakdown();
  });
  note.replaceChildren(`Filtered to the finding's operators (${shown} shown) · `, all);
}

function filterToFinding(event) {
  const ops = (event.detail.operators || []).filter((o) => o.side === "host" || o.side === "device");
  if (!ops.length || !loaded) return;
  state.side = ops[0].side;
  state.kind = null;
  state.only = new Set(ops.filter((o) => o.side === state.side).map((o) => o.op));
  document.querySelectorAll("#side-tabs button").forEach((b) => b.classList.toggle("active", b.dataset.side === state.side));
  loadBreakdown();
}
document.addEventListener("trace:show-evidence", filterToFinding);

function fillKinds(kinds) {
  const select = $("kind-select");
  select.replaceChildren(new Option("all kinds", ""));
  for (const k of kinds) select.appendChild(new Option(k, k));
  select.value = state.kind || "";
}

function drawChart(rows) {
  const top = rows.slice(0, 25).reverse();
  const names = top.map((r) => (state.kind ? r.op : `${r.op} [${r.kind}]`));
  const data = [
    { type: "bar", orientation: "h", name: "total µs", y: names, x: top.map((r) => r.total_us), customdata: top.map((r) => [r.op, r.kind]) },
    { type: "bar", orientation: "h", name: "self µs", y: names, x: top.map((r) => r.self_us), customdata: top.map((r) => [r.op, r.kind]) },
  ];
  const layout = {
    barmode: "group", height: Math.max(260, 22 * top.length + 80), margin: { l: 260, r: 20, t: 30, b: 40 },
    title: { text: `${state.side === "host" ? "Host" : "Accelerator"} operator types by total and self time`, font: { size: 13 } },
    xaxis: { title: { text: "µs" } }, legend: { orientation: "h" },
  };
  const div = $("breakdown-chart");
  Plotly.react(div, data, layout, plotConfig).then(() => {
    div.dataset.rows = String(top.length);
    if (!performance.getEntriesByName("breakdown-drawn").length) {
      performance.mark("breakdown-drawn"); // (the benchmark reads it)
      document.dispatchEvent(new Event("trace:breakdown-drawn"));
    }
    if (!div.dataset.bound) {
      div.dataset.bound = "1";
      div.on("plotly_click", (event) => {
        const [op, kind] = event.points[0].customdata;
        openDrill(op, kind);
      });
    }
  });
}

function fillTable(rows) {
  const body = $("breakdown-table").querySelector("tbody");
  body.replaceChildren();
  for (const r of rows) {
    const link = document.createElement("a");
    link.href = "#drilldown";
    link.textContent = r.op;
    link.addEventListener("click", (event) => {
      event.preventDefault();
      openDrill(r.op, r.kind);
    });
    const first = document.createElement("td");
    first.appendChild(link);
    const tr = row([first, cell(r.kind), cell(r.count.toLocaleString("en-US"), "num"), cell(us(r.total_us), "num"),
      cell(us(r.self_us), "num"), cell(us(r.mean_us), "num"), cell(us(r.p50_us), "num"), cell(us(r.p95_us), "num"),
      cell(us(r.max_us), "num"), cell(pct(r.share), "num")]);
    tr.dataset.op = r.op;
    tr.dataset.kind = r.kind;
    tr.dataset.totalUs = r.total_us;
    body.appendChild(tr);
  }
  $("breakdown-table").dataset.rows = String(rows.length);
}

function openDrill(op, kind) {
  Object.assign(state, { op, opKind: kind, offset: 0 });
  $("group-by").value = "";
  loadDrill();
}

async function loadDrill() {
  const params = new URLSearchParams({ side: state.side, op: state.op, kind: state.opKind, limit: state.limit, offset: state.offset, order: $("drill-order").value });
  const groupBy = $("group-by").value;
  if (groupBy) params.set("group_by", groupBy);
  const [{ ok, data }] = await Promise.all([fetchJSON(`${api}instances/?${params}`), loadPlotly()]);
  const section = $("drilldown");
  section.hidden = false;
  if (!ok) {
    $("drill-count").textContent = errorMessage(data);
    return;
  }
  state.total = data.count;
  $("drill-op").textContent = data.op;
  $("drill-count").textContent = `${data.count.toLocaleString("en-US")} instances (${data.kinds.join(", ")})`;
  drawHistogram(data.histogram);
  fillInstances(data.results);
  fillGroupBy(data);
  $("drill-page").textContent = `${data.offset + 1}–${data.offset + data.results.length} of ${data.count}`;
  $("drill-prev").disabled = data.offset === 0;
  $("drill-next").disabled = data.offset + data.results.length >= data.count;
  section.dataset.op = data.op;
  section.scrollIntoView({ block: "start" });
}

function drawHistogram(histogram) {
  const edges = histogram.edges_us;
  const mids = histogram.counts.map((_, i) => (edges[i] + edges[i + 1]) / 2);
  Plotly.react($("drill-histogram"), [{ type: "bar", x: mids, y: histogram.counts, name: "instances" }], {
    height: 240, margin: { l: 50, r: 20, t: 30, b: 40 }, bargap: 0.05,
    title: { text: "Durations", font: { size: 13 } }, xaxis: { title: { text: "µs" } }, yaxis: { title: { text: "count" } },
  }, plotConfig);
}

function fillInstances(instances) {
  const body = $("instance-table").querySelector("tbody");
  body.replaceChildren();
  for (const inst of instances) {
    const args = document.createElement("td");
    const code = document.createElement("code");
    code.textContent = JSON.stringify(inst.args);
    args.appendChild(code);
    body.appendChild(row([cell(inst.name), cell(us(inst.start_us), "num"), cell(us(inst.dur_us), "num"), cell(us(inst.self_us), "num"),
      cell(inst.track), cell(inst.launched_by || "–"), args]));
  }
  $("instance-table").dataset.rows = String(instances.length);
}

function fillGroupBy(data) {
  const select = $("group-by");
  const current = select.value;
  const keys = new Set([...select.options].map((o) => o.value).filter(Boolean));
  for (const inst of data.results) for (const k of Object.keys(inst.args)) keys.add(k);
  select.replaceChildren(new Option("(none)", ""));
  for (const k of keys) select.appendChild(new Option(k, k));
  select.value = current;
  const table = $("group-table");
  table.hidden = !data.groups;
  if (!data.groups) return;
  const body = table.querySelector("tbody");
  body.replaceChildren();
  for (const g of data.groups) {
    body.appendChild(row([cell(JSON.stringify(g.value)), cell(g.count.toLocaleString("en-US"), "num"), cell(us(g.total_us), "num"),
      cell(us(g.self_us), "num"), cell(us(g.mean_us), "num"), cell(us(g.max_us), "num")]));
  }
}

for (const button of document.querySelectorAll("#side-tabs button")) {
  button.addEventListener("click", () => {
    document.querySelectorAll("#side-tabs button").forEach((b) => b.classList.toggle("active", b === button));
    state.side = button.dataset.side;
    state.kind = state.side === "host" ? undefined : null;
    state.only = null;
    $("drilldown").hidden = true;
    loadBreakdown();
  });
}
$("kind-select").addEventListener("change", (event) => {
  state.kind = event.target.value || null;
  state.only = null;
  loadBreakdown();
});
$("group-by").addEventListener("change", () => loadDrill());
$("drill-order").addEventListener("change", () => { state.offset = 0; loadDrill(); });
$("drill-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadDrill(); });
$("drill-next").addEventListener("click", () => { state.offset += state.limit; loadDrill(); });

async function start() {
  if (root.dataset.status === "ready") {
    loaded = true;
    await loadBreakdown();
    return;
  }
  if (root.dataset.status === "failed") return;
  connect(root.dataset.wsPath, onMessage);
  // It may have moved on between the page's rendering and the socket's opening.
  const { ok, data } = await fetchJSON(api);
  if (ok) {
    showStatus(data.status, data.progress, null, data.error);
    if (data.status === "ready") becameReady();
  }
}
start();
