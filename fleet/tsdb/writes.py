"""A poll cycle's samples as one Prometheus remote-write request, and the way it goes out.

Encoding: a WriteRequest (protobuf) of one TimeSeries per (device, counter), each holding one
sample at the cycle's slot. A series' labels never change between cycles, so each series'
bytes up to its value are built once per device (and TSDB_LABELS) and kept; a cycle appends
that prefix, the value's 8 bytes and the timestamp's few for each series. The request is
snappy-compressed as remote write asks (benchmarks/bench_tsdb.py measures it).

Writing (`Writer`): the request goes straight to the store when nothing is waiting; when the
store is down, slow or busy with another writer, it waits in the spool (fleet/tsdb/buffer.py)
and every later request queues behind it, so that the store receives each writer's cycles
in order. A cycle written twice (a retried task, an answer lost after the store took it) is
kept once: VictoriaMetrics deduplicates samples of a series with the same timestamp
(-dedup.minScrapeInterval=1ms), Prometheus ignores an exact repeat of its latest sample.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass

import cramjam

from fleet.tsdb.buffer import Batch, Spool
from fleet.tsdb.client import Client, TsdbError, TsdbUnavailable
from fleet.tsdb.series import GPU_TYPES, DeviceKey, dcgm_fields, parse_labels, series_counters

log = logging.getLogger(__name__)

_pack_double = struct.Struct("<d").pack


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _labels(labels: dict[str, str]) -> bytes:
    """Label messages (TimeSeries field 1), sorted by name as the stores expect."""
    return b"".join(
        _field(1, _field(1, name.encode()) + _field(2, value.encode())) for name, value in sorted(labels.items())
    )


def _series_prefix(labels: dict[str, str], ts_len: int) -> bytes:
    """A TimeSeries' bytes up to its one sample's value: WriteRequest field 1 (its length),
    the labels, Sample field 2 (its length) and the value's tag (double, field 1)."""
    sample_len = 1 + 8 + 1 + ts_len
    body_len = len(labels_bytes := _labels(labels)) + 2 + sample_len
    return b"\x0a" + _varint(body_len) + labels_bytes + b"\x12" + bytes([sample_len]) + b"\x09"


class Encoder:
    """Encodes cycles of polled devices; keeps each device's series prefixes between cycles."""

    def __init__(self, *, dcgm: bool = True):
        self.dcgm = dcgm
        self._prefixes: dict[tuple, tuple[tuple, tuple]] = {}

    def _device(self, key: DeviceKey, extra: str, ts_len: int) -> tuple[tuple, tuple]:
        found = self._prefixes.get((key, extra, ts_len))
        if found is None:
            extra_labels = dict(parse_labels(extra))
            labels = {**key.labels(), **extra_labels}
            own = tuple((counter, _series_prefix({**labels, "__name__": name}, ts_len))
                        for counter, name in series_counters())
            dcgm = ()
            if self.dcgm and key.device_type in GPU_TYPES:
                dcgm_labels = {**key.dcgm_labels(), **extra_labels}
                dcgm = tuple((counter, factor, _series_prefix({**dcgm_labels, "__name__": field}, ts_len))
                             for field, counter, factor in dcgm_fields())
            if len(self._prefixes) > 200_000:  # devices come and go: keep it bounded
                self._prefixes.clear()
            found = self._prefixes[(key, extra, ts_len)] = (own, dcgm)
        return found

    def encode(self, cycle: float, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "") -> tuple[bytes, int]:
        """The uncompressed WriteRequest of one cycle (epoch seconds) and its number of samples.

        A counter's value must be a number (not a bool); anything else has no sample."""
        ts = _varint(round(cycle * 1000))
        suffix = b"\x10" + ts
        out = bytearray()
        samples = 0
        for key, snapshot in devices:
            own, dcgm = self._device(key, extra, len(ts))
            get = snapshot.get
            for counter, prefix in own:
                value = get(counter)
                if value is None or value.__class__ is bool:
                    continue
                try:
                    packed = _pack_double(value)
                except struct.error:
                    continue  # not a number
                out += prefix
                out += packed
                out += suffix
                samples += 1
            for counter, factor, prefix in dcgm:
                value = get(counter)
                if value is None or value.__class__ is bool:
                    continue
                try:
                    packed = _pack_double(value * factor)
                except (struct.error, TypeError):
                    continue
                out += prefix
                out += packed
                out += suffix
                samples += 1
        return bytes(out), samples

    def batch(self, cycle: float, scope: str, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "") -> Batch:
        raw, samples = self.encode(cycle, devices, extra)
        return Batch(round(cycle * 1000), scope, samples, compress(raw))


def compress(raw: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw))


@dataclass(frozen=True)
class WriteResult:
    """What became of a batch: written now, waiting in the spool, or refused by the store."""

    written: int = 0  # samples the store took now (this batch's and spooled ones)
    buffered: int = 0  # samples of this batch left waiting in the spool
    rejected: int = 0  # samples the store refused (its message logged), never retried
    waiting: int = 0  # batches in the spool afterwards
    kept: int = 0  # samples of this batch now in the store or waiting for it


class Writer:
    """Sends batches to the store, through the spool whenever the store cannot take them now."""

    def __init__(self, client: Client, spool: Spool, *, flush_budget_s: float = 1.0):
        self.client = client
        self.spool = spool
        self.flush_budget_s = flush_budget_s

    def write(self, batch: Batch) -> WriteResult:
        """Send `batch` (or spool it behind those waiting), then send what waits, within the budget."""
        if batch.samples == 0:
            return WriteResult(waiting=self.spool.count())
        with self.spool.lock(blocking=False) as held:
            if not held:  # another writer is talking to the store: queue behind it
                kept = batch.samples if self.spool.append(batch) else 0
                return WriteResult(buffered=kept, waiting=self.spool.count(), kept=kept)
            if self.spool.count() == 0:
                try:
                    self.client.write(batch.body)
                    return WriteResult(written=batch.samples, kept=batch.samples)
                except TsdbUnavailable as exc:
                    log.warning("time-series store unavailable, cycle %d of %s waits in the spool: %s",
                                batch.cycle_ms, batch.scope, exc)
                    kept = batch.samples if self.spool.append(batch) else 0
                    return WriteResult(buffered=kept, waiting=self.spool.count(), kept=kept)
                except TsdbError as exc:
                    self.spool.note_dropped(batch, f"rejected by the store: {exc}")
                    return WriteResult(rejected=batch.samples)
            entry = self.spool.append(batch)
            flushed = self._drain(time.monotonic() + self.flush_budget_s)
        still = entry is not None and entry.exists()
        kept = batch.samples if still or (entry is not None and entry not in flushed.rejected_entries) else 0
        return WriteResult(written=flushed.written, buffered=batch.samples if still else 0,
                           rejected=flushed.rejected, waiting=self.spool.count(), kept=kept)

    def flush(self, budget_s: float | None = None) -> WriteResult:
        """Send waiting batches, oldest first, until the spool is empty, the store fails or
        the budget is spent. Does nothing while another writer holds the spool."""
        budget = self.flush_budget_s if budget_s is None else budget_s
        with self.spool.lock(blocking=False) as held:
            if not held:
                return WriteResult(waiting=self.spool.count())
            result = self._drain(time.monotonic() + budget)
        return WriteResult(written=result.written, rejected=result.rejected, waiting=self.spool.count())

    def _drain(self, deadline: float) -> _Drained:
        written = rejected = 0
        rejected_entries = set()
        for entry in self.spool.entries():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            batch = self.spool.read(entry)
            if batch is None:
                continue
            try:
                self.client.write(batch.body, timeout_s=min(left, self.client.write_timeout_s))
            except TsdbUnavailable as exc:
                log.info("time-series store still unavailable, %d batches wait: %s", self.spool.count(), exc)
                break
            except TsdbError as exc:
                self.spool.note_dropped(batch, f"rejected by the store: {exc}")
                self.spool.remove(entry)
                rejected += batch.samples
                rejected_entries.add(entry)
                continue
            self.spool.remove(entry)
            written += batch.samples
        return _Drained(written, rejected, rejected_entries)


@dataclass(frozen=True)
class _Drained:
    written: int
    rejected: int
    rejected_entries: set
