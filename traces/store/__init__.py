"""Stored traces: where a trace's files are and everything read from or written to them.

Owns the layout of the traces storage (files), the analysis results beside a trace: summary,
instances, args and the download (results), the page data the trace page draws (page_data),
reading both back for pages and the API (queries), how much of each is stored (page_limits),
the storage's budget and retention (storage_budget) and the S3-compatible backend
(object_store).

May import: fleet.reading, traces, traces.atrace.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
