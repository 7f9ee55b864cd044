"""Where work for a host runs: the one place that decides it.

An emulated host may be polled, rebooted or traced by any worker (its state lives in a
shared folder), so its work goes to the shared queue. A host with an agent (fleet/agent)
has real devices that only its own machine can reach: its work goes to the queue that agent
consumes.
"""

from datetime import UTC, datetime, timedelta

from django.conf import settings

from fleet.durations import human_duration
from fleet.hosts.exporter_fleet import read_only_reason
from fleet.models import Host

# An agent that has not said it is alive for this many poll intervals (and at least
# AGENT_ALIVE_MIN_S) gets no more polls: they would only pile up in its queue.
AGENT_ALIVE_INTERVALS = 3
AGENT_ALIVE_MIN_S = 15.0


def agent_queue_name(host_name: str) -> str:
    """The queue the agent of ``host_name`` consumes (derived from CELERY_QUEUE)."""
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.host.{host_name}"


def host_queue(host: Host) -> str:
    """The queue for work that must run where the host's devices are (poll, reboot, capture)."""
    return host.agent_queue or settings.CELERY_TASK_DEFAULT_QUEUE


def agent_alive_window() -> timedelta:
    return timedelta(seconds=max(AGENT_ALIVE_MIN_S, AGENT_ALIVE_INTERVALS * settings.POLL_INTERVAL))


def agent_is_alive(host: Host, now: datetime | None = None) -> bool:
    if not host.has_agent or host.agent_seen_at is None:
        return False
    now = now or datetime.now(tz=UTC)
    return now - host.agent_seen_at <= agent_alive_window()


def agent_status(host: Host, now: datetime | None = None) -> str:
    """What a page says about who polls the host: "" (the emulator), or the agent's state."""
    if not host.has_agent:
        return ""
    if agent_is_alive(host, now):
        return "polled by its agent"
    if host.agent_seen_at is None:
        return "agent never seen"
    silent = ((now or datetime.now(tz=UTC)) - host.agent_seen_at).total_seconds()
    return f"agent stopped: not seen for {human_duration(silent)}"


def live_agent_hosts() -> list[tuple[int, str]]:
    """(host id, queue) of every host whose agent is alive: beat polls these on their queues."""
    since = datetime.now(tz=UTC) - agent_alive_window()
    return list(Host.objects.with_agent().filter(agent_seen_at__gte=since).values_list("id", "agent_queue"))


def capture_unavailable_reason(host: Host) -> str | None:
    """Why a trace cannot be captured on this host, or None where it can.

    Captures run the emulator's traced workloads; an agent's real devices have no tracer
    in Asicmon yet, so a host with an agent says so instead of offering a Capture button;
    nor do the GPUs read through a metrics exporter.
    """
    if reason := read_only_reason(host.name):
        return f"{reason}; Asicmon cannot capture traces there (upload a PyTorch profiler or Chakra trace instead)"
    if host.has_agent:
        return (
            f"{host.name} is a real machine polled by its agent; Asicmon cannot capture traces "
            "on real devices yet (upload a PyTorch profiler or Chakra trace instead)"
        )
    return None
