// Device page: draw the recent history, then extend every graph with each poll.
"use strict";

(function () {
  const head = document.getElementById("device");
  const figures = JSON.parse(document.getElementById("device-figures").textContent);
  const deviceId = Number(head.dataset.deviceId);
  const config = { displaylogo: false, responsive: true, displayModeBar: "hover" };

  for (const figure of figures) {
    Plotly.newPlot(`chart-${figure.counter}`, figure.data, figure.layout, config);
  }

  function applyPoll(message) {
    if (message.type !== "device.polled" || message.device.id !== deviceId) return;
    const line = message.device;
    const when = new Date((line.sample_ts || message.cycle) * 1000).toISOString();
    for (const figure of figures) {
      const value = line[figure.counter];
      if (value === null || value === undefined) continue;
      const div = document.getElementById(`chart-${figure.counter}`);
      Plotly.extendTraces(div, { x: [[when]], y: [[value * figure.scale]] }, [0], 2000);
      div.dataset.points = div.data[0].x.length;
    }
    Asicmon.setHealthBadge(head.querySelector('[data-field="health"]'), line.health, line.reasons);
    head.querySelector('[data-field="reasons"]').textContent = line.reasons.join(", ");
  }

  Asicmon.connect(head.dataset.wsPath, applyPoll);
})();
