"""Distributed jobs: one trace per rank, captured or uploaded together, then joined.

Owns a job's capture (capture), its upload (uploads), the per-rank analysis and the
cross-rank step (analysis), the results the pages and the API show (results) and what the
fleet knew of each device while the job ran (health).

May import: emulator, fleet, fleet.agent, fleet.hosts, fleet.polling, fleet.reading, traces, traces.atrace, traces.store, traces.uploads.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
