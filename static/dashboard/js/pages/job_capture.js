// Fleet page: capture a distributed job on the devices ticked in the table, or on every
// device the filters (host, type) select; then open the job's page, which follows each rank.
import { errorMessage, fetchJSON } from "../lib/http.js";

const panel = document.getElementById("job-capture");
const picked = new Set();

function showPicked() {
  document.getElementById("job-picked-count").textContent = String(picked.size);
  document.querySelectorAll("input.job-pick").forEach((box) => {
    box.checked = picked.has(Number(box.value));
  });
}

if (panel) {
  document.addEventListener("change", (event) => {
    const box = event.target.closest("input.job-pick");
    if (!box) return;
    if (box.checked) picked.add(Number(box.value));
    else picked.delete(Number(box.value));
    showPicked();
  });
  // The table is swapped in when filters or pages change: tick again what was picked.
  new MutationObserver(showPicked).observe(document.getElementById("fleet-rows"), { childList: true });

  document.getElementById("job-capture-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const status = document.getElementById("job-capture-status");
    const button = document.getElementById("job-capture-button");
    const scope = panel.querySelector('input[name="job-scope"]:checked').value;
    const filters = document.getElementById("fleet-filters");
    const body = {
      name: document.getElementById("job-name").value,
      duration_s: Number(document.getElementById("job-duration").value),
      parallelism: document.getElementById("job-parallelism").value,
    };
    if (scope === "picked") body.devices = [...picked];
    else {
      body.host = filters.elements.host.value;
      body.type = filters.elements.type.value;
    }
    button.disabled = true;
    status.className = "";
    status.textContent = "Starting…";
    const { ok, data } = await fetchJSON(panel.dataset.apiUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    if (ok) {
      window.location.assign(data.url);
      return;
    }
    button.disabled = false;
    status.className = "error";
    status.textContent = errorMessage(data);
  });
}
