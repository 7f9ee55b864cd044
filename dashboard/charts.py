"""Pure functions from rows to Plotly figure dicts: no I/O, no Django."""

from datetime import UTC, datetime

from fleet.key_counters import series_style


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


# Horizontal lines drawn on a counter's graph: (value in the counter's unit, label, colour).
THRESHOLDS = {
    "temperature_c": [(85.0, "warning", "#e0a020"), (95.0, "critical", "#d64545")],
}


def with_gaps(points: list[tuple[float, float]], gap_s: float) -> list[tuple[float, float | None]]:
    """The points with a None wherever polls stopped for longer than ``gap_s``, so that the
    line breaks there instead of bridging the silence."""
    out: list[tuple[float, float | None]] = []
    for i, (t, v) in enumerate(points):
        if i and t - points[i - 1][0] > gap_s:
            out.append(((t + points[i - 1][0]) / 2, None))
        out.append((t, v))
    return out


def _lines(name: str, scale: float, ceiling: float | None) -> list[dict]:
    lines = [(value * 1.0, label, colour) for value, label, colour in THRESHOLDS.get(name, [])]
    if ceiling is not None:
        lines.append((ceiling * scale, "total", "#555"))
    return [
        {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": y, "y1": y, "name": label,
         "line": {"color": colour, "width": 1, "dash": "dash"}}
        for y, label, colour in lines
    ]


def counter_figure(name: str, points: list[tuple[float, float]], *, gap_s: float | None = None,
                   ceiling: float | None = None) -> dict:
    """A counter's graph; ``ceiling`` (in the counter's unit, e.g. total memory) is drawn
    as a line, and the y axis reaches it."""
    style = series_style(name)
    title, unit, scale, colour = style.label, style.unit, style.scale, style.colour
    if ceiling is not None:
        title += " of total"
    if gap_s is not None:
        points = with_gaps(points, gap_s)
    figure = {
        "counter": name,
        "scale": scale,
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": title,
                "x": [_iso(t) for t, _ in points],
                "y": [None if v is None else v * scale for _, v in points],
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
    if ceiling is not None:
        figure["layout"]["yaxis"]["range"] = [0, ceiling * scale * 1.05]
    return figure


def device_figures(history: dict[str, list[tuple[float, float]]], *, gap_s: float | None = None,
                   snapshot: dict | None = None) -> list[dict]:
    """One graph per counter; memory is drawn against the device's total."""
    total = (snapshot or {}).get("memory_total_bytes")
    return [
        counter_figure(name, points, gap_s=gap_s, ceiling=total if name == "memory_used_bytes" else None)
        for name, points in history.items()
    ]
