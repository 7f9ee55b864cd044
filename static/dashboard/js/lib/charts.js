// Plotly helpers. Pages that chart load plotly.min.js with `defer` before their module.
import { resolveColours } from "./colours.js";

const CONFIG = { displaylogo: false, responsive: true, displayModeBar: "hover" };
const MAX_POINTS = 2000;

// Draws a figure dict of fleet/reading/charts.py into the element with id `elementId`, its
// var(--name) colours replaced by the CSS custom properties they name.
export function draw(elementId, figure) {
  const { data, layout } = resolveColours(figure);
  return window.Plotly.newPlot(elementId, data, layout, CONFIG);
}

// Appends one point to the first trace of a drawn chart, keeping the last MAX_POINTS; a
// chart drawn over a window of `windowS` seconds slides it to end at the new point.
export function appendPoint(elementId, when, value, windowS) {
  const div = document.getElementById(elementId);
  const marker = div.data[0].marker;
  const update = { x: [[when]], y: [[value]] };
  if (marker && Array.isArray(marker.size)) update["marker.size"] = [[0]];
  window.Plotly.extendTraces(div, update, [0], MAX_POINTS);
  div.dataset.points = div.data[0].x.length;
  if (windowS) {
    const end = new Date(when);
    const start = new Date(end.getTime() - windowS * 1000);
    if (!div.layout.xaxis.autorange && new Date(div.layout.xaxis.range[1]) < end) {
      window.Plotly.relayout(div, { "xaxis.range": [start.toISOString(), end.toISOString()] });
    }
  }
}
