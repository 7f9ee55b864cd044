"""Pure functions from rows to Plotly figure dicts: no I/O, no Django."""

from datetime import UTC, datetime

# How each key counter is drawn: title, axis label, scale applied to the raw value.
SERIES_STYLE = {
    "device_utilization": ("Utilization", "%", 100.0, "#3b7dd8"),
    "temperature_c": ("Temperature", "°C", 1.0, "#d9534f"),
    "power_w": ("Power", "W", 1.0, "#e0a020"),
    "memory_used_bytes": ("Memory used", "GiB", 1 / 2**30, "#2e9e5b"),
}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat()


def counter_figure(name: str, points: list[tuple[float, float]]) -> dict:
    title, unit, scale, colour = SERIES_STYLE.get(name, (name, "", 1.0, "#555"))
    return {
        "counter": name,
        "scale": scale,
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": title,
                "x": [_iso(t) for t, _ in points],
                "y": [v * scale for _, v in points],
                "line": {"color": colour, "width": 2},
                "hovertemplate": f"%{{y:.1f}} {unit}<extra></extra>",
            }
        ],
        "layout": {
            "title": {"text": f"{title} ({unit})", "font": {"size": 14}, "x": 0.02, "xanchor": "left"},
            "margin": {"l": 50, "r": 10, "t": 36, "b": 36},
            "height": 240,
            "xaxis": {"type": "date"},
            "yaxis": {"rangemode": "tozero"},
        },
    }


def device_figures(history: dict[str, list[tuple[float, float]]]) -> list[dict]:
    return [counter_figure(name, points) for name, points in history.items()]
