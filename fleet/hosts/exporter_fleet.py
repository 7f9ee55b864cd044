"""The exporters of EXPORTER_URLS as hosts of the fleet: a Host row per endpoint, a Device
row per GPU its page shows (type ``gpu``), and one `ExporterHost` per endpoint, cached per
process, that the shard poll reads like an emulated host's monitor. No agent runs there.

    EXPORTER_URLS="dcgm=http://node-1:9400/metrics"   # the host node-1-9400, one device per GPU
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError, transaction

from fleet.hosts.exporters import ExporterHost, exporter_host
from fleet.hosts.polled_host import DeviceMonitors, Snapshots
from fleet.models import Device, Host

log = logging.getLogger(__name__)

DEVICE_TYPE = "gpu"


def endpoints() -> dict[str, tuple[str, str]]:
    """(spec, url) of each exporter host, by host name."""
    return {name: (spec, url) for spec, url, name in settings.EXPORTER_URLS}


class Unreachable(DeviceMonitors):
    """An exporter that did not answer when its host was opened: no devices this cycle
    (its devices keep their last snapshots; the next poll tries again)."""

    def __init__(self, name: str, probe_timeout: float) -> None:
        super().__init__(name, {}, probe_timeout)

    def poll(self, now: float | None = None) -> Snapshots:
        return {}


_hosts: dict[tuple[str, str, str], ExporterHost] = {}  # (name, spec, url) -> its host, per process


def exporter_monitor(name: str, seen_xids: dict[str, int] | None = None,
                     seen_ras: dict | None = None) -> ExporterHost | Unreachable:
    """The host of the exporter ``name``, kept for the life of the process
    (``exporter_monitor.cache_clear()`` forgets them); ``seen_xids``, ``seen_ras`` as
    `exporter_host` says."""
    spec, url = endpoints()[name]
    host = _hosts.get((name, spec, url))
    if host is not None:
        return host
    try:
        host = exporter_host(url, name=name, spec=spec, probe_timeout=settings.PROBE_TIMEOUT, seen_xids=seen_xids,
                             seen_ras=seen_ras)
    except Exception as exc:  # no answer, or a page or spec that cannot be read: no devices this cycle
        log.warning("exporter %s (%s) not read: %s: %s", name, url, type(exc).__name__, exc)
        return Unreachable(name, settings.PROBE_TIMEOUT)
    return _hosts.setdefault((name, spec, url), host)


def _reopen_if_grown(name: str) -> bool:
    """Forgets the host of exporter ``name`` when its last page showed GPUs it does not have
    (a GPU added, or the exporter restarted with more); True if so. The XIDs it had seen are
    kept, so none is reported twice."""
    spec, url = endpoints()[name]
    old = _hosts.get((name, spec, url))
    if old is None or not set(old.lib._page) - set(old.keys.values()):
        return False
    del _hosts[(name, spec, url)]
    exporter_monitor(name, seen_xids=old.lib._last_xid, seen_ras=old.lib._last_ras)
    return True


exporter_monitor.cache_clear = _hosts.clear  # type: ignore[attr-defined]


def monitor_of(host_name: str, emulated):
    """The exporter host of that name if EXPORTER_URLS names it, else ``emulated(host_name)``."""
    if host_name in endpoints():
        return exporter_monitor(host_name)
    return emulated(host_name)


def read_only_reason(host_name: str) -> str | None:
    """Why Asicmon cannot act on the devices of ``host_name`` (read through an exporter), or
    None: an exporter publishes metrics and takes no commands."""
    if host_name in endpoints():
        return f"{host_name} is read through its metrics exporter, which takes no commands"
    return None


_registered: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def ensure_registered() -> None:
    """Registers each exporter of EXPORTER_URLS not yet registered by this process (once
    per process; one that does not answer is tried again at the next call), and the GPUs
    that appeared on an exporter's page since."""
    with _lock:
        for entry in settings.EXPORTER_URLS:
            try:
                if entry in _registered and _reopen_if_grown(entry[2]):
                    _registered.discard(entry)  # its new GPUs are registered now
                if entry not in _registered and register_exporter(entry[2]) is not None:
                    _registered.add(entry)
                if entry in _registered:
                    mark_presence(entry[2])
            except DatabaseError:
                raise  # the poll retries it
            except Exception:  # a page the spec cannot read: this exporter waits, the shard goes on
                log.exception("exporter %s (%s) not registered", entry[2], entry[1])


def mark_presence(name: str) -> tuple[list[str], list[str]]:
    """Marks absent the devices of exporter ``name`` its last page no longer shows (their
    history stays; an exporter lists only the GPUs its driver still sees) and present again
    those it shows again; (serials gone, serials back). Writes only what changed."""
    monitor = exporter_monitor(name)
    if isinstance(monitor, Unreachable):
        return [], []  # no page, no news: an unanswered exporter is not a host without GPUs
    shown = set(monitor.shown())
    now = datetime.now(tz=UTC)
    devices = Device.objects.filter(host__name=name)
    gone = list(devices.filter(absent_since__isnull=True).exclude(serial__in=shown).values_list("serial", flat=True))
    back = list(devices.filter(absent_since__isnull=False, serial__in=shown).values_list("serial", flat=True))
    if gone:
        Device.objects.filter(serial__in=gone).update(absent_since=now)
        log.warning("exporter %s no longer publishes %s: marked absent (their history stays)", name, ", ".join(gone))
    if back:
        Device.objects.filter(serial__in=back).update(absent_since=None)
        log.info("exporter %s publishes %s again: present", name, ", ".join(back))
    return gone, back


def forget_registrations() -> None:
    with _lock:
        _registered.clear()


@transaction.atomic
def register_exporter(name: str) -> list[str] | None:
    """The Host row of exporter ``name`` and a Device row per GPU its page shows (running it
    again adds nothing); the serials created, or None if the exporter did not answer or the
    name is an agent's host."""
    monitor = exporter_monitor(name)
    if isinstance(monitor, Unreachable):
        return None
    host, _ = Host.objects.get_or_create(name=name)
    if host.has_agent:
        log.error("exporter %s: the host name belongs to an agent's host; not registered", name)
        return None
    created = []
    for index, serial in enumerate(monitor.serials):
        _, new = Device.objects.get_or_create(serial=serial, defaults={
            "host": host, "device_type": DEVICE_TYPE, "index": index,
            "model": monitor.lib.model(monitor.keys[serial])[:64],
        })
        if new:
            created.append(serial)
    return created
