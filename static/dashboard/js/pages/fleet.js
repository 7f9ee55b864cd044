// Fleet page: each poll message updates the rows and tiles of its devices in place.
import { connect } from "../lib/live.js";
import { formatValue, keyCounters, setHealthBadge } from "../lib/format.js";

const table = document.getElementById("fleet-table");
const rows = new Map();
const tiles = new Map();

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

function updateTile(tile, line) {
  tile.className = `tile health-${line.health}`;
  const status = line.reasons.length ? `${line.health}: ${line.reasons.join(", ")}` : line.health;
  tile.title = tile.title.split(" · ").slice(0, 2).concat(status).join(" · ");
}

function updateRow(tr, line, cycle) {
  for (const counter of keyCounters) {
    const cell = tr.querySelector(`[data-field="${counter.name}"]`);
    if (cell) cell.textContent = formatValue(counter, line.counters[counter.name], line.driver_status);
  }
  setHealthBadge(tr.querySelector('[data-field="health"]'), line.health, line.reasons);
  tr.dataset.cycle = cycle;
}

function applyPoll(message) {
  if (message.type !== "fleet.polled") return;
  for (const line of message.devices) {
    const tr = rows.get(line.id);
    if (!tr) continue;
    updateRow(tr, line, message.cycle);
    const tile = tiles.get(line.id);
    if (tile) updateTile(tile, line);
  }
  recountHealth();
}

if (table) {
  document.querySelectorAll("[data-tile-id]").forEach((a) => tiles.set(Number(a.dataset.tileId), a));
  table.querySelectorAll("tr[data-device-id]").forEach((tr) => rows.set(Number(tr.dataset.deviceId), tr));
  connect(table.dataset.wsPath, applyPoll);
}
