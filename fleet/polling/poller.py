"""Polling: every cycle, each shard of emulated hosts and exporters (EXPORTER_URLS), and
each host with an agent, is probed, and its health, snapshots, health index, one message and its samples are written
(the samples to the time-series store, fleet/tsdb).

Celery tasks (fleet/tasks.py) are thin wrappers over these functions; tests call them too.
"""

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.db import connection as db_connection

from fleet import events, tsdb
from fleet.driver_errors import poll as driver_errors
from fleet.health import assessing, remediation
from fleet.health import index as health_index
from fleet.hosts import exporter_fleet
from fleet.hosts.emulated_fleet import host_monitor
from fleet.hosts.polled_host import PolledHost
from fleet.models import Device, Host
from fleet.polling import otlp_export, snapshots
from fleet.polling.sharding import shard_of_host
from fleet.tsdb.series import DeviceKey
from fleet.tsdb.writes import Encoder, WriteResult

log = logging.getLogger(__name__)


def current_cycle(now: float | None = None) -> float:
    """The start of the poll slot that `now` falls in: the key of a cycle's samples."""
    now = time.time() if now is None else now
    interval = settings.POLL_INTERVAL
    return (now // interval) * interval


def shards() -> range:
    return range(settings.POLL_SHARDS)


@dataclass(frozen=True)
class ShardPollResult:
    shard: int
    cycle: float
    devices: int
    samples: int  # the cycle's samples: sent to the store, or waiting in the spool
    seconds: float
    gap: str = ""  # why nothing of this cycle was written for the shard; empty when written
    waiting: int = 0  # batches waiting in the spool for the store afterwards


def poll_shard(shard: int, cycle: float) -> ShardPollResult:
    """Poll every emulated host of one shard through Asicmon, for one cycle.

    Stores the latest snapshots in Redis, publishes one message for the shard and writes
    the cycle's samples to the time-series store in one batch (a repeat of the same cycle
    adds nothing). Hosts with an agent are left to their agents (`poll_agent_host`).
    """
    deadline = cycle + settings.POLL_INTERVAL
    try:
        if settings.EXPORTER_URLS:
            retry_transient(exporter_fleet.ensure_registered, deadline)
        hosts = retry_transient(
            lambda: list(Host.objects.emulated().in_shard(shard, settings.POLL_SHARDS).values_list("id", "name")),
            deadline,
        )
    except SlotPassed as exc:
        return _gap(shard, cycle, f"shard {shard}", time.perf_counter(), exc)
    return _poll_hosts(
        shard, cycle, hosts, lambda name: exporter_fleet.monitor_of(name, host_monitor), label=f"shard {shard}", scope=f"shard:{shard}/{settings.POLL_SHARDS}"
    )


class MisroutedPoll(Exception):
    """An agent was asked to poll a host that is not its own."""


def poll_agent_host(host_id: int, cycle: float) -> ShardPollResult | None:
    """Poll the real devices of the agent's own host (run by that agent only), for one cycle.

    The same writes as a shard's poll; the message goes to the host's shard group, so the
    pages that follow that shard see it. None if the host is gone.
    """
    from fleet.agent.discovery import agent_host

    host = Host.objects.filter(pk=host_id).values_list("name", flat=True).first()
    if host is None:
        return None
    local = agent_host()
    if host != local.name:
        raise MisroutedPoll(f"the agent of {local.name} was asked to poll {host}")
    result = _poll_hosts(
        shard_of_host(host_id), cycle, [(host_id, host)], lambda _: local, label=f"host {host}", scope=f"host:{host_id}"
    )
    Host.objects.filter(pk=host_id).update(agent_seen_at=datetime.now(tz=UTC))
    return result


def _poll_hosts(
    shard: int, cycle: float, hosts: list[tuple[int, str]], monitor_of: Callable[[str], PolledHost], *,
    label: str, scope: str,
) -> ShardPollResult:
    """Probe the hosts, then write their health, snapshots, health index, one message and
    their samples.

    A transient database or Redis error is retried until the cycle's slot ends; if it is
    still failing then, the cycle is a gap for these hosts. The samples go last, to the
    store (`write_samples`): a store that is down or slow makes them wait in
    the spool, within TSDB_WRITE_TIMEOUT_S and TSDB_FLUSH_BUDGET_S, never holding up the
    live values. ``scope`` names the writer of the batch.
    """
    started = time.perf_counter()
    deadline = cycle + settings.POLL_INTERVAL
    try:
        rows_by_serial = retry_transient(lambda: _devices_of(hosts), deadline)
        devices = {row[0]: row for row in rows_by_serial}
        kinds = {device_id: (device_type, state) for _, device_id, device_type, state, _, _ in rows_by_serial}
        now = time.time()
        polled, keyed, polled_hosts = _probe(hosts, devices, monitor_of)
        retry_transient(lambda: assessing.assess_polled(polled, kinds, now), deadline)
        retry_transient(lambda: snapshots.write_snapshots(cycle, polled), deadline)
        drained = driver_errors.drain(polled_hosts)
        retry_transient(lambda: driver_errors.record(drained, devices), deadline)
        _repair(polled)
        _remediate(polled)
        retry_transient(lambda: health_index.record(polled, cycle), deadline)
        retry_transient(lambda: events.shard_polled(shard, cycle, list(polled)), deadline)
    except SlotPassed as exc:
        return _gap(shard, cycle, label, started, exc)
    written = write_samples(cycle, scope, keyed)
    if settings.OTLP_METRICS_ENDPOINT:  # off by default; sent beside the next poll
        otlp_export.sender(settings.OTLP_METRICS_ENDPOINT).submit(cycle, keyed)
    result = ShardPollResult(shard, cycle, len(polled), written.kept, time.perf_counter() - started,
                             waiting=written.waiting)
    log.info(
        "%s cycle %.0f: %d devices, %d samples in %.1f ms%s",
        label, cycle, result.devices, result.samples, result.seconds * 1000,
        f" ({result.waiting} batches wait for the store)" if result.waiting else "",
    )
    return result


_encoders: dict[bool, Encoder] = {}


def write_samples(cycle: float, scope: str, keyed: list[tuple[DeviceKey, dict]]) -> WriteResult:
    """The cycle's samples to the store (requests of at most 4 MiB), through the spool when
    it cannot take them now. A spool that cannot be written (a full disk) loses them, said
    in the log."""
    encoder = _encoders.get(settings.TSDB_DCGM_SERIES)
    if encoder is None:
        encoder = _encoders[settings.TSDB_DCGM_SERIES] = Encoder(dcgm=settings.TSDB_DCGM_SERIES)
    batches = encoder.batches(cycle, scope, keyed, settings.TSDB_LABELS)
    try:
        return tsdb.writer().write(batches)
    except OSError as exc:
        lost = sum(b.samples for b in batches)
        log.error("cycle %.0f of %s: %d samples lost, the spool cannot be written: %s", cycle, scope, lost, exc)
        return WriteResult(rejected=lost)


def flush_samples() -> WriteResult:
    """Send the batches waiting in the spool, within TSDB_FLUSH_BUDGET_S (the beat task)."""
    return tsdb.writer().flush()


def _repair(polled: dict[int, dict]) -> None:
    """The repair ladder for driver errors: first, so that a device it takes is not also
    rebooted by the health rules' remediation. Not retried (the next poll carries on)."""
    try:
        driver_errors.after_poll(polled)
    except TRANSIENT_ERRORS as exc:
        log.warning("repair ladder skipped this cycle: %s: %s", type(exc).__name__, exc)


def _remediate(polled: dict[int, dict]) -> None:
    """Remediation acts on devices: not retried here (the next poll sees what is still wrong)."""
    try:
        remediation.after_poll(polled)
    except TRANSIENT_ERRORS as exc:
        log.warning("remediation skipped this cycle: %s: %s", type(exc).__name__, exc)


def _gap(shard: int, cycle: float, label: str, started: float, exc: Exception) -> ShardPollResult:
    log.warning("%s cycle %.0f: a gap, %s", label, cycle, exc)
    return ShardPollResult(shard, cycle, 0, 0, time.perf_counter() - started, gap=str(exc))


def _devices_of(hosts: list[tuple[int, str]]) -> list[tuple[str, int, str, str, str, int]]:
    """(serial, id, type, state, model, index) of the hosts' devices."""
    return list(
        Device.objects.filter(host_id__in=[host_id for host_id, _ in hosts]).values_list(
            "serial", "id", "device_type", "state", "model", "index"
        )
    )


def _probe(hosts, devices: dict[str, tuple], monitor_of):
    """Snapshots by device id, (series labels, snapshot) of each device for the store, and
    the hosts polled (their error events are drained next)."""
    polled: dict[int, dict] = {}
    keyed: list[tuple[DeviceKey, dict]] = []
    monitors = [monitor_of(name) for _, name in hosts]
    for (_, host), snapshots_by_serial in zip(hosts, poll_hosts_concurrently(monitors), strict=True):
        for serial, snapshot in snapshots_by_serial.items():
            row = devices.get(serial)
            if row is None:
                continue  # a device the database does not know (yet): not ours to record
            _, device_id, device_type, _, model, index = row
            polled[device_id] = snapshot
            keyed.append((DeviceKey(host, device_id, serial, device_type, model, index), snapshot))
    return polled, keyed, monitors


_host_pool: ThreadPoolExecutor | None = None


def poll_hosts_concurrently(monitors: list[PolledHost]) -> Iterator[dict[str, dict]]:
    """Each host's snapshots, hosts polled side by side: a host waiting out the time budget
    of a newly hung device does not hold up the next host, so newly hung devices on many
    hosts cost their shard about one probe timeout, not one per host. (A device already
    known hung costs nothing: it is probed in the background.)"""
    global _host_pool
    if len(monitors) <= 1:
        yield from (monitor.poll() for monitor in monitors)
        return
    if _host_pool is None:
        _host_pool = ThreadPoolExecutor(settings.POLL_HOST_THREADS, thread_name_prefix="poll-host")
    yield from _host_pool.map(lambda monitor: monitor.poll(), monitors)


# --- Transient errors ------------------------------------------------------------------

TRANSIENT_ERRORS = (OperationalError, InterfaceError, redis.ConnectionError, redis.TimeoutError, OSError)


class SlotPassed(Exception):
    """A transient error outlasted the poll slot."""


def retry_transient(step, deadline: float, *, first_wait: float = 0.05, max_wait: float = 1.0):
    """Run `step`, retrying database and Redis errors that go away by themselves (a dropped
    connection, a server restarting, no free connection) with back-off until `deadline`
    (Unix seconds); then raise SlotPassed with the last error."""
    wait = first_wait
    while True:
        try:
            return step()
        except TRANSIENT_ERRORS as exc:
            if isinstance(exc, OperationalError | InterfaceError):
                db_connection.close()  # a broken connection goes back to the pool as broken
            if time.time() + wait >= deadline:
                raise SlotPassed(f"{type(exc).__name__}: {exc}".strip()) from exc
            log.info("transient %s, retrying in %.2f s: %s", type(exc).__name__, wait, exc)
            time.sleep(wait)
            wait = min(wait * 2, max_wait)

