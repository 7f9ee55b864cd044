// Trace page: the advisor's findings at the top — the verdict in one line, then each finding
// by its estimated saving, with a link that opens the timeline at its evidence (the events
// highlighted) and filters the breakdown to its operators (the "trace:show-evidence" event,
// which pages/trace_analyses.js and pages/trace_detail.js answer).
import { errorMessage, fetchJSON } from "../lib/http.js";
import { us } from "../lib/trace_kit.js";

const card = document.getElementById("findings-card");
const root = document.getElementById("trace");
const $ = (id) => document.getElementById(id);

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
  const perStep = f.saving_per_step_us !== null ? `, ${us(f.saving_per_step_us)} µs per step` : "";
  saving.append(`Saves up to ${us(f.saving_us)} µs (${(100 * f.saving_share).toFixed(1)}% of the critical path${perStep}) · `);
  const show = text("a", "show on the timeline");
  show.href = "#timeline-card";
  show.className = "finding-show";
  show.dataset.index = String(index);
  show.addEventListener("click", (event) => {
    event.preventDefault();
    document.dispatchEvent(new CustomEvent("trace:show-evidence", { detail: { rule: f.rule, ...f.evidence } }));
  });
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
  const list = $("findings-list");
  list.replaceChildren(...data.findings.map(item));
  if (!data.findings.length) list.replaceChildren(text("li", "Nothing above the thresholds: no fix would save a noticeable share of the critical path.", "muted"));
  card.dataset.verdict = data.verdict;
  card.dataset.findings = String(data.findings.length);
  card.dataset.loaded = "1";
  performance.mark("findings-drawn"); // (the benchmark reads it)
}

let started = false;
function whenReady() {
  const go = () => {
    if (started || root.dataset.status !== "ready") return;
    started = true;
    load();
  };
  go();
  if (!started) new MutationObserver(go).observe(root, { attributes: true, attributeFilter: ["data-status"] });
}

whenReady();
