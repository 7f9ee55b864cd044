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


#: A process that has not polled its agent for this long is not offered for capture.
PROCESS_FRESH_S = 30.0


def capture_unavailable_reason(host: Host, device=None, *, any_process: bool = False) -> str | None:
    """Why a trace cannot be captured on this host (or this device of it), or None where it can.

    An emulated host captures its emulated workloads. A host with an agent captures the
    PyTorch processes that poll its agent (started with KINETO_USE_DAEMON=1,
    fleet/agent/kineto.py): the device's own, or the host's CPU-only ones (``any_process``:
    any of them, as the host's page offers). GPUs read through a metrics exporter cannot be
    traced.
    """
    if reason := read_only_reason(host.name):
        return f"{reason}; Asicmon cannot capture traces there (upload a PyTorch profiler or Chakra trace instead)"
    if host.has_agent:
        if not agent_is_alive(host):
            return f"{host.name}'s agent is not running ({agent_status(host)}): start it to capture there"
        found = fresh_processes(host).exclude(role="launcher").exists() if any_process else capture_process(host, device)
        if not found:
            where = f"device {device.index} of {host.name}" if device is not None else host.name
            return (f"no PyTorch process on {where} polls its agent: start the job with KINETO_USE_DAEMON=1 "
                    f"(and KINETO_IPC_SOCKET_DIR as the agent's AGENT_KINETO says) to capture it")
    return None


def process_fresh_since() -> datetime:
    """A process that last polled before this is not offered for capture (PROCESS_FRESH_S)."""
    return datetime.now(tz=UTC) - timedelta(seconds=PROCESS_FRESH_S)


def fresh_processes(host: Host):
    """The processes that polled the host's agent lately (the ones a capture may take)."""
    return host.processes.filter(last_poll__gte=process_fresh_since())


def capture_process(host: Host, device=None):
    """The process a capture on ``device`` (or the host) takes: one that created a context on
    that device, else a CPU-only one of the host; ranks before lone processes, never a
    launcher; among equals the lowest rank, then the oldest. None: there is none."""
    candidates = [p for p in fresh_processes(host) if p.role != "launcher"]
    on_device = [p for p in candidates if device is not None and device.index in p.gpus]
    chosen = on_device or [p for p in candidates if not p.gpus]
    key = lambda p: (p.role != "rank", p.rank if p.rank is not None else 1 << 30, p.first_seen)  # noqa: E731
    return min(chosen, key=key, default=None)
