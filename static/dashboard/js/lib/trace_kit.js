// Helpers of the trace pages: formatting, small DOM builders, Plotly loading. (Fetching is
// lib/http.js, the websocket lib/live.js, shared by every page.)

// The trace states' labels by state, as the server puts them in the page
// (traces/choices.py, rendered as <script id="trace-statuses">).
const statuses = document.getElementById("trace-statuses");
export const statusLabels = statuses ? JSON.parse(statuses.textContent) : {};
export const statusLabel = (status) => statusLabels[status] || status;

export const us = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US", { maximumFractionDigits: 1 }));
export const pct = (v) => `${(100 * v).toFixed(1)}%`;

export function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

export function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) tr.appendChild(c);
  return tr;
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

// The breakdown chart is the first thing a person looks at: the other views of the trace
// page draw after it (or after `waitMs` if it never comes).
export function afterBreakdownDrawn(waitMs = 3000) {
  if (performance.getEntriesByName("breakdown-drawn").length) return Promise.resolve();
  return new Promise((resolve) => {
    document.addEventListener("trace:breakdown-drawn", () => resolve(), { once: true });
    setTimeout(resolve, waitMs);
  });
}
