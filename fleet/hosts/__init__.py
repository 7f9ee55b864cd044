"""Hosts and the devices they hold, as a poll reads them.

Owns the protocol of a polled host (polled_host), the real accelerators of this machine
(local), the emulated fleet of this deployment (emulated_fleet) and its devices' Asicmon
monitors compiled from their specs (emulated_monitors).

May import: emulator, fleet, fleet.asicmon, fleet.asimov.
(a bare app name, e.g. ``fleet``, means its top-level modules; tests/test_layers.py checks this list)
"""
