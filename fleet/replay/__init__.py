"""Fault-history replays started from the dashboard: the upload checked, the Celery task's
run with its progress in Redis (`runs`), and the page with its status (`views`). The replay
itself is the emulator's (`emulator.replay`, docs/replay.md).

May import: emulator, fleet.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
