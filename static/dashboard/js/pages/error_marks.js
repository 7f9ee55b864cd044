// Device page: the device's driver errors as marks on its graphs' time axis (a dashed line
// and the code, "Xid 79"; hover for the error and its count). A graph drawn later (from its
// first live sample) gets them when it is drawn.
const source = document.getElementById("device-error-marks");
const marks = source ? JSON.parse(source.textContent) : [];
const colours = { critical: "#b2182b", warning: "#e08214", info: "#7f7f7f" };

async function mark(chart) {
  if (!marks.length || chart.dataset.errorMarks !== undefined) return;
  chart.dataset.errorMarks = ""; // claimed: each graph is marked once
  const shapes = marks.map((m) => ({
    type: "line", xref: "x", yref: "paper", x0: m.t, x1: m.t, y0: 0, y1: 1,
    line: { color: colours[m.severity] || "#7f7f7f", width: 1, dash: "dot" },
  }));
  const annotations = marks.map((m) => ({
    x: m.t, xref: "x", y: 0, yref: "paper", yanchor: "top", text: m.label, hovertext: m.text,
    showarrow: false, font: { size: 9, color: colours[m.severity] || "#7f7f7f" },
  }));
  const own = chart.layout.shapes || [], ownNotes = chart.layout.annotations || [];
  await Plotly.relayout(chart, { shapes: own.concat(shapes), annotations: ownNotes.concat(annotations) });
  chart.dataset.errorMarks = String(marks.length);
}

document.addEventListener("device:chart-drawn", (event) => mark(event.detail));
document.querySelectorAll("#charts .chart[data-points]").forEach(mark);
