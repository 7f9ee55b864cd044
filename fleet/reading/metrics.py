"""`GET /metrics`: the fleet in the Prometheus text format, from the snapshot cache.

- every catalogue counter as ``asicmon_<name>`` (units spelled out as Prometheus names them:
  ``_per_s`` becomes ``_per_second``, ``_s`` ``_seconds``) with labels host, device (the device id),
  serial, type and model; per-core counters add ``core``; state counters are one series per
  value (1 for the current one); info counters are ``asicmon_<name>_info{value=…} 1``;
- health, state and remediation: ``asicmon_device_health{level}``,
  ``asicmon_device_state{state}``, ``asicmon_memory_seconds_to_exhaustion``,
  ``asicmon_devices{health}``, ``asicmon_devices_in_state{state}``,
  ``asicmon_automation_paused``, ``asicmon_actions{kind,status}``;
- for GPU-type devices the dcgm-exporter names, units and labels (gpu, UUID, modelName,
  Hostname, device), so that existing Grafana DCGM dashboards read them unchanged;
- the time-series spools (one per poll worker and agent host, labelled ``spool``):
  ``asicmon_tsdb_spool_batches``, ``asicmon_tsdb_spool_bytes``, ``asicmon_tsdb_store_refusing``,
  ``asicmon_tsdb_write_failures_total{reason}``, ``asicmon_tsdb_samples_lost_total{reason}``,
  ``asicmon_tsdb_last_write_success_timestamp_seconds`` (fleet/tsdb/status.py).

Two queries and one Redis call, whatever the fleet's size.
"""

import time

from django.db.models import Count
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from fleet.asicmon import CATALOGUE
from fleet.choices import ActionKind, ActionStatus, DeviceState, Health
from fleet.driver_errors import metrics as driver_error_metrics
from fleet.health.assessing import current_health
from fleet.models import Action, Automation, Device
from fleet.polling import snapshots
from fleet.tsdb.series import DCGM_FIELDS, metric_name

LABELS = ("host", "device", "serial", "type", "model")
GPU_TYPES = {"gpu", "nvml"}
__all__ = ["DCGM_FIELDS", "metric_name", "render"]
class _Families:
    """Metric families by name, each a header and its sample lines in the text format.

    Per-device series are written here rather than through prometheus_client's
    `generate_latest`, which escaped and validated the same five labels again for each of
    ~55 series per device (85 % of the time at 10k devices). Each device's labels are
    escaped once (`label_text`); the fleet-wide families go through prometheus_client.
    """

    def __init__(self):
        self.headers: dict[str, str] = {}
        self.lines: dict[str, list[str]] = {}

    def add(self, name: str, kind: str, doc: str, labels: str, value: float, sample_name: str | None = None) -> None:
        lines = self.lines.get(name)
        if lines is None:
            lines = self.lines[name] = []
            shown = sample_name or name
            self.headers[name] = f"# HELP {shown} {doc}\n# TYPE {shown} {kind}\n"
        lines.append(f"{sample_name or name}{{{labels}}} {float(value)!r}\n")

    def text(self) -> str:
        return "".join(self.headers[name] + "".join(lines) for name, lines in self.lines.items())


def label_text(labels: dict[str, str]) -> str:
    """Labels in the text format, values escaped as the format asks."""
    def escape(value: str) -> str:
        return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')

    return ",".join(f'{name}="{escape(str(value))}"' for name, value in labels.items())


def _number(value) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    return float(value) if isinstance(value, int | float) else None


def _catalogue_samples(families: _Families, labels: str, snapshot: dict) -> None:
    for name, counter in CATALOGUE.items():
        value = snapshot.get(name)
        if value is None:
            continue
        metric = metric_name(name)
        doc = f"{counter.description} Unit: {counter.unit}."
        if counter.kind == "state":
            for option in counter.values:
                families.add(metric, "gauge", doc, f'{labels},state="{option}"', option == value)
        elif counter.kind == "info":
            families.add(f"{metric}_info", "gauge", doc, f"{labels},{label_text({'value': value})}", 1)
        elif counter.per_core:
            for core, core_value in enumerate(value or []):
                if (number := _number(core_value)) is not None:
                    families.add(metric, "gauge", doc, f'{labels},core="{core}"', number)
        elif (number := _number(value)) is not None:
            if counter.kind == "counter":
                families.add(metric.removesuffix("_total"), "counter", doc, labels, number, sample_name=metric)
            else:
                families.add(metric, "gauge", doc, labels, number)


def _dcgm_samples(lines: dict[str, list[str]], device: Device, snapshot: dict) -> None:
    """dcgm-exporter's series for one GPU, as it writes them (its counters have no _total)."""
    labels = label_text({
        "gpu": str(device.index),
        "UUID": device.serial,
        "device": f"nvidia{device.index}",
        "modelName": device.model,
        "Hostname": device.host.name,
    })
    for field, _, name, factor, _ in DCGM_FIELDS:
        if (number := _number(snapshot.get(name))) is not None:
            lines.setdefault(field, []).append(f"{field}{{{labels}}} {float(number * factor)!r}")


def _dcgm_text(lines: dict[str, list[str]]) -> str:
    out = []
    for field, kind, _, _, doc in DCGM_FIELDS:
        if field in lines:
            out += [f"# HELP {field} {doc}", f"# TYPE {field} {kind}", *lines[field]]
    return "\n".join(out) + "\n" if out else ""


def _health_samples(families: _Families, labels: str, device: Device, snapshot: dict | None, now: float) -> Health:
    assessment = current_health(snapshot, now)
    for level in Health:
        families.add("asicmon_device_health", "gauge", "1 for the device's current health level.",
                     f'{labels},level="{level.value}"', assessment.health == level)
    for state in DeviceState:
        families.add("asicmon_device_state", "gauge", "1 for the device's current operational state.",
                     f'{labels},state="{state.value}"', device.state == state)
    for finding in assessment.findings:
        if finding.rule == "memory_leak":
            families.add("asicmon_memory_seconds_to_exhaustion", "gauge",
                         "Seconds until a leaking device runs out of memory at its current rate.",
                         labels, finding.values.get("seconds_to_exhaustion", 0))
    return assessment.health


class _FleetCollector:
    """Fleet-wide families, through prometheus_client."""

    def __init__(self, healths: list[Health], devices: list[Device]):
        self.healths = healths
        self.devices = devices

    def collect(self):
        by_health = GaugeMetricFamily("asicmon_devices", "Devices by health.", labels=["health"])
        for level in Health:
            by_health.add_metric([level.value], sum(1 for h in self.healths if h == level))
        yield by_health
        by_state = GaugeMetricFamily("asicmon_devices_in_state", "Devices by operational state.", labels=["state"])
        for state in DeviceState:
            by_state.add_metric([state.value], sum(1 for d in self.devices if d.state == state))
        yield by_state
        yield GaugeMetricFamily("asicmon_automation_paused", "1 while automated remediation is paused.",
                                value=Automation.read().paused)
        rows = Action.objects.order_by().values_list("kind", "status").annotate(n=Count("id"))
        counts = {(kind, status): n for kind, status, n in rows}
        actions = CounterMetricFamily("asicmon_actions", "Remediation and operator actions recorded, by kind and outcome.",
                                      labels=["kind", "status"])
        for kind in ActionKind.values:
            for status in ActionStatus.values:
                actions.add_metric([kind, status], counts.get((kind, status), 0))
        yield actions


def render() -> bytes:
    """The whole fleet in the Prometheus text exposition format."""
    devices = list(Device.objects.for_dashboard())
    latest = snapshots.read_snapshots([d.id for d in devices])
    now = time.time()
    families = _Families()
    dcgm: dict[str, list[str]] = {}
    healths = []
    for device in devices:
        snapshot = latest.get(device.id)
        labels = label_text({"host": device.host.name, "device": device.id, "serial": device.serial,
                             "type": device.device_type, "model": device.model})
        healths.append(_health_samples(families, labels, device, snapshot, now))
        if snapshot:
            _catalogue_samples(families, labels, snapshot)
            if device.device_type in GPU_TYPES:
                _dcgm_samples(dcgm, device, snapshot)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_FleetCollector(healths, devices))
    registry.register(_SpoolCollector())
    return (generate_latest(registry) + families.text().encode() + _dcgm_text(dcgm).encode()
            + driver_error_metrics.render_text().encode())


# --- The time-series spools (fleet/tsdb/status.py) ---------------------------------------------

class _SpoolCollector:
    """What waits in each spool for the store, why, and what was lost: one Redis round trip."""

    def collect(self):
        from fleet.tsdb import status

        try:
            spools = status.spools()
        except Exception:  # noqa: BLE001 (Redis away: the fleet's series still go out)
            return
        label = ["spool"]
        batches = GaugeMetricFamily("asicmon_tsdb_spool_batches", "Batches waiting in the spool for the time-series store.", labels=label)
        size = GaugeMetricFamily("asicmon_tsdb_spool_bytes", "Bytes the batches waiting in the spool take.", labels=label)
        refusing = GaugeMetricFamily("asicmon_tsdb_store_refusing", "1 while the store refuses (or does not answer) the spool's writes.", labels=label)
        success = GaugeMetricFamily("asicmon_tsdb_last_write_success_timestamp_seconds",
                                    "When the store last took a write from the spool's writers.", labels=label)
        failures = CounterMetricFamily("asicmon_tsdb_write_failures", "Write requests the store refused or did not answer, by reason.",
                                       labels=["spool", "reason"])
        lost = CounterMetricFamily("asicmon_tsdb_samples_lost", "Samples that will never reach the store, by reason.",
                                   labels=["spool", "reason"])
        for spool in spools:
            batches.add_metric([spool.spool], spool.batches)
            size.add_metric([spool.spool], spool.bytes)
            refusing.add_metric([spool.spool], spool.refusing)
            if spool.last_success_at is not None:
                success.add_metric([spool.spool], spool.last_success_at)
            for reason, n in spool.failures.items():
                failures.add_metric([spool.spool, reason], n)
            for reason, n in spool.lost.items():
                lost.add_metric([spool.spool, reason], n)
        yield from (batches, size, refusing, success, failures, lost)
