"""Sending batches to the store, through the spool whenever the store does not take them.

The requests go straight to the store when nothing is waiting; otherwise, or when the
store does not take them now, they wait in the spool (fleet/tsdb/buffer.py) and every
later request queues behind them, so that the store receives each writer's cycles in order.

What the store's answer means for a request:

- taken (2xx): written;
- malformed (400, 422: the store cannot read it, or refuses some of its samples, as
  Prometheus refuses a whole request for one sample out of order): the request is split in
  two and each half sent again, down to single series, so that only the series the store
  refuses are dropped (each logged with the store's words, in dropped.log) and the others
  written; at most MAX_SPLIT_REQUESTS requests a batch, then the rest of what is refused is
  dropped whole, said so;
- too large (413, a proxy's body limit): split the same way, down to single series; what is
  still refused waits in the spool;
- anything else (401, 403, 404 after a credential rotation or a misrouted proxy, other 4xx,
  5xx, 408/429, no answer in time, connection refused): not the request's fault, so it waits
  in the spool, in order, until the store takes it; nothing is dropped but by the spool's
  bound.

While the store refuses, the writer says so loudly but not often: one warning a minute for a
spool (the `Monitor` decides; fleet/tsdb/status.py shares it through Redis with the fleet
page's banner and /metrics), and once when the store takes writes again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet.tsdb.buffer import Batch, Drop, Spool
from fleet.tsdb.client import MALFORMED, Client, TsdbError
from fleet.tsdb.split import halves

log = logging.getLogger("fleet.tsdb.writes")

MAX_SPLIT_REQUESTS = 256  # a batch's requests while splitting it (a bad series among 50k takes ~32)
WARN_EVERY_S = 60.0


@dataclass(frozen=True)
class WriteResult:
    """What became of a batch: written now, waiting in the spool, or dropped."""

    written: int = 0  # samples the store took now (this batch's and spooled ones)
    buffered: int = 0  # samples of this batch left waiting in the spool
    rejected: int = 0  # samples the store refused as malformed (its message logged), never retried
    waiting: int = 0  # batches in the spool afterwards
    kept: int = 0  # samples of this batch now in the store or waiting for it
    lost: int = 0  # samples dropped for another reason: the spool full, its disk full


@dataclass(frozen=True)
class Report:
    """What one write or flush did, for the spool's monitor."""

    folder: Path
    written: int  # samples the store took
    failures: list[tuple[str, str]]  # (reason, the store's words) of each request that failed
    refused: tuple[str, str] | None  # why batches still wait, if the store refused the last one sent
    drops: list[Drop]
    batches: int  # in the spool afterwards
    bytes: int
    at: float = field(default_factory=time.time)


class Monitor:
    """Told what each write did; keeps the log quiet (one warning a minute per spool, in this
    process). fleet/tsdb/status.py's shares the state through Redis."""

    _warned: dict[Path, float] = {}  # noqa: RUF012 (per process, on purpose)
    _failing: set[Path] = set()  # noqa: RUF012

    def may_warn(self, folder: Path) -> bool:
        now = time.monotonic()
        if now - self._warned.get(folder, -WARN_EVERY_S) < WARN_EVERY_S:
            return False
        self._warned[folder] = now
        return True

    def record(self, report: Report) -> bool:
        """Note the report; True when the store takes writes again after refusing them."""
        if report.refused:
            self._failing.add(report.folder)
            return False
        if report.written and report.folder in self._failing:
            self._failing.discard(report.folder)
            return True
        return False


@dataclass
class _Run:
    written: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    refused: tuple[str, str] | None = None
    own: dict[Path, int] = field(default_factory=dict)  # spool files holding this write's samples
    touched: bool = False  # anything sent or kept yet


_started: set[Path] = set()  # spools this process has cleaned at start
_MONITOR_TROUBLE = Path("<monitor>")  # the key of the monitor's own warnings' pace


class Writer:
    """Sends batches to the store, through the spool whenever the store cannot take them now."""

    def __init__(self, client: Client, spool: Spool, *, flush_budget_s: float = 1.0, monitor: Monitor | None = None):
        self.client = client
        self.spool = spool
        self.flush_budget_s = flush_budget_s
        self.monitor = monitor or Monitor()
        if spool.folder not in _started:
            _started.add(spool.folder)
            spool.clean_temporaries()

    def write(self, batch: Batch | list[Batch]) -> WriteResult:
        """Send a cycle's batches (or spool them behind those waiting), then send what
        waits, within the budget."""
        batches = [b for b in ([batch] if isinstance(batch, Batch) else batch) if b.samples]
        if not batches:
            return WriteResult(waiting=self.spool.count())
        run = _Run()
        try:
            with self.spool.lock(blocking=False) as held:
                # Nothing waits: the cycle goes to the store now, even while another process
                # (another shard's poll on this host) holds the lock to send its own; what the
                # store does not take joins the spool (appending takes the lock to make room).
                if self.spool.count() == 0:
                    self._send_cycle(batches, run)
                else:
                    self._keep(batches, run, None)
                    if held:
                        self._drain(time.monotonic() + self.flush_budget_s, run)
        except OSError as exc:  # the spool's folder or lock cannot be made: nothing was sent or kept
            if run.touched:
                raise
            for each in batches:
                self.spool.note_dropped(each, f"the spool cannot be used: {exc}", "spool_error")
        drops, waiting = self._finish(run)
        own_drops = [d for d in drops if d.entry is None or d.entry in run.own]
        return WriteResult(
            written=run.written,
            buffered=sum(n for entry, n in run.own.items() if entry.exists()),
            rejected=sum(d.samples for d in drops if d.kind == "malformed"),
            lost=sum(d.samples for d in drops if d.kind != "malformed"),
            waiting=waiting,
            kept=sum(b.samples for b in batches) - sum(d.samples for d in own_drops),
        )

    def flush(self, budget_s: float | None = None) -> WriteResult:
        """Send waiting batches, oldest first, until the spool is empty, the store fails or
        the budget is spent. Does nothing while another writer holds the spool."""
        budget = self.flush_budget_s if budget_s is None else budget_s
        run = _Run()
        with self.spool.lock(blocking=False) as held:
            if held:
                self.spool.clean_temporaries()
                self._drain(time.monotonic() + budget, run)
        drops, waiting = self._finish(run)
        return WriteResult(written=run.written, rejected=sum(d.samples for d in drops if d.kind == "malformed"),
                           lost=sum(d.samples for d in drops if d.kind != "malformed"), waiting=waiting)

    # --- Sending -----------------------------------------------------------------------------

    def _send_cycle(self, batches: list[Batch], run: _Run) -> None:
        """Nothing waits: each batch straight to the store; from the first it does not take,
        that and the rest to the spool."""
        for n, each in enumerate(batches):
            keep = self._send(each, None, run, time.monotonic() + self.flush_budget_s, self.client.write_timeout_s)
            if keep:
                self._keep([*keep, *batches[n + 1:]], run, None)
                return

    def _drain(self, deadline: float, run: _Run) -> None:
        """Send the spool's batches oldest first until one is not taken or time is up."""
        for entry in self.spool.entries():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            batch = self.spool.read(entry)
            if batch is None:
                continue
            keep = self._send(batch, entry, run, deadline, min(left, self.client.write_timeout_s))
            unchanged = len(keep) == 1 and keep[0] is batch
            if not unchanged:
                self._keep(keep, run, entry)  # what is left of it waits in its place
                self.spool.remove(entry)
            if keep:
                break

    def _send(self, batch: Batch, entry: Path | None, run: _Run, deadline: float, timeout: float) -> list[Batch]:
        """Send one batch, split where the store calls a part malformed or too large; returns
        what is left to keep, in order (nothing when all was written or dropped). The first
        request always goes; its parts while time is left."""
        pending = [batch]
        requests = 0
        while pending:
            part = pending[0]
            if requests:
                timeout = min(deadline - time.monotonic(), self.client.write_timeout_s)
                if timeout <= 0:
                    return pending
            requests += 1
            run.touched = True
            try:
                self.client.write(part.body, timeout_s=timeout)
            except TsdbError as exc:
                run.failures.append((exc.reason, str(exc)))
                splits = exc.status in (*MALFORMED, 413) and requests < MAX_SPLIT_REQUESTS
                pieces = halves(part) if splits else []
                if pieces:
                    pending[0:1] = pieces
                elif exc.status in MALFORMED:
                    why = "" if requests < MAX_SPLIT_REQUESTS else f" (not split further: {requests} requests)"
                    self.spool.note_dropped(part, f"rejected by the store{why}: {exc}", "malformed", entry)
                    pending.pop(0)
                else:
                    run.refused = (exc.reason, str(exc))
                    return pending
                continue
            pending.pop(0)
            run.written += part.samples
            run.refused = None
        return []

    def _keep(self, batches: list[Batch], run: _Run, origin: Path | None) -> None:
        """Into the spool; files of this write's own samples noted as such."""
        for each in batches:
            run.touched = True
            entry = self.spool.append(each, origin)
            if entry is not None and (origin is None or origin in run.own):
                run.own[entry] = each.samples

    # --- Saying what happened ---------------------------------------------------------------

    def _finish(self, run: _Run) -> tuple[list[Drop], int]:
        """Tell the monitor, warn (not too often) while the store refuses; the drops and the
        batches left waiting."""
        drops = self.spool.take_drops()
        entries = self.spool.entries()
        size = 0
        for entry in entries:
            try:
                size += entry.stat().st_size
            except FileNotFoundError:
                continue
        report = Report(self.spool.folder, run.written, run.failures, run.refused, drops, len(entries), size)
        try:
            recovered = self.monitor.record(report)
        except Exception as exc:  # the monitor's own trouble (Redis away) never costs a write
            if Monitor().may_warn(_MONITOR_TROUBLE):  # once a minute, like the rest
                log.warning("time-series spool: the writes' state could not be recorded: %s: %s", type(exc).__name__, exc)
            recovered = False
        if run.refused and self.monitor.may_warn(self.spool.folder):
            reason, message = run.refused
            log.warning(
                "time-series store refuses writes (%s: %s): %d batches (%.1f MiB) wait in the spool %s, "
                "sent oldest first once it takes them again",
                reason, message, len(entries), size / (1 << 20), self.spool.folder,
            )
        elif recovered:
            log.warning("time-series store takes writes again: %d samples written, %d batches still wait in %s",
                        run.written, len(entries), self.spool.folder)
        return drops, len(entries)
