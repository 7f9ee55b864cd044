"""What the monitor modules Asimov generates call: C-style call conventions and the small
parsing and arithmetic helpers a spec's expressions compile to.

The monitor itself (stats cache, refresh under a time budget, rates) is
`fleet.asicmon.monitor.DeviceMonitor`; a generated module subclasses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleet.asicmon.monitor import DeviceMonitor

__all__ = [
    "DeviceMonitor",
    "DriverStatusError",
    "Out",
    "clamp",
    "field",
    "flags",
    "hex_int",
    "mean",
    "parse_unit",
    "regex_field",
    "text_value",
    "words",
]


class DriverStatusError(Exception):
    """A C-style driver call returned a status other than OK."""

    def __init__(self, status: int, function: str) -> None:
        super().__init__(f"{function} returned status {status}")
        self.status = status
        self.function = function


class Out:
    """An out-parameter for C-style calls: the callee writes ``value``."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = None


# -- helpers the generated code calls -------------------------------------------------------


def parse_unit(text: str, unit: str) -> float:
    """ "1234 mW" -> 1234 when unit is "mW"; the suffix must be the one the spec expects."""
    number, _, suffix = text.strip().partition(" ")
    if suffix.strip() != unit:
        raise ValueError(f"expected a value in {unit}, got {text.strip()!r}")
    return _number(number)


def _number(text: str) -> float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def regex_field(pattern: re.Pattern, text: str, convert: Callable[[str], Any]) -> Any:
    m = pattern.search(text)
    if m is None:
        raise ValueError(f"{pattern.pattern!r} does not match {text.strip()[:60]!r}")
    return convert(m.group(1))


def field(text: str, key: str, convert: Callable[[str], Any]) -> Any:
    """The value after ``key`` in "key value" or "key: value" text (first occurrence as a word)."""
    for line in text.splitlines():
        words = line.replace(":", " ").split()
        for i, w in enumerate(words[:-1]):
            if w == key:
                return convert(words[i + 1])
    raise ValueError(f"no field {key!r} in {text.strip()[:60]!r}")


def words(text: str, key: str, convert: Callable[[str], Any]) -> list:
    """All values after ``key`` on its line: "busy_us: 12 40 7" -> [12, 40, 7]."""
    for line in text.splitlines():
        head, _, rest = line.partition(":") if ":" in line else line.partition(" ")
        if head.strip() == key:
            return [convert(w) for w in rest.split()]
    raise ValueError(f"no line {key!r} in {text.strip()[:60]!r}")


def hex_int(text: str) -> int:
    return int(text.strip(), 16)


def text_value(text: str) -> str:
    return text.strip()


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)


def clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


def flags(mask: int, names: Mapping[int, str], none: str = "none") -> str:
    """Names of the bits set in ``mask``, comma-joined in bit order, or ``none``."""
    found = [name for bit, name in sorted(names.items()) if mask & bit]
    return ",".join(dict.fromkeys(found)) if found else none
