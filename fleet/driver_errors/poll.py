"""What a poll does with error events: drain them from the hosts' monitors, store them, and
hand the new ones to the repair ladder."""

from __future__ import annotations

import logging

from fleet.asicmon.errors.events import ErrorEvent
from fleet.driver_errors import gate, ladder
from fleet.driver_errors.store import record_events
from fleet.hosts.polled_host import PolledHost

log = logging.getLogger(__name__)

__all__ = ["after_poll", "drain", "record"]

Drained = list[tuple[str, dict[str, list[ErrorEvent]]]]


def drain(hosts: list[PolledHost]) -> Drained:
    """Each host's error events since its last poll, by serial (a host without the
    channel, e.g. a test double, has none)."""
    out = []
    for host in hosts:
        drain_events = getattr(host, "drain_events", None)
        events = drain_events() if drain_events is not None else {}
        if events:
            out.append((host.name, events))
    return out


def record(drained: Drained, devices: dict[str, tuple]) -> None:
    """Stores the drained events. (A retry after a database error part-way counts the
    events stored before the error again: a count, never a lost or a duplicated row.)"""
    if not drained:
        return
    ids = {serial: row[1] for serial, row in devices.items()}
    for host, events in drained:
        created = record_events(host, events, ids)
        for row in created:
            log.info("driver error %s %s on %s: %s (%s)", row.vendor, row.code, row.serial or row.address, row.name, row.action)


def after_poll(polled: dict[int, dict]) -> None:
    """The gate for the polled devices under repair, then their new incidents."""
    if not polled:
        return
    gate.follow_up(polled)
    ladder.handle_incidents(list(polled))
