// Device page: the device's ready captures as marks on its graphs' time axis; clicking a
// mark's label opens the trace. A graph drawn later (from its first live sample) gets them
// when it is drawn.
import { colour } from "../lib/colours.js";
import { fetchJSON } from "../lib/http.js";

const head = document.getElementById("device");
let captures = null;

function readyCaptures() {
  if (!captures) {
    const params = new URLSearchParams({ device: head.dataset.deviceId, source: "capture", status: "ready", limit: 20 });
    captures = fetchJSON(`/api/traces/?${params}`).then(({ ok, data }) =>
      ok ? (data.results || data).filter((t) => t.capture_started_at) : null);
  }
  return captures;
}

async function mark(chart) {
  if (chart.dataset.captureMarks !== undefined) return;
  chart.dataset.captureMarks = ""; // claimed: each graph is marked once
  const found = await readyCaptures();
  if (!found) return;
  const red = colour("chart-capture");
  const shapes = found.map((t) => ({
    type: "rect", xref: "x", yref: "paper", x0: t.capture_started_at, x1: t.capture_ended_at || t.capture_started_at,
    y0: 0, y1: 1, fillcolor: red, opacity: 0.15, line: { color: red, width: 1 },
  }));
  const annotations = found.map((t) => ({
    x: t.capture_started_at, xref: "x", y: 1, yref: "paper", yanchor: "bottom", text: `trace #${t.id}`,
    showarrow: false, font: { size: 10, color: red }, captureevents: true, hovertext: `Open trace #${t.id}: ${t.name}`,
  }));
  // Added to the graph's own shapes (threshold lines, gaps), never in their place.
  const own = chart.layout.shapes || [], ownNotes = chart.layout.annotations || [];
  const first = ownNotes.length;
  await Plotly.relayout(chart, { shapes: own.concat(shapes), annotations: ownNotes.concat(annotations) });
  chart.on("plotly_clickannotation", (event) => {
    const capture = found[event.index - first];
    if (capture) window.location.href = capture.url;
  });
  chart.dataset.captureMarks = String(found.length);
}

document.addEventListener("device:chart-drawn", (event) => mark(event.detail));
// Graphs drawn before this script listened.
document.querySelectorAll("#charts .chart[data-points]").forEach(mark);
