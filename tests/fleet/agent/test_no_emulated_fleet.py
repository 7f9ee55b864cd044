"""FLEET_HOSTS=0: a stack with no emulated fleet, only hosts that have an agent."""

import subprocess
import sys

import pytest

from fleet.agent import queues
from fleet.agent.discovery import agent_host
from fleet.agent.registration import register_host
from fleet.hosts import emulated_fleet
from fleet.models import Device, Host
from fleet.polling import poller
from tests.support.processes import ROOT, child_env

pytestmark = pytest.mark.django_db


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_settings_accept_zero_emulated_hosts_and_refuse_fewer():
    code = "from django.conf import settings; print(settings.FLEET_HOSTS)"
    run = lambda hosts: subprocess.run(  # noqa: E731
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, env=child_env(FLEET_HOSTS=hosts, DJANGO_SETTINGS_MODULE="dashboard.settings"),
        capture_output=True, text=True,
    )
    assert run(0).stdout.strip() == "0"
    refused = run(-1)
    assert refused.returncode != 0 and "FLEET_HOSTS=-1 must be at least 0" in refused.stderr


def test_seeding_an_empty_fleet_adds_nothing_and_agent_hosts_are_still_polled(fleet_settings, agent_settings, clean_redis):
    fleet_settings.FLEET_HOSTS = 0
    result = emulated_fleet.seed_fleet()
    assert (result.hosts_created, result.devices_total) == (0, 0)
    register_host("node-a", queues.agent_queue_name("node-a"), agent_host().devices)
    cycle = poller.current_cycle()
    assert sum(poller.poll_shard(s, cycle).devices for s in poller.shards()) == 0
    host = Host.objects.get()
    assert poller.poll_agent_host(host.id, cycle).devices == Device.objects.count() == 3
