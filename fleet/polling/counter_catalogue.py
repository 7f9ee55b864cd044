"""The counter catalogue in the database.

The poll writes samples to the time-series store (fleet/tsdb), and its readers read them
there (fleet/reading/history.py).
"""

from fleet.asicmon import CATALOGUE
from fleet.models import Counter


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

