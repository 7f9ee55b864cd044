// Device and host pages: the Capture trace button. Asks the API for a capture, then follows
// the trace's websocket with a progress bar and its stage in words, and opens the trace's page
// when it is ready. On a host's page: the process chosen in its table, and a Capture job
// button per job with ranks there (the job's page follows its ranks).
import { connect } from "../lib/live.js";
import { errorMessage, postJSON } from "../lib/http.js";
import { statusLabel } from "../lib/trace_kit.js";

const section = document.getElementById("device-traces");
const form = document.getElementById("capture-form");

if (form) {
  const bar = document.getElementById("capture-progress");
  const status = document.getElementById("capture-status");
  const button = document.getElementById("capture-button");

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    performance.mark("capture-clicked"); // (benchmarks read these marks)
    button.disabled = true;
    status.textContent = "Starting…";
    const duration = Number(document.getElementById("capture-duration").value);
    const problems = [...form.querySelectorAll('input[name="problems"]:checked')].map((box) => box.value);
    const steps = document.getElementById("capture-iterations"); // a real process: by optimizer steps
    const request = { duration_s: duration, problems };
    if (steps && steps.value) request.iterations = Number(steps.value);
    const chosen = form.querySelector('input[name="pid"]:checked'); // a host's page: the process
    if (chosen) request.pid = Number(chosen.value);
    const { ok, data } = await postJSON(section.dataset.captureUrl, request);
    if (!ok) {
      button.disabled = false;
      status.textContent = errorMessage(data);
      status.className = "error";
      return;
    }
    status.className = "";
    bar.hidden = false;
    bar.value = 0;
    section.dataset.traceUrl = data.url;
    connect(`/ws/traces/${data.id}/`, (message) => {
      if (message.type === "trace.progress") {
        if (!performance.getEntriesByName("capture-first-progress").length) performance.mark("capture-first-progress");
        bar.value = message.progress;
        bar.dataset.progress = message.progress;
        status.textContent = message.stage
          ? `${message.stage}…`
          : `${statusLabel(message.status)} ${Math.round(message.progress * 100)}% · ${message.events.toLocaleString("en-US")} events`;
      } else if (message.status === "capturing") {
        status.textContent = `${statusLabel(message.status)} 0%`;
      } else if (message.status === "analysing") {
        bar.value = 1;
        status.textContent = "Capture stored; analysing…";
      } else if (message.status === "ready") {
        window.location.assign(data.url);
      } else if (message.status === "failed") {
        button.disabled = false;
        status.textContent = `${statusLabel(message.status)}: ${message.error}`;
        status.className = "error";
      }
    });
  });
}

for (const jobButton of document.querySelectorAll(".capture-job-button")) {
  jobButton.addEventListener("click", async () => {
    const status = document.getElementById("capture-status");
    jobButton.disabled = true;
    status.textContent = `Starting job ${jobButton.dataset.runId}…`;
    const steps = document.getElementById("capture-iterations");
    const request = { run_id: jobButton.dataset.runId, duration_s: Number(document.getElementById("capture-duration").value) };
    if (steps && steps.value) request.iterations = Number(steps.value);
    const { ok, data } = await postJSON(section.dataset.jobCaptureUrl, request);
    if (!ok) {
      jobButton.disabled = false;
      status.textContent = errorMessage(data);
      status.className = "error";
      return;
    }
    window.location.assign(data.url);
  });
}
