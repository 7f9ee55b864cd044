"""Samples in a Prometheus-compatible time-series store (VictoriaMetrics by default).

The package is Django-free but for this module, which builds its parts from the settings:
`client()`, `configured_labels()` and `writer()`, and `status` (the spools' state in Redis).

May import: fleet, fleet.asicmon.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""

from fleet.tsdb.client import Client, Series, TsdbError, TsdbUnavailable

__all__ = ["Client", "Series", "TsdbError", "TsdbUnavailable", "client", "configured_labels", "writer"]

_clients: dict[tuple, Client] = {}


def client() -> Client:
    """The store the settings name (one client per configuration, shared by threads)."""
    from django.conf import settings

    key = (settings.TSDB_URL, settings.TSDB_WRITE_URL, settings.TSDB_READ_TIMEOUT_S, settings.TSDB_WRITE_TIMEOUT_S)
    found = _clients.get(key)
    if found is None:
        found = _clients[key] = Client(*key)
    return found


def configured_labels() -> str:
    """The TSDB_LABELS text: extra labels on every series written and every selector read."""
    from django.conf import settings

    return settings.TSDB_LABELS


def writer():
    """The poll's writer: the store, with the spool under TSDB_BUFFER_DIR in front of it,
    telling Redis what it did (fleet/tsdb/status.py)."""
    from django.conf import settings

    from fleet.tsdb.buffer import Spool
    from fleet.tsdb.sending import Writer
    from fleet.tsdb.status import RedisMonitor

    spool = Spool(settings.TSDB_BUFFER_DIR, settings.TSDB_BUFFER_MAX_MB * 1024 * 1024)
    return Writer(client(), spool, flush_budget_s=settings.TSDB_FLUSH_BUDGET_S, monitor=RedisMonitor(spool.folder))
