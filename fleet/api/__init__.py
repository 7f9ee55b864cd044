"""The fleet's REST API: thin DRF views over the readers and the writers, its permissions,
parameters, pagination and schema.

May import: fleet, fleet.agent, fleet.asicmon, fleet.driver_errors, fleet.health, fleet.polling, fleet.reading, fleet.tsdb.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
