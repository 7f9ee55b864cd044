"""The upload gate: who may send a body to an upload route, and how large.

Owns the gate's decision (upload_gate) and its place inside Daphne, before the body is stored
(daphne_gate).

May import: nothing.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
