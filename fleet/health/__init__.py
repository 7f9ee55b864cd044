"""Health of devices and what is done about it.

Owns detection (rules over a snapshot and recent polls), the fleet-wide health index in Redis
(index), health at poll time: windows in Redis and health events in the database (assessing),
the actions on a device's hardware (control), remediation with its automation brake
(remediation) and automatic captures when a device looks wrong (autocapture).

May import: fleet, fleet.agent, fleet.asicmon, fleet.asimov, fleet.hosts.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
