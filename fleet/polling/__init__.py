"""Polling: every cycle, the shards of hosts are read and their samples sent on.

Owns the poll cycle (poller), which shard a host is in (sharding), the latest snapshot of
each device in Redis (snapshots), the counter catalogue mirrored into the database
(counter_catalogue) and the one-off move of old samples into the time-series store
(sample_export). The queues work for a host goes to are fleet.agent.queues.

May import: fleet, fleet.agent, fleet.asicmon, fleet.driver_errors, fleet.health, fleet.hosts, fleet.tsdb.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
