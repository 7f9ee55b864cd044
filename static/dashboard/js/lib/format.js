// Formatting of counter values, from the key-counter table the server puts in every page
// (fleet/reading/key_counters.py, rendered by base.html as <script id="key-counters">).

const table = document.getElementById("key-counters");

// [{name, label, unit, suffix, scale, digits, colour}, ...], in column order.
export const keyCounters = table ? JSON.parse(table.textContent) : [];

const blank = (v) => v === null || v === undefined || v === "";

// A key counter's raw value as the fleet table shows it: "42%", "61.5 °C", "–", or
// "not reported" when the driver answered (status ok) without it: the device cannot give it.
export function formatValue(counter, value, driverStatus) {
  if (blank(value)) return driverStatus === "ok" ? "not reported" : "–";
  return `${(Number(value) * counter.scale).toFixed(counter.digits)}${counter.suffix}`;
}

// Sets a health badge's colour class, text and tooltip.
export function setHealthBadge(el, health, reasons) {
  el.className = `${el.className.replace(/\bhealth-\w+/g, "").trim()} health-${health}`;
  el.textContent = health;
  el.title = (reasons || []).join(", ");
}
