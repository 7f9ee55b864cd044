// The findings panel: the verdict, where the time goes, and each finding with what it would
// save; a finding's link calls onShow(evidence) (the page shows it on the timeline and
// filters the breakdown). A trace already ready has the panel drawn by the server with the
// page; one that becomes ready while the page is open has it fetched and drawn here.
import { $, errorMessage, fetchJSON, human, text } from "../../lib/trace_kit.js";

function item(f, index, onShow) {
  const li = document.createElement("li");
  li.dataset.rule = f.rule;
  const head = document.createElement("p");
  head.append(text("span", f.severity, `badge severity-${f.severity}`), " ", text("b", f.title));
  const saving = document.createElement("p");
  const perStep = f.saving_per_step_us !== null ? `, ${human(f.saving_per_step_us)} per step` : "";
  saving.append(`Saves up to ${human(f.saving_us)} (${(100 * f.saving_share).toFixed(1)}% of the critical path${perStep}) · `);
  const show = text("a", "show on the timeline", "finding-show");
  show.href = "#timeline-card";
  show.dataset.index = String(index);
  show.addEventListener("click", (event) => (event.preventDefault(), onShow(f)));
  saving.append(show);
  li.append(head, saving, text("p", `Next: ${f.action}`, "muted"));
  return li;
}

function draw(card, data, onShow) {
  $("findings-verdict").textContent = data.summary;
  // Where the time goes (the account's lines the summary does not already carry).
  const lines = ((data.account || {}).lines || []).filter((line) => !data.summary.includes(line));
  $("findings-account").replaceChildren(...lines.map((line) => text("li", line)));
  const list = $("findings-list");
  list.replaceChildren(...data.findings.map((f, i) => item(f, i, onShow)));
  if (!data.findings.length) list.replaceChildren(text("li", "Nothing above the thresholds: no fix would save a noticeable share of the critical path.", "muted"));
  card.dataset.verdict = data.verdict;
  card.dataset.findings = String(data.findings.length);
}

export function findingsPanel(card, { onShow }) {
  const show = (f) => onShow({ rule: f.rule, ...f.evidence });
  return {
    // Drawn with the page (a trace already ready): only its links need their findings.
    serverDrawn() {
      const data = $("findings-data");
      if (!data) return false;
      const { findings } = JSON.parse(data.textContent);
      for (const a of card.querySelectorAll("a.finding-show")) {
        const f = findings[Number(a.dataset.index)];
        a.addEventListener("click", (event) => (event.preventDefault(), show(f)));
      }
      performance.mark("findings-drawn");
      return true;
    },
    async load() {
      const { ok, data } = await fetchJSON(card.dataset.url);
      card.hidden = false;
      if (!ok) {
        $("findings-verdict").replaceChildren(text("span", errorMessage(data), "muted"));
        card.dataset.loaded = "error";
        return;
      }
      draw(card, data, show);
      card.dataset.loaded = "1";
      performance.mark("findings-drawn"); // (the benchmark reads it)
    },
  };
}
