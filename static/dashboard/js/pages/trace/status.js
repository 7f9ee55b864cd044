// The trace page's head: the trace's state and progress, followed over its websocket until
// the trace is ready (or failed); once ready, the facts the analysis found (events, span).
import { connect } from "../../lib/live.js";
import { $, fetchJSON, statusLabel, us } from "../../lib/trace_kit.js";

function showStatus(root, status, progress, events, error) {
  root.dataset.status = status;
  $("trace-status").textContent = status;
  $("trace-status").className = `badge status-${status}`;
  $("trace-pending").hidden = status === "ready" || status === "failed";
  const known = (v) => v !== null && v !== undefined;
  if (known(progress)) $("trace-progress").value = progress;
  let line = `${statusLabel(status)}…`;
  if (status === "capturing" && known(progress)) {
    line = `${statusLabel(status)} ${Math.round(progress * 100)}%` + (known(events) ? ` · ${events.toLocaleString("en-US")} events` : "");
  }
  if (status === "analysing") line = "Capture stored; analysing…";
  $("trace-state").textContent = line;
  if (error) {
    $("trace-error").textContent = error;
    $("trace-error").hidden = false;
  }
}

// The facts line of a trace that became ready while the page was open.
async function addFacts(url) {
  const { ok, data } = await fetchJSON(url);
  if (!ok || data.events === null) return;
  const facts = $("trace-size");
  if (!$("trace-events")) facts.append(` · ${data.events.toLocaleString("en-US")} events · span ${us(data.span_us)} µs`);
  if (data.iterations_run !== null && !$("trace-iterations")) facts.append(` · kept ${data.iterations_kept} of ${data.iterations_run} iterations`);
}

// Resolves once the trace (root: the page's #trace) is ready; never for a failed one.
export function whenReady(root, urls) {
  if (root.dataset.status === "ready") return Promise.resolve();
  if (root.dataset.status === "failed") return new Promise(() => {});
  return new Promise((resolve) => {
    let done = false;
    const update = (status, progress, events, error) => {
      if (done) return;
      showStatus(root, status, progress, events, error);
      if (status !== "ready") return;
      done = true;
      addFacts(urls.trace).then(resolve, resolve);
    };
    connect(root.dataset.wsPath, (message) => {
      if (message.type === "trace.progress") update(message.status, message.progress, message.events, "");
      else if (message.type === "trace.changed") update(message.status, message.progress, null, message.error);
    });
    // It may have moved on between the page's rendering and the socket's opening.
    fetchJSON(urls.trace).then(({ ok, data }) => ok && update(data.status, data.progress, null, data.error));
  });
}
