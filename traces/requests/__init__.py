"""Request spans: OpenTelemetry spans received over OTLP/HTTP or uploaded beside a trace,
kept for a bounded window and joined to the device traces captured in it.

May import: emulator, fleet.reading, traces, traces.atrace, traces.store.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
