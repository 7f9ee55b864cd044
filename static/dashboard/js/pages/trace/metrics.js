// The captured device's counters from a minute before the capture to a minute after, the
// capture shaded, on the timeline's axis (`ms`). Shown for captures of a device only (the
// card carries data-url then).
import { colour } from "../../lib/colours.js";
import { $, fetchJSON, plotConfig, text } from "../../lib/trace_kit.js";

const NAMES = {
  device_utilization: ["Utilization", 100, "%"], temperature_c: ["Temperature", 1, "°C"],
  power_w: ["Power", 1, "W"], memory_used_bytes: ["Memory", 1 / 2 ** 30, "GiB"],
};

export function metricsPanel(card, { ms }) {
  async function load() {
    const { ok, data } = await fetchJSON(card.dataset.url);
    if (!ok) return;
    card.hidden = false;
    if (!Object.values(data.series).some((points) => points.length)) {
      const className = data.unavailable ? "chart-empty history-unavailable" : "chart-empty";
      $("metrics-chart").replaceChildren(text("p", data.unavailable || "No samples of the device around this capture.", className));
      return;
    }
    const keys = Object.keys(NAMES);
    const traces = keys.map((k, i) => ({
      type: "scatter", mode: "lines+markers", name: `${NAMES[k][0]} (${NAMES[k][2]})`, yaxis: i ? `y${i + 1}` : "y",
      x: data.series[k].map((p) => ms(p[0])), y: data.series[k].map((p) => p[1] * NAMES[k][1]),
    }));
    const capture = { type: "rect", xref: "x", yref: "paper", x0: ms(data.capture_us[0]), x1: ms(data.capture_us[1]), y0: 0, y1: 1,
      fillcolor: colour("chart-critical"), opacity: 0.08, line: { width: 0 } };
    const layout = { height: 420, margin: { t: 20, l: 60, r: 10, b: 40 }, xaxis: { title: { text: "ms from the trace's first event" } },
      grid: { rows: keys.length, columns: 1, pattern: "coupled" }, shapes: [capture] };
    keys.forEach((k, i) => (layout[i ? `yaxis${i + 1}` : "yaxis"] = { title: { text: NAMES[k][2], font: { size: 11 } } }));
    Plotly.react($("metrics-chart"), traces, layout, plotConfig);
    $("metrics-chart").dataset.points = String(traces.reduce((n, t) => n + t.x.length, 0));
  }
  return { load: () => (card.dataset.url ? load() : null) };
}
