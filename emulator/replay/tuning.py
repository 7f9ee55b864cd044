"""The same history replayed under Asicmon's policy over a small grid of ladder, breaker and
offender settings, with the best by ETTR and by false pulls, so that an operator can choose
settings on their own history before turning automation on."""

from __future__ import annotations

import dataclasses
import itertools

from emulator.replay.engine import Settings, replay
from emulator.replay.history import Fault
from emulator.replay.model import settings_with
from emulator.replay.report import summarise

__all__ = ["DEFAULT_GRID", "best", "text", "tune"]

DEFAULT_GRID = {
    "max_attempts": [2, 3, 4],
    "breaker_share": [0.05, 0.1, 0.2],
    "offender_incidents": [2, 3, 4],
}


def tune(faults: list[Fault], base: Settings, grid: dict[str, list] | None = None) -> list[dict]:
    grid = grid or DEFAULT_GRID
    names = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(grid) - names)
    if unknown:
        raise ValueError(f"grid: unknown settings {', '.join(unknown)}")
    if any(not isinstance(v, list) or not v for v in grid.values()):
        raise ValueError("grid: each setting takes a non-empty list of values")
    rows = []
    for values in itertools.product(*grid.values()):
        chosen = dict(zip(grid, values, strict=True))
        s = settings_with(chosen, "grid", base)
        p = summarise(replay(faults, s, ["asicmon"]), faults, s)["policies"]["asicmon"]
        rows.append({"settings": chosen, "ettr": p["ettr"], "device_hours_in_service": p["device_hours_in_service"],
                     "false_pulls": p["false_pulls"], "pulled_devices": p["pulled_devices"],
                     "escalations_to_person": p["escalations_to_person"], "breaker_trips": p["breaker_trips"],
                     "flagged": (p["offenders"] or {}).get("flagged", 0)})
    return rows


def best(rows: list[dict]) -> dict:
    """The best row by ETTR (then device-hours), and by false pulls (then ETTR)."""
    return {
        "by_ettr": max(rows, key=lambda r: (r["ettr"], r["device_hours_in_service"])),
        "by_false_pulls": min(rows, key=lambda r: (r["false_pulls"], -r["ettr"])),
    }


def text(rows: list[dict]) -> str:
    keys = list(rows[0]["settings"]) if rows else []
    lines = ["  ".join(f"{k:>18}" for k in keys) + f"{'ETTR %':>10}{'device-h in service':>21}{'pulled':>8}"
             f"{'false':>7}{'person':>8}{'trips':>7}{'flagged':>9}"]
    for r in rows:
        lines.append("  ".join(f"{r['settings'][k]!s:>18}" for k in keys)
                     + f"{100 * r['ettr']:>10.3f}{r['device_hours_in_service']:>21,.0f}{r['pulled_devices']:>8}{r['false_pulls']:>7}"
                     + f"{r['escalations_to_person']:>8}{r['breaker_trips']:>7}{r['flagged']:>9}")
    if rows:
        b = best(rows)
        lines += ["", f"best by ETTR: {b['by_ettr']['settings']} ({100 * b['by_ettr']['ettr']:.3f} %)",
                  f"best by false pulls: {b['by_false_pulls']['settings']} ({b['by_false_pulls']['false_pulls']} false pulls)"]
    return "\n".join(lines)
