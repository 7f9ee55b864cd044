"""Hosts and the devices they hold, as a poll reads them.

Owns the protocol of a polled host (polled_host), the real accelerators of this machine
(local), the emulated fleet of this deployment (emulated_fleet) and its devices' Asicmon
monitors compiled from their specs (emulated_monitors).

May import: fleet.asicmon, fleet.asimov, emulator, and the fleet app's top-level modules."""
