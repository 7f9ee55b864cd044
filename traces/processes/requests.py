"""Asking for a capture of a real PyTorch process (the web's side): which process a page or
the API means, whether it may be captured now, and the trace row queued to its host's agent
(traces.processes.capture runs it there). Refusals say why and write nothing."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.agent.queues import capture_process, capture_unavailable_reason, fresh_processes
from fleet.models import Device, HostProcess
from traces import queueing, writers
from traces.choices import TraceSource
from traces.models import Trace
from traces.refusals import BadTrace, CaptureUnavailable, DeviceBusy


def request_device_capture(device, user, duration_s, problems=None, iterations=None) -> Trace:
    """A capture of a device, wherever it is: its emulated workload (traces.writers), or the
    PyTorch process on it of its host with an agent."""
    if not device.host.has_agent:
        return writers.request_capture(device, user, duration_s, problems, iterations)
    if iterations is not None:
        iterations = writers.validate_iterations(iterations, device.host)
        duration_s = writers.MAX_CAPTURE_S  # the bound the steps must fit in
    duration = writers.validate_duration(duration_s)
    if problems:
        raise BadTrace("problems are the emulator's to play: a real process runs as it runs; leave problems out")
    return request_process_capture(device.host, user, duration, iterations, device=device)


def request_process_capture(host, user, duration: float, iterations: int | None = None, *, pid=None,
                            device: Device | None = None) -> Trace:
    """Write the trace row (queued) for a capture of one process of ``host`` and queue it to
    the host's agent when the row commits. ``pid`` (from the host's page) names the process
    among those polling its agent; without it, the process the device's page offers
    (fleet.agent.queues.capture_process). Refusals say why, and change nothing."""
    if reason := capture_unavailable_reason(host, device, any_process=pid is not None):
        raise CaptureUnavailable(reason)
    process = _chosen(host, pid) if pid is not None else capture_process(host, device)
    device = device or device_of(process)
    if busy := busy_capture(host.name, process.pid):
        raise DeviceBusy(f"process {process.pid} on {host.name} is already being captured (trace {busy.pk}, "
                         f"{busy.status}); wait for it to finish")
    writers.make_room(0)
    params = {"duration_s": duration, "pid": process.pid, "command": process.command[:200],
              **({"iterations": iterations} if iterations else {}), **rank_params(process)}
    where = device.serial if device else host.name
    try:
        with transaction.atomic():
            trace = Trace.objects.create(
                name=f"{where} pid {process.pid} {timezone.now():%Y-%m-%d %H:%M:%S}", source=TraceSource.CAPTURE,
                created_by=user, device=device, host_name=host.name, device_type=device.device_type if device else "cpu",
                workload="pytorch", params=params,
            )
    except IntegrityError:
        busy = Trace.objects.busy_captures().filter(device=device).first()
        which = f" (trace {busy.pk}, {busy.status})" if busy else ""
        raise DeviceBusy(f"device {device.serial} is already capturing a trace{which}; wait for it to finish") from None
    queue = host.agent_queue
    transaction.on_commit(lambda: writers._enqueue_to(queue, queueing.PROCESS_CAPTURE_TASK, trace.pk))
    return trace


def parse_pid(raw) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
        raise BadTrace(f"pid must be a process id (a whole number), not {raw!r}")
    return int(raw)


def _chosen(host, pid: int) -> HostProcess:
    process = fresh_processes(host).filter(pid=pid).first()
    if process is None:
        raise BadTrace(f"no PyTorch process {pid} polls {host.name}'s agent now: choose one of the host's processes")
    if process.role == "launcher":
        ranks = ", ".join(str(p.pid) for p in fresh_processes(host) if p.parent == pid) or "none polling"
        raise BadTrace(f"process {pid} is a job's launcher: it runs no PyTorch work of its own; capture one of its "
                       f"ranks (pids {ranks})")
    return process


def device_of(process: HostProcess) -> Device | None:
    """The device a process runs on (the first GPU it created a context on); None: CPU only."""
    if not process.gpus:
        return None
    return Device.objects.filter(host_id=process.host_id, index=process.gpus[0], absent_since__isnull=True).first()


def rank_params(process: HostProcess) -> dict:
    return {"rank": process.rank, "world_size": process.world_size} if process.rank is not None else {}


def busy_capture(host_name: str, pid: int) -> Trace | None:
    """The capture of process ``pid`` on the host still queued or running, if any."""
    return Trace.objects.busy_captures().filter(host_name=host_name, params__pid=pid).first()


