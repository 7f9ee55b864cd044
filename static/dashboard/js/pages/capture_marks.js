// Device page: the device's ready captures as marks on its graphs' time axis; clicking a
// mark's label opens the trace.
import { fetchJSON } from "../lib/http.js";

const head = document.getElementById("device");
const charts = () => [...document.querySelectorAll("#charts .chart.js-plotly-plot")];

async function markCaptures() {
  const params = new URLSearchParams({ device: head.dataset.deviceId, source: "capture", status: "ready", limit: 20 });
  const { ok, data } = await fetchJSON(`/api/traces/?${params}`);
  if (!ok) return;
  const captures = (data.results || data).filter((t) => t.capture_started_at);
  const shapes = captures.map((t) => ({
    type: "rect", xref: "x", yref: "paper", x0: t.capture_started_at, x1: t.capture_ended_at || t.capture_started_at,
    y0: 0, y1: 1, fillcolor: "#d62728", opacity: 0.15, line: { color: "#d62728", width: 1 },
  }));
  const annotations = captures.map((t) => ({
    x: t.capture_started_at, xref: "x", y: 1, yref: "paper", yanchor: "bottom", text: `trace #${t.id}`,
    showarrow: false, font: { size: 10, color: "#d62728" }, captureevents: true, hovertext: `Open trace #${t.id}: ${t.name}`,
  }));
  for (const chart of charts()) {
    // Added to the graph's own shapes (threshold lines, gaps), never in their place.
    const own = chart.layout.shapes || [], ownNotes = chart.layout.annotations || [];
    const first = ownNotes.length;
    await Plotly.relayout(chart, { shapes: own.concat(shapes), annotations: ownNotes.concat(annotations) });
    chart.on("plotly_clickannotation", (event) => {
      const capture = captures[event.index - first];
      if (capture) window.location.href = capture.url;
    });
    chart.dataset.captureMarks = String(captures.length);
  }
}

function whenCharted(tries = 600) { // up to a minute: a loaded machine draws late
  if (charts().length || tries <= 0) return markCaptures();
  setTimeout(() => whenCharted(tries - 1), 100);
}

whenCharted();
