"""A compact health index of the whole fleet, kept in Redis for the fleet page.

One hash: device id -> health's first letter and sample time in whole seconds (e.g.
"h1795000000"), written by each shard's poll before its message. Reading it costs a dozen
bytes per device where the snapshots cost a kilobyte, so the fleet page can count, filter and
sort 10,000 devices by health without reading their snapshots. Staleness is applied when it
is read, as `assessing.current_health` does for a snapshot.
"""

import time

from django.conf import settings

from fleet.asicmon.limits import DEFAULT_LIMITS
from fleet.choices import Health
from fleet.redis import get_redis, key

# Worst first: the order of the summaries and of a table sorted by health.
SEVERITY = {Health.CRITICAL.value: 0, Health.WARNING.value: 1, Health.UNKNOWN.value: 2, Health.HEALTHY.value: 3}
_BY_LETTER = {h.value[0].encode(): h.value for h in Health}


def _key() -> str:
    return key("health-index")


def record(polled: dict[int, dict], cycle: float) -> None:
    """Stores the health of freshly polled devices (their snapshots by device id, health
    assessed)."""
    if polled:
        entries = {
            device_id: f"{snapshot.get('health', Health.UNKNOWN.value)[0]}{int(snapshot.get('sample_ts') or cycle)}"
            for device_id, snapshot in polled.items()
        }
        get_redis().hset(_key(), mapping=entries)


def forget(device_ids: list[int]) -> None:
    if device_ids:
        get_redis().hdel(_key(), *device_ids)


def read(now: float | None = None) -> dict[int, str]:
    """Health by device id as of ``now``: unknown once no poll came for a few intervals.
    A device never polled is absent."""
    now = time.time() if now is None else now
    oldest = now - DEFAULT_LIMITS.stale_after_intervals * settings.POLL_INTERVAL
    unknown = Health.UNKNOWN.value
    return {
        int(device_id): _BY_LETTER.get(entry[:1], unknown) if int(entry[1:]) >= oldest else unknown
        for device_id, entry in get_redis().hgetall(_key()).items()
    }
