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
built and sent beside the next poll, by the OpenTelemetry SDK's OTLP exporter. A backlog
beyond `MAX_WAITING` cycles is dropped, said in the log; the Prometheus path is untouched.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Iterable

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from fleet.asicmon.catalogue import CATALOGUE
from fleet.asicmon.mappings import MAPPINGS, ucum
from fleet.tsdb.series import DeviceKey

__all__ = ["OtlpSender", "metrics_data", "sender"]

log = logging.getLogger(__name__)

SCOPE = InstrumentationScope("asicmon.poller", "0.1")
RESOURCE = Resource.create({"service.name": "asicmon"})
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


def _device_attributes(key: DeviceKey, snapshot: dict) -> dict[str, str]:
    attributes = {"host.name": key.host, "hw.serial_number": key.serial, "hw.type": "gpu"}
    if key.model:
        attributes["hw.model"] = key.model
    for counter, attribute in DEVICE_ATTRIBUTES.items():
        value = snapshot.get(counter)
        if isinstance(value, str) and value:
            attributes[attribute] = value
    return attributes


def metrics_data(cycle: float, keyed: Iterable[tuple[DeviceKey, dict]]) -> MetricsData:
    """The cycle's samples as the SDK's metrics data, one metric per OpenTelemetry name."""
    points: dict[str, list[NumberDataPoint]] = {}
    for key, snapshot in keyed:
        base = _device_attributes(key, snapshot)
        ts = snapshot.get("sample_ts")
        at = int((ts if isinstance(ts, int | float) else cycle) * 1e9)
        for counter, metric, _, _, fixed, per_core in PLAN:
            value = snapshot.get(counter)
            if value is None:
                continue
            found = points.setdefault(metric, [])
            if per_core:
                for core, one in enumerate(value if isinstance(value, list) else ()):
                    if isinstance(one, int | float):
                        attrs = {**base, **fixed, "hw.id": f"{key.serial}/core{core}", "hw.parent": key.serial}
                        found.append(NumberDataPoint(attrs, 0, at, one))
                continue
            if not isinstance(value, int | float) or isinstance(value, bool):
                continue
            if fixed.get("hw.type", "gpu") == "gpu":
                attrs = {**base, **fixed, "hw.id": key.serial}
            else:  # a sensor of the device (hw.temperature): its own id, the device its parent
                attrs = {"host.name": key.host, **fixed, "hw.id": f"{key.serial}/{fixed['hw.type']}",
                         "hw.parent": key.serial}
            found.append(NumberDataPoint(attrs, 0, at, value))
    metrics = []
    for _, metric, unit, is_sum, _, _ in PLAN:
        data_points = points.pop(metric, None)
        if not data_points:
            continue
        data = (Sum(data_points, AggregationTemporality.CUMULATIVE, True) if is_sum else Gauge(data_points))
        metrics.append(Metric(metric, None, unit, data))
    return MetricsData([ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, metrics, "")], "")])


class OtlpSender:
    """A thread that builds and sends the cycles the poll submits, one at a time."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0) -> None:
        self.exporter = OTLPMetricExporter(endpoint=endpoint, timeout=timeout_s)
        self.sent = self.failed = self.dropped = 0  # cycles
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
            try:
                result = self.exporter.export(metrics_data(cycle, keyed))
                if result is MetricExportResult.SUCCESS:
                    self.sent += 1
                else:
                    self.failed += 1
                    log.warning("OTLP metrics: cycle %.0f not accepted by the receiver", cycle)
            except Exception:  # the poll goes on whatever the receiver does
                self.failed += 1
                log.exception("OTLP metrics: cycle %.0f not sent", cycle)
            finally:
                self._queue.task_done()


@functools.cache
def sender(endpoint: str) -> OtlpSender:
    """The process's sender to ``endpoint`` (``sender.cache_clear()`` forgets it)."""
    return OtlpSender(endpoint)
