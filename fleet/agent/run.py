"""Starting the agent: check the settings, register, keep saying "alive", consume the queue.

Every poll interval the agent keeps where its kernel-log follower is and its RAS counters'
readings (AGENT_STATE_DIR/error-sources.json); a restarted agent resumes there, so driver
errors logged while it was down are read (kmsg records the kernel overwrote meanwhile are
counted as lost)."""

import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

from fleet.agent.discovery import agent_discovery, error_state, rediscover
from fleet.agent.kineto import KinetoDaemon, KinetoError
from fleet.agent.processes import observed
from fleet.agent.queues import agent_queue_name
from fleet.agent.registration import HostNameTaken, Registration, register_host, report_processes
from fleet.asicmon.errors.pump import KernelLogPump
from fleet.asicmon.errors.sources import KMSG
from fleet.models import Host

log = logging.getLogger("fleet.agent")


def run() -> int:
    missing = [str(d) for d in settings.ASIMOV_SPEC_DIRS if not d.is_dir()]
    if missing:
        log.error("ASIMOV_SPEC_DIRS names folders that do not exist: %s", ", ".join(missing))
        return 2
    if Host._meta.db_table not in connection.introspection.table_names():
        log.error(
            "the database at DATABASE_URL has no Asicmon tables: point DATABASE_URL at the central "
            "stack's database (or run `python manage.py migrate` there first)"
        )
        return 2
    name, queue = settings.AGENT_HOST, agent_queue_name(settings.AGENT_HOST)
    found = agent_discovery()
    found.host.poll()  # a first reading: names the models, and starts the rates
    try:
        registration = register_host(name, queue, found.host.devices)
    except HostNameTaken as exc:
        log.error("%s", exc)
        return 2
    log.info(
        "agent of %s on queue %s: %d devices (%d new, %d back, %d absent)%s",
        name, queue, len(found.host.devices), len(registration.created), len(registration.returned),
        len(registration.absent), "" if found.host.devices else "; nothing to poll on this machine",
    )
    for device in found.host.devices:
        log.info("  %s %s", device.device_type, device.serial)
    for serial in registration.refused:
        log.error("  %s is a device of an emulated host: not registered (a copy of its files?)", serial)
    pump = start_kernel_log(found.host)
    start_kineto(settings.AGENT_KINETO, settings.AGENT_STATE_DIR / "kineto-traces")
    threading.Thread(target=_say_alive, args=(name, queue, pump), daemon=True, name="agent-alive").start()
    return _consume(name, queue)


def start_kernel_log(host) -> KernelLogPump | None:
    """Follows AGENT_KERNEL_LOG (default /dev/kmsg) for driver errors, in a child process,
    routing them to ``host``'s devices; None when the setting is empty or it cannot be read."""
    path = settings.AGENT_KERNEL_LOG
    if not path:
        return None
    if path == "/dev/kmsg" and not Path(path).exists():
        log.warning("no /dev/kmsg on this machine: driver errors are not followed (set AGENT_KERNEL_LOG to a file)")
        return None
    if not os.access(path, os.R_OK) and Path(path).exists():
        log.error("AGENT_KERNEL_LOG=%s cannot be read by this user: driver errors are not followed", path)
        return None
    state = error_state()
    resume = state.log_position(path)
    from_start = state.read_from_start(path)  # a reboot since: its boot-time lines too
    pump = KernelLogPump(path, host.router, bucket_s=settings.DRIVER_ERROR_BUCKET_S, duty=settings.AGENT_KERNEL_LOG_DUTY,
                         resume=resume, from_start=from_start)
    pump.start()
    where = f", resumed after position {resume}" if resume is not None else ", from its start (a reboot since)" if from_start else ""
    log.info("following %s for driver errors%s", path, where)
    return pump


#: The agent's Kineto daemon (None: off, or another daemon serves): captures ask it.
_kineto: KinetoDaemon | None = None
#: A process that has not polled for this long is gone from the host's list (libkineto polls
#: every 5 s).
PROCESS_STALE_S = 20.0


def kineto_daemon() -> KinetoDaemon | None:
    return _kineto


def start_kineto(where: str, trace_dir: Path) -> KinetoDaemon | None:
    """Serve Kineto's daemon protocol in a thread (``where``: "off", "abstract" or a socket
    folder: AGENT_KINETO); None, said in the log, where it is off or another daemon serves."""
    global _kineto
    if where == "off":
        log.info("Kineto captures are off (AGENT_KINETO=off)")
        return None
    try:
        daemon = KinetoDaemon(trace_dir, socket_dir=None if where == "abstract" else where)
    except KinetoError as exc:
        log.error("PyTorch processes cannot be captured from Asicmon on this host: %s", exc)
        return None
    threading.Thread(target=daemon.serve, args=(threading.Event(),), daemon=True, name="agent-kineto").start()
    _kineto = daemon
    at = "the abstract socket @dynolog" if where == "abstract" else f"{where}/dynolog"
    log.info("serving Kineto's daemon protocol at %s: start PyTorch jobs with KINETO_USE_DAEMON=1%s to capture them",
             at, "" if where == "abstract" else f" and KINETO_IPC_SOCKET_DIR={where}")
    return daemon


def save_error_state(pump: KernelLogPump | None) -> None:
    """Keeps where the kernel log was left and the RAS counters' readings (AGENT_STATE_DIR),
    for the next start of this agent."""
    state = error_state()
    if pump is not None:
        state.note_log(pump.path, pump.stats.position, kmsg=pump.path == KMSG)
    state.save()


def _say_alive(name: str, queue: str, pump: KernelLogPump | None = None) -> None:
    """Beat polls a host only while its agent is alive: say so every poll interval. Every
    AGENT_REDISCOVER_S, look for devices again: new ones join, vanished ones turn absent."""
    looked = time.monotonic()
    while True:
        time.sleep(settings.POLL_INTERVAL)
        try:
            save_error_state(pump)
        except OSError as exc:
            log.warning("could not keep the error sources' state: %s", exc)
        try:
            if time.monotonic() - looked >= settings.AGENT_REDISCOVER_S:
                looked = time.monotonic()
                found = rediscover()
                if pump is not None:
                    pump.router = found.host.router  # devices that came or went
                _report(register_host(name, queue, found.host.devices))
            else:
                Host.objects.filter(name=name).update(agent_seen_at=datetime.now(tz=UTC))
            report_kineto_processes(name)
        except Exception:  # a database blip: say it next time
            log.warning("could not record that the agent is alive", exc_info=True)
        finally:
            close_old_connections()


def report_kineto_processes(name: str) -> int:
    """The PyTorch processes polling this agent, as the fleet shows them (0 without Kineto)."""
    if _kineto is None:
        return 0
    return report_processes(name, observed(_kineto.live_processes(PROCESS_STALE_S)))


def _report(registration: Registration) -> None:
    for serial in registration.created + registration.returned:
        log.info("device %s found", serial)
    for serial in registration.absent:
        log.warning("device %s is gone: marked absent (its history stays)", serial)
    for serial in registration.refused:
        log.error("%s is a device of an emulated host: not registered (a copy of its files?)", serial)


def _consume(name: str, queue: str) -> int:
    """A Celery worker in this process on this host's queue only. The solo pool keeps the
    monitors (and their rate history) in this one process. The Celery app is the project's
    (the settings module's package makes it the current app when Django starts)."""
    from celery import current_app

    current_app.worker_main([
        "worker", "-Q", queue, "--pool", "solo", "-n", f"agent-{name}@%h",
        "-l", settings.LOG_LEVEL, "--without-gossip", "--without-mingle",
    ])
    return 0
