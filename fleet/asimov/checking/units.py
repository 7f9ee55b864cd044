"""Units for Asimov's checks: a unit is a product of base dimensions with a scale.

"mW" is watts at scale 1e-3, "J" is watts times seconds, "B/s" is bytes per second, so
``rate()`` of a counter in mJ is in mW and `convert` knows the factor between any two
units of the same dimension.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Unit", "UnitError", "parse_unit"]


class UnitError(ValueError):
    pass


@dataclass(frozen=True)
class Unit:
    dims: tuple[tuple[str, int], ...]  # sorted (dimension, exponent), exponents non-zero
    scale: float = 1.0
    text: str = ""

    def __str__(self) -> str:
        return self.text or _format(self.dims, self.scale)

    def __mul__(self, other: Unit) -> Unit:
        return _make(_combine(self.dims, other.dims, 1), self.scale * other.scale)

    def __truediv__(self, other: Unit) -> Unit:
        return _make(_combine(self.dims, other.dims, -1), self.scale / other.scale)

    def same_dimension(self, other: Unit) -> bool:
        return self.dims == other.dims

    def same(self, other: Unit) -> bool:
        return self.dims == other.dims and math.isclose(self.scale, other.scale, rel_tol=1e-9)

    def factor_to(self, other: Unit) -> float:
        """The number a value in this unit is multiplied by to express it in ``other``."""
        if not self.same_dimension(other):
            raise UnitError(f"cannot convert {self} to {other}")
        return self.scale / other.scale


def _combine(a, b, sign):
    dims = dict(a)
    for d, e in b:
        dims[d] = dims.get(d, 0) + sign * e
    return tuple(sorted((d, e) for d, e in dims.items() if e))


def _make(dims, scale, text=""):
    return Unit(dims, scale, text)


def _format(dims, scale):
    if not dims and scale == 1:
        return "1"
    for name, (d, s) in _BASE.items():
        if d == dims and math.isclose(s, scale, rel_tol=1e-9):
            return name
    num = "*".join(d if e == 1 else f"{d}^{e}" for d, e in dims if e > 0) or "1"
    den = "*".join(d if e == -1 else f"{d}^{-e}" for d, e in dims if e < 0)
    text = f"{num}/{den}" if den else num
    return text if scale == 1 else f"{scale:g}*{text}"


def _dims(**kw):
    return tuple(sorted(kw.items()))


W, S, B, C, N, L, CY = (
    _dims(W=1),
    _dims(s=1),
    _dims(B=1),
    _dims(C=1),
    _dims(count=1),
    _dims(lane=1),
    _dims(cycle=1),
)
J = _dims(W=1, s=1)
HZ = _dims(s=-1)
V = _dims(V=1)

_BASE: dict[str, tuple[tuple, float]] = {
    "1": ((), 1.0),
    "ratio": ((), 1.0),
    "%": ((), 0.01),
    "percent": ((), 0.01),
    "W": (W, 1.0),
    "mW": (W, 1e-3),
    "uW": (W, 1e-6),
    "kW": (W, 1e3),
    "J": (J, 1.0),
    "mJ": (J, 1e-3),
    "uJ": (J, 1e-6),
    "kJ": (J, 1e3),
    "s": (S, 1.0),
    "ms": (S, 1e-3),
    "us": (S, 1e-6),
    "ns": (S, 1e-9),
    "min": (S, 60.0),
    "h": (S, 3600.0),
    "Hz": (HZ, 1.0),
    "kHz": (HZ, 1e3),
    "MHz": (HZ, 1e6),
    "GHz": (HZ, 1e9),
    "B": (B, 1.0),
    "kB": (B, 1e3),
    "MB": (B, 1e6),
    "GB": (B, 1e9),
    "KiB": (B, 1024.0),
    "MiB": (B, 1024.0**2),
    "GiB": (B, 1024.0**3),
    "C": (C, 1.0),
    "mC": (C, 1e-3),
    "cC": (C, 1e-2),
    "count": (N, 1.0),
    "lanes": (L, 1.0),
    "cycles": (CY, 1.0),
    "V": (V, 1.0),
    "mV": (V, 1e-3),
}

KNOWN_UNITS = tuple(_BASE)


def parse_unit(text: str) -> Unit:
    """Parses "W", "mW", "B/s", "count/s", "J/s"... A product of names, optionally "/" one."""
    text = text.strip()
    num, _, den = text.partition("/")
    unit = Unit((), 1.0)
    for part, sign in ((num, 1), (den, -1)):
        if not part:
            if sign == 1:
                raise UnitError(f"unknown unit {text!r}")
            continue
        for name in part.split("*"):
            name = name.strip()
            if name not in _BASE:
                raise UnitError(f"unknown unit {name!r}")
            dims, scale = _BASE[name]
            u = Unit(dims, scale)
            unit = unit * u if sign == 1 else unit / u
    return Unit(unit.dims, unit.scale, text)


PER_SECOND = Unit(S, 1.0, "s")
DIMENSIONLESS = Unit((), 1.0, "1")
