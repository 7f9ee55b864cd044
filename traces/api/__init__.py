"""The traces' REST API: thin DRF views over the writers and the stored page data, for
traces, jobs, uploads and request spans.

May import: emulator, fleet, fleet.api, traces, traces.atrace, traces.jobs, traces.processes, traces.requests, traces.store, traces.uploads.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
