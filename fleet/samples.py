"""The counter catalogue in the database, and reading the PostgreSQL samples table.

The poll writes samples to the time-series store (fleet/tsdb), not here.
"""

from datetime import datetime

from fleet.asicmon import CATALOGUE
from fleet.models import Counter, Sample

# Kinds of catalogue counters that are numbers worth a time series.
SERIES_KINDS = {"gauge", "counter"}


def mirror_catalogue(**kwargs) -> None:
    """Copy the Asicmon catalogue into the Counter table (run after every migrate)."""
    Counter.objects.bulk_create(
        [
            Counter(name=c.name, unit=c.unit, kind=c.kind, description=c.description[:255])
            for c in CATALOGUE.values()
        ],
        ignore_conflicts=True,
    )


def counter_ids() -> dict[str, int]:
    """Counter name -> id, one small query; mirrors the catalogue if a counter is missing."""
    ids = dict(Counter.objects.values_list("name", "id"))
    if len(ids) < len(CATALOGUE):
        mirror_catalogue()
        ids = dict(Counter.objects.values_list("name", "id"))
    return ids


def series_counter_names() -> list[str]:
    return sorted(name for name, c in CATALOGUE.items() if c.kind in SERIES_KINDS)


def read_series(device_id: int, counter_id: int, since: datetime, until: datetime, limit: int):
    """(ts, value) pairs of one device's counter in [since, until], oldest first; with more
    than ``limit`` in the range, the latest ``limit`` of them."""
    latest = list(
        Sample.objects.filter(device_id=device_id, counter_id=counter_id, ts__gte=since, ts__lte=until)
        .order_by("-ts")
        .values_list("ts", "value")[:limit]
    )
    latest.reverse()
    return latest
