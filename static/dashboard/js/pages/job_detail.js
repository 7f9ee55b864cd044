// Job page: follows the job over its websocket (each rank's status and progress, the job's
// state) and reloads when the results are ready; draws the ranks side by side, a window of
// collectives at a time, with the cross-rank critical path over them.
import { connect } from "../lib/live.js";
import { colour } from "../lib/colours.js";
import { errorMessage, fetchJSON } from "../lib/http.js";

const head = document.getElementById("job");
const WAIT = colour("chart-wait");
const TRANSFER = colour("chart-transfer");
const PATH = colour("chart-path");

function cell(text, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  td.textContent = text;
  return td;
}

// A job whose ranks are sent one at a time: a rank that has just arrived gets its row, in
// rank order, and the count of ranks in goes up.
function newRow(rank) {
  const tr = document.createElement("tr");
  tr.dataset.rank = rank;
  const state = document.createElement("td");
  const badge = document.createElement("span");
  badge.dataset.field = "status";
  const progress = document.createElement("span");
  progress.dataset.field = "progress";
  const error = document.createElement("div");
  error.className = "error";
  error.dataset.field = "error";
  error.hidden = true;
  state.append(badge, " ", progress, error);
  tr.append(cell(String(rank)), cell("–"), cell("–"), state, cell("", "health-cell"));
  for (let k = 0; k < 6; k += 1) tr.append(cell("–", "num"));
  tr.append(cell("–"));
  const body = document.querySelector("#rank-table tbody");
  const after = [...body.rows].find((row) => Number(row.dataset.rank) > rank);
  body.insertBefore(tr, after || null);
  const arrived = document.getElementById("job-arrived");
  if (arrived) arrived.textContent = String(body.rows.length);
  return tr;
}

function showRank(update) {
  const tr = document.querySelector(`#rank-table tr[data-rank="${update.rank}"]`) || newRow(update.rank);
  const badge = tr.querySelector('[data-field="status"]');
  badge.className = `badge status-${update.status}`;
  badge.textContent = update.status;
  tr.dataset.status = update.status;
  const progress = tr.querySelector('[data-field="progress"]');
  const parts = [];
  if (update.status === "capturing") parts.push(`${Math.round(update.progress * 100)}%`);
  if (update.events !== null && update.events !== undefined) parts.push(`${update.events.toLocaleString("en-US")} events`);
  progress.textContent = parts.join(" · ");
  const error = tr.querySelector('[data-field="error"]');
  error.hidden = !update.error;
  error.textContent = update.error || "";
}

function onMessage(message) {
  if (message.type === "job.ranks") {
    message.ranks.forEach(showRank);
    document.getElementById("job-progress").value = message.progress;
  } else if (message.type === "job.changed") {
    const status = document.getElementById("job-status");
    status.className = `badge status-${message.status}`;
    status.textContent = message.status;
    head.dataset.status = message.status;
    document.getElementById("job-state").textContent = `${message.status}…`;
    if (message.status === "ready" || message.status === "failed") window.location.reload();
  }
}

const STAGE = { queued: 0, capturing: 1, analysing: 2, combining: 3, ready: 4, failed: 4 };
const RANK_STAGE = { queued: 0, capturing: 1, analysing: 2, ready: 3, busy: 3, failed: 3 };

// On (re)connecting: what happened before the socket joined the job's group (or while it was
// down) never comes over it, so the job's state and its ranks are read once from the API.
async function catchUp() {
  const { ok, data } = await fetchJSON(`/api/jobs/${head.dataset.jobId}/`);
  if (!ok) return; // the live updates still come
  for (const r of data.ranks) {
    const shown = document.querySelector(`#rank-table tr[data-rank="${r.rank}"]`);
    if (!shown || (RANK_STAGE[r.status] ?? 0) > (RANK_STAGE[shown.dataset.status] ?? 0)) {
      showRank(r);
    }
  }
  // A state only moves forward: an answer read before a change the socket has already told
  // of must not take the page back.
  if (STAGE[data.status] > STAGE[head.dataset.status]) onMessage({ type: "job.changed", status: data.status });
}

// -- the ranks side by side -----------------------------------------------------------------
let first = 0;
let total = 0;
let count = 0;

function bars(window) {
  // One horizontal bar per (rank, collective): base = start, x = length, y = the rank.
  const wait = { y: [], base: [], x: [], name: "waiting for the last rank", marker: { color: WAIT } };
  const transfer = { y: [], base: [], x: [], name: "transfer", marker: { color: TRANSFER } };
  for (const row of window.ranks) {
    row.arrival_us.forEach((arrival, k) => {
      const last = row.last_arrival_us[k];
      const end = row.end_us[k];
      wait.y.push(`rank ${row.rank}`);
      wait.base.push(arrival);
      wait.x.push(Math.max(last - arrival, 0));
      transfer.y.push(`rank ${row.rank}`);
      transfer.base.push(Math.min(last, end));
      transfer.x.push(Math.max(end - last, 0));
    });
  }
  const common = { type: "bar", orientation: "h", hoverinfo: "x+y+name" };
  return [{ ...common, ...wait }, { ...common, ...transfer }];
}

function pathLine(window) {
  const x = [];
  const y = [];
  for (const seg of window.path) {
    x.push(seg.start_us, seg.end_us, null);
    y.push(`rank ${seg.rank}`, `rank ${seg.rank}`, null);
  }
  return { type: "scatter", mode: "lines", x, y, name: "critical path", line: { color: PATH, width: 4 }, hoverinfo: "skip" };
}

async function drawTimeline() {
  const url = `${head.dataset.timelineUrl}?first=${first}`;
  const { ok, data } = await fetchJSON(url);
  const div = document.getElementById("job-timeline");
  if (!ok) {
    div.textContent = errorMessage(data);
    return;
  }
  total = data.total;
  count = data.count;
  const ranks = data.ranks.map((r) => `rank ${r.rank}`).reverse();
  const layout = {
    barmode: "overlay", height: Math.max(220, 28 * ranks.length + 80), margin: { l: 70, r: 10, t: 10, b: 40 },
    xaxis: { title: { text: "µs from the job's first collective" }, range: data.window_us },
    yaxis: { categoryorder: "array", categoryarray: ranks }, legend: { orientation: "h" },
  };
  await window.Plotly.react(div, [...bars(data), pathLine(data)], layout, { displaylogo: false, responsive: true });
  div.dataset.collectives = String(count);
  div.dataset.pathSegments = String(data.path.length);
  document.getElementById("timeline-range").textContent = total ? `collectives ${first}–${first + count - 1} of ${total}` : "no collectives";
  document.getElementById("timeline-prev").disabled = first === 0;
  document.getElementById("timeline-next").disabled = first + count >= total;
}

if (head) {
  if (head.dataset.status !== "ready" && head.dataset.status !== "failed") {
    connect(head.dataset.wsPath, onMessage, { onOpen: catchUp });
  }
  if (document.getElementById("job-timeline")) {
    document.getElementById("timeline-prev").addEventListener("click", () => {
      first = Math.max(0, first - count);
      drawTimeline();
    });
    document.getElementById("timeline-next").addEventListener("click", () => {
      first += count;
      drawTimeline();
    });
    window.addEventListener("load", drawTimeline);
  }
}
