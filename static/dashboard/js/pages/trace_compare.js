// Comparison page: a bar chart of the largest deltas (the tables are server-rendered).
import { colour } from "../lib/colours.js";
import { plotConfig } from "../lib/trace_kit.js";

window.addEventListener("load", () => {
  const data = JSON.parse(document.getElementById("delta-data").textContent);
  Plotly.newPlot("delta-chart", [{
    type: "bar", orientation: "h", y: data.ops, x: data.deltas,
    marker: { color: data.deltas.map((d) => colour(d > 0 ? "chart-slower" : "chart-faster")) },
    hovertemplate: "%{y}: %{x:,.1f} µs<extra></extra>",
  }], { margin: { t: 10, l: 260, r: 20, b: 40 }, height: 60 + 24 * data.ops.length, xaxis: { title: { text: "B − A, µs" } } }, plotConfig);
});
