"""Counter values in human units (GiB, not 5322227914 B), for the device page."""

from django import template

from dashboard.templatetags.asicmon import NOT_REPORTED

register = template.Library()

_BINARY = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")]
_DECIMAL = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def _bytes(value: float, suffix: str = "") -> str:
    for size, name in _BINARY:
        if abs(value) >= size:
            return f"{value / size:.1f} {name}{suffix}"
    return f"{value:.0f} B{suffix}"


def _number(value: float) -> str:
    for size, prefix in _DECIMAL:
        if abs(value) >= size:
            return f"{value / size:.1f}{prefix}"
    return f"{value:.4g}"


@register.filter
def human(value, unit: str) -> str:
    """A counter value with its unit, scaled for people."""
    if value is NOT_REPORTED:
        return NOT_REPORTED
    if value is None or value == "":
        return "–"
    if isinstance(value, list):
        return ", ".join(human(v, unit) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    match unit:
        case "B":
            return _bytes(value)
        case "B/s":
            return _bytes(value, "/s")
        case "1" if isinstance(value, float) and 0.0 <= value <= 1.0:
            return f"{value * 100:.1f} %"
        case "C":
            return f"{value:.1f} °C"
        case "W" | "MHz" | "J" | "lanes":
            return f"{_number(value)} {unit}"
        case "s":
            return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.1f} s"
        case "count/s":
            return f"{_number(value)}/s"
        case _:
            return _number(value)
