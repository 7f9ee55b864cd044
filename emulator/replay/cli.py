"""``python -m emulator replay HISTORY [--nodes 400 --devices-per-node 8] [--jobs 128,8x30]
[--settings FILE] [--policies asicmon,none,reboot] [--json] [--html OUT] [--grid [FILE]]``, or ``--rates llama3 [--days 54]
[--seed 1]`` for a history drawn from published rates instead of HISTORY."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from emulator.replay import tuning
from emulator.replay.engine import POLICIES, Settings, replay
from emulator.replay.history import DAY, HistoryError, load_history
from emulator.replay.html import write_html
from emulator.replay.model import settings_with
from emulator.replay.rates import BUILT_IN, draw_history, load_rates
from emulator.replay.report import summarise, text

__all__ = ["add_replay_command", "parse_jobs", "replay_command", "settings_from"]


def parse_jobs(raw: str) -> tuple[int, ...]:
    """``128,8x30``: one job of 128 servers and thirty of 8."""
    sizes: list[int] = []
    for part in filter(None, (p.strip() for p in raw.split(","))):
        size, _, count = part.partition("x")
        try:
            n, k = int(size), int(count or 1)
        except ValueError:
            raise ValueError(f"--jobs: {part!r} is not SIZE or SIZExCOUNT") from None
        if n < 1 or k < 1:
            raise ValueError(f"--jobs: {part!r}: sizes and counts are at least 1")
        sizes += [n] * k
    return tuple(sizes)


def _read_json(path: str):
    """A JSON file's value; ValueError saying where it cannot be read."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: {exc.msg}") from None


def settings_from(path: str | None, **overrides) -> Settings:
    s = settings_with(_read_json(path), path) if path else Settings()
    for k, v in overrides.items():
        if v is not None:
            setattr(s, k, v)
    return s


def add_replay_command(sub) -> None:
    p = sub.add_parser("replay", help="replay a fault history against repair policies on a virtual clock")
    p.add_argument("history", nargs="?", help="the shared trace's JSON, or a CSV node,start,end,class,description (days)")
    p.add_argument("--rates", help=f"draw the history from fault rates per GPU-hour: {', '.join(BUILT_IN)} or a JSON file")
    p.add_argument("--days", type=float, help="with --rates: days to draw (default: the rates' own)")
    p.add_argument("--seed", type=int, default=1, help="with --rates: the draw's seed")
    p.add_argument("--nodes", type=int, help="servers in the fleet (default 400)")
    p.add_argument("--devices-per-node", type=int, help="devices per server (default 8)")
    p.add_argument("--jobs", help="job sizes in servers, e.g. 128,8x30 (the rest are spares)")
    p.add_argument("--settings", help="a JSON file of replay settings (docs/replay.md)")
    p.add_argument("--policies", default=",".join(POLICIES), help="which policies, side by side")
    p.add_argument("--json", action="store_true", help="the figures as JSON")
    p.add_argument("--html", metavar="OUT", help="also write the report as one HTML file with charts")
    p.add_argument("--grid", nargs="?", const="default", help="tune: Asicmon's policy over a grid of settings "
                   "(a JSON file {setting: [values]}; default: attempts, breaker share, offender incidents)")


def _history(args: argparse.Namespace, s: Settings):
    if bool(args.history) == bool(args.rates):
        raise ValueError("give either HISTORY or --rates")
    if args.history:
        if args.days is not None:
            raise ValueError("--days goes with --rates (a history has its own span)")
        return load_history(args.history)
    rates = load_rates(args.rates)
    days = args.days or rates["days"]
    if days <= 0:
        raise ValueError("--days must be above 0")
    s.horizon_s = days * DAY
    return draw_history(rates, s.nodes, s.devices_per_node, days, args.seed)


def replay_command(args: argparse.Namespace) -> int:
    try:
        jobs = parse_jobs(args.jobs) if args.jobs else None
        s = settings_from(args.settings, nodes=args.nodes, devices_per_node=args.devices_per_node, jobs=jobs)
        faults = _history(args, s)
        if args.grid:
            rows = tuning.tune(faults, s, _grid(args.grid))
            print(json.dumps({"rows": rows, "best": tuning.best(rows)}, indent=2) if args.json else tuning.text(rows))
            return 0
        policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
        summary = summarise(replay(faults, s, policies), faults, s)
        if args.html:
            write_html(summary, args.html)
    except OSError as exc:
        print(f"replay: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except (HistoryError, ValueError) as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2) if args.json else text(summary))
    return 0


def _grid(raw: str) -> dict | None:
    if raw == "default":
        return None
    data = _read_json(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{raw}: expected {{setting: [values]}}")
    return data
