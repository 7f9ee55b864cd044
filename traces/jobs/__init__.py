"""Distributed jobs: one trace per rank, captured or uploaded together, then joined.

Owns a job's capture (capture), its upload (uploads), the per-rank analysis and the
cross-rank step (analysis), the results the pages and the API show (results) and what the
fleet knew of each device while the job ran (health).

May import: traces.store, traces.uploads, traces.atrace, fleet.reading, and the traces app's
top-level modules (writers, models, events, queueing, refusals)."""
