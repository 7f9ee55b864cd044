"""Seeding the emulated fleet's rows (the seeding itself: tests/fleet/polling/test_poller.py)."""

import pytest

from fleet.hosts import emulated_fleet
from fleet.models import Device, Host

pytestmark = pytest.mark.django_db


def test_rows_another_process_seeded_meanwhile_are_taken_row_by_row_and_not_counted(fleet_settings, monkeypatch):
    emulated_fleet.seed_fleet()
    before = set(Device.objects.values_list("serial", "host__name", "device_type", "index", "workload"))
    # As if another process seeded the fleet between this one's look and its inserts: the
    # look finds nothing, the inserts meet rows that are there.
    monkeypatch.setattr(emulated_fleet, "_in_chunks", lambda rows, field, values: iter(()))
    row_by_row = []
    monkeypatch.setattr(emulated_fleet, "_seed_row_by_row", lambda layout, seed=emulated_fleet._seed_row_by_row: (
        row_by_row.append(len(layout)) or seed(layout)))
    again = emulated_fleet.seed_fleet()
    assert row_by_row == [2]  # the bulk insert met the rows, and the fleet was seeded again row by row
    assert (again.hosts_created, again.devices_created, again.devices_total) == (0, 0, 8)
    assert set(Device.objects.values_list("serial", "host__name", "device_type", "index", "workload")) == before
    assert Host.objects.count() == 2
