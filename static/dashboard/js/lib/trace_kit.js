// The trace pages' one helper module: the element lookup, the API fetch (lib/http.js),
// formatting, small DOM builders, Plotly loading.
// The websocket is lib/live.js, the colours lib/colours.js, shared by every page.
import { errorMessage, fetchJSON } from "./http.js";

export { errorMessage, fetchJSON };

export const $ = (id) => document.getElementById(id);

// The trace states' labels by state, as the server puts them in the page
// (traces/choices.py, rendered as <script id="trace-statuses">).
const statuses = document.getElementById("trace-statuses");
export const statusLabels = statuses ? JSON.parse(statuses.textContent) : {};
export const statusLabel = (status) => statusLabels[status] || status;

export const us = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US", { maximumFractionDigits: 1 }));
export const pct = (v) => `${(100 * v).toFixed(1)}%`;

// Microseconds as µs, ms or s (as the server's us_human filter writes them).
export function human(v) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}

export function text(tag, content, className) {
  const el = document.createElement(tag);
  el.textContent = content;
  if (className) el.className = className;
  return el;
}

export const cell = (content, className) => text("td", content, className);

export function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c);
  return tr;
}

// An API error in place of what the element with id `id` would have shown.
export function showError(id, data) {
  $(id).replaceChildren(text("p", errorMessage(data), "error"));
}

// Sets the one tab of a tab row that is `active` (a button, or a test on each button).
export function activateTab(tabsId, isActive) {
  document.querySelectorAll(`#${tabsId} button`).forEach((b) => b.classList.toggle("active", isActive(b)));
}

export const plotConfig = { displaylogo: false, responsive: true, displayModeBar: "hover" };

// Plotly (about 5 MB of script) on the trace page: fetched early by the page's
// <link rel="preload" data-plotly> but run only when a chart is first drawn, so that the
// page paints first. Pages that load it with a <script defer> get that one.
let plotlyLoading = null;
export function loadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  if (!plotlyLoading) {
    const link = document.querySelector("link[data-plotly]");
    plotlyLoading = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = link.href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error(`Plotly could not be loaded from ${link.href}`));
      document.head.appendChild(script);
    });
  }
  return plotlyLoading;
}

export const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
