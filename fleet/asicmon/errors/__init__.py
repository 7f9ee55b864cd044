"""Driver error events: a device's second input beside its counters (no Django).

`ErrorEvent` and `EventChannel` (events, merged per bucket), the per-vendor catalogues that
classify them (`catalogue`), the kernel-log reader (`KernelLogReader`) and the other sources
(`sources`). A monitor's channel is `DeviceMonitor.events`; the poll drains it.
"""

from fleet.asicmon.errors.catalogue import (
    ACTIONS,
    Catalogue,
    CatalogueEntry,
    catalogue,
    catalogue_names,
    classify,
)
from fleet.asicmon.errors.events import DEFAULT_BUCKET_S, ErrorEvent, EventChannel, fingerprint
from fleet.asicmon.errors.kernel_log import KernelLogReader, normalise_address, parse_message

__all__ = [
    "ACTIONS",
    "DEFAULT_BUCKET_S",
    "Catalogue",
    "CatalogueEntry",
    "ErrorEvent",
    "EventChannel",
    "KernelLogReader",
    "catalogue",
    "catalogue_names",
    "classify",
    "fingerprint",
    "normalise_address",
    "parse_message",
]
