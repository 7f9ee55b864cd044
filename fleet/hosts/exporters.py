"""A metrics exporter a fleet already runs (NVIDIA's dcgm-exporter, AMD's device-metrics-exporter)
as the driver of a spec (``dcgm_exporter.asimov``, ``amd_exporter.asimov``):
its ``/metrics`` page, in the Prometheus text format, read once per refresh and shared by
every GPU behind the endpoint.

    host = exporter_host("http://node-1:9400/metrics")   # one monitor per GPU on the page
    for serial, snapshot in host.poll().items(): ...

`PromLib` is the ``lib`` of ``fleet/asimov/specs/dcgm_exporter.asimov``: ``promDevice(index)``
(the index-th GPU of the page), ``promScrape(gpu)`` (that GPU's series on a fresh page),
``promValue(page, name, *aliases)`` (the first series present; a renamed series is given
its old and new names) and ``promLabel(page, label)``. A series the exporter does not
publish raises `MissingSeries`, which the spec reads as no value where it says ``optional``.
A new value of ``DCGM_FI_DEV_XID_ERRORS`` (the last XID the GPU raised) becomes an error
event on the GPU's monitor, classified by NVIDIA's catalogue.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from fleet.asicmon.errors.catalogue import classify
from fleet.asicmon.errors.events import ErrorEvent
from fleet.asicmon.errors.sources import RAS_BLOCKS
from fleet.asicmon.monitor import DEFAULT_TIMEOUT_S, refresh_together
from fleet.asimov.loader import monitor_class
from fleet.hosts.polled_host import DeviceMonitors

__all__ = ["ExporterHost", "MissingSeries", "PromLib", "exporter_host", "parse_page"]

XID_SERIES = "DCGM_FI_DEV_XID_ERRORS"
# What names a GPU on a page, best first: dcgm-exporter's UUID, AMD's serial number, then
# the exporters' indexes (gpu, gpu_id), which name it only on its own host.
GPU_KEYS = ("UUID", "serial_number", "gpu", "gpu_id")
UNIQUE_KEYS = ("UUID", "serial_number")
MODEL_LABELS = ("modelName", "card_model")  # dcgm-exporter's, AMD's
MAX_AGE_S = 1.0  # a page this young serves the next GPU's refresh too


class MissingSeries(LookupError):
    """The exporter publishes no such series for this GPU."""


_RAS_SERIES = re.compile(r"(?:amd_)?gpu_ecc_(correct|uncorrect|deferred)_([a-z0-9_]+)$")
_RAS_KINDS = {"correct": "ce", "uncorrect": "ue", "deferred": "de"}


def _ras_slot(series: str) -> str | None:
    """``umc.ue`` for ``gpu_ecc_uncorrect_umc`` (or ``amd_gpu_ecc_uncorrect_umc``); None for
    any other series, the totals included."""
    match = _RAS_SERIES.match(series)
    if match is None or match.group(2) not in RAS_BLOCKS:
        return None
    return f"{match.group(2)}.{_RAS_KINDS[match.group(1)]}"


@dataclass
class GpuPage:
    """One GPU's series on one page: name -> value, and the GPU's labels."""

    key: str
    values: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


_SAMPLE = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _labels(text: str) -> dict[str, str]:
    return {m.group(1): re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], m.group(2))
            for m in _LABEL.finditer(text)}


def parse_page(text: str) -> dict[str, GpuPage]:
    """The page's series per GPU (keyed by its UUID label, else its ``gpu`` index), in the
    order the GPUs first appear. Series are kept under the names the page gives them;
    comments, series of no GPU and lines that are not samples are left out."""
    gpus: dict[str, GpuPage] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.group(1), _labels(match.group(2) or ""), match.group(3)
        key = next((labels[k] for k in GPU_KEYS if labels.get(k)), None)
        if key is None:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        page = gpus.get(key)
        if page is None:
            page = gpus[key] = GpuPage(key, labels=labels)
        page.values[name] = number
    return gpus


class PromLib:
    """One exporter endpoint as a driver library (thread-safe; one GET per `MAX_AGE_S`)."""

    def __init__(self, url: str, timeout: float = 2.0,
                 on_xid: Callable[[str, int, dict], None] | None = None,
                 on_ras: Callable[[str, ErrorEvent], None] | None = None) -> None:
        self.url = url
        self.timeout = timeout
        self.on_xid = on_xid
        self.on_ras = on_ras
        self.fetches = 0
        self._lock = threading.Lock()
        self._page: dict[str, GpuPage] = {}
        self._at = -1e18
        self._last_xid: dict[str, int] = {}
        self._last_ras: dict[tuple[str, str], int] = {}  # (GPU key, "umc.ue") -> its last count

    def page(self) -> dict[str, GpuPage]:
        with self._lock:
            if time.monotonic() - self._at > MAX_AGE_S:
                with urllib.request.urlopen(self.url, timeout=self.timeout) as response:  # noqa: S310 - an operator's URL
                    text = response.read().decode("utf-8", "replace")
                self._page, self._at = parse_page(text), time.monotonic()
                self.fetches += 1
                self._xids()
                self._ras_counts()
            return self._page

    def _xids(self) -> None:
        for key, gpu in self._page.items():
            xid = int(gpu.values.get(XID_SERIES, 0) or 0)
            if xid and xid != self._last_xid.get(key) and self.on_xid is not None:
                self.on_xid(key, xid, gpu.labels)
            self._last_xid[key] = xid

    def _ras_counts(self) -> None:
        """AMD's per-block ECC counts (``gpu_ecc_uncorrect_umc``...): an increase is an event,
        as amdgpu's sysfs counters are (code ``umc.ue``); the first reading of a count is
        where counting starts (a restart of the exporter or of Asicmon reports nothing old)."""
        now = time.time()
        for key, gpu in self._page.items():
            for name, value in gpu.values.items():
                slot = _ras_slot(name)
                if slot is None:
                    continue
                before, self._last_ras[(key, slot)] = self._last_ras.get((key, slot)), int(value)
                if before is None or value <= before or self.on_ras is None:
                    continue
                block, kind = slot.split(".")
                self.on_ras(key, ErrorEvent(
                    "amd", slot, f"{int(value) - before} {kind} errors in {block} block (total {int(value)})", now,
                    raw=f"{name}={value:g}", source="amd_exporter", count=int(value) - before,
                    address=gpu.labels.get("pcie_bus_id", gpu.labels.get("pci_bus_id", "")).lower(),
                ))

    # -- the spec's driver functions ------------------------------------------------------------
    def promDevice(self, index: int) -> str:  # noqa: N802 - a driver function, named as specs call it
        keys = list(self.page())
        if not 0 <= index < len(keys):
            raise MissingSeries(f"{self.url} publishes {len(keys)} GPU(s), none at index {index}")
        return keys[index]

    def promScrape(self, gpu: str) -> GpuPage:  # noqa: N802
        found = self.page().get(gpu)
        if found is None:
            raise MissingSeries(f"{self.url} no longer publishes GPU {gpu}")
        return found

    def promValue(self, page: GpuPage, name: str, *aliases: str) -> float:  # noqa: N802
        for candidate in (name, *aliases):
            if candidate in page.values:
                return page.values[candidate]
        raise MissingSeries(f"no series {' or '.join((name, *aliases))} for GPU {page.key}")

    def model(self, key: str) -> str:
        """The GPU's model as its labels on the last page give it ("" when they do not)."""
        labels = self._page[key].labels if key in self._page else {}
        return next((labels[k] for k in MODEL_LABELS if labels.get(k)), "")

    def promLabel(self, page: GpuPage, label: str) -> str:  # noqa: N802
        if label not in page.labels:
            raise MissingSeries(f"no label {label} on GPU {page.key}")
        return page.labels[label]


class ExporterHost(DeviceMonitors):
    """The GPUs behind one exporter endpoint, polled together (a `PolledHost`)."""

    def __init__(self, name: str, monitors: dict, lib: PromLib, probe_timeout: float) -> None:
        super().__init__(name, monitors, probe_timeout)
        self.lib = lib
        self.keys: dict[str, str] = {}  # each device's serial -> the GPU's key on the page

    def shown(self) -> list[str]:
        """The serials of the GPUs the last page showed: one gone from it (pulled, or fallen
        off the bus and no longer in the exporter's list) is neither probed nor reported."""
        page = self.lib._page
        return [serial for serial, key in self.keys.items() if key in page]

    def snapshots(self) -> dict[str, dict]:
        shown = set(self.shown())
        return {serial: snap for serial, snap in super().snapshots().items() if serial in shown}

    def poll(self, now: float | None = None) -> dict[str, dict]:
        with contextlib.suppress(OSError):  # each probe then fails, and says why
            self.lib.page()  # one GET for all, outside the probes' time budgets
        shown = self.shown()
        refresh_together([self.monitor(s) for s in shown], time.time() if now is None else now, self.probe_timeout)
        return self.snapshots()


def exporter_host(url: str, name: str = "", spec: str = "dcgm_exporter",
                  probe_timeout: float = DEFAULT_TIMEOUT_S, timeout: float = 2.0,
                  seen_xids: dict[str, int] | None = None,
                  seen_ras: dict[tuple[str, str], int] | None = None) -> ExporterHost:
    """A host for one exporter endpoint: one monitor per GPU its page shows, named by the
    GPU's UUID, its XID errors routed to that monitor as classified error events."""
    monitors = {}

    def on_xid(key: str, xid: int, labels: dict) -> None:
        monitor = monitors.get(key)
        if monitor is not None:
            detail = f"last XID reported by dcgm-exporter: {xid}"
            event = ErrorEvent("nvidia", str(xid), detail, time.time(), raw=f"{XID_SERIES}={xid}",
                               source="dcgm_exporter", address=labels.get("pci_bus_id", "").lower())
            monitor.events.put(classify(event, "nvidia_xid"))

    def on_ras(key: str, event: ErrorEvent) -> None:
        monitor = monitors.get(key)
        if monitor is not None:
            monitor.events.put(classify(event, "amd_ras"))

    lib = PromLib(url, timeout=timeout, on_xid=on_xid, on_ras=on_ras)
    klass = monitor_class(spec)
    for index, (key, gpu) in enumerate(lib.page().items()):
        unique = any(gpu.labels.get(k) == key for k in UNIQUE_KEYS)
        serial = key if unique else f"{name or url}#gpu{key}"  # an index names it only on its host
        monitors[key] = klass(index=index, lib=lib, serial=serial, timeout=probe_timeout)
    # XIDs already on the page when joining are events now (drained at the first poll), but
    # those in ``seen_xids`` (the GPU key's last XID, from an earlier host of the endpoint)
    lib._last_xid = dict(seen_xids or {})
    lib._xids()
    if seen_ras is not None:  # per-block ECC counts as an earlier host of the endpoint last read them
        lib._last_ras = dict(seen_ras)
        lib._ras_counts()
    host = ExporterHost(name or url, {m.serial: m for m in monitors.values()}, lib, probe_timeout)
    host.keys = {m.serial: key for key, m in monitors.items()}
    return host
