"""Formatting of counter values. The key counters format by their table
(fleet.key_counters), which static/dashboard/js/lib/format.js reads too."""

from django import template
from django.utils.html import json_script

from fleet import key_counters as table
from fleet.key_counters import NOT_REPORTED, KeyCounter, reported

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
    from fleet.routing import agent_status

    return agent_status(host)


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
