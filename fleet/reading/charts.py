"""Pure functions from rows to Plotly figure dicts: no I/O, no Django."""

from datetime import UTC, datetime

from fleet.reading.key_counters import series_style


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


# Horizontal lines drawn on a counter's graph: (value in the counter's unit, label, colour).
# Colours are references to the CSS custom properties (static/dashboard/css/asicmon.css),
# resolved by the page's chart helper (lib/charts.js) before plotting.
THRESHOLDS = {
    "temperature_c": [(85.0, "warning", "var(--health-warning)"), (95.0, "critical", "var(--health-critical)")],
}


def with_gaps(points: list[tuple], gap_s: float) -> list[tuple]:
    """The points with Nones wherever polls stopped for longer than ``gap_s``, so that the
    line breaks there instead of bridging the silence. A point is a sample (t, value) or a
    band (t, mean, min, max)."""
    out: list[tuple] = []
    for i, point in enumerate(points):
        t = point[0]
        if i and t - points[i - 1][0] > gap_s:
            out.append(((t + points[i - 1][0]) / 2, *[None] * (len(point) - 1)))
        out.append(point)
    return out


def _scaled(points: list[tuple], column: int, scale: float) -> list[float | None]:
    return [None if p[column] is None else p[column] * scale for p in points]


def _band(points: list[tuple], scale: float, colour: str) -> list[dict]:
    """The min–max band of band points: the max line, then the min line filled up to it."""
    edge = {"type": "scatter", "mode": "lines", "x": [_iso(p[0]) for p in points], "connectgaps": False,
            "line": {"color": colour, "width": 0}, "hoverinfo": "skip", "showlegend": False}
    return [
        {**edge, "name": "max", "y": _scaled(points, 3, scale)},
        {**edge, "name": "min", "y": _scaled(points, 2, scale), "fill": "tonexty", "opacity": 0.3},
    ]


def _lines(name: str, scale: float, ceiling: float | None) -> list[dict]:
    lines = [(value * 1.0, label, colour) for value, label, colour in THRESHOLDS.get(name, [])]
    if ceiling is not None:
        lines.append((ceiling * scale, "total", "var(--chart-total)"))
    return [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y, "name": label,
         "line": {"color": colour, "width": 1, "dash": "dash"}}
        for y, label, colour in lines
    ]


def _lone_markers(values: list[float | None]) -> list[int]:
    """A marker size per point: visible for a value with no value beside it (a line needs
    two points, so a lone sample or band would otherwise not show at all), none elsewhere."""
    def present(i: int) -> bool:
        return 0 <= i < len(values) and values[i] is not None
    return [LONE_MARKER if present(i) and not present(i - 1) and not present(i + 1) else 0 for i in range(len(values))]


LONE_MARKER = 6


def counter_figure(name: str, points: list[tuple], *, gap_s: float | None = None,
                   ceiling: float | None = None, live: bool = True,
                   window: tuple[float, float] | None = None) -> dict:
    """A counter's graph; ``ceiling`` (in the counter's unit, e.g. total memory) is drawn
    as a line, and the y axis reaches it. Band points (t, mean, min, max) draw the mean
    with a min–max band. ``live``: the page extends the line with each poll. ``window``
    (since, until, epoch seconds): the x axis spans it whatever the points, and a point
    stamped after its end (a band's bucket that holds "now") is drawn at its end."""
    style = series_style(name)
    title, unit, scale, colour = style.label, style.unit, style.scale, style.colour
    if ceiling is not None:
        title += " of total"
    if window is not None:
        points = [(min(p[0], window[1]), *p[1:]) for p in points]
    if gap_s is not None:
        points = with_gaps(points, gap_s)
    values = _scaled(points, 1, scale)
    figure = {
        "counter": name,
        "scale": scale,
        "live": live,
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": title,
                "x": [_iso(p[0]) for p in points],
                "y": values,
                "connectgaps": False,
                "line": {"color": colour, "width": 2},
                "marker": {"color": colour, "size": _lone_markers(values)},
                "hovertemplate": f"%{{y:.{style.digits}f}}{style.suffix}<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": f"{title} ({unit})", "font": {"size": 14}, "x": 0.02, "xanchor": "left"},
            "margin": {"l": 50, "r": 10, "t": 36, "b": 36},
            "height": 240,
            "xaxis": {"type": "date"},
            "yaxis": {"rangemode": "tozero"},
            "shapes": _lines(name, scale, ceiling),
        },
    }
    if points and len(points[0]) == 4:
        figure["data"] += _band(points, scale, colour)
    if ceiling is not None:
        figure["layout"]["yaxis"]["range"] = [0, ceiling * scale * 1.05]
    if window is not None:
        figure["layout"]["xaxis"]["range"] = [_iso(window[0]), _iso(window[1])]
        figure["window_s"] = window[1] - window[0]
    figure["empty"] = all(v is None for v in values)
    return figure


def device_figures(history: dict[str, list[tuple]], *, gap_s: float | None = None,
                   snapshot: dict | None = None, live: bool = True,
                   window: tuple[float, float] | None = None) -> list[dict]:
    """One graph per counter, each over ``window``; memory is drawn against the device's total."""
    total = (snapshot or {}).get("memory_total_bytes")
    return [
        counter_figure(name, points, gap_s=gap_s, ceiling=total if name == "memory_used_bytes" else None,
                       live=live, window=window)
        for name, points in history.items()
    ]


def empty_reason(*, live: bool, last_sample_ts: float | None, since: float, poll_interval: float,
                 now: float) -> str:
    """Why a graph of the chosen range has nothing to draw, and what comes next: a poll is
    coming only while the device's last sample is recent; otherwise when that sample was."""
    if last_sample_ts is None:
        return "no samples yet; the graph starts with the first poll" if live else "no samples in this range"
    last = datetime.fromtimestamp(last_sample_ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if live and now - last_sample_ts <= 3 * poll_interval:
        return "no samples in this range yet; the graph starts with the next poll"
    if last_sample_ts < since:
        return f"no samples in this range: the last sample was at {last}, no poll since"
    return f"no samples of this counter in this range (last sample of the device at {last})"
