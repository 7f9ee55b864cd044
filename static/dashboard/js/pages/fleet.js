// Fleet page: summaries of the whole fleet, and one page of the device table, filtered,
// sorted and paged by the server. Changing filters or page swaps the table in without a
// reload, and the socket is told which rows the page shows: it sends only those rows'
// updates, and the fleet's summary when it changes.
import { connect } from "../lib/live.js";
import { formatValue, keyCounters, setHealthBadge } from "../lib/format.js";

const section = document.getElementById("fleet-rows");
const form = document.getElementById("fleet-filters");
let rows = new Map();
let live = null;

function collectRows() {
  rows = new Map();
  section.querySelectorAll("tr[data-device-id]").forEach((tr) => rows.set(Number(tr.dataset.deviceId), tr));
}

function subscribe() {
  if (live) live.send({ type: "subscribe", devices: [...rows.keys()] });
}

function updateRow(tr, line, cycle) {
  for (const counter of keyCounters) {
    const cell = tr.querySelector(`[data-field="${counter.name}"]`);
    if (cell) cell.textContent = formatValue(counter, line.counters[counter.name], line.driver_status);
  }
  setHealthBadge(tr.querySelector('[data-field="health"]'), line.health, line.reasons);
  tr.dataset.cycle = cycle;
}

function hostItem(host) {
  const li = document.createElement("li");
  li.dataset.hostId = host.id;
  const link = document.createElement("a");
  link.href = `?host=${encodeURIComponent(host.name)}`;
  link.textContent = host.name;
  li.append(link);
  for (const [health, count] of Object.entries(host.counts)) {
    const badge = document.createElement("span");
    badge.className = `badge health-${health}`;
    badge.textContent = `${count} ${health}`;
    li.append(" ", badge);
  }
  const of = document.createElement("span");
  of.className = "muted";
  of.textContent = `of ${host.devices}`;
  li.append(" ", of);
  return li;
}

function showSummary(summary) {
  document.querySelectorAll("[data-health-count]").forEach((a) => {
    a.querySelector("b").textContent = summary.health_counts[a.dataset.healthCount] ?? 0;
  });
  const set = (name, value) => {
    const el = document.querySelector(`[data-summary="${name}"]`);
    if (el) el.textContent = value;
  };
  set("devices", summary.devices);
  set("hosts", summary.hosts);
  set("problem-hosts", summary.problem_host_count);
  document.getElementById("problem-hosts").replaceChildren(...summary.problem_hosts.map(hostItem));
}

function onMessage(message) {
  if (message.type !== "fleet.polled") return;
  for (const line of message.devices) {
    const tr = rows.get(line.id);
    if (tr) updateRow(tr, line, message.cycle);
  }
  if (message.summary) showSummary(message.summary);
}

function showQueryInForm(params) {
  for (const field of form.elements) {
    if (field.name) field.value = params.get(field.name) || (field.tagName === "SELECT" ? field.options[0].value : "");
  }
  for (const name of ["sort", "per_page"]) {
    if (!params.get(name)) form.elements[name].selectedIndex = name === "per_page" ? 1 : 0;
  }
}

// Fetches the table for `params` and swaps it in; records it in the history unless replaying.
async function loadTable(params, { record = true } = {}) {
  for (const [name, value] of [...params]) if (!value) params.delete(name);
  const query = params.toString();
  section.setAttribute("aria-busy", "true");
  try {
    const response = await fetch(`${section.dataset.tableUrl}?${query}`, { credentials: "same-origin" });
    const body = await response.text();
    if (!response.ok) throw new Error(body);
    section.innerHTML = body;
    collectRows();
    subscribe();
    if (record) history.pushState(null, "", query ? `?${query}` : window.location.pathname);
  } catch (error) {
    section.dataset.error = error.message;
    window.alert(error.message);
  } finally {
    section.removeAttribute("aria-busy");
  }
}

if (section) {
  collectRows();
  live = connect(section.dataset.wsPath, onMessage, { onOpen: subscribe });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = new URLSearchParams(new FormData(form));
    params.delete("page"); // new filters start on the first page
    loadTable(params);
  });
  // Pager, health counts and host links: the same table, other parameters, no reload.
  document.addEventListener("click", (event) => {
    const link = event.target.closest("a[data-page-link], #health-summary a, #problem-hosts a, #clear-filters");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    const params = new URL(link.href).searchParams;
    showQueryInForm(params);
    loadTable(params);
  });
  window.addEventListener("popstate", () => {
    const params = new URLSearchParams(window.location.search);
    showQueryInForm(params);
    loadTable(params, { record: false });
  });
}
