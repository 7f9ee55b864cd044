"""The poll's samples as OpenTelemetry metrics over OTLP/HTTP, off unless OTLP_METRICS_ENDPOINT
is set (headers, e.g. a token, from the SDK's own OTEL_EXPORTER_OTLP_METRICS_HEADERS).

Each numeric counter with an OpenTelemetry name in `fleet.asicmon.mappings` is one data point
per device and cycle, named and attributed as the ``hw.*`` conventions say (``hw.gpu.utilization``,
``hw.gpu.memory.usage``, ``hw.errors`` with ``error.type``...), its unit in UCUM, at the
time of the device's refresh (``sample_ts``): gauges as gauges, ``_total`` counters as
cumulative monotonic sums. Every point carries ``hw.id`` (the device's serial; a core or a
sensor of it below it), ``host.name`` and, where known, ``hw.model``, ``hw.serial_number``,
``hw.driver_version`` and ``hw.firmware_version``.

The poll hands a cycle's samples to a sender thread and goes on (`submit`): the request is
built (`Encoder`, straight into the OTLP protobuf wire format) and sent beside the next poll,
by the OpenTelemetry SDK's OTLP/HTTP exporter's client. A backlog
beyond `MAX_WAITING` cycles is dropped, said in the log; the Prometheus path is untouched.
"""

from __future__ import annotations

import functools
import logging
import queue
import struct
import threading
import time
from collections.abc import Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.metrics.v1.metrics_pb2 import AGGREGATION_TEMPORALITY_CUMULATIVE

from fleet.asicmon.catalogue import CATALOGUE
from fleet.asicmon.mappings import MAPPINGS, ucum
from fleet.tsdb.series import DeviceKey

__all__ = ["Encoder", "OtlpSender", "sender"]

log = logging.getLogger(__name__)

SCOPE = ("asicmon.poller", "0.1")
RESOURCE = {"service.name": "asicmon"}
MAX_WAITING = 4  # cycles waiting to be sent
# Snapshot strings that are attributes of every point of the device.
DEVICE_ATTRIBUTES = {"device_model": "hw.model", "driver_version": "hw.driver_version",
                     "firmware_version": "hw.firmware_version"}


def _plan() -> list[tuple[str, str, str, bool, dict[str, str], bool]]:
    """(counter, metric, unit, is a sum, fixed attributes, per core) of every counter sent."""
    out = []
    for name, counter in CATALOGUE.items():
        names = MAPPINGS[name]
        if not names.otel or not counter.is_numeric:
            continue
        fixed = {k: v for k, v in names.otel_attributes.items() if "<" not in v}
        out.append((name, names.otel, ucum(counter.unit), counter.kind == "counter", fixed, counter.per_core))
    return out


PLAN = _plan()


def _device_attributes(key: DeviceKey, snapshot: dict) -> tuple[tuple[str, str], ...]:
    attributes = {"host.name": key.host, "hw.serial_number": key.serial, "hw.type": "gpu"}
    if key.model:
        attributes["hw.model"] = key.model
    for counter, attribute in DEVICE_ATTRIBUTES.items():
        value = snapshot.get(counter)
        if isinstance(value, str) and value:
            attributes[attribute] = value
    return tuple(attributes.items())


def _point_attributes(key: DeviceKey, base: tuple, fixed: dict[str, str], core: int | None) -> dict[str, str]:
    if core is not None:
        return {**dict(base), **fixed, "hw.id": f"{key.serial}/core{core}", "hw.parent": key.serial}
    if fixed.get("hw.type", "gpu") == "gpu":
        return {**dict(base), **fixed, "hw.id": key.serial}
    # a sensor of the device (hw.temperature): its own id, the device its parent
    return {"host.name": key.host, **fixed, "hw.id": f"{key.serial}/{fixed['hw.type']}", "hw.parent": key.serial}


# The OTLP protobuf messages written by hand (opentelemetry-proto's metrics.proto and
# common.proto field numbers): a cycle is ~30,000 points, and building them as protobuf objects
# cost ~5 us each on the poll worker's interpreter, beside the next poll. Here a point is its
# attributes' bytes, made once per device and series, plus 18 bytes of time and value.
_LEN, _FIXED64 = 2, 1


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes or a nested message."""
    return _varint(number << 3 | _LEN) + _varint(len(payload)) + payload


def _key_value(key: str, value: str) -> bytes:
    """A KeyValue (key 1, value 2) whose AnyValue is a string (string_value 1)."""
    return _field(1, key.encode()) + _field(2, _field(1, value.encode()))


def _attributes(field: int, attributes: dict[str, str]) -> bytes:
    return b"".join(_field(field, _key_value(k, v)) for k, v in attributes.items())


_POINT_TIME = _varint(3 << 3 | _FIXED64)  # NumberDataPoint.time_unix_nano, fixed64
_POINT_DOUBLE = _varint(4 << 3 | _FIXED64)  # NumberDataPoint.as_double, double
_POINT_TAIL = struct.Struct("<" + "B" * len(_POINT_TIME) + "QBd")
_RESOURCE = _field(1, _attributes(1, RESOURCE))  # ResourceMetrics.resource
_SCOPE = _field(1, _field(1, SCOPE[0].encode()) + _field(2, SCOPE[1].encode()))  # ScopeMetrics.scope


def _metric_header(name: str, unit: str) -> bytes:
    return _field(1, name.encode()) + _field(3, unit.encode())  # Metric.name, Metric.unit


#: Sum.aggregation_temporality (2) cumulative and Sum.is_monotonic (3) true: the same bytes
#: after every counter's data points.
SUM_TAIL = _varint(2 << 3) + _varint(AGGREGATION_TEMPORALITY_CUMULATIVE) + _varint(3 << 3) + b"\x01"


def _point_prefix(attributes: dict[str, str]) -> bytes:
    """A data point up to its time and value: its field tag in the metric's data_points (1),
    its length (its attributes and the 18 bytes of time and value) and its attributes (7)."""
    encoded = _attributes(7, attributes)
    return _varint(1 << 3 | _LEN) + _varint(len(encoded) + _POINT_TAIL.size) + encoded


class EncodedRequest:
    """A serialized ExportMetricsServiceRequest (`SerializeToString` as the protobuf class has)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def SerializeToString(self) -> bytes:  # noqa: N802 - the protobuf message's name
        return self.data


class Encoder:
    """Cycles of samples as OTLP requests (ExportMetricsServiceRequest, serialized), one
    metric per OpenTelemetry name. A point's attributes are encoded once per device and
    series and reused (they change only when the device's model or versions do)."""

    def __init__(self) -> None:
        self._templates: dict[str, tuple[tuple, dict]] = {}  # serial -> (device attributes, templates)

    def request(self, cycle: float, keyed: Iterable[tuple[DeviceKey, dict]]) -> tuple[EncodedRequest, int]:
        """The request and its number of data points."""
        series: dict[str, list[bytes]] = {}
        count = 0
        pack = _POINT_TAIL.pack
        time_tag, double_tag = tuple(_POINT_TIME), _POINT_DOUBLE[0]
        for key, snapshot in keyed:
            base = _device_attributes(key, snapshot)
            known = self._templates.get(key.serial)
            if known is None or known[0] != base:
                known = self._templates[key.serial] = (base, {})
            templates = known[1]
            ts = snapshot.get("sample_ts")
            at = int((ts if isinstance(ts, int | float) else cycle) * 1e9)
            for counter, metric, _, _, fixed, per_core in PLAN:
                value = snapshot.get(counter)
                if value is None:
                    continue
                values = enumerate(value) if per_core and isinstance(value, list) else ((None, value),)
                for core, one in values:
                    if not isinstance(one, int | float) or isinstance(one, bool):
                        continue
                    prefix = templates.get((counter, core))
                    if prefix is None:
                        prefix = templates[(counter, core)] = _point_prefix(_point_attributes(key, base, fixed, core))
                    points = series.get(metric)
                    if points is None:
                        points = series[metric] = []
                    points.append(prefix + pack(*time_tag, at, double_tag, one))
                    count += 1
        return EncodedRequest(self._request(series)), count

    @staticmethod
    def _request(series: dict[str, list[bytes]]) -> bytes:
        metrics = []
        for metric, points in series.items():
            unit, is_sum = METRICS[metric]
            data = b"".join(points)  # data_points, each with its field tag and length
            if is_sum:
                body = _field(7, data + SUM_TAIL)  # Metric.sum
            else:
                body = _field(5, data)  # Metric.gauge
            metrics.append(_field(2, _metric_header(metric, unit) + body))  # ScopeMetrics.metrics
        scope_metrics = _field(2, _SCOPE + b"".join(metrics))  # ResourceMetrics.scope_metrics
        return _field(1, _RESOURCE + scope_metrics)  # ExportMetricsServiceRequest.resource_metrics


# metric name -> (UCUM unit, is a cumulative sum); counters sharing a name share both
METRICS = {metric: (unit, is_sum) for _, metric, unit, is_sum, _, _ in PLAN}


class OtlpSender:
    """A thread that builds and sends the cycles the poll submits, one at a time."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0) -> None:
        self.exporter = OTLPMetricExporter(endpoint=endpoint, timeout=timeout_s)
        self.encoder = Encoder()
        self.sent = self.failed = self.dropped = 0  # cycles
        self.points, self.busy_s = 0, 0.0  # data points sent, seconds spent building and sending
        self.encode_s = 0.0  # of which building the requests
        self._queue: queue.Queue = queue.Queue(MAX_WAITING)
        threading.Thread(target=self._run, name="otlp-metrics", daemon=True).start()

    def submit(self, cycle: float, keyed: list[tuple[DeviceKey, dict]]) -> bool:
        """Queues the cycle for sending; False (and said in the log) when the backlog is full."""
        try:
            self._queue.put_nowait((cycle, keyed))
            return True
        except queue.Full:
            self.dropped += 1
            log.warning("OTLP metrics: cycle %.0f dropped, %d cycles wait to be sent", cycle, MAX_WAITING)
            return False

    def flush(self, timeout_s: float = 10.0) -> bool:
        """Waits until every submitted cycle was sent (or failed); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        while True:
            cycle, keyed = self._queue.get()
            started = time.perf_counter()
            try:
                request, count = self.encoder.request(cycle, keyed)
                self.encode_s += time.perf_counter() - started
                # The SDK exporter's HTTP client sends the encoded request (its retries, headers,
                # compression): its own encoder, from the SDK's data model, takes 5x longer.
                result = self.exporter._client.export(request.SerializeToString())  # noqa: SLF001
                if result.success:
                    self.sent += 1
                    self.points += count
                else:
                    self.failed += 1
                    log.warning("OTLP metrics: cycle %.0f not accepted by the receiver", cycle)
            except Exception:  # the poll goes on whatever the receiver does
                self.failed += 1
                log.exception("OTLP metrics: cycle %.0f not sent", cycle)
            finally:
                self.busy_s += time.perf_counter() - started
                self._queue.task_done()


@functools.cache
def sender(endpoint: str) -> OtlpSender:
    """The process's sender to ``endpoint`` (``sender.cache_clear()`` forgets it)."""
    return OtlpSender(endpoint)
