// The critical path of the whole trace or of one step: its operators' table, the operators
// with the least slack off the path (a row opens its event: onEvent(index)), and the step
// selector (a step shows its window on the timeline: onWindow(startUs, endUs)).
import { $, cell, fetchJSON, pct, row, showError, us } from "../../lib/trace_kit.js";

export function criticalPathPanel(card, { onWindow, onEvent }) {
  let steps = [];

  function fillSteps(data) {
    steps = data.steps;
    const select = $("step-select");
    for (const name of data.valid_steps) select.append(new Option(name, name));
    $("steps-listed").textContent = `${data.steps.length.toLocaleString("en-US")} steps in the trace; ` +
      `critical paths stored for ${data.valid_steps.length} of them (listed in the step selector).`;
  }

  function fillSlack(slack) {
    $("slack-summary").textContent = slack.zero_length_hidden
      ? `(${slack.zero_length_hidden.toLocaleString("en-US")} zero-length events hidden)` : "";
    $("slack-table").tBodies[0].replaceChildren(...slack.rows.map((r) => {
      const tr = row([cell(r.name), cell(r.events.toLocaleString("en-US"), "num"), cell(us(r.slack_us), "num"), cell(us(r.dur_us), "num")]);
      tr.className = "clickable";
      tr.addEventListener("click", () => onEvent(r.index));
      return tr;
    }));
  }

  async function load(step) {
    const params = step ? `?step=${encodeURIComponent(step)}` : "";
    const { ok, data } = await fetchJSON(`${card.dataset.pathUrl}${params}`);
    if (!ok) return showError("path-table", data);
    if (!steps.length && data.steps.length) fillSteps(data);
    const t = data.table;
    if (!t) return ($("path-summary").textContent = "no work events to build a path from");
    $("path-summary").textContent = `${data.step || "whole trace"} · ${us(t.length_us)} µs · ` +
      `host ${us(t.by_side.host_us)} µs, accelerator ${us(t.by_side.device_us)} µs`;
    $("path-table").tBodies[0].replaceChildren(...t.rows.map((r) => row([
      cell(r.op), cell(r.side), cell(r.on_path.toLocaleString("en-US"), "num"), cell(us(r.path_us), "num"),
      cell(pct(r.share), "num"), cell(r.off_path.toLocaleString("en-US"), "num"),
      cell(us(r.min_slack_us), "num"), cell(us(r.median_slack_us), "num"),
    ])));
    fillSlack(t.least_slack_by_op);
  }

  function onStep() {
    const name = $("step-select").value;
    load(name);
    const step = steps.find((s) => s.name === name);
    if (step) onWindow(step.start_us, step.end_us);
    else onWindow();
  }

  $("step-select").addEventListener("change", onStep);
  $("timeline-reset").addEventListener("click", () => (($("step-select").value = ""), onStep()));

  return {
    load: () => load(""),
    // Back to the whole trace in the selector (the timeline shows a window of its own).
    clearStep: () => ($("step-select").value = ""),
  };
}
