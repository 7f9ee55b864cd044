// The operator breakdown: host or accelerator operator types by total and self time, as a
// chart and a table, by kind; a click on an operator type calls onOpen(side, op, kind) (the
// drill-down). filterTo(evidence) narrows it to a finding's operators.
import { $, activateTab, cell, errorMessage, fetchJSON, loadPlotly, pct, plotConfig, row, us } from "../../lib/trace_kit.js";

export function breakdownPanel(section, { onOpen, onSide }) {
  const url = section.dataset.url;
  // kind undefined: the side's default (framework operators on the host, so that Python
  // frames never bury them); null: all kinds. only: a finding's operators, or null.
  const state = { side: "host", kind: undefined, only: null, loaded: false };
  let drawn;
  const firstDrawn = new Promise((resolve) => (drawn = resolve));

  async function load() {
    state.loaded = true;
    // The host side shows framework operators by default: asked for straight away, and only
    // if the trace has none, asked again for every kind.
    const kind = state.kind === undefined ? (state.side === "host" ? "host_op" : null) : state.kind;
    const params = new URLSearchParams({ side: state.side });
    if (kind) params.set("kind", kind);
    const [{ ok, data }] = await Promise.all([fetchJSON(`${url}?${params}`), loadPlotly()]);
    if (state.kind === undefined) {
      state.kind = ok ? kind : null;
      if (!ok && kind && data.kind) return load();
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
      load();
    });
    note.replaceChildren(`Filtered to the finding's operators (${shown} shown) · `, all);
  }

  function fillKinds(kinds) {
    const select = $("kind-select");
    select.replaceChildren(new Option("all kinds", ""));
    for (const k of kinds) select.appendChild(new Option(k, k));
    select.value = state.kind || "";
  }

  function drawChart(rows) {
    const top = rows.slice(0, 25).reverse();
    const names = top.map((r) => (state.kind ? r.op : `${r.op} [${r.kind}]`));
    const ids = top.map((r) => [r.op, r.kind]);
    const data = [
      { type: "bar", orientation: "h", name: "total µs", y: names, x: top.map((r) => r.total_us), customdata: ids },
      { type: "bar", orientation: "h", name: "self µs", y: names, x: top.map((r) => r.self_us), customdata: ids },
    ];
    const layout = {
      barmode: "group", height: Math.max(260, 22 * top.length + 80), margin: { l: 260, r: 20, t: 30, b: 40 },
      title: { text: `${state.side === "host" ? "Host" : "Accelerator"} operator types by total and self time`, font: { size: 13 } },
      xaxis: { title: { text: "µs" } }, legend: { orientation: "h" },
    };
    const div = $("breakdown-chart");
    Plotly.react(div, data, layout, plotConfig).then(() => {
      div.dataset.rows = String(top.length);
      if (!performance.getEntriesByName("breakdown-drawn").length) performance.mark("breakdown-drawn"); // (the benchmark reads it)
      drawn();
      if (!div.dataset.bound) {
        div.dataset.bound = "1";
        div.on("plotly_click", (event) => onOpen(state.side, ...event.points[0].customdata));
      }
    });
  }

  function fillTable(rows) {
    $("breakdown-table").tBodies[0].replaceChildren(...rows.map((r) => {
      const link = document.createElement("a");
      link.href = "#drilldown";
      link.textContent = r.op;
      link.addEventListener("click", (event) => (event.preventDefault(), onOpen(state.side, r.op, r.kind)));
      const first = document.createElement("td");
      first.appendChild(link);
      const tr = row([first, cell(r.kind), cell(r.count.toLocaleString("en-US"), "num"), cell(us(r.total_us), "num"),
        cell(us(r.self_us), "num"), cell(us(r.mean_us), "num"), cell(us(r.p50_us), "num"), cell(us(r.p95_us), "num"),
        cell(us(r.max_us), "num"), cell(pct(r.share), "num")]);
      Object.assign(tr.dataset, { op: r.op, kind: r.kind, totalUs: r.total_us });
      return tr;
    }));
    $("breakdown-table").dataset.rows = String(rows.length);
  }

  for (const button of document.querySelectorAll("#side-tabs button")) {
    button.addEventListener("click", () => {
      activateTab("side-tabs", (b) => b === button);
      state.side = button.dataset.side;
      state.kind = state.side === "host" ? undefined : null;
      state.only = null;
      onSide(state.side);
      load();
    });
  }
  $("kind-select").addEventListener("change", (event) => {
    state.kind = event.target.value || null;
    state.only = null;
    load();
  });

  return {
    firstDrawn,
    load() {
      section.hidden = false;
      return load();
    },
    // The breakdown filtered to a finding's operators (on their side, every kind).
    filterTo(evidence) {
      const ops = (evidence.operators || []).filter((o) => o.side === "host" || o.side === "device");
      if (!ops.length || !state.loaded) return;
      state.side = ops[0].side;
      state.kind = null;
      state.only = new Set(ops.filter((o) => o.side === state.side).map((o) => o.op));
      activateTab("side-tabs", (b) => b.dataset.side === state.side);
      load();
    },
  };
}
