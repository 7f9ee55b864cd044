"""``--html OUT``: the replay's report as one self-contained HTML file (Plotly inlined from
``static/vendor/plotly``): the fleet in service over time per policy, ETTR per policy,
losses by fault class, and the figures' table."""

from __future__ import annotations

import html
import json
from pathlib import Path

__all__ = ["PLOTLY", "charts", "render", "write_html"]

PLOTLY = Path(__file__).resolve().parents[2] / "static" / "vendor" / "plotly" / "plotly.min.js"
ROWS = [
    ("device-hours in service", "device_hours_in_service", "{:,.0f}"),
    ("in service", "in_service_share", "{:.3%}"),
    ("jobs' ETTR", "ettr", "{:.3%}"),
    ("job interruptions", "job_interruptions", "{}"),
    ("detect p95, monitor-seen (s)", "detect_s_p95_seen_by_monitor", "{:.0f}"),
    ("isolate p50 (s)", "isolate_s_p50", "{:.0f}"),
    ("escalations to a person", "escalations_to_person", "{}"),
    ("waited for a person", "waited_for_a_person", "{}"),
    ("devices pulled", "pulled_devices", "{}"),
    ("false pulls", "false_pulls", "{}"),
    ("breaker trips", "breaker_trips", "{}"),
]


def _cell(value, fmt: str) -> str:
    return "-" if value is None else html.escape(fmt.format(value))


def charts(summary: dict) -> list[dict]:
    """The report's three Plotly charts (data and layout), for this file and the dashboard's page."""
    pols = summary["policies"]
    service = [{"type": "scatter", "mode": "lines", "name": n, "y": [100 * v for v in p["in_service_by_day"]]}
               for n, p in pols.items()]
    ettr = [{"type": "bar", "x": list(pols), "y": [100 * p["ettr"] for p in pols.values()]}]
    first = next(iter(pols.values()))
    kinds = sorted(first["by_class"], key=lambda k: -first["by_class"][k]["job_gpu_hours_lost"])[:12]
    losses = [{"type": "bar", "name": n, "x": kinds, "y": [p["by_class"][k]["job_gpu_hours_lost"] for k in kinds]}
              for n, p in pols.items()]
    low = min((p["ettr"] for p in pols.values()), default=1.0)
    return [
        {"id": "service", "data": service, "layout": {"title": {"text": "Fleet in service (% of devices), by day"},
                                                      "xaxis": {"title": {"text": "day"}}}},
        {"id": "ettr", "data": ettr, "layout": {"title": {"text": "Jobs' ETTR (%)"},
                                                "yaxis": {"range": [max(0.0, 100 * low - 2), 100]}}},
        {"id": "losses", "data": losses, "layout": {"title": {"text": "Job GPU-hours lost by fault class"},
                                                    "barmode": "group"}},
    ]


def render(summary: dict, plotly_js: str | None = None) -> str:
    st = summary["settings"]
    names = list(summary["policies"])
    head = "".join(f"<th>{html.escape(n)}</th>" for n in names)
    body = "".join(
        f"<tr><th>{html.escape(label)}</th>"
        + "".join(f"<td>{_cell(summary['policies'][n].get(key), fmt)}</td>" for n in names) + "</tr>"
        for label, key, fmt in ROWS)
    figures = charts(summary)
    divs = "".join(f'<div id="{c["id"]}" style="height:380px"></div>' for c in figures)
    data = json.dumps(figures).replace("</", "<\\/")
    js = (plotly_js if plotly_js is not None else PLOTLY.read_text()).replace("</script", "<\\/script")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Asicmon replay</title>
<style>body{{font-family:sans-serif;margin:2em}}td,th{{padding:2px 10px;text-align:right}}</style>
<script>{js}</script></head><body>
<h1>Replay: {st['faults']} faults on {st['servers_with_faults']} of {st['nodes']} servers, {st['days']:.1f} days</h1>
<table><tr><th></th>{head}</tr>{body}</table>
{divs}
<script>for (const c of {data}) Plotly.newPlot(c.id, c.data, c.layout);</script>
</body></html>
"""


def write_html(summary: dict, path: str | Path) -> None:
    """Writes the report whole (to a temporary file, then renamed): never half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render(summary))
    tmp.replace(path)
