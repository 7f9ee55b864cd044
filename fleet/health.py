"""Health of a device from its latest snapshot: plain thresholds, no I/O."""

from fleet.choices import Health

TEMPERATURE_WARNING_C = 85.0
TEMPERATURE_CRITICAL_C = 95.0
# A snapshot older than this many poll intervals no longer says anything.
STALE_AFTER_INTERVALS = 3


def assess(snapshot: dict | None, *, now: float, poll_interval: float) -> Health:
    if not snapshot:
        return Health.UNKNOWN
    sampled = snapshot.get("sample_ts") or snapshot.get("cycle") or 0.0
    if now - sampled > STALE_AFTER_INTERVALS * poll_interval:
        return Health.UNKNOWN
    driver_status = snapshot.get("driver_status")
    if driver_status in {"hung", "error"}:
        return Health.CRITICAL
    temperature = snapshot.get("temperature_c")
    if temperature is not None and temperature >= TEMPERATURE_CRITICAL_C:
        return Health.CRITICAL
    if driver_status == "rebooting":
        return Health.WARNING
    if temperature is not None and temperature >= TEMPERATURE_WARNING_C:
        return Health.WARNING
    return Health.HEALTHY
