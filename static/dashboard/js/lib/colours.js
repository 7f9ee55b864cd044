// The colours of charts and health, defined once as CSS custom properties in
// css/asicmon.css (--health-*, --chart-*, --counter-*) and read here, so that a colour
// changes in one place. Plotly does not understand var(--name): figures made in Python
// carry such references and resolveColours turns them into the colours before plotting.

const VAR = /^var\(\s*(--[\w-]+)\s*\)$/;

// The colour of the custom property `--name` (name given without its dashes, or with them).
export function colour(name) {
  const property = name.startsWith("--") ? name : `--${name}`;
  return getComputedStyle(document.documentElement).getPropertyValue(property).trim();
}

// A copy of `value` (a figure, a trace, any JSON) with every "var(--name)" string replaced
// by the colour it names.
export function resolveColours(value) {
  if (typeof value === "string") {
    const match = value.match(VAR);
    return match ? colour(match[1]) || value : value;
  }
  if (Array.isArray(value)) return value.map(resolveColours);
  if (value && typeof value === "object") {
    const out = {};
    for (const [key, v] of Object.entries(value)) out[key] = resolveColours(v);
    return out;
  }
  return value;
}
