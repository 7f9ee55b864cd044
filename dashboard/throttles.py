"""Rate limits of the API: calls per signed-in user (API_THROTTLE_USER) and per client
address for calls nobody signed in for (API_THROTTLE_ANON). Past the rate a call gets 429
with ``Retry-After`` (the seconds until the current window ends) and ``{"detail": ...}``.

The counts live in Redis (under REDIS_KEY_PREFIX), one counter per caller and window of the
rate's period, raised with an atomic increment (one round trip): every web process counts
against the same limit.
A fixed window lets a caller send up to twice the rate across a window's edge; the point is
that one script cannot keep every web process busy, not an exact quota.

Only DRF views are counted. The OTLP receiver (/v1/traces) and /metrics are plain Django
views behind their own bearer tokens: a collector's or a scraper's rate is the operator's
choice, and the receiver's bodies are bounded by the upload gate (dashboard/gate/upload_gate.py).

A user's calls are counted by DRF's throttle check (after the permission check). An
anonymous call is refused by the permission check (401) before DRF would count it, so its
address is counted by :class:`AnonymousAddressRate`, the last authentication class: it is
reached only when no credentials signed the call in. When Redis cannot be reached the
call is let through (said in the log) at once: the counters' client tries once with short
timeouts, where the shared client retries with back-off (seconds a call while Redis is down).
A rate limit must not take the API down, or slow it, with Redis.
"""

from __future__ import annotations

import logging
import time

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import Throttled
from rest_framework.throttling import BaseThrottle

from dashboard.env import parse_rate
from dashboard.signin import client_address
from fleet.redis import key

log = logging.getLogger(__name__)
clock = time.time  # the windows' clock (a test holds it still)
COUNTER_TIMEOUT_S = 0.5
_clients: dict[str, redis.Redis] = {}


def counters() -> redis.Redis:
    """The counters' Redis client (REDIS_URL): one try, half a second at most."""
    url = settings.REDIS_URL
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_timeout=COUNTER_TIMEOUT_S,
                                             socket_connect_timeout=COUNTER_TIMEOUT_S, retry=Retry(NoBackoff(), 0))
    return _clients[url]


def seconds_to_wait(scope: str, ident: str, rate: str | None, now: float | None = None) -> float | None:
    """Count one call of `ident` against `rate`; the seconds until it may call again when
    this call is over the rate, else None."""
    parsed = parse_rate(rate) if rate else None
    if parsed is None:
        return None
    count, period = parsed
    now = clock() if now is None else now
    window = int(now // period)
    counter = key("throttle", scope, ident, str(window))
    try:
        pipe = counters().pipeline(transaction=False)  # one round trip
        pipe.incr(counter)
        pipe.expireat(counter, (window + 1) * period + 1)
        calls = pipe.execute()[0]
    except (redis.RedisError, OSError) as exc:
        log.warning("API rate limit not counted (Redis is not answering: %s)", exc)
        return None
    if calls <= count:
        return None
    return max(1.0, (window + 1) * period - now)


def _refuse(wait_s: float, who: str, setting: str) -> Throttled:
    return Throttled(wait=wait_s, detail=f"Too many API calls {who} ({setting}={getattr(settings, setting)}).")


class UserRate(BaseThrottle):
    """API_THROTTLE_USER calls per signed-in user (anonymous calls: AnonymousAddressRate).
    Refuses with its own words (DRF's would not name the setting)."""

    def allow_request(self, request, view) -> bool:
        user = request.user
        if user and user.is_authenticated:
            wait_s = seconds_to_wait("user", str(user.pk), settings.API_THROTTLE_USER)
            if wait_s is not None:
                raise _refuse(wait_s, "from this user", "API_THROTTLE_USER")
        return True


class AnonymousAddressRate(BaseAuthentication):
    """Signs in nobody: counts a call that no credentials signed in for against
    API_THROTTLE_ANON for its client address (TRUSTED_PROXIES decides which that is), and
    refuses it past the rate."""

    def authenticate(self, request):
        wait_s = seconds_to_wait("anon", client_address(request), settings.API_THROTTLE_ANON)
        if wait_s is not None:
            raise _refuse(wait_s, "from this address without signing in", "API_THROTTLE_ANON")
        return None
