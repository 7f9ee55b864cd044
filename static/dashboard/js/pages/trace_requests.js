// The requests page: every request's latency as a histogram, its percentiles marked, so the
// tail shows at a glance (the slowest ten and why are in the tables under it).
import { colour } from "../lib/colours.js";
import { plotConfig } from "../lib/trace_kit.js";

const chart = document.getElementById("latency-chart");

function draw() {
  const histogram = JSON.parse(document.getElementById("latency-histogram").textContent);
  const percentiles = JSON.parse(document.getElementById("latency-percentiles").textContent) || {};
  const edges = histogram.edges_ms;
  const counts = histogram.counts;
  const centres = counts.map((_, i) => (edges[i] + edges[i + 1]) / 2);
  const widths = counts.map((_, i) => edges[i + 1] - edges[i]);
  const bars = {
    type: "bar", x: centres, y: counts, width: widths, name: "requests", showlegend: false,
    marker: { color: colour("chart-device") },
    text: counts.map((n, i) => `${n} request${n === 1 ? "" : "s"} of ${edges[i].toFixed(1)}–${edges[i + 1].toFixed(1)} ms`),
    hoverinfo: "text", textposition: "none",
  };
  const marks = Object.entries(percentiles).map(([name, ms]) => ({
    type: "line", x0: ms, x1: ms, yref: "paper", y0: 0, y1: 1, line: { dash: "dot", width: 1, color: colour("chart-merged") },
  }));
  const labels = Object.entries(percentiles).map(([name, ms], i) => ({
    x: ms, yref: "paper", y: 1 - 0.08 * i, text: `${name} ${ms.toFixed(1)} ms`, showarrow: false, xanchor: "left",
  }));
  const layout = {
    height: 260, margin: { t: 10, l: 50, r: 10, b: 40 }, bargap: 0.05,
    xaxis: { title: { text: "latency (ms)" }, rangemode: "tozero" },
    yaxis: { title: { text: "requests" }, fixedrange: true },
    shapes: marks, annotations: labels,
  };
  Plotly.react(chart, [bars], layout, plotConfig).then(() => {
    Object.assign(chart.dataset, { bins: String(counts.length), requests: String(counts.reduce((a, b) => a + b, 0)), drawn: "1" });
  });
}

if (window.Plotly) draw();
else window.addEventListener("load", draw, { once: true });
