// Plotly helpers. Pages that chart load plotly.min.js with `defer` before their module.

const CONFIG = { displaylogo: false, responsive: true, displayModeBar: "hover" };
const MAX_POINTS = 2000;

// Draws a figure dict of fleet/charts.py into the element with id `elementId`.
export function draw(elementId, figure) {
  return window.Plotly.newPlot(elementId, figure.data, figure.layout, CONFIG);
}

// Appends one point to the first trace of a drawn chart, keeping the last MAX_POINTS.
export function appendPoint(elementId, when, value) {
  const div = document.getElementById(elementId);
  window.Plotly.extendTraces(div, { x: [[when]], y: [[value]] }, [0], MAX_POINTS);
  div.dataset.points = div.data[0].x.length;
}
