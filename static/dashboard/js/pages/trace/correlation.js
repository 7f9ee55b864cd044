// Host and accelerator: bound / idle states over time, launch-to-start latency, idle gaps
// per accelerator stream. `ms` puts microseconds on the timeline's axis.
import { colour } from "../../lib/colours.js";
import { $, cell, fetchJSON, pct, plotConfig, row, showError, us } from "../../lib/trace_kit.js";

const STATES = ["device_bound", "device_busy", "host_bound", "idle"];

function drawStates(over, ms) {
  const x = over.edges_us.slice(0, -1).map((e, i) => ms((e + over.edges_us[i + 1]) / 2));
  const series = STATES.map((k) => ({
    type: "scatter", mode: "lines", stackgroup: "states", name: k.replace("_", "-"), x, y: over[k],
    line: { width: 0, color: colour(`chart-${k.replace("_", "-")}`) },
  }));
  Plotly.react($("states-chart"), series, {
    title: { text: "Bound / idle over time", font: { size: 14 } }, margin: { t: 36, l: 50, r: 10, b: 40 }, height: 260,
    yaxis: { tickformat: ".0%", range: [0, 1] }, xaxis: { title: { text: "ms from the trace's first event" } },
  }, plotConfig);
}

function drawLatency(data) {
  const h = data.launch_latency_histogram;
  Plotly.react($("latency-chart"), [{
    type: "bar", x: h.edges_us.slice(0, -1).map((e, i) => (e + h.edges_us[i + 1]) / 2), y: h.counts, marker: { color: colour("chart-host") },
  }], {
    title: { text: `Launch → start latency (${data.matched.toLocaleString("en-US")} launches, p50 ${us(data.launch_latency.p50_us)} µs)`, font: { size: 14 } },
    margin: { t: 36, l: 50, r: 10, b: 40 }, height: 240, xaxis: { title: { text: "µs" } }, yaxis: { title: { text: "launches" } },
  }, plotConfig);
}

export function correlationPanel(card, { ms }) {
  return {
    async load() {
      const { ok, data } = await fetchJSON(card.dataset.url);
      if (!ok) return showError("states-chart", data);
      drawStates(data.states_over_time, ms);
      drawLatency(data);
      $("gaps-table").tBodies[0].replaceChildren(...data.idle_gaps.map((g) => row([
        cell(g.label), cell(pct(g.utilization), "num"), cell(us(g.busy_us), "num"), cell(us(g.idle_us), "num"),
        cell(g.gaps.count.toLocaleString("en-US"), "num"), cell(us(g.gaps.p50_us), "num"), cell(us(g.gaps.max_us), "num"),
      ])));
    },
  };
}
