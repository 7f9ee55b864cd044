// The trace page: follows the trace until it is ready, then wires its panels (one module
// each under pages/trace/): findings, operator breakdown and drill-down, then the analyses
// (timeline with the critical path, flame, correlation, metrics around a capture), drawn
// after the breakdown chart, the first thing a person looks at. Each panel reads its URLs
// from its section's data-* attributes; the panels talk through the callbacks given here.
import { $, loadPlotly, pause } from "../lib/trace_kit.js";
import { breakdownPanel } from "./trace/breakdown.js";
import { correlationPanel } from "./trace/correlation.js";
import { criticalPathPanel } from "./trace/critical_path.js";
import { drilldownPanel } from "./trace/drilldown.js";
import { findingsPanel } from "./trace/findings.js";
import { flamePanel } from "./trace/flame.js";
import { metricsPanel } from "./trace/metrics.js";
import { whenReady } from "./trace/status.js";
import { timelinePanel } from "./trace/timeline.js";

const root = $("trace");
const views = $("trace-views");
const drilldown = drilldownPanel($("drilldown"));
const breakdown = breakdownPanel($("trace-results"), { onOpen: drilldown.open, onSide: drilldown.close });
const timeline = timelinePanel($("timeline-card"));
const path = criticalPathPanel($("timeline-card"), { onWindow: timeline.show, onEvent: timeline.showEvent });
const flame = flamePanel($("flame-card"));
const correlation = correlationPanel($("correlation-card"), { ms: timeline.ms });
const metrics = metricsPanel($("metrics-card"), { ms: timeline.ms });

// A finding's link: the breakdown narrowed to its operators, the timeline at its window.
function showEvidence(evidence) {
  breakdown.filterTo(evidence);
  if (evidence.focus_us) path.clearStep();
  timeline.showEvidence(evidence);
}
const findings = findingsPanel($("findings-card"), { onShow: showEvidence });
const findingsDrawn = findings.serverDrawn();

async function drawAnalyses() {
  views.hidden = false;
  // The first window is asked for at once and drawn after the breakdown chart (or after 3 s
  // if that never comes).
  await timeline.start(Promise.all([loadPlotly(), Promise.race([breakdown.firstDrawn, pause(3000)])]));
  performance.mark("timeline-drawn"); // (benchmarks read these marks)
  await Promise.all([flame.load(), path.load(), correlation.load(), metrics.load()]);
  views.dataset.loaded = "1";
  performance.mark("views-drawn");
}

whenReady(root, { trace: root.dataset.apiUrl }).then(() => {
  if (!findingsDrawn) findings.load();
  breakdown.load();
  drawAnalyses();
});
