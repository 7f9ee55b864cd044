// One request: its spans on top and, on the same time axis under them, the engine steps and
// the device's kernels of the trace over its time (the trace's stored timeline, from the API).
// Clicking a span, step or kernel opens the trace's timeline at its time.
import { errorMessage, fetchJSON } from "../lib/http.js";
import { colour } from "../lib/colours.js";
import { plotConfig } from "../lib/trace_kit.js";

const root = document.getElementById("request");
const chart = document.getElementById("request-chart");
const info = document.getElementById("request-chart-info");
const PHASE_COLOURS = { queue: colour("chart-queue"), prefill: colour("chart-prefill"), decode: colour("chart-decode") };

function spanTraces(spans, t0ns, rows, offsetNs) {
  // One row per span, the root first; customdata: its time on the trace's clock (µs).
  const byName = spans.map((s, i) => ({ ...s, row: i }));
  return byName.map((s) => ({
    customdata: [[(s.start_ns - offsetNs) / 1000, (s.end_ns - offsetNs) / 1000]],
    type: "bar", orientation: "h", xaxis: "x", yaxis: "y2", name: s.name, showlegend: false,
    y: [rows.length + s.row], base: [(s.start_ns - t0ns) / 1e6], x: [Math.max((s.end_ns - s.start_ns) / 1e6, 1e-3)],
    marker: { color: PHASE_COLOURS[s.name] || "#6b4fbb" }, width: 0.7,
    text: [`${s.name}<br>${((s.end_ns - s.start_ns) / 1e6).toFixed(2)} ms`], hoverinfo: "text", textposition: "none",
  }));
}

function timelineTraces(tl, t0us) {
  const b = tl.bars;
  const groups = { host: [], device: [] };
  for (let i = 0; i < b.row.length; i++) groups[tl.rows[b.row[i]].is_device ? "device" : "host"].push(i);
  return Object.entries(groups).map(([side, idx]) => ({
    type: "bar", orientation: "h", xaxis: "x", yaxis: "y", name: side === "device" ? "kernels" : "engine (host)",
    y: idx.map((i) => b.row[i]), base: idx.map((i) => (b.start_us[i] - t0us) / 1000),
    x: idx.map((i) => Math.max((b.end_us[i] - b.start_us[i]) / 1000, 1e-4)), customdata: idx.map((i) => [b.start_us[i], b.end_us[i]]),
    marker: { color: colour(side === "device" ? "chart-device" : "chart-merged") }, width: 0.8,
    text: idx.map((i) => (b.count[i] === 1 ? tl.names[b.name[i]] : `${b.count[i]} events (longest ${tl.names[b.name[i]]})`)),
    hoverinfo: "text", textposition: "none",
  }));
}

async function draw() {
  const width = Math.max(400, Math.round(chart.clientWidth || 1200));
  const { ok, data } = await fetchJSON(`${root.dataset.apiUrl}?width_px=${width}`);
  if (!ok) {
    chart.textContent = errorMessage(data);
    return;
  }
  const req = data.request;
  const t0ns = req.start_ns;
  const t0us = (t0ns - data.clock_offset_ns) / 1000; // the request's start on the trace's clock
  const tl = data.timeline;
  const spans = data.spans;
  const traces = [...timelineTraces(tl, t0us), ...spanTraces(spans, t0ns, tl.rows, data.clock_offset_ns)];
  const nRows = tl.rows.length;
  const spanShare = Math.min(0.45, 0.12 + 0.06 * spans.length);
  const layout = {
    barmode: "overlay", height: Math.max(360, 28 * (nRows + spans.length) + 120), margin: { t: 20, l: 230, r: 10, b: 40 },
    legend: { orientation: "h", y: -0.12 },
    xaxis: { title: { text: "ms from the request's arrival" }, range: [(tl.start_us - t0us) / 1000, (tl.end_us - t0us) / 1000] },
    yaxis: { domain: [0, 1 - spanShare - 0.04], tickvals: tl.rows.map((_, i) => i), ticktext: tl.rows.map((r) => r.label), autorange: "reversed", fixedrange: true },
    yaxis2: { domain: [1 - spanShare, 1], tickvals: spans.map((_, i) => nRows + i), ticktext: spans.map((s) => s.name), autorange: "reversed", fixedrange: true },
  };
  await Plotly.react(chart, traces, layout, plotConfig);
  chart.on("plotly_click", (event) => {
    const p = event.points && event.points[0];
    if (!p || p.customdata === undefined) return;
    // A span, step or kernel opens the trace's timeline over its time (and a little around it).
    const [start, end] = p.customdata.map(Number);
    const margin = Math.max((end - start) * 0.05, 500);
    window.location.href = `${root.dataset.traceUrl}#window=${(start - margin).toFixed(3)},${(end + margin).toFixed(3)}`;
  });
  Object.assign(chart.dataset, { spans: String(spans.length), bars: String(tl.bars.row.length), rows: String(nRows), drawn: "1" });
  info.textContent = `${spans.length} spans · ${tl.events_in_window.toLocaleString("en-US")} trace events in this window (${tl.bars.row.length} bars)`;
  performance.mark("request-drawn");
}

function whenPlotly() {
  if (window.Plotly) return draw();
  window.addEventListener("load", draw, { once: true });
}

whenPlotly();
