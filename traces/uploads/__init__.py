"""Uploads of trace files, one service for traces and jobs.

Owns the upload handlers that spool a body to disk under a limit (handlers), resumable and
whole-file upload sessions (sessions), what a trace is made from (sources) and the look an
upload gets at its first bytes (check).

May import: traces, traces.atrace, traces.store.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
