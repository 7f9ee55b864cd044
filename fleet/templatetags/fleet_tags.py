"""The fleet pages' template tags: counter values formatted, in human units (GiB, not
5322227914 B) on the device page. The key counters format by their table
(fleet.reading.key_counters), which static/dashboard/js/lib/format.js reads too."""

from django import template
from django.utils.html import json_script

from fleet.agent import queues
from fleet.reading import key_counters as table
from fleet.reading.key_counters import NOT_REPORTED, KeyCounter, reported

register = template.Library()


def _blank(value) -> bool:
    return value is None or value == ""


@register.simple_tag
def key_counters() -> tuple[KeyCounter, ...]:
    """``{% key_counters as counters %}``: the key counters, in column order."""
    return table.KEY_COUNTERS


@register.simple_tag
def key_counters_script():
    """The key-counter table as JSON for the page JavaScript (``<script id="key-counters">``)."""
    return json_script(table.key_counters_json(), "key-counters")


@register.filter
def key_value(snapshot, key_counter: KeyCounter) -> str:
    """``{{ snapshot|key_value:counter }}``: a key counter of a snapshot, formatted."""
    return key_counter.format(reported(snapshot, key_counter.name))


@register.filter
def agent_status(host):
    return queues.agent_status(host)


@register.filter
def counter(snapshot, name):
    """A counter of a snapshot; "not reported" when the driver answered without it (the
    device cannot give it), None when nothing is known (never polled, or no answer)."""
    return reported(snapshot, name)


@register.filter
def counter_value(value):
    """A counter value for a table: floats to four significant digits, lists shortened."""
    if value is NOT_REPORTED:
        return NOT_REPORTED
    if _blank(value):
        return "–"
    if isinstance(value, list):
        return ", ".join(str(counter_value(v)) for v in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return value


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
