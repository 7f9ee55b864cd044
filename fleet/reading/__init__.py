"""Reading the fleet: what the pages, the API and /metrics show.

Owns the readers in a fixed number of queries (queries), a device's history from the
time-series store (history), the charts built from it (charts), the key counters (key_counters), the Prometheus
endpoint (metrics) and the load-balancing signal (capacity). Durations for people are
fleet.durations.

May import: fleet, fleet.agent, fleet.asicmon, fleet.driver_errors, fleet.health, fleet.polling, fleet.tsdb.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
