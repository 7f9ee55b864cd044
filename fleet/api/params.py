"""Parsing of query parameters into values, with specific messages for bad input."""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError

DEFAULT_WINDOW = timedelta(minutes=15)
MAX_WINDOW = timedelta(days=31)  # or the store's retention and a day, when that is longer


def max_window() -> timedelta:
    return max(MAX_WINDOW, timedelta(days=settings.SAMPLE_RETENTION_DAYS + 1))


def parse_instant(name: str, raw: str) -> datetime:
    """An ISO 8601 date-time (naive means UTC) or Unix seconds."""
    raw = raw.strip()
    try:
        return datetime.fromtimestamp(float(raw), tz=UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        parsed = parse_datetime(raw)
    except ValueError:
        parsed = None
    if parsed is None:
        raise ValidationError(
            {name: f"'{raw}' is not a time: use ISO 8601 (2026-11-21T10:00:00Z) or Unix seconds."}
        )
    if timezone.is_naive(parsed):
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def parse_time_range(params) -> tuple[datetime, datetime]:
    until = parse_instant("until", params["until"]) if params.get("until") else timezone.now()
    try:
        since = parse_instant("since", params["since"]) if params.get("since") else until - DEFAULT_WINDOW
    except OverflowError:
        raise ValidationError({"until": f"until ({until.isoformat()}) is too early to have a range before it."}) from None
    if since >= until:
        raise ValidationError({"since": f"since ({since.isoformat()}) must be before until ({until.isoformat()})."})
    longest = max_window()
    if until - since > longest:
        raise ValidationError({"since": f"the range may span at most {longest.days} days; "
                                        f"this one spans {(until - since).days} days."})
    return since, until


DATABASE_INTS = range(-(2**63), 2**63)  # what a database integer column holds (SQLite, PostgreSQL bigint)


def database_int(raw: str, name: str, what: str = "an integer") -> int:
    """``raw`` as an integer a database query can take; a 400 naming ``name`` when it is not
    one, or is past what a database integer holds (SQLite raises OverflowError on those)."""
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: f"'{raw[:40]}' is not {what}."}) from None
    if value not in DATABASE_INTS:
        raise ValidationError({name: f"'{raw[:40]}' is out of range."})
    return value


def parse_limit(params, *, default: int, maximum: int) -> int:
    raw = params.get("limit")
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({"limit": f"'{raw}' is not an integer."}) from None
    if not 1 <= value <= maximum:
        raise ValidationError({"limit": f"limit must be between 1 and {maximum}."})
    return value


def parse_choice(params, name: str, choices: list[str]) -> str | None:
    raw = params.get(name)
    if raw in (None, ""):
        return None
    if raw not in choices:
        raise ValidationError({name: f"'{raw}' is not one of: {', '.join(choices)}."})
    return raw
