// The flame: call paths aggregated, host or accelerator, searchable; a click zooms.
import { colour } from "../../lib/colours.js";
import { $, activateTab, fetchJSON, plotConfig, showError } from "../../lib/trace_kit.js";

export function flamePanel(card) {
  const state = { flame: null, side: "host" };

  function draw() {
    const tree = state.flame[state.side];
    const term = $("flame-search").value.trim().toLowerCase();
    const matches = term ? tree.labels.map((l) => l.toLowerCase().includes(term)) : null;
    const colours = matches ? matches.map((m) => colour(m ? "chart-critical" : "chart-faded")) : undefined;
    $("flame-matches").textContent = matches ? `${matches.filter(Boolean).length} matching` : "";
    const custom = tree.ids.map((_, i) => [tree.values_us[i], tree.self_us[i], tree.counts[i]]);
    const trace = {
      type: "icicle", ids: tree.ids, labels: tree.labels, parents: tree.parents, values: tree.self_us,
      branchvalues: "remainder", customdata: custom, marker: colours ? { colors: colours } : {},
      tiling: { orientation: "v", flip: "y" }, root: { color: colour("chart-root") },
      hovertemplate: "<b>%{label}</b><br>total %{customdata[0]:,.1f} µs<br>self %{customdata[1]:,.1f} µs<br>count %{customdata[2]:,}<extra></extra>",
    };
    const chart = $("flame-chart");
    Plotly.react(chart, [trace], { margin: { t: 10, l: 10, r: 10, b: 10 }, height: 460 }, plotConfig);
    chart.dataset.side = state.side;
    chart.dataset.nodes = String(tree.ids.length);
  }

  for (const button of document.querySelectorAll("#flame-tabs button")) {
    button.addEventListener("click", () => {
      activateTab("flame-tabs", (b) => b === button);
      state.side = button.dataset.side;
      if (state.flame) draw();
    });
  }
  $("flame-search").addEventListener("input", () => state.flame && draw());

  return {
    async load() {
      const { ok, data } = await fetchJSON(card.dataset.url);
      if (!ok) return showError("flame-chart", data);
      state.flame = data;
      draw();
      const chart = $("flame-chart");
      chart.on("plotly_click", (event) => {
        const point = event.points && event.points[0];
        if (point) chart.dataset.zoomedTo = point.label; // the icicle zooms into it by itself
      });
    },
  };
}
