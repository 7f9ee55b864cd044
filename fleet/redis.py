"""One Redis client per process, from REDIS_URL."""

from functools import cache

import redis
from django.conf import settings


@cache
def get_redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5, health_check_interval=30)


def key(*parts: str) -> str:
    return ":".join([settings.REDIS_KEY_PREFIX, *parts])
