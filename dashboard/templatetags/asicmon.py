"""Formatting of counter values; static/dashboard/js/live.js formats the same way."""

from django import template

register = template.Library()


def _blank(value) -> bool:
    return value is None or value == ""


@register.filter
def percent(value):
    return "–" if _blank(value) else f"{float(value) * 100:.0f}%"


@register.filter
def celsius(value):
    return "–" if _blank(value) else f"{float(value):.1f} °C"


@register.filter
def watts(value):
    return "–" if _blank(value) else f"{float(value):.0f} W"


@register.filter
def gib(value):
    return "–" if _blank(value) else f"{float(value) / 2**30:.1f} GiB"


@register.filter
def get_item(mapping, key):
    return None if mapping is None else mapping.get(key)


@register.filter
def counter_value(value):
    """A counter value for a table: floats to four significant digits, lists shortened."""
    if _blank(value):
        return "–"
    if isinstance(value, list):
        return ", ".join(str(counter_value(v)) for v in value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return value
