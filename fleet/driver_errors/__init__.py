"""Driver errors in the fleet app: storing the events the polls drain (`store`), the repair
ladder that acts on them (`ladder`), the validation gate (`gate`), repeat offenders across
the fleet (`offenders`) and what pages and /metrics show (`views`, `metrics`; the REST views are fleet.api.driver_errors).

The events themselves, their sources and catalogues are Django-free, in
`fleet.asicmon.errors`.

May import: fleet, fleet.agent, fleet.asicmon, fleet.asimov, fleet.health, fleet.hosts.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
