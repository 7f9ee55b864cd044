// Device page: draw the history, then extend every graph of raw samples with each poll. A
// graph with no samples yet is a sentence (the server's), drawn from its first live sample.
// Each graph drawn is announced ("device:chart-drawn") for the capture marks.
import { appendPoint, draw } from "../lib/charts.js";
import { connect } from "../lib/live.js";
import { setHealthBadge } from "../lib/format.js";

const head = document.getElementById("device");
const figures = JSON.parse(document.getElementById("device-figures").textContent);
const deviceId = Number(head.dataset.deviceId);

function drawChart(id, figure) {
  draw(id, figure).then((div) => {
    div.dataset.points = div.data[0].x.length;
    document.dispatchEvent(new CustomEvent("device:chart-drawn", { detail: div }));
  });
}

function applyPoll(message) {
  if (message.type !== "device.polled" || message.device.id !== deviceId) return;
  const line = message.device;
  const when = new Date((line.sample_ts || message.cycle) * 1000).toISOString();
  for (const figure of figures) {
    if (figure.live === false) continue; // a rollup graph: polls do not extend it
    const value = line.counters[figure.counter];
    if (value === null || value === undefined) continue;
    const id = `chart-${figure.counter}`;
    if (document.getElementById(id).querySelector(".chart-empty")) {
      figure.data[0].x = [when];
      figure.data[0].y = [value * figure.scale];
      figure.data[0].marker.size = [6]; // a lone point: a line needs two
      if (figure.window_s) {
        const end = new Date(when);
        figure.layout.xaxis.range = [new Date(end.getTime() - figure.window_s * 1000).toISOString(), when];
      }
      document.getElementById(id).replaceChildren();
      drawChart(id, figure);
    } else {
      appendPoint(id, when, value * figure.scale, figure.window_s);
    }
  }
  setHealthBadge(head.querySelector('[data-field="health"]'), line.health, line.reasons);
  head.querySelector('[data-field="reasons"]').textContent = line.reasons.join(", ");
}

for (const figure of figures) {
  if (!figure.empty) drawChart(`chart-${figure.counter}`, figure);
}
connect(head.dataset.wsPath, applyPoll);
