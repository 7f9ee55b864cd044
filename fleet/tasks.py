"""Celery tasks: thin wrappers over fleet.polling.poller and fleet.health.remediation,
JSON arguments only."""

from celery import shared_task
from django.conf import settings

from fleet.agent import queues
from fleet.driver_errors import store as driver_error_store
from fleet.health import remediation
from fleet.polling import poller


@shared_task(ignore_result=True)
def poll_fleet(cycle: float | None = None) -> None:
    """Fan out one poll task per shard of emulated hosts, and one per host with a live agent
    on that agent's own queue, for the current cycle."""
    cycle = poller.current_cycle() if cycle is None else cycle
    expires = settings.POLL_INTERVAL * 0.9
    for shard in poller.shards():
        poll_shard.apply_async((shard, cycle), expires=expires)
    for host_id, queue in queues.live_agent_hosts():
        poll_agent_host.apply_async((host_id, cycle), queue=queue, expires=expires)


@shared_task(ignore_result=True, acks_late=True)
def poll_shard(shard: int, cycle: float) -> dict:
    result = poller.poll_shard(shard, cycle)
    return {"shard": result.shard, "devices": result.devices, "samples": result.samples}


@shared_task(ignore_result=True, acks_late=True)
def poll_agent_host(host_id: int, cycle: float) -> dict | None:
    result = poller.poll_agent_host(host_id, cycle)
    return None if result is None else {"host": host_id, "devices": result.devices, "samples": result.samples}


@shared_task(ignore_result=True)
def sync_scheduler() -> list[str]:
    """Drain and resume scheduler nodes as their devices say; read their jobs (SCHEDULER)."""
    from fleet.scheduler import sync

    return sync.sync_all()


@shared_task(ignore_result=True)
def send_alerts() -> dict:
    """What of the fleet needs a person, to Alertmanager (ALERTMANAGER_URL; fleet/alerts)."""
    from fleet.alerts import rules

    return rules.send()


@shared_task(ignore_result=True)
def flush_samples() -> dict:
    """Send the samples waiting in the spool for the time-series store (polls send them too)."""
    result = poller.flush_samples()
    return {"written": result.written, "rejected": result.rejected, "waiting": result.waiting}


@shared_task(ignore_result=True)
def prune_driver_errors() -> int:
    """Delete driver errors older than DRIVER_ERROR_RETENTION_DAYS (hourly, from beat)."""
    return driver_error_store.prune()


@shared_task(ignore_result=True, acks_late=True)
def issue_action(action_id: int) -> None:
    """Carries out an operator's reboot recorded as action ``action_id``."""
    remediation.issue_pending(action_id)


@shared_task(ignore_result=True, name="fleet.tasks.run_replay")
def run_replay(replay_id: str) -> None:
    """A fault history replayed against the repair policies (fleet.replay.runs, docs/replay.md)."""
    from fleet.replay import runs as replays

    replays.run(replay_id)
