"""Putting a device's history into the time-series store for a test: any points, at any
times, as the poll would have written them (its series names and labels, and the test's
own TSDB_LABELS), then flushed so that they read back at once."""

from __future__ import annotations

from fleet import tsdb
from fleet.polling.sample_export import encode_series
from fleet.tsdb.series import series_name
from fleet.tsdb.writes import compress
from tests.support.tsdb import flush


def device_labels(device, host: str | None = None) -> dict[str, str]:
    return {"host": host or device.host.name, "device": str(device.pk), "serial": device.serial,
            "type": device.device_type, "model": device.model}


def write_points(device, points: dict[str, list[tuple[float, float]]], *, host: str | None = None,
                 client=None, extra: str | None = None) -> int:
    """Write ``points`` (counter name -> [(epoch seconds, value)]) of ``device`` to the store
    (the settings' by default); returns the number written."""
    from django.conf import settings

    from fleet.tsdb.series import parse_labels

    added = dict(parse_labels(settings.TSDB_LABELS if extra is None else extra))
    labels = device_labels(device, host)
    series = [({"__name__": series_name(name), **labels, **added}, [(round(t * 1000), float(v)) for t, v in sorted(values)])
              for name, values in points.items()]
    store = client or tsdb.client()
    store.write(compress(encode_series(series)), timeout_s=30)
    flush(max((t for values in points.values() for t, _ in values), default=None), store.read_url)
    return sum(len(values) for values in points.values())
