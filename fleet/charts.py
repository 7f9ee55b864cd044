"""Pure functions from rows to Plotly figure dicts: no I/O, no Django."""

from datetime import UTC, datetime

from fleet.key_counters import series_style


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


# Horizontal lines drawn on a counter's graph: (value in the counter's unit, label, colour).
THRESHOLDS = {
    "temperature_c": [(85.0, "warning", "#e0a020"), (95.0, "critical", "#d64545")],
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
        lines.append((ceiling * scale, "total", "#555"))
    return [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y, "name": label,
         "line": {"color": colour, "width": 1, "dash": "dash"}}
        for y, label, colour in lines
    ]


def counter_figure(name: str, points: list[tuple], *, gap_s: float | None = None,
                   ceiling: float | None = None, live: bool = True) -> dict:
    """A counter's graph; ``ceiling`` (in the counter's unit, e.g. total memory) is drawn
    as a line, and the y axis reaches it. Band points (t, mean, min, max) draw the mean
    with a min–max band. ``live``: the page extends the line with each poll."""
    style = series_style(name)
    title, unit, scale, colour = style.label, style.unit, style.scale, style.colour
    if ceiling is not None:
        title += " of total"
    if gap_s is not None:
        points = with_gaps(points, gap_s)
    figure = {
        "counter": name,
        "scale": scale,
        "live": live,
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": title,
                "x": [_iso(p[0]) for p in points],
                "y": _scaled(points, 1, scale),
                "connectgaps": False,
                "line": {"color": colour, "width": 2},
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
    return figure


def device_figures(history: dict[str, list[tuple]], *, gap_s: float | None = None,
                   snapshot: dict | None = None, live: bool = True) -> list[dict]:
    """One graph per counter; memory is drawn against the device's total."""
    total = (snapshot or {}).get("memory_total_bytes")
    return [
        counter_figure(name, points, gap_s=gap_s, ceiling=total if name == "memory_used_bytes" else None, live=live)
        for name, points in history.items()
    ]
