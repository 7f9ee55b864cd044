"""Which poll shard a host belongs to. Every process shares POLL_SHARDS from the environment."""

from django.conf import settings


def shard_of_host(host_id: int) -> int:
    return host_id % settings.POLL_SHARDS
