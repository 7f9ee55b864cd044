// The timeline: a window of bars per thread and stream, asked from the server on zoom and
// pan, the critical path in red with its edges, merged bars in grey; a click on a bar shows
// its event. A finding's evidence opens at its window with its events highlighted.
import { colour } from "../../lib/colours.js";
import { $, errorMessage, fetchJSON, plotConfig, showError, us } from "../../lib/trace_kit.js";

const LEGEND = { critical: "critical path", evidence: "finding's events" };

export function timelinePanel(card) {
  const chart = $("timeline-chart");
  const state = { span: null, t0: 0, requests: 0, bars: null, highlight: new Set() };
  let firstWindow = null; // resolves once the timeline has been drawn
  let pending = null;
  // Microseconds as ms from the trace's first event (the other charts' time axis too).
  const ms = (usValue) => (usValue - state.t0) / 1000;

  function barLabel(data, i) {
    const b = data.bars;
    const name = data.names[b.name[i]];
    const dur = us(b.end_us[i] - b.start_us[i]);
    if (b.count[i] === 1) return `${name}<br>${dur} µs${b.critical[i] ? " · on the critical path" : ""}`;
    return `${b.count[i].toLocaleString("en-US")} events (longest ${name})<br>busy ${us(b.busy_us[i])} of ${dur} µs` +
      (b.critical[i] ? `<br>${b.critical[i]} on the critical path` : "");
  }

  function barTraces(data) {
    const b = data.bars;
    const groups = { host: [], device: [], merged: [], critical: [], evidence: [] };
    for (let i = 0; i < b.row.length; i++) {
      const side = data.rows[b.row[i]].is_device ? "device" : "host";
      const key = b.count[i] === 1 && state.highlight.has(b.event[i]) ? "evidence"
        : b.critical[i] > 0 ? "critical" : b.count[i] > 1 ? "merged" : side;
      groups[key].push(i);
    }
    if (!groups.evidence.length) delete groups.evidence;
    const traces = Object.entries(groups).map(([key, idx]) => ({
      type: "bar", orientation: "h", name: LEGEND[key] || key,
      y: idx.map((i) => b.row[i]), base: idx.map((i) => ms(b.start_us[i])),
      x: idx.map((i) => Math.max((b.end_us[i] - b.start_us[i]) / 1000, 1e-6)),
      customdata: idx, marker: { color: colour(`chart-${key}`) }, width: 0.8,
      text: idx.map((i) => barLabel(data, i)), hoverinfo: "text", textposition: "none",
    }));
    const e = data.edges;
    const ex = [], ey = [];
    for (let k = 0; k < e.src.length; k++) ex.push(ms(e.src_us[k]), ms(e.dst_us[k]), null), ey.push(e.src_row[k], e.dst_row[k], null);
    traces.push({ type: "scatter", mode: "lines", name: "path edges", x: ex, y: ey, line: { color: colour("chart-edge"), width: 1.5 }, hoverinfo: "skip" });
    return traces;
  }

  function describe(data) {
    Object.assign(chart.dataset, {
      requests: String(state.requests), windowStartUs: String(data.start_us), windowEndUs: String(data.end_us),
      bars: String(data.bars.row.length), criticalBars: String(data.bars.critical.filter((c) => c > 0).length),
      events: String(data.events_in_window),
      highlighted: String(data.bars.event.filter((e, i) => data.bars.count[i] === 1 && state.highlight.has(e)).length),
    });
    $("timeline-info").textContent = `${data.bars.row.length.toLocaleString("en-US")} bars for ` +
      `${data.events_in_window.toLocaleString("en-US")} events · ${data.merged_bars.toLocaleString("en-US")} merged · ` +
      `${data.edges_total.toLocaleString("en-US")} path edges in view`;
  }

  // Asks for the bars of a window and draws them (once `drawAfter`, if given, resolves).
  async function loadWindow(startUs, endUs, drawAfter = null) {
    const width = Math.max(200, Math.round(chart.clientWidth || 1200));
    const params = new URLSearchParams({ width_px: width });
    if (startUs !== undefined) params.set("start_us", startUs), params.set("end_us", endUs);
    state.requests += 1;
    const [{ ok, data }] = await Promise.all([fetchJSON(`${card.dataset.url}?${params}`), drawAfter]);
    if (!ok) return showError("timeline-chart", data);
    if (!state.span) {
      state.span = data.span_us;
      state.t0 = data.span_us[0];
    }
    state.bars = data;
    const layout = {
      barmode: "overlay", showlegend: true, legend: { orientation: "h", y: 1.08 }, dragmode: "zoom",
      margin: { t: 30, l: 230, r: 10, b: 40 }, height: Math.max(260, 26 * data.rows.length + 90),
      xaxis: { title: { text: "ms from the trace's first event" }, range: [ms(data.start_us), ms(data.end_us)] },
      yaxis: { tickvals: data.rows.map((_, i) => i), ticktext: data.rows.map((r) => r.label), autorange: "reversed", fixedrange: true },
    };
    await Plotly.react(chart, barTraces(data), layout, plotConfig);
    describe(data);
  }

  function onRelayout(event) {
    let range = null;
    if (event["xaxis.range[0]"] !== undefined) range = [event["xaxis.range[0]"], event["xaxis.range[1]"]];
    else if (event["xaxis.range"]) range = event["xaxis.range"];
    else if (event["xaxis.autorange"]) range = "all";
    if (!range) return;
    clearTimeout(pending);
    pending = setTimeout(() => {
      if (range === "all") return loadWindow();
      const start = state.t0 + range[0] * 1000, end = state.t0 + range[1] * 1000;
      if (end > start) loadWindow(start, end);
    }, 150);
  }

  async function showEvent(index) {
    const box = $("event-detail");
    const { ok, data } = await fetchJSON(card.dataset.eventUrl.replace(/\/0\/$/, `/${index}/`));
    box.hidden = false;
    box.replaceChildren();
    if (!ok) return (box.textContent = errorMessage(data));
    const h = document.createElement("h3");
    h.textContent = `${data.name}${data.critical ? " — on the critical path" : ""}`;
    const facts = document.createElement("p");
    facts.textContent = `${data.kind} · ${data.lane} · start ${us(ms(data.start_us) * 1000)} µs from the first event · ${us(data.dur_us)} µs` +
      (data.correlation >= 0 ? ` · correlation ${data.correlation}` : "");
    box.append(h, facts);
    for (const role of ["launched_by", "launched"]) {
      if (!data[role]) continue;
      const p = document.createElement("p");
      const a = document.createElement("a");
      a.href = "#";
      a.textContent = data[role].name;
      a.addEventListener("click", (e) => (e.preventDefault(), showEvent(data[role].index)));
      p.append(role === "launched_by" ? "Launched by " : "Launched ", a);
      box.append(p);
    }
    const requestsLink = document.getElementById("trace-requests-link");
    if (requestsLink && Array.isArray(data.args.request_ids) && data.args.request_ids.length) {
      // An engine step: the requests of its batch, each a link to its request page.
      const p = document.createElement("p");
      p.id = "event-requests";
      p.append("Requests in this step: ");
      data.args.request_ids.forEach((rid, i) => {
        const a = document.createElement("a");
        a.href = new URL(`${encodeURIComponent(rid)}/`, requestsLink.href).href;
        a.textContent = rid;
        p.append(i ? ", " : "", a);
      });
      box.append(p);
    }
    const args = document.createElement("pre");
    args.textContent = JSON.stringify(data.args, null, 2);
    box.append(args);
    box.dataset.event = String(index);
  }

  function onBarClick(event) {
    const point = event.points && event.points[0];
    if (!point || point.customdata === undefined) return;
    const b = state.bars.bars, i = point.customdata;
    if (b.count[i] === 1) return showEvent(b.event[i]);
    const box = $("event-detail");
    box.hidden = false;
    box.textContent = `${b.count[i].toLocaleString("en-US")} events merged here (busy ${us(b.busy_us[i])} µs, ` +
      `${b.critical[i]} on the critical path): drag across them to zoom in.`;
  }

  return {
    ms,
    showEvent,
    // A window [startUs, endUs] of the trace, or the whole trace without them.
    show: (startUs, endUs) => loadWindow(startUs, endUs),
    // The first window: asked for at once, drawn once `drawAfter` resolves.
    async start(drawAfter) {
      // A link from a request's page opens the timeline at its time: #window=<start_us>,<end_us>.
      const asked = /^#window=(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)$/.exec(location.hash);
      firstWindow = loadWindow(asked ? Number(asked[1]) : undefined, asked ? Number(asked[2]) : undefined, drawAfter);
      await firstWindow;
      chart.on("plotly_relayout", onRelayout);
      chart.on("plotly_click", onBarClick);
    },
    // A finding's evidence: its window, its events highlighted (until the next finding).
    async showEvidence(evidence) {
      const { focus_us: focus, events } = evidence;
      if (!focus) return;
      await firstWindow;
      state.highlight = new Set(events || []);
      card.scrollIntoView({ block: "start" });
      await loadWindow(focus[0], focus[1]);
      chart.dataset.evidence = evidence.rule || "";
    },
  };
}
