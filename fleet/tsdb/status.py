"""The spools' state, shared through Redis: what waits, why, what failed and what was lost.

Each poll worker and agent host has a spool of its own, on its own disk; the web processes
that show the fleet page's banner and serve /metrics may run elsewhere. So each writer tells
Redis what its write did (`RedisMonitor.record`, one pipelined round trip a write), in one
hash per spool (named `<host>:<folder>`), and the pages read them all (`spools()`).

This module (like the package's __init__) reads the settings; the rest of fleet/tsdb does not.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleet.tsdb.sending import WARN_EVERY_S, Monitor, Report

log = logging.getLogger(__name__)

KEEP_S = 7 * 24 * 3600  # a spool not heard of for a week is forgotten
LOSS_SHOWN_S = 3600  # the banner names samples lost within the last hour
TEXT_MAX = 300


def _keys(spool: str | None = None) -> str:
    from fleet.redis import key

    return key("tsdb-spool", spool) if spool else key("tsdb-spools")


def spool_name(folder: Path) -> str:
    return f"{socket.gethostname()}:{folder}"


class RedisMonitor(Monitor):
    """A writer's monitor that keeps its spool's state in Redis, and lets one process a
    minute warn in the log for the spool (whichever sets the key first)."""

    def __init__(self, folder: Path):
        self.name = spool_name(folder)

    def may_warn(self, folder: Path) -> bool:
        from fleet.redis import get_redis

        try:
            return bool(get_redis().set(_keys(self.name) + ":warned", 1, nx=True, ex=int(WARN_EVERY_S)))
        except Exception:  # noqa: BLE001 (Redis away: this process's own pace)
            return super().may_warn(folder)

    def record(self, report: Report) -> bool:
        from fleet.redis import get_redis

        key = _keys(self.name)
        pipe = get_redis().pipeline(transaction=False)
        pipe.hset(key, mapping={"batches": report.batches, "bytes": report.bytes, "reported_at": report.at})
        for reason, n in Counter(reason for reason, _ in report.failures).items():
            pipe.hincrby(key, f"failures:{reason}", n)
        if report.failures:
            reason, message = report.failures[-1]
            pipe.hset(key, mapping={"last_failure_at": report.at, "last_failure": f"{reason}: {message}"[:TEXT_MAX]})
        lost = Counter()
        for drop in report.drops:
            lost[drop.kind] += drop.samples
        for kind, n in lost.items():
            pipe.hincrby(key, f"lost:{kind}", n)
        if report.drops:
            last = report.drops[-1]
            text = f"{sum(lost.values())} samples: {last.reason}"[:TEXT_MAX]
            pipe.hset(key, mapping={"last_loss_at": report.at, "last_loss": text})
        cleared = None
        if report.refused:
            pipe.hsetnx(key, "failing_since", report.at)
            pipe.hset(key, "refused", ": ".join(report.refused)[:TEXT_MAX])
        elif report.written:
            cleared = len(pipe)
            pipe.hdel(key, "failing_since")
        if report.written:
            pipe.hset(key, "last_success_at", report.at)
        pipe.expire(key, KEEP_S)
        pipe.sadd(_keys(), self.name)
        done = pipe.execute()
        return cleared is not None and bool(done[cleared])


@dataclass(frozen=True)
class SpoolState:
    """One spool as its writers last told it."""

    spool: str
    batches: int
    bytes: int
    reported_at: float
    last_success_at: float | None
    last_failure_at: float | None
    last_failure: str
    failing_since: float | None  # the store refuses this spool's batches since then
    refused: str
    failures: dict[str, int]  # failed requests by reason
    lost: dict[str, int]  # samples lost by kind
    last_loss_at: float | None
    last_loss: str

    @property
    def refusing(self) -> bool:
        return self.failing_since is not None

    @property
    def lost_recently(self) -> bool:
        return self.last_loss_at is not None and time.time() - self.last_loss_at < LOSS_SHOWN_S

    @property
    def mib(self) -> float:
        return self.bytes / (1 << 20)

    @property
    def since(self) -> datetime | None:
        return _datetime(self.failing_since)

    @property
    def last_written(self) -> datetime | None:
        return _datetime(self.last_success_at)

    @property
    def lost_at(self) -> datetime | None:
        return _datetime(self.last_loss_at)


def _datetime(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def _state(name: str, raw: dict[bytes, bytes]) -> SpoolState:
    fields = {k.decode(): v.decode() for k, v in raw.items()}

    def number(name: str) -> float | None:
        return float(fields[name]) if name in fields else None

    def counts(prefix: str) -> dict[str, int]:
        return {k.removeprefix(prefix): int(v) for k, v in sorted(fields.items()) if k.startswith(prefix)}

    return SpoolState(
        spool=name, batches=int(fields.get("batches", 0)), bytes=int(fields.get("bytes", 0)),
        reported_at=number("reported_at") or 0.0, last_success_at=number("last_success_at"),
        last_failure_at=number("last_failure_at"), last_failure=fields.get("last_failure", ""),
        failing_since=number("failing_since"), refused=fields.get("refused", ""),
        failures=counts("failures:"), lost=counts("lost:"), last_loss_at=number("last_loss_at"),
        last_loss=fields.get("last_loss", ""),
    )


def spools() -> list[SpoolState]:
    """Every spool heard of in the last week, by name (two Redis round trips)."""
    from fleet.redis import get_redis

    client = get_redis()
    names = sorted(n.decode() for n in client.smembers(_keys()))
    if not names:
        return []
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(_keys(name))
    found, gone = [], []
    for name, raw in zip(names, pipe.execute(), strict=True):
        if raw:
            found.append(_state(name, raw))
        else:
            gone.append(name)
    if gone:
        client.srem(_keys(), *gone)
    return found


def needing_attention() -> list[SpoolState]:
    """The spools the fleet page's banner names: the store refuses their batches, or they
    lost samples within the last hour. Empty (and logged) when Redis cannot say."""
    try:
        return [s for s in spools() if s.refusing or s.lost_recently]
    except Exception:
        log.exception("the time-series spools' state could not be read")
        return []
