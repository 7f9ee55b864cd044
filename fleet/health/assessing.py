"""Health at poll time: the rules' windows in Redis, and health events in the database.

`assess_polled` is the one call a poll makes. It reads the windows of the polled devices
(one Redis round trip), runs the rules of `fleet.health.detection` on each, writes the windows back
(one round trip), records which devices are critical in a fleet-wide Redis set (what the
brake counts), and opens or closes health events only for devices whose findings changed:
no database query per device per poll.
"""

import time
from datetime import UTC, datetime

import orjson
from django.conf import settings
from django.db import IntegrityError, transaction

from fleet.choices import DeviceState, Health
from fleet.health import autocapture, detection
from fleet.models import HealthEvent
from fleet.redis import get_redis, key


def current_health(snapshot: dict | None, now: float | None = None) -> detection.Assessment:
    """Health of a cached snapshot as of ``now`` (default: the wall clock), stale after a few
    of the configured poll intervals: what pages, the API, /metrics and capacity show."""
    now = time.time() if now is None else now
    return detection.assess_with_reasons(snapshot, now=now, poll_interval=settings.POLL_INTERVAL)


def _windows_key() -> str:
    return key("health-windows")


def critical_key() -> str:
    return key("critical-devices")


def read_windows(device_ids: list[int]) -> dict[int, dict]:
    if not device_ids:
        return {}
    values = get_redis().hmget(_windows_key(), device_ids)
    return {i: orjson.loads(v) for i, v in zip(device_ids, values, strict=True) if v is not None}


def forget_windows(device_ids: list[int]) -> None:
    """A rebooted device starts its windows again. The rules it had open are kept, so that
    the next poll closes the events of those that no longer fire."""
    if not device_ids:
        return
    still_open = {i: orjson.dumps({"open": w["open"]}) for i, w in read_windows(device_ids).items() if w.get("open")}
    pipe = get_redis().pipeline(transaction=False)
    pipe.hdel(_windows_key(), *device_ids)
    if still_open:
        pipe.hset(_windows_key(), mapping=still_open)
    pipe.execute()


def assess_polled(polled: dict[int, dict], kinds: dict[int, tuple[str, str]], now: float) -> None:
    """Runs the rules on freshly polled snapshots and stores the findings in each snapshot.

    ``kinds`` maps a device id to its (type, state); only devices in service count as
    critical for the brake (one in repair or maintenance is not turning critical)."""
    windows = read_windows(list(polled))
    limits: dict[str, detection.Limits] = {}
    changed: dict[int, tuple[dict, list[detection.Finding]]] = {}
    critical, not_critical = [], []
    for device_id, snapshot in polled.items():
        window = windows.get(device_id) or {}
        previous = window.get("open", {})
        device_type, state = kinds.get(device_id, ("", ""))
        if device_type not in limits:
            limits[device_type] = detection.limits_for(spec_health(device_type), settings.HEALTH_LIMITS)
        assessment, window = detection.observe(window, snapshot, limits[device_type])
        snapshot["health"] = assessment.health.value
        snapshot["health_reasons"] = assessment.reasons
        snapshot["health_findings"] = [f.to_json() for f in assessment.findings]
        window["open"] = {f.rule: f.level.value for f in assessment.findings}
        windows[device_id] = window
        if window["open"] != previous:
            changed[device_id] = (previous, assessment.findings)
        counts = assessment.health == Health.CRITICAL and state == DeviceState.IN_SERVICE
        (critical if counts else not_critical).append(device_id)
    _write(windows, critical, not_critical)
    if changed:
        record_events(changed, datetime.fromtimestamp(now, tz=UTC))


def _write(windows: dict[int, dict], critical: list[int], not_critical: list[int]) -> None:
    pipe = get_redis().pipeline(transaction=False)
    if windows:
        pipe.hset(_windows_key(), mapping={i: orjson.dumps(w) for i, w in windows.items()})
    if critical:
        pipe.sadd(critical_key(), *critical)
    if not_critical:
        pipe.srem(critical_key(), *not_critical)
    pipe.execute()


def spec_health(device_type: str) -> dict:
    """The health limits a device type's Asimov spec sets (none without a spec)."""
    from fleet.asimov.loader import monitor_class

    try:
        return dict(monitor_class(device_type, tuple(settings.ASIMOV_SPEC_DIRS)).HEALTH)
    except LookupError:
        return {}


def critical_count() -> int:
    return int(get_redis().scard(critical_key()))


def record_events(changed: dict[int, tuple[dict, list[detection.Finding]]], at: datetime) -> None:
    """Closes the events of rules that stopped firing (or changed level) and opens the new
    ones. Idempotent: a second worker making the same change opens nothing twice."""
    for device_id, (previous, findings) in changed.items():
        now_open = {f.rule: f for f in findings}
        ended = [rule for rule, level in previous.items() if rule not in now_open or now_open[rule].level.value != level]
        started = [f for f in findings if previous.get(f.rule) != f.level.value]
        with transaction.atomic():
            if ended:
                HealthEvent.objects.filter(device_id=device_id, rule__in=ended, ended_at__isnull=True).update(ended_at=at)
            for finding in started:
                _open_event(device_id, finding, at)


def _open_event(device_id: int, finding: detection.Finding, at: datetime) -> None:
    try:
        with transaction.atomic():
            event = HealthEvent.objects.create(
                device_id=device_id,
                rule=finding.rule,
                level=finding.level.value,
                reason=finding.reason[:255],
                values=finding.values,
                started_at=at,
            )
    except IntegrityError:
        return  # another worker opened it for the same poll
    if autocapture.wanted(event):
        transaction.on_commit(lambda: autocapture.capture_for(event))
