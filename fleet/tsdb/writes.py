"""A poll cycle's samples as Prometheus remote-write requests, and the way they go out.

Encoding: WriteRequests (protobuf) of one TimeSeries per (device, counter), each holding one
sample at the cycle's slot, of at most MAX_REQUEST_BYTES each. A series' labels never change
between cycles, so each device's series bytes are built once (per TSDB_LABELS) and kept; a
cycle joins them and writes each value's 8 bytes and the timestamp in place. Requests are
snappy-compressed as remote write asks (benchmarks/bench_tsdb.py measures it).

Writing (`Writer`, fleet/tsdb/sending.py): the requests go straight to the store when nothing
is waiting; when the store is down, slow, refuses them or is busy with another writer, they
wait in the spool (fleet/tsdb/buffer.py) and every later request queues behind them, so that
the store receives each writer's cycles in order. A cycle written twice (a retried task, an
answer lost after the store took it) is kept once: VictoriaMetrics deduplicates samples of a
series with the same timestamp (-dedup.minScrapeInterval=1ms), Prometheus ignores an exact
repeat of its latest sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import compress as compress_values
from typing import NamedTuple

import cramjam
import numpy as np

from fleet.tsdb.buffer import Batch
from fleet.tsdb.sending import Writer, WriteResult
from fleet.tsdb.series import GPU_TYPES, DeviceKey, dcgm_fields, parse_labels, series_counters

__all__ = ["Encoder", "WriteResult", "Writer", "compress"]


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


class _Template(NamedTuple):
    body: bytes  # the series that have a number, with room for each value and timestamp
    offsets: tuple[int, ...]  # where each value goes
    present: tuple[bool, ...]  # which of the layout's series these are
    factors: tuple[float, ...]  # each value's factor


class _Layout:
    """A device's candidate series: the counters they read, each value's factor (dcgm
    series are in dcgm-exporter's units) and their bytes up to the value; and templates of
    the request bytes by the types of the values read (a number or not)."""

    __slots__ = ("by_presence", "counters", "factors", "prefixes", "templates")

    def __init__(self, counters: tuple, factors: tuple, prefixes: tuple):
        self.counters = counters
        self.factors = factors
        self.prefixes = prefixes
        self.templates: dict[tuple, _Template] = {}  # by the types of the values read
        self.by_presence: dict[tuple, _Template] = {}  # by which series have a number

    def template(self, types: tuple[type, ...], ts_len: int) -> _Template:
        """The template for values of these types (made once for each set of series that
        have a number: an int that becomes a float next cycle changes nothing)."""
        present = tuple(t in _NUMBERS for t in types)
        found = self.by_presence.get(present)
        if found is None:
            out, offsets = bytearray(), []
            for prefix, here in zip(self.prefixes, present, strict=True):
                if here:
                    out += prefix
                    offsets.append(len(out))
                    out += bytes(8) + b"\x10" + bytes(ts_len)
            factors = tuple(f for f, here in zip(self.factors, present, strict=True) if here)
            found = self.by_presence[present] = _Template(bytes(out), tuple(offsets), present, factors)
        if len(self.templates) > 256:
            self.templates.clear()
        self.templates[types] = found
        return found


_NUMBERS = {int, float}
# Requests stay well below the stores' limits on a request's uncompressed size
# (VictoriaMetrics' -maxInsertRequestSize is 32 MiB): a large shard's cycle is several.
MAX_REQUEST_BYTES = 4 << 20


class Encoder:
    """Encodes cycles of polled devices; keeps each device's series bytes between cycles.

    A cycle is assembled from each device's template (its series' bytes, made once) with
    the cycle's values and timestamp written into place by numpy: per device, Python only
    reads the counters and looks up the template for the types of what it read."""

    def __init__(self, *, dcgm: bool = True):
        self.dcgm = dcgm
        self._layouts: dict[tuple, dict[DeviceKey, _Layout]] = {}

    def _layout(self, key: DeviceKey, extra: str, ts_len: int) -> _Layout:
        extra_labels = dict(parse_labels(extra))
        labels = {**key.labels(), **extra_labels}
        series = [(counter, 1.0, _series_prefix({**labels, "__name__": name}, ts_len))
                  for counter, name in series_counters()]
        if self.dcgm and key.device_type in GPU_TYPES:
            dcgm_labels = {**key.dcgm_labels(), **extra_labels}
            series += [(counter, factor, _series_prefix({**dcgm_labels, "__name__": field}, ts_len))
                       for field, counter, factor in dcgm_fields()]
        counters, factors, prefixes = zip(*series, strict=True)
        return _Layout(counters, factors, prefixes)

    def encode(self, cycle: float, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "") -> tuple[bytearray, int]:
        """The uncompressed WriteRequest of one cycle (epoch seconds) and its number of
        samples, in one piece whatever its size."""
        chunks = self.encode_chunks(cycle, devices, extra, max_bytes=None)
        if not chunks:
            return bytearray(), 0
        return chunks[0]

    def encode_chunks(self, cycle: float, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "",
                      max_bytes: int | None = MAX_REQUEST_BYTES) -> list[tuple[bytearray, int]]:
        """The cycle's WriteRequests, each below `max_bytes` uncompressed (but for one
        device's series), with their numbers of samples.

        A counter's value must be a number (not a bool); anything else has no sample."""
        ts = _varint(round(cycle * 1000))
        layouts = self._layouts.get((extra, len(ts)))
        if layouts is None or len(layouts) > 200_000:  # devices come and go: keep it bounded
            layouts = self._layouts[(extra, len(ts))] = {}
        chunks = []
        chunk = _Chunk()
        for key, snapshot in devices:
            layout = layouts.get(key)
            if layout is None:
                layout = layouts[key] = self._layout(key, extra, len(ts))
            found = tuple(map(snapshot.get, layout.counters))
            types = tuple(map(type, found))
            template = layout.templates.get(types) or layout.template(types, len(ts))
            n = len(template.offsets)
            if n == 0:
                continue
            if max_bytes is not None and chunk.size + len(template.body) > max_bytes and chunk.size:
                chunks.append(chunk.assemble(ts))
                chunk = _Chunk()
            chunk.parts.append(template.body)
            chunk.offsets.extend(template.offsets)
            chunk.values.extend(found if n == len(found) else compress_values(found, template.present))
            chunk.factors.extend(template.factors)
            chunk.bases.append(chunk.size)
            chunk.counts.append(n)
            chunk.size += len(template.body)
        if chunk.size:
            chunks.append(chunk.assemble(ts))
        return chunks

    def batches(self, cycle: float, scope: str, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "",
                max_bytes: int = MAX_REQUEST_BYTES) -> list[Batch]:
        """The cycle's samples as requests of at most `max_bytes` uncompressed, compressed."""
        cycle_ms = round(cycle * 1000)
        return [Batch(cycle_ms, scope, n, compress(raw))
                for raw, n in self.encode_chunks(cycle, devices, extra, max_bytes=max_bytes)]

    def batch(self, cycle: float, scope: str, devices: Iterable[tuple[DeviceKey, dict]], extra: str = "") -> Batch:
        """The cycle's samples as one request, whatever its size."""
        raw, samples = self.encode(cycle, devices, extra)
        return Batch(round(cycle * 1000), scope, samples, compress(raw))


class _Chunk:
    """One request being assembled: its devices' templates, and where their values go."""

    __slots__ = ("bases", "counts", "factors", "offsets", "parts", "size", "values")

    def __init__(self):
        self.parts: list[bytes] = []
        self.offsets: list[int] = []
        self.values: list = []
        self.factors: list[float] = []
        self.bases: list[int] = []
        self.counts: list[int] = []
        self.size = 0

    def assemble(self, ts: bytes) -> tuple[bytearray, int]:
        raw = bytearray().join(self.parts)  # the one copy of the request's bytes
        body = np.frombuffer(raw, dtype=np.uint8)
        at = np.asarray(self.offsets, dtype=np.int64) + np.repeat(np.asarray(self.bases, dtype=np.int64), self.counts)
        numbers = np.asarray(self.values, dtype="<f8") * np.asarray(self.factors, dtype="<f8")
        body[at[:, None] + _EIGHT] = numbers.view(np.uint8).reshape(-1, 8)
        body[(at + 9)[:, None] + np.arange(len(ts))] = np.frombuffer(ts, dtype=np.uint8)
        del body
        return raw, len(self.values)


_EIGHT = np.arange(8)


def compress(raw: bytes | bytearray) -> bytes:
    return bytes(cramjam.snappy.compress_raw(raw))
