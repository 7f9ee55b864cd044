"""The per-family tables of a kernel performance model (`kernel_model`): what the fit learns
per kernel family on top of its class curves, as plain data that goes to and from JSON
(``python -m emulator fit --json`` prints it as ``families``; ``python -m traces.atrace
whatif --model`` reads it back); and the model itself read back from that JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .kernel_sizes import OP_CLASSES

__all__ = ["Detail", "detail_from_json", "model_from_json", "stem"]


@dataclass
class Detail:
    """What the fit learned per kernel family, on top of the class curves: each family's
    efficiency curve (its kernels' time over the class curve's, as a function of size, the
    log ratio interpolated between the sizes seen and flat beyond them), the median time of
    each (family, launch), each family's time over threads launched and its median, the
    median of each family template (`stem`) and each class's time per output element of its
    tiles (`kernel_sizes.tile_work`), for kernels without a size; and the curve of each group
    of classes (`kernel_model.GROUPS`)."""

    curves: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # family -> (log size, log ratio)
    launches: dict[str, float] = field(default_factory=dict)  # family|launch -> median µs
    medians: dict[str, float] = field(default_factory=dict)  # family -> median µs
    groups: dict[str, dict[str, float]] = field(default_factory=dict)  # GROUPS name -> curve
    by_threads: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # family -> (log threads, log µs)
    stems: dict[str, float] = field(default_factory=dict)  # `stem` -> median µs
    tile_rates: dict[str, float] = field(default_factory=dict)  # class -> median µs per output element

    def to_dict(self) -> dict[str, Any]:
        return {"groups": self.groups,
                "by_threads": {f: [list(map(_r, x)), list(map(_r, y))] for f, (x, y) in self.by_threads.items()},
                "curves": {f: [list(map(_r, x)), list(map(_r, y))] for f, (x, y) in self.curves.items()},
                "launches": {k: _r(v) for k, v in self.launches.items()},
                "medians": {k: _r(v) for k, v in self.medians.items()},
                "stems": {k: _r(v) for k, v in self.stems.items()},
                "tile_rates": {k: _r(v) for k, v in self.tile_rates.items()}}

    @staticmethod
    def from_dict(data: Any) -> Detail:
        if not isinstance(data, dict):
            raise ValueError("families: expected {curves: ..., launches: ..., medians: ...}")
        try:
            curves = {str(f): ([float(v) for v in x], [float(v) for v in y])
                      for f, (x, y) in (data.get("curves") or {}).items()}
            launches = {str(k): float(v) for k, v in (data.get("launches") or {}).items()}
            medians = {str(k): float(v) for k, v in (data.get("medians") or {}).items()}
            groups = {str(g): {str(k): float(v) for k, v in p.items()} for g, p in (data.get("groups") or {}).items()}
            by_threads = {str(f): ([float(v) for v in x], [float(v) for v in y])
                          for f, (x, y) in (data.get("by_threads") or {}).items()}
            stems = {str(k): float(v) for k, v in (data.get("stems") or {}).items()}
            tile_rates = {str(k): float(v) for k, v in (data.get("tile_rates") or {}).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"families: not numbers where numbers belong ({exc})") from None
        if any("latency_us" not in p for p in groups.values()):
            raise ValueError("families: a group's curve needs a latency_us")
        for f, (x, y) in [*curves.items(), *by_threads.items()]:
            if not x or len(x) != len(y) or any(b <= a for a, b in zip(x, x[1:])):
                raise ValueError(f"families: the curve of {f!r} needs increasing points, as many x as y")
        return Detail(curves, launches, medians, groups, by_threads, stems, tile_rates)


def stem(family: str) -> str:
    """A family without its template arguments: the families of one kernel template
    (``fft2d_r2c_32x32<float, false, 5u, true>`` and ``<float, false, 0u, false>``)."""
    return family.split("<", 1)[0]


def detail_from_json(data: Any) -> Detail | None:
    """The family tables of ``fit --json``'s output (its ``families``), None when it has none;
    ValueError saying what is wrong otherwise."""
    families = data.get("families") if isinstance(data, dict) else None
    return None if families is None else Detail.from_dict(families)


def model_from_json(data: Any) -> dict[str, dict[str, float]]:
    """A model from JSON: ``{"model": {class: params}}`` (what ``fit --json`` prints) or the
    class -> parameters mapping itself; ValueError saying what is wrong otherwise."""
    model = data.get("model", data) if isinstance(data, dict) else None
    if not isinstance(model, dict) or not model:
        raise ValueError("expected a performance model: {class: {latency_us: ..., ...}}")
    for c, p in model.items():
        if c not in OP_CLASSES:
            raise ValueError(f"unknown operator class {c!r} (one of {', '.join(OP_CLASSES)})")
        if not isinstance(p, dict) or not isinstance(p.get("latency_us"), int | float):
            raise ValueError(f"class {c!r} needs a numeric latency_us")
        for key in ("tflops", "gbps", "fallback_us"):
            if p.get(key) is not None and (not isinstance(p[key], int | float) or p[key] < 0):
                raise ValueError(f"class {c!r}: {key} must be a number >= 0")
    return model


def _r(v: float) -> float:
    return float(f"{v:.6g}")
