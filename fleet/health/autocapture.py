"""Capture when something looks wrong: a short trace of a device whose work rate fell well
below what its utilization gives (the ``slow_work`` rule), linked to the health event.

At most one per device per hour (a Redis key that expires) and AUTOCAPTURE_MAX_PER_HOUR
fleet-wide (a counter per clock hour). The capture itself is the traces app's: it answers the
``capture_wanted`` signal; what it refuses (a capture already running, a real host, storage
full) it logs and skips.
"""

import logging
import time

from django.conf import settings

from fleet.models import Device, HealthEvent
from fleet.redis import get_redis, key
from fleet.signals import capture_wanted

log = logging.getLogger(__name__)

RULES = ("slow_work",)
DEVICE_EVERY_S = 3600


def wanted(event: HealthEvent) -> bool:
    return event.rule in RULES and settings.AUTOCAPTURE_MAX_PER_HOUR > 0


def _allowed(device_id: int) -> bool:
    client = get_redis()
    if not client.set(key("autocapture", "device", str(device_id)), "1", nx=True, ex=DEVICE_EVERY_S):
        return False  # one already within the hour
    bucket = key("autocapture", "fleet", str(int(time.time() // 3600)))
    count = client.incr(bucket)
    client.expire(bucket, 2 * 3600)
    return count <= settings.AUTOCAPTURE_MAX_PER_HOUR


def capture_for(event: HealthEvent) -> int | None:
    """Asks for a trace of the event's device (``fleet.signals.capture_wanted``, which the
    traces app answers) and links it; returns the trace id."""
    if not wanted(event) or not _allowed(event.device_id):
        return None
    device = Device.objects.select_related("host").get(id=event.device_id)
    answers = capture_wanted.send(
        sender=HealthEvent, device=device, duration_s=settings.AUTOCAPTURE_DURATION_S, reason=event.reason
    )
    trace_id = next((answer for _, answer in answers if answer is not None), None)
    if trace_id is None:
        return None
    HealthEvent.objects.filter(id=event.id).update(trace_id=trace_id)
    log.warning("captured trace %d of %s: %s", trace_id, device.serial, event.reason)
    return trace_id
