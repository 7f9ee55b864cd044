// Replay page: poll the replay's status until it is done, then show its figures and charts.
const run = document.getElementById("replay-run");
const state = document.getElementById("replay-state");
const bar = document.getElementById("replay-progress");
const table = document.getElementById("replay-figures");

const ROWS = [
  ["device-hours in service", "device_hours_in_service", (v) => Math.round(v).toLocaleString()],
  ["jobs' ETTR", "ettr", (v) => (100 * v).toFixed(3) + " %"],
  ["detect p95, monitor-seen (s)", "detect_s_p95_seen_by_monitor", (v) => (v === null ? "-" : v.toFixed(0))],
  ["escalations to a person", "escalations_to_person", String],
  ["devices pulled", "pulled_devices", String],
  ["false pulls", "false_pulls", String],
];

function cell(tag, text) {
  const el = document.createElement(tag);
  el.textContent = text;
  return el;
}

function showFigures(summary) {
  const names = Object.keys(summary.policies);
  const head = document.createElement("tr");
  head.append(cell("th", ""), ...names.map((n) => cell("th", n)));
  table.append(head);
  for (const [label, field, format] of ROWS) {
    const row = document.createElement("tr");
    row.dataset.field = field;
    row.append(cell("th", label), ...names.map((n) => cell("td", format(summary.policies[n][field]))));
    table.append(row);
  }
  table.hidden = false;
}

function showGrid(grid) {
  const box = document.getElementById("replay-grid");
  const gridTable = document.getElementById("replay-grid-table");
  const keys = Object.keys(grid.rows[0].settings);
  const head = document.createElement("tr");
  head.append(...keys.map((k) => cell("th", k)), cell("th", "ETTR"), cell("th", "device-hours in service"),
    cell("th", "pulled"), cell("th", "false pulls"), cell("th", "flagged"));
  gridTable.append(head);
  const best = JSON.stringify(grid.best.by_ettr.settings);
  for (const r of grid.rows) {
    const row = document.createElement("tr");
    if (JSON.stringify(r.settings) === best) row.className = "best";
    row.append(...keys.map((k) => cell("td", String(r.settings[k]))), cell("td", (100 * r.ettr).toFixed(3) + " %"),
      cell("td", Math.round(r.device_hours_in_service).toLocaleString()), cell("td", String(r.pulled_devices)),
      cell("td", String(r.false_pulls)), cell("td", String(r.flagged)));
    gridTable.append(row);
  }
  const fmt = (s) => Object.entries(s).map(([k, v]) => `${k} ${v}`).join(", ");
  document.getElementById("replay-best").textContent =
    `Best by ETTR: ${fmt(grid.best.by_ettr.settings)} (${(100 * grid.best.by_ettr.ettr).toFixed(3)} %); ` +
    `best by false pulls: ${fmt(grid.best.by_false_pulls.settings)} (${grid.best.by_false_pulls.false_pulls}).`;
  box.hidden = false;
}

async function poll() {
  const response = await fetch(run.dataset.statusUrl, { headers: { Accept: "application/json" } });
  const status = await response.json();
  if (!response.ok) {
    state.textContent = status.error;
    return;
  }
  bar.value = status.progress;
  state.textContent = status.state + (status.policy ? ` (${status.policy})` : "") + (status.error ? `: ${status.error}` : "");
  if (status.state === "done") {
    showFigures(status.summary);
    if (status.grid) showGrid(status.grid);
    for (const chart of status.charts) window.Plotly.newPlot(chart.id, chart.data, chart.layout);
    run.dataset.done = "true";
  } else if (status.state !== "failed") {
    setTimeout(poll, 1000);
  }
}

window.addEventListener("load", poll);
