"""Replays started from the dashboard: the uploaded history is checked at once (the page
answers 400 with why), then replayed by a Celery task (`fleet.tasks.run_replay`) that
reports its progress; the status and the figures stay in Redis for a day.
See docs/replay.md for what the figures mean."""

from __future__ import annotations

import json
import uuid

from celery import current_app

from emulator.replay import tuning
from emulator.replay.cli import parse_jobs
from emulator.replay.engine import POLICIES, replay
from emulator.replay.history import Fault, HistoryError, parse_csv, parse_json
from emulator.replay.html import charts
from emulator.replay.model import Settings, settings_with
from emulator.replay.report import summarise
from fleet.redis import get_redis, key

__all__ = ["MAX_BYTES", "REPLAY_TASK", "ReplayError", "run", "start", "status"]

REPLAY_TASK = "fleet.tasks.run_replay"
MAX_BYTES = 5_000_000
TTL_S = 86400


class ReplayError(ValueError):
    """An upload or option the replay cannot take, with why."""


def _key(rid: str, part: str) -> str:
    return key("replay", rid, part)


def _parse(name: str, text: str) -> list[Fault]:
    if name.lower().endswith(".csv"):
        return parse_csv(text, name)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(f"{name}:{exc.lineno}:{exc.colno}: {exc.msg}") from None
    return parse_json(data, name)


def _options(nodes: int, devices_per_node: int, jobs: str, settings: str = ""):
    if not 1 <= nodes <= 100_000 or not 1 <= devices_per_node <= 64:
        raise ReplayError("servers must be 1..100000 and devices per server 1..64")
    base = None
    if settings.strip():
        try:
            data = json.loads(settings)
        except json.JSONDecodeError as exc:
            raise ReplayError(f"settings:{exc.lineno}:{exc.colno}: {exc.msg}") from None
        base = settings_with(data, "settings")
    s = base or Settings()
    s.nodes, s.devices_per_node, s.jobs = nodes, devices_per_node, parse_jobs(jobs)
    return s


def start(name: str, data: bytes, nodes: int = 400, devices_per_node: int = 8, jobs: str = "128,8x30",
          settings: str = "", tune: bool = False) -> str:
    """Checks the history and the options (``settings``: a JSON object of replay settings,
    docs/replay.md; ``tune``: also replay Asicmon's policy over the default grid), keeps
    them, queues the replay; its id."""
    if len(data) > MAX_BYTES:
        raise ReplayError(f"{name}: {len(data):,} bytes, at most {MAX_BYTES:,}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReplayError(f"{name}: not UTF-8 text") from None
    faults = _parse(name, text)
    s = _options(nodes, devices_per_node, jobs, settings)
    servers = len({f.node for f in faults})
    if servers > s.nodes:
        raise ReplayError(f"the history names {servers} servers, the fleet has {s.nodes}")
    if sum(s.jobs) > s.nodes:
        raise ReplayError(f"jobs need {sum(s.jobs)} servers, the fleet has {s.nodes}")
    rid = uuid.uuid4().hex
    options = {"name": name, "nodes": nodes, "devices_per_node": devices_per_node, "jobs": jobs,
               "settings": settings, "tune": bool(tune)}
    r = get_redis()
    with r.pipeline() as p:
        p.set(_key(rid, "history"), text, ex=TTL_S)
        p.set(_key(rid, "options"), json.dumps(options), ex=TTL_S)
        p.set(_key(rid, "status"), json.dumps({"state": "queued", "progress": 0.0}), ex=TTL_S)
        p.execute()
    current_app.send_task(REPLAY_TASK, args=[rid])
    return rid


def _set(rid: str, **fields) -> None:
    get_redis().set(_key(rid, "status"), json.dumps(fields), ex=TTL_S)


def run(rid: str) -> None:
    """The task's body: one policy after another, the progress after each."""
    r = get_redis()
    raw_options, text = r.get(_key(rid, "options")), r.get(_key(rid, "history"))
    if raw_options is None or text is None:
        _set(rid, state="failed", progress=0.0, error="the replay's history expired")
        return
    try:
        options = json.loads(raw_options)
        faults = _parse(options["name"], text.decode())
        s = _options(options["nodes"], options["devices_per_node"], options["jobs"], options.get("settings", ""))
        steps = len(POLICIES) + (1 if options.get("tune") else 0)
        results = {}
        for done, name in enumerate(POLICIES, start=1):
            _set(rid, state="running", progress=(done - 1) / (steps + 1), policy=name)
            results.update(replay(faults, s, [name]))
        summary = summarise(results, faults, s)
        grid = None
        if options.get("tune"):
            _set(rid, state="running", progress=len(POLICIES) / (steps + 1), policy="tuning")
            rows = tuning.tune(faults, s)
            grid = {"rows": rows, "best": tuning.best(rows)}
    except (HistoryError, ValueError) as exc:
        _set(rid, state="failed", progress=0.0, error=str(exc))
        return
    _set(rid, state="done", progress=1.0, summary=summary, charts=charts(summary), grid=grid)
    r.delete(_key(rid, "history"))


def status(rid: str) -> dict | None:
    raw = get_redis().get(_key(rid, "status"))
    return None if raw is None else json.loads(raw)
