"""Celery tasks: thin wrappers over fleet.services, JSON arguments only."""

from celery import shared_task
from django.conf import settings

from fleet import services


@shared_task(ignore_result=True)
def poll_fleet(cycle: float | None = None) -> None:
    """Fan out one poll task per shard of hosts for the current cycle."""
    cycle = services.current_cycle() if cycle is None else cycle
    for shard in services.shards():
        poll_shard.apply_async((shard, cycle), expires=settings.POLL_INTERVAL * 0.9)


@shared_task(ignore_result=True, acks_late=True)
def poll_shard(shard: int, cycle: float) -> dict:
    result = services.poll_shard(shard, cycle)
    return {"shard": result.shard, "devices": result.devices, "samples": result.samples}


@shared_task(ignore_result=True)
def prune_samples() -> int:
    return services.prune_samples()
