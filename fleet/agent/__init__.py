"""The host agent: a Celery worker on a machine with real accelerators.

``python -m fleet.agent`` (or ``make agent``) finds this machine's devices through their
specs, registers the host and its devices in the fleet, says it is alive every poll
interval, and consumes its own queue: beat sends this host's polls there, and the same
poll service as the emulated fleet's writes the samples, snapshots and websocket messages.
The queues work for a host goes to, the shared one or its agent's, are decided here (queues).
It needs the stack's settings (DATABASE_URL, REDIS_URL, CELERY_QUEUE, POLL_INTERVAL, …).

May import: fleet, fleet.asicmon, fleet.hosts.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
