// Device page: draw the history, then extend every graph of raw samples with each poll.
import { appendPoint, draw } from "../lib/charts.js";
import { connect } from "../lib/live.js";
import { setHealthBadge } from "../lib/format.js";

const head = document.getElementById("device");
const figures = JSON.parse(document.getElementById("device-figures").textContent);
const deviceId = Number(head.dataset.deviceId);

function applyPoll(message) {
  if (message.type !== "device.polled" || message.device.id !== deviceId) return;
  const line = message.device;
  const when = new Date((line.sample_ts || message.cycle) * 1000).toISOString();
  for (const figure of figures) {
    if (figure.live === false) continue; // a rollup graph: polls do not extend it
    const value = line.counters[figure.counter];
    if (value !== null && value !== undefined) {
      appendPoint(`chart-${figure.counter}`, when, value * figure.scale);
    }
  }
  setHealthBadge(head.querySelector('[data-field="health"]'), line.health, line.reasons);
  head.querySelector('[data-field="reasons"]').textContent = line.reasons.join(", ");
}

for (const figure of figures) draw(`chart-${figure.counter}`, figure);
connect(head.dataset.wsPath, applyPoll);
