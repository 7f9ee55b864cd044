"""Driver errors in the fleet app: storing the events the polls drain (`store`), the repair
ladder that acts on them (`ladder`), the validation gate (`gate`), repeat offenders across
the fleet (`offenders`) and what pages, the API and /metrics show (`views`, `metrics`).

The events themselves, their sources and catalogues are Django-free, in
`fleet.asicmon.errors`.
"""
