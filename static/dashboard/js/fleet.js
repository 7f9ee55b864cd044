// Fleet page: each poll message updates the rows of its devices in place.
"use strict";

(function () {
  const table = document.getElementById("fleet-table");
  if (!table) return;
  const rows = new Map();
  const tiles = new Map();
  document.querySelectorAll("[data-tile-id]").forEach((a) => tiles.set(Number(a.dataset.tileId), a));
  table.querySelectorAll("tr[data-device-id]").forEach((tr) => rows.set(Number(tr.dataset.deviceId), tr));

  function recountHealth() {
    // Under a health filter the table holds only some devices: keep the server's counts.
    if (table.dataset.healthFilter) return;
    const counts = {};
    rows.forEach((tr) => {
      const health = tr.querySelector('[data-field="health"]').textContent.trim();
      counts[health] = (counts[health] || 0) + 1;
    });
    document.querySelectorAll("[data-health-count]").forEach((li) => {
      li.querySelector("b").textContent = counts[li.dataset.healthCount] || 0;
    });
  }

  function applyPoll(message) {
    if (message.type !== "fleet.polled") return;
    for (const line of message.devices) {
      const tr = rows.get(line.id);
      if (!tr) continue;
      for (const [field, fmt] of Object.entries(Asicmon.format)) {
        const cell = tr.querySelector(`[data-field="${field}"]`);
        if (cell) cell.textContent = fmt(line[field]);
      }
      Asicmon.setHealthBadge(tr.querySelector('[data-field="health"]'), line.health, line.reasons);
      const tile = tiles.get(line.id);
      if (tile) {
        tile.className = `tile health-${line.health}`;
        tile.title = tile.title.split(" · ").slice(0, 2).concat(
          line.reasons.length ? `${line.health}: ${line.reasons.join(", ")}` : line.health).join(" · ");
      }
      tr.dataset.cycle = message.cycle;
    }
    recountHealth();
  }

  Asicmon.connect(table.dataset.wsPath, applyPoll);
})();
