"""How the advisor writes times, shares and counts, so that the CLI, the API and the trace
page read the same sentences: durations in µs, ms or s chosen by size (as the page's
``us_human`` filter), times relative to the trace's start, shares as percentages."""

from __future__ import annotations


def duration(ns: float) -> str:
    """A duration in µs, ms or s by its size: 12.3 µs, 4.56 ms, 1.23 s."""
    v = float(ns) / 1000.0
    if abs(v) >= 1e6:
        return f"{v / 1e6:,.2f} s"
    if abs(v) >= 1e3:
        return f"{v / 1e3:,.2f} ms"
    return f"{v:,.1f} µs"


def duration_us(value_us: float) -> str:
    """:func:`duration` of a value in microseconds."""
    return duration(float(value_us) * 1000.0)


def at(ns: float, origin_ns: int) -> str:
    """A moment as the time since the trace's start ("at 1.23 s")."""
    return duration(max(float(ns) - origin_ns, 0.0))


def window(a_ns: float, b_ns: float, origin_ns: int) -> str:
    """A time window relative to the trace's start: "1.20 s to 1.35 s"."""
    return f"{at(a_ns, origin_ns)} to {at(b_ns, origin_ns)}"


def share(x: float) -> str:
    """A share as a percentage: 42%, or 0.4% under one percent."""
    return f"{x:.0%}" if x >= 0.01 or x == 0 else f"{x:.1%}"


def times(count: float, per: str = "") -> str:
    """A count as words: "once", "twice", "12 times" (per step, where given)."""
    n = round(count, 1)
    word = "once" if n == 1 else "twice" if n == 2 else f"{n:,.0f} times" if n >= 1 else f"{n:g} times"
    return f"{word} {per}".rstrip()


def plural(count: int, noun: str, many: str | None = None) -> str:
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
