"""A history drawn from published fault rates per GPU-hour (``llama3_mix.json`` beside this
file: the Llama 3 mix, with its source), for fleets that have no history of their own."""

from __future__ import annotations

import json
import random
from pathlib import Path

from emulator.replay.history import DAY, Fault, HistoryError

__all__ = ["BUILT_IN", "draw_history", "load_rates"]

BUILT_IN = {"llama3": Path(__file__).with_name("llama3_mix.json")}


def load_rates(name_or_path: str) -> dict:
    path = BUILT_IN.get(name_or_path, Path(name_or_path))
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise HistoryError(f"{path}: {exc.strerror} (built-in rates: {', '.join(BUILT_IN)})") from None
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    try:
        gpu_hours = float(data["gpus"]) * float(data["days"]) * 24
        rows = {kind: (float(row["count"]) / gpu_hours, float(row["repair_h"])) for kind, row in data["classes"].items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise HistoryError(f"{path}: expected gpus, days and classes with count and repair_h ({exc})") from None
    return {"source": data.get("source", ""), "per_gpu_hour": rows, "days": float(data["days"])}


def draw_history(rates: dict, nodes: int, devices_per_node: int, days: float, seed: int = 1) -> list[Fault]:
    """Faults of each class as a Poisson process over the fleet's GPUs for ``days``, each on a
    server drawn uniformly, back after the class's repair time."""
    rng = random.Random(seed)
    gpus = nodes * devices_per_node
    horizon = days * DAY
    faults = []
    for kind, (rate, repair_h) in sorted(rates["per_gpu_hour"].items()):
        per_s = rate * gpus / 3600
        t = rng.expovariate(per_s) if per_s > 0 else horizon
        while t < horizon:
            faults.append(Fault(f"node-{rng.randrange(nodes):05d}", t, t + repair_h * 3600, kind))
            t += rng.expovariate(per_s)
    return sorted(faults, key=lambda f: (f.start_s, f.node))
