// Trace page: the advisor's findings at the top — the verdict in one line, then each finding
// by its estimated saving, with a link that opens the timeline at its evidence (the events
// highlighted) and filters the breakdown to its operators (the "trace:show-evidence" event,
// which pages/trace_analyses.js and pages/trace_detail.js answer). A trace already ready has
// its panel drawn by the server with the page; one that becomes ready while the page is open
// has it fetched and drawn here.
import { errorMessage, fetchJSON } from "../lib/http.js";

const card = document.getElementById("findings-card");
const root = document.getElementById("trace");
const $ = (id) => document.getElementById(id);

// Microseconds as µs, ms or s (as the server's us_human filter writes them).
function human(v) {
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)} s`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(2)} ms`;
  return `${v.toFixed(1)} µs`;
}

function showEvidence(f) {
  document.dispatchEvent(new CustomEvent("trace:show-evidence", { detail: { rule: f.rule, ...f.evidence } }));
}

function text(tag, content, className) {
  const el = document.createElement(tag);
  el.textContent = content;
  if (className) el.className = className;
  return el;
}

function item(f, index) {
  const li = document.createElement("li");
  li.dataset.rule = f.rule;
  const head = document.createElement("p");
  head.append(text("span", f.severity, `badge severity-${f.severity}`), " ", text("b", f.title));
  const saving = document.createElement("p");
  const perStep = f.saving_per_step_us !== null ? `, ${human(f.saving_per_step_us)} per step` : "";
  saving.append(`Saves up to ${human(f.saving_us)} (${(100 * f.saving_share).toFixed(1)}% of the critical path${perStep}) · `);
  const show = text("a", "show on the timeline");
  show.href = "#timeline-card";
  show.className = "finding-show";
  show.dataset.index = String(index);
  show.addEventListener("click", (event) => (event.preventDefault(), showEvidence(f)));
  saving.append(show);
  li.append(head, saving, text("p", `Next: ${f.action}`, "muted"));
  return li;
}

async function load() {
  const { ok, data } = await fetchJSON(`${card.dataset.apiBase}findings/`);
  card.hidden = false;
  if (!ok) {
    $("findings-verdict").replaceChildren(text("span", errorMessage(data), "muted"));
    card.dataset.loaded = "error";
    return;
  }
  $("findings-verdict").textContent = data.summary;
  // Where the time goes (the account's lines the summary does not already carry).
  const lines = ((data.account || {}).lines || []).filter((line) => !data.summary.includes(line));
  $("findings-account").replaceChildren(...lines.map((line) => text("li", line)));
  const list = $("findings-list");
  list.replaceChildren(...data.findings.map(item));
  if (!data.findings.length) list.replaceChildren(text("li", "Nothing above the thresholds: no fix would save a noticeable share of the critical path.", "muted"));
  card.dataset.verdict = data.verdict;
  card.dataset.findings = String(data.findings.length);
  card.dataset.loaded = "1";
  performance.mark("findings-drawn"); // (the benchmark reads it)
}

// Drawn with the page (a trace already ready): only its links need their findings.
function bindServerDrawn() {
  const data = JSON.parse($("findings-data").textContent);
  for (const a of card.querySelectorAll("a.finding-show")) {
    const f = data.findings[Number(a.dataset.index)];
    a.addEventListener("click", (event) => (event.preventDefault(), showEvidence(f)));
  }
  performance.mark("findings-drawn");
}

let started = false;
function whenReady() {
  if ($("findings-data")) return bindServerDrawn();
  const go = () => {
    if (started || root.dataset.status !== "ready") return;
    started = true;
    load();
  };
  go();
  if (!started) new MutationObserver(go).observe(root, { attributes: true, attributeFilter: ["data-status"] });
}

whenReady();
