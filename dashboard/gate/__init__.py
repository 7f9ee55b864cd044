"""The upload gate: who may send a body to an upload route, and how large.

Owns the gate's decision (upload_gate) and its place inside Daphne, before the body is stored
(daphne_gate).

May import: the apps' upload limits (settings) and dashboard's own modules; no app imports
it."""
