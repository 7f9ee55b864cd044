"""Polling: every cycle, each shard of emulated hosts (and each host with an agent) is
probed, and its health, samples, snapshots, health index and one message are written.

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

from fleet import events, health_index, health_service, remediation, samples, snapshots
from fleet.emulated_fleet import host_monitor
from fleet.hosts import PolledHost
from fleet.models import Device, Host
from fleet.sharding import shard_of_host

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
    samples: int
    seconds: float
    gap: str = ""  # why nothing of this cycle was written for the shard; empty when written


def poll_shard(shard: int, cycle: float) -> ShardPollResult:
    """Poll every emulated host of one shard through Asicmon, for one cycle.

    Writes the cycle's samples in one batch (a repeat of the same cycle adds nothing),
    stores the latest snapshots in Redis and publishes one message for the shard. Hosts
    with an agent are left to their agents (`poll_agent_host`).
    """
    deadline = cycle + settings.POLL_INTERVAL
    try:
        hosts = retry_transient(
            lambda: list(Host.objects.emulated().in_shard(shard, settings.POLL_SHARDS).values_list("id", "name")),
            deadline,
        )
    except SlotPassed as exc:
        return _gap(shard, cycle, f"shard {shard}", time.perf_counter(), exc)
    return _poll_hosts(
        shard, cycle, hosts, host_monitor, label=f"shard {shard}", scope=f"shard:{shard}/{settings.POLL_SHARDS}"
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
    """Probe the hosts, then write their health, samples, snapshots, health index and one message.

    A transient database or Redis error is retried until the cycle's slot ends; if it is
    still failing then, the cycle is a gap for these hosts: their samples are written
    whole (one transaction) or not at all. ``scope`` names the writer of the samples:
    a repeat of the cycle by the same scope adds none (`samples.write_samples`).
    """
    started = time.perf_counter()
    deadline = cycle + settings.POLL_INTERVAL
    try:
        rows_by_serial = retry_transient(lambda: _devices_of(hosts), deadline)
        counter_ids = retry_transient(samples.counter_ids, deadline)
        devices = {serial: device_id for serial, device_id, _, _ in rows_by_serial}
        kinds = {device_id: (device_type, state) for _, device_id, device_type, state in rows_by_serial}
        now = time.time()
        polled, rows = _probe(hosts, devices, cycle, counter_ids, monitor_of)
        retry_transient(lambda: health_service.assess_polled(polled, kinds, now), deadline)
        written = retry_transient(lambda: samples.write_samples(rows, scope), deadline)
        retry_transient(lambda: snapshots.write_snapshots(cycle, polled), deadline)
        _remediate(polled)
        retry_transient(lambda: health_index.record(polled, cycle), deadline)
        retry_transient(lambda: events.shard_polled(shard, cycle, list(polled)), deadline)
    except SlotPassed as exc:
        return _gap(shard, cycle, label, started, exc)
    result = ShardPollResult(shard, cycle, len(polled), written, time.perf_counter() - started)
    log.info(
        "%s cycle %.0f: %d devices, %d samples in %.1f ms",
        label, cycle, result.devices, result.samples, result.seconds * 1000,
    )
    return result


def _remediate(polled: dict[int, dict]) -> None:
    """Remediation acts on devices: not retried here (the next poll sees what is still wrong)."""
    try:
        remediation.after_poll(polled)
    except TRANSIENT_ERRORS as exc:
        log.warning("remediation skipped this cycle: %s: %s", type(exc).__name__, exc)


def _gap(shard: int, cycle: float, label: str, started: float, exc: Exception) -> ShardPollResult:
    log.warning("%s cycle %.0f: a gap, %s", label, cycle, exc)
    return ShardPollResult(shard, cycle, 0, 0, time.perf_counter() - started, gap=str(exc))


def _devices_of(hosts: list[tuple[int, str]]) -> list[tuple[str, int, str, str]]:
    """(serial, id, type, state) of the hosts' devices."""
    return list(
        Device.objects.filter(host_id__in=[host_id for host_id, _ in hosts]).values_list(
            "serial", "id", "device_type", "state"
        )
    )


def _probe(hosts, devices: dict[str, int], cycle: float, counter_ids: dict[str, int], monitor_of):
    """Snapshots by device id, and the cycle's sample rows."""
    cycle_ts = datetime.fromtimestamp(cycle, tz=UTC)
    polled: dict[int, dict] = {}
    rows: list[samples.SampleRow] = []
    for snapshots_by_serial in poll_hosts_concurrently([monitor_of(name) for _, name in hosts]):
        for serial, snapshot in snapshots_by_serial.items():
            device_id = devices.get(serial)
            if device_id is None:
                continue  # a device the database does not know (yet): not ours to record
            polled[device_id] = snapshot
            rows.extend(samples.rows_from_snapshot(device_id, cycle_ts, snapshot, counter_ids))
    return polled, rows


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

