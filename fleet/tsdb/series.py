"""What the store holds: series names and labels, and PromQL selectors for them.

- every catalogue counter of kind gauge or counter (one value per device, not per core) as
  `fleet.reading.metrics.metric_name(counter)` (asicmon_temperature_celsius, …) with the labels
  host, device (the device id), serial, type and model;
- for GPU-type devices the dcgm-exporter names too (DCGM_FIELDS below, in their
  units), labelled as /metrics labels them (gpu, UUID, device, modelName, Hostname);
- on every series the installation's extra labels (TSDB_LABELS).

No label takes values without bound: a fleet of N devices has N × (counters) series.
"""

from __future__ import annotations

import re
from functools import cache
from typing import NamedTuple

from fleet.asicmon import CATALOGUE

DEVICE_LABELS = ("host", "device", "serial", "type", "model")
DCGM_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname")
GPU_TYPES = {"gpu", "nvml"}
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RESERVED = {"__name__", *DEVICE_LABELS, *DCGM_LABELS}


RENAMED = {"core_count": "cores"}  # a _count suffix means a histogram's count to Prometheus
MiB = 1 << 20
# dcgm-exporter's field, its Prometheus type, the catalogue counter and the factor to its unit
# (the /metrics page, fleet/reading/metrics.py, serves the same).
DCGM_FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "device_utilization", 100.0, "GPU utilization (in %)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "temperature_c", 1.0, "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "power_w", 1.0, "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "energy_j_total", 1000.0, "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "clock_mhz", 1.0, "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "memory_used_bytes", 1.0 / MiB, "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "memory_free_bytes", 1.0 / MiB, "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "pcie_errors_total", 1.0, "Total number of PCIe retries."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "ecc_corrected_total", 1.0, "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "ecc_uncorrected_total", 1.0, "Total number of double-bit volatile ECC errors."),
)


def metric_name(counter_name: str) -> str:
    """The Prometheus name of a catalogue counter: units spelled out as Prometheus names them."""
    name = RENAMED.get(counter_name, counter_name)
    name = name.replace("_per_s", "_per_second")
    if name.endswith("_s"):
        name = name.removesuffix("_s") + "_seconds"
    return f"asicmon_{name}"


@cache
def series_counters() -> tuple[tuple[str, str], ...]:
    """(catalogue counter, series name) of every counter that gets a time series."""
    return tuple(
        (name, metric_name(name)) for name, counter in CATALOGUE.items()
        if counter.is_numeric and not counter.per_core
    )


def series_name(counter: str) -> str:
    """The series name of a catalogue counter; KeyError for one that has no series."""
    names = dict(series_counters())
    return names[counter]


@cache
def dcgm_fields() -> tuple[tuple[str, str, float], ...]:
    """(dcgm-exporter field, catalogue counter, factor to the field's unit)."""
    return tuple((field, counter, factor) for field, _, counter, factor, _ in DCGM_FIELDS)


class DeviceKey(NamedTuple):
    """What a device's series are labelled with (a tuple: quick to hash, as each cycle does)."""

    host: str
    device_id: int
    serial: str
    device_type: str
    model: str
    index: int = 0

    def labels(self) -> dict[str, str]:
        return {"host": self.host, "device": str(self.device_id), "serial": self.serial,
                "type": self.device_type, "model": self.model}

    def dcgm_labels(self) -> dict[str, str]:
        return {"gpu": str(self.index), "UUID": self.serial, "device": f"nvidia{self.index}",
                "modelName": self.model, "Hostname": self.host}


@cache
def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """TSDB_LABELS ("name=value,name=value") as (name, value) pairs; ValueError says what is wrong."""
    pairs = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"{item!r} is not name=value")
        if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"{name!r} is not a label name (letters, digits and _, not starting with __)")
        if name in _RESERVED:
            raise ValueError(f"{name!r} is a label Asicmon writes itself")
        if name in dict(pairs):
            raise ValueError(f"{name!r} is given twice")
        pairs.append((name, value))
    return tuple(pairs)


def escape(value: str) -> str:
    """A label value inside double quotes in PromQL."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def selector(metric: str, *, extra: str | None = None, **labels: str) -> str:
    """'metric{a="x",b="y",<TSDB_LABELS>}' with the values escaped. `extra` is the
    TSDB_LABELS text (the configured one by default)."""
    if extra is None:
        from django.conf import settings  # the one setting read here; nothing else of Django

        extra = settings.TSDB_LABELS
    matchers = [*labels.items(), *parse_labels(extra)]
    inside = ",".join(f'{name}="{escape(str(value))}"' for name, value in matchers)
    return f"{metric}{{{inside}}}"


# Fleet-wide aggregates recorded by the store's rule engine (vmalert beside VictoriaMetrics,
# Prometheus' rule_files): a fleet-wide graph over a day reads these few series instead of
# every device's (benchmarks/bench_tsdb.py). (recorded name, PromQL aggregation, counter).
RECORDED = (
    ("asicmon:temperature_c:p95_by_type", "quantile by ({by}) (0.95, {series})", "temperature_c"),
    ("asicmon:temperature_c:max_by_type", "max by ({by}) ({series})", "temperature_c"),
    ("asicmon:device_utilization:avg_by_type", "avg by ({by}) ({series})", "device_utilization"),
    ("asicmon:power_w:sum_by_type", "sum by ({by}) ({series})", "power_w"),
)


def recording_rules(extra: str = "") -> str:
    """The rules file (Prometheus' format, which vmalert reads too) recording RECORDED per
    device type, for the series carrying the TSDB_LABELS `extra` (kept on the results)."""
    extra_names = [name for name, _ in parse_labels(extra)]
    by = ", ".join(["type", *extra_names])
    lines = [
        "# Fleet-wide aggregates by device type, recorded by the store's rule engine (vmalert with",
        "# VictoriaMetrics, rule_files in Prometheus). Made by fleet.tsdb.series.recording_rules().",
        "groups:",
        "  - name: asicmon-fleet",
        "    rules:",
    ]
    for record, aggregation, counter in RECORDED:
        expr = aggregation.format(by=by, series=selector(series_name(counter), extra=extra))
        quoted = expr.replace("'", "''")  # a YAML single-quoted string
        lines += [f"      - record: {record}", f"        expr: '{quoted}'"]
    return "\n".join(lines) + "\n"
