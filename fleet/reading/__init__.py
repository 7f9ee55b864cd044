"""Reading the fleet: what the pages, the API and /metrics show.

Owns the readers in a fixed number of queries (queries), a device's history from the
time-series store (history), the charts built from it (charts), durations for people
(durations), the key counters (key_counters), the Prometheus endpoint (metrics) and the
load-balancing signal (capacity).

May import: fleet.polling (snapshots), fleet.health (index, detection), fleet.tsdb,
fleet.asicmon and the fleet app's top-level modules. Nothing here writes a device's state."""
