// Helpers of the trace pages: fetch with the CSRF token, formatting, small DOM builders.
// (The websocket helper is connect() in lib/live.js, shared by every page.)

export function csrfToken() {
  const input = document.querySelector("input[name=csrfmiddlewaretoken]");
  if (input) return input.value;
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

// fetch() that sends the CSRF token and resolves to {ok, status, data}: the JSON body, or
// {detail: text} when the server answered with something else.
export async function fetchJSON(url, options = {}) {
  const headers = { "X-CSRFToken": csrfToken(), Accept: "application/json", ...(options.headers || {}) };
  const response = await fetch(url, { credentials: "same-origin", ...options, headers });
  let data;
  const text = await response.text();
  try {
    data = JSON.parse(text);
  } catch {
    data = { detail: text || response.statusText };
  }
  return { ok: response.ok, status: response.status, data };
}

// The message of an error body from DRF: {"detail": "..."} or {"field": ["..."]}.
export function errorMessage(data) {
  if (!data) return "Something went wrong.";
  if (typeof data.detail === "string") return data.detail;
  return Object.entries(data)
    .map(([field, messages]) => `${field}: ${[].concat(messages).join(" ")}`)
    .join("; ");
}

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
