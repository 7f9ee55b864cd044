"""Where a host's work runs: the shared queue for emulated hosts, the agent's own queue for a
real machine, and whether that agent is alive enough to be sent polls."""

from datetime import UTC, datetime, timedelta

import pytest

from fleet.agent.queues import (
    agent_alive_window,
    agent_is_alive,
    agent_queue_name,
    agent_status,
    capture_unavailable_reason,
    host_queue,
    live_agent_hosts,
)
from fleet.models import Host

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _queue(settings):
    settings.CELERY_TASK_DEFAULT_QUEUE = "asicmon"
    settings.POLL_INTERVAL = 10


def test_an_emulated_host_s_work_goes_to_the_shared_queue_a_real_one_s_to_its_agent():
    assert agent_queue_name("gpu-07") == "asicmon.host.gpu-07"
    assert host_queue(Host(name="host-00")) == "asicmon"
    assert (
        host_queue(Host(name="gpu-07", agent_queue="asicmon.host.gpu-07")) == "asicmon.host.gpu-07"
    )


def test_an_agent_is_alive_for_three_poll_intervals_and_at_least_fifteen_seconds(settings):
    assert agent_alive_window() == timedelta(seconds=30)
    settings.POLL_INTERVAL = 1
    assert agent_alive_window() == timedelta(seconds=15)


def test_what_a_page_says_about_who_polls_a_host():
    agent = Host(name="gpu-07", agent_queue="q")
    assert agent_status(Host(name="host-00"), NOW) == ""
    assert agent_status(agent, NOW) == "agent never seen" and not agent_is_alive(agent, NOW)
    agent.agent_seen_at = NOW - timedelta(seconds=20)
    assert agent_status(agent, NOW) == "polled by its agent"
    agent.agent_seen_at = NOW - timedelta(minutes=5)
    assert agent_status(agent, NOW).startswith("agent stopped: not seen for ")


def test_only_hosts_whose_agent_was_seen_lately_are_polled_on_their_queue(db):
    Host.objects.create(name="fresh", agent_queue="q.fresh", agent_seen_at=datetime.now(tz=UTC))
    Host.objects.create(
        name="silent",
        agent_queue="q.silent",
        agent_seen_at=datetime.now(tz=UTC) - timedelta(hours=1),
    )
    Host.objects.create(name="emulated")
    assert [queue for _, queue in live_agent_hosts()] == ["q.fresh"]


def test_captures_on_a_host_with_an_agent_need_the_agent_running():
    assert capture_unavailable_reason(Host(name="host-00")) is None
    assert "gpu-07's agent is not running (agent never seen)" in capture_unavailable_reason(
        Host(name="gpu-07", agent_queue="q")
    )
