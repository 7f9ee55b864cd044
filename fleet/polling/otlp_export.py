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
built (`Encoder`, straight into the OTLP protobuf messages) and sent beside the next poll, by
the OpenTelemetry SDK's OTLP/HTTP exporter. A backlog
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
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    NumberDataPoint,
)
from opentelemetry.sdk.metrics.export import MetricExportResult

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


def _key_values(attributes: dict[str, str]) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attributes.items()]


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


class Encoder:
    """Cycles of samples as OTLP requests (ExportMetricsServiceRequest), one metric per
    OpenTelemetry name. A point's attributes are built once per device and series and
    copied after (they change only when the device's model or versions do)."""

    def __init__(self) -> None:
        self._templates: dict[str, tuple[tuple, dict]] = {}  # serial -> (device attributes, templates)

    def request(self, cycle: float, keyed: Iterable[tuple[DeviceKey, dict]]) -> tuple[ExportMetricsServiceRequest, int]:
        """The request and its number of data points."""
        request = ExportMetricsServiceRequest()
        resource_metrics = request.resource_metrics.add()
        resource_metrics.resource.attributes.extend(_key_values(RESOURCE))
        scope_metrics = resource_metrics.scope_metrics.add()
        scope_metrics.scope.name, scope_metrics.scope.version = SCOPE
        series: dict[str, object] = {}
        count = 0
        for key, snapshot in keyed:
            base = _device_attributes(key, snapshot)
            known = self._templates.get(key.serial)
            if known is None or known[0] != base:
                known = self._templates[key.serial] = (base, {})
            templates = known[1]
            ts = snapshot.get("sample_ts")
            at = int((ts if isinstance(ts, int | float) else cycle) * 1e9)
            for counter, metric, unit, is_sum, fixed, per_core in PLAN:
                value = snapshot.get(counter)
                if value is None:
                    continue
                values = enumerate(value) if per_core and isinstance(value, list) else [(None, value)]
                for core, one in values:
                    if not isinstance(one, int | float) or isinstance(one, bool):
                        continue
                    points = series.get(metric)
                    if points is None:
                        points = series[metric] = _metric(scope_metrics, metric, unit, is_sum)
                    template = templates.get((counter, core))
                    if template is None:
                        template = templates[(counter, core)] = NumberDataPoint(
                            attributes=_key_values(_point_attributes(key, base, fixed, core)))
                    point = points.add()
                    point.CopyFrom(template)
                    point.time_unix_nano, point.as_double = at, one
                    count += 1
        return request, count


def _metric(scope_metrics, name: str, unit: str, is_sum: bool):
    metric = scope_metrics.metrics.add(name=name, unit=unit)
    if not is_sum:
        return metric.gauge.data_points
    metric.sum.aggregation_temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
    metric.sum.is_monotonic = True
    return metric.sum.data_points


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
                # The SDK exporter's send of an encoded request (its size limit, retries, headers,
                # compression): its own encoder, from the SDK's data model, takes 5x longer.
                result = self.exporter._export_batch(request)  # noqa: SLF001
                if result is MetricExportResult.SUCCESS:
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
