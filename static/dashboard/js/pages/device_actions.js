// Device page: an operator's buttons post an action, then the state is followed until the
// device settles (rebooting -> in service, or repair). The health badge follows the
// websocket (device.js); this module follows the device's state through the API.
import { setHealthBadge } from "../lib/format.js";
import { errorMessage, fetchJSON } from "../lib/http.js";

const section = document.getElementById("device-health");
const form = document.getElementById("device-actions");
const result = document.getElementById("action-result");
const stateField = section.querySelector('[data-field="state"]');
const STATE_NAMES = {
  in_service: "In service", rebooting: "Rebooting", repair: "In repair", drained: "Drained", maintenance: "In maintenance",
};

function showState(state) {
  stateField.dataset.state = state;
  stateField.textContent = STATE_NAMES[state] || state;
}

async function follow() {
  // Poll the device until it is no longer rebooting (every 1.5 s, at most 10 minutes).
  for (let i = 0; i < 400; i += 1) {
    const { ok, data } = await fetchJSON(section.dataset.api);
    if (ok) {
      showState(data.state);
      const badge = document.querySelector('#device [data-field="health"]');
      if (badge) setHealthBadge(badge, data.health, data.health_reasons);
      if (data.state !== "rebooting") return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1500));
  }
}

async function act(action) {
  const body = { action, reason: document.getElementById("action-reason").value };
  if (action === "maintenance") {
    const until = document.getElementById("action-until").value;
    if (until) body.until = new Date(until).toISOString();
  }
  result.textContent = "…";
  const { ok, data } = await fetchJSON(section.dataset.actionsUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!ok) {
    result.textContent = errorMessage(data);
    result.dataset.outcome = "error";
    return;
  }
  result.textContent = `${data.kind}: ${data.status}`;
  result.dataset.outcome = "ok";
  await follow();
}

if (form) {
  for (const button of form.querySelectorAll("button[data-action]")) {
    button.addEventListener("click", () => act(button.dataset.action));
  }
}
if (stateField.dataset.state === "rebooting") follow();
