// The drill-down of one operator type: its durations' histogram and its instances, a page
// at a time, ordered and grouped by an argument.
import { $, cell, errorMessage, fetchJSON, loadPlotly, plotConfig, row, us } from "../../lib/trace_kit.js";

export function drilldownPanel(section) {
  const url = section.dataset.url;
  const state = { side: "host", op: null, kind: null, offset: 0, limit: 50 };

  async function load() {
    const params = new URLSearchParams({ side: state.side, op: state.op, kind: state.kind, limit: state.limit, offset: state.offset, order: $("drill-order").value });
    const groupBy = $("group-by").value;
    if (groupBy) params.set("group_by", groupBy);
    const [{ ok, data }] = await Promise.all([fetchJSON(`${url}?${params}`), loadPlotly()]);
    section.hidden = false;
    if (!ok) {
      $("drill-count").textContent = errorMessage(data);
      return;
    }
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
    $("instance-table").tBodies[0].replaceChildren(...instances.map((inst) => {
      const args = document.createElement("td");
      const code = document.createElement("code");
      code.textContent = JSON.stringify(inst.args);
      args.appendChild(code);
      return row([cell(inst.name), cell(us(inst.start_us), "num"), cell(us(inst.dur_us), "num"), cell(us(inst.self_us), "num"),
        cell(inst.track), cell(inst.launched_by || "–"), args]);
    }));
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
    table.tBodies[0].replaceChildren(...data.groups.map((g) => row([cell(JSON.stringify(g.value)), cell(g.count.toLocaleString("en-US"), "num"),
      cell(us(g.total_us), "num"), cell(us(g.self_us), "num"), cell(us(g.mean_us), "num"), cell(us(g.max_us), "num")])));
  }

  $("group-by").addEventListener("change", () => load());
  $("drill-order").addEventListener("change", () => { state.offset = 0; load(); });
  $("drill-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load(); });
  $("drill-next").addEventListener("click", () => { state.offset += state.limit; load(); });

  return {
    open(side, op, kind) {
      Object.assign(state, { side, op, kind, offset: 0 });
      $("group-by").value = "";
      load();
    },
    close() {
      section.hidden = true;
    },
  };
}
