"""Capturing a distributed job: every rank at once, over the same wall-clock window.

:func:`request_job_capture` writes the Job row, one JobRank per device and a Trace row per
rank that can be traced (a device already capturing a trace is *busy*: its rank still runs
in the job, untraced, and the job says so), then queues the capture when that commits.
:func:`run_job_capture` (the capture task, on the traces queue) runs the emulated job on
the devices as their state files say they are now (the job holds them at full load while it
runs, which the pollers see), reports each rank's progress over the job's websocket group,
stores each rank's trace (gzipped Kineto JSON) and queues that rank's analysis as soon as it
is stored (traces/jobs/analysis.py). A device that hangs or reboots fails its rank with the reason;
the other ranks still complete.
"""

from __future__ import annotations

import io
import logging
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from emulator.config import find_host
from emulator.workloads.graph import workload_for
from emulator.workloads.jobs import JobSpec, Rank, condition_of, run_job_live
from emulator.workloads.training import PARALLELISMS
from fleet.agent.queues import capture_unavailable_reason
from fleet.hosts.emulated_fleet import fleet_config
from fleet.models import Device
from traces import writers
from traces.choices import JobStatus, RankStatus, TraceSource, TraceStatus
from traces.jobs import analysis as job_analysis
from traces.jobs.analysis import JOB_CAPTURE_GRACE_S, fail_job, move_job, push_ranks
from traces.jobs.health import snapshot_facts
from traces.models import Job, JobRank, Trace
from traces.store.files import TraceFiles

log = logging.getLogger(__name__)

PROGRESS_PUSH_EVERY_S = 0.25
PROGRESS_ROW_EVERY_S = 1.0


def job_devices(*, device_ids=None, host: str = "", device_type: str = "") -> list[Device]:
    """The devices of a job, in rank order: the ids given (in their order), or every present
    device of a host and/or a type (by host, then slot). BadTrace says what is wrong."""
    if device_ids:
        devices = _by_ids(device_ids)
    elif host or device_type:
        devices = _by_filter(host, device_type)
    else:
        raise writers.BadTrace("name the job's devices: a list of device ids, or a host and/or a device type")
    if len(devices) > settings.JOB_MAX_RANKS:
        raise writers.BadTrace(f"{len(devices)} devices: a job has at most {settings.JOB_MAX_RANKS} ranks (JOB_MAX_RANKS)")
    types = sorted({d.device_type for d in devices})
    if len(types) > 1:
        raise writers.BadTrace(f"a job runs one model on one device type; these devices are of types {', '.join(types)}: choose one type")
    for h in {d.host for d in devices}:
        if h.has_agent:  # one process at a time there, from its device's page (issue 50 builds jobs)
            raise writers.CaptureUnavailable(
                f"{h.name} is a real machine: capture its PyTorch processes one at a time from their devices' pages")
        if reason := capture_unavailable_reason(h):
            raise writers.CaptureUnavailable(reason)
    return devices


def _by_ids(device_ids) -> list[Device]:
    if not isinstance(device_ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in device_ids):
        raise writers.BadTrace("devices must be a list of device ids (integers)")
    if len(set(device_ids)) != len(device_ids):
        raise writers.BadTrace("a device can hold only one rank of a job: devices has repeats")
    found = {d.pk: d for d in Device.objects.select_related("host").filter(pk__in=device_ids)}
    missing = [i for i in device_ids if i not in found]
    if missing:
        raise writers.BadTrace(f"no device with id {', '.join(map(str, missing))}")
    return [found[i] for i in device_ids]


def _by_filter(host: str, device_type: str) -> list[Device]:
    query = Device.objects.select_related("host").filter(absent_since__isnull=True)
    if host:
        query = query.filter(host__name=host)
    if device_type:
        query = query.filter(device_type=device_type)
    devices = list(query.order_by("host__name", "index"))
    if not devices:
        what = " and ".join(x for x in (f"host {host!r}" if host else "", f"type {device_type!r}" if device_type else "") if x)
        raise writers.BadTrace(f"no device matches {what}")
    return devices


def _sw_version(device: Device) -> str:
    return find_host(fleet_config(), device.host.name).device(device.serial).sw_version


def request_job_capture(user, devices: list[Device], duration_s, *, name: str = "", parallelism: str = "data") -> Job:
    """Write the job's rows (queued) and queue its capture when they commit."""
    duration = writers.validate_duration(duration_s)
    if parallelism not in PARALLELISMS:
        raise writers.BadTrace(f"parallelism must be one of {', '.join(PARALLELISMS)}, not {parallelism!r}")
    name = (name or "").strip()[:200] or f"{devices[0].device_type} job {timezone.now():%Y-%m-%d %H:%M:%S}"
    writers.make_room(0)
    device_type = devices[0].device_type
    workload = workload_for(device_type).name
    with transaction.atomic():
        job = Job.objects.create(
            name=name, source=TraceSource.CAPTURE, created_by=user, parallelism=parallelism,
            world_size=len(devices), device_type=device_type, workload=workload,
            params={"duration_s": duration, "devices": [d.pk for d in devices]},
        )
        busy = []
        for rank, device in enumerate(devices):
            trace, status, error = _rank_trace(job, rank, device, user, duration, workload)
            if status == RankStatus.BUSY:
                busy.append(error)
            JobRank.objects.create(job=job, rank=rank, status=status, error=error, device=device,
                                   device_serial=device.serial, host_name=device.host.name, trace=trace)
        if len(busy) == len(devices):
            raise writers.DeviceBusy("every device of the job is capturing a trace already: " + "; ".join(busy[:5]))
    transaction.on_commit(lambda: _enqueue_capture(job.pk, duration))
    return job


def _rank_trace(job: Job, rank: int, device: Device, user, duration: float, workload: str):
    """The rank's Trace row, or why the device is busy (it holds another capture)."""
    try:
        with transaction.atomic():
            trace = Trace.objects.create(
                name=f"{job.name} · rank {rank}", source=TraceSource.CAPTURE, created_by=user,
                params={"duration_s": duration, "job": job.pk, "rank": rank}, device=device,
                host_name=device.host.name, device_type=device.device_type, sw_version=_sw_version(device),
                workload=workload,
            )
        return trace, RankStatus.QUEUED, ""
    except IntegrityError:
        other = Trace.objects.busy_captures().filter(device=device).first()
        which = f" (trace {other.pk}, {other.status})" if other else ""
        return None, RankStatus.BUSY, f"device {device.serial} is capturing another trace{which}; its rank runs untraced"


def _enqueue_capture(job_id: int, duration: float) -> None:
    job_analysis.enqueue(job_id, writers.queueing.JOB_CAPTURE_TASK, duration + JOB_CAPTURE_GRACE_S)


class _Progress:
    """Per-rank progress: pushed a few times a second, written to the rows once a second."""

    def __init__(self, job_id: int, ranks: list[JobRank]):
        self.job_id = job_id
        self.ranks = {r.rank: r for r in ranks}
        self.pushed = self.saved = 0.0
        self.failed_sent: set[int] = set()

    def __call__(self, fraction: float, counts: dict[int, int], failed: dict[int, str]) -> None:
        now = time.monotonic()
        new_failures = [r for r in failed if r in self.ranks and r not in self.failed_sent]
        if now - self.pushed >= PROGRESS_PUSH_EVERY_S or fraction >= 1.0 or new_failures:
            self.pushed = now
            self.failed_sent.update(new_failures)
            rows = [{"rank": r, "status": RankStatus.CAPTURING, "progress": fraction, "events": n, "error": ""}
                    for r, n in counts.items()]
            rows += [{"rank": r, "status": RankStatus.FAILED, "progress": fraction, "events": None, "error": failed[r]}
                     for r in new_failures]
            push_ranks(self.job_id, fraction, rows)
        if now - self.saved >= PROGRESS_ROW_EVERY_S:
            self.saved = now
            for r, n in counts.items():
                self.ranks[r].progress, self.ranks[r].events = fraction, n
            JobRank.objects.bulk_update([self.ranks[r] for r in counts], ["progress", "events"])
            Job.objects.filter(pk=self.job_id, status=JobStatus.CAPTURING).update(progress=fraction)


def _conditions(hosts: dict):
    """A device's state as its host's state file says now (the pollers keep it current)."""

    def now(rank: Rank, t: float):
        host = hosts[rank.host]
        with host.locked():
            host.sync()
            return condition_of(host.state(rank.serial))

    return now


def _occupy(hosts: dict, ranks: list[JobRank], until: float) -> None:
    """The job holds its devices at full load until ``until`` (saved: the pollers see it)."""
    for name, host in hosts.items():
        with host.locked():
            host.sync(time.time())
            for r in ranks:
                if r.host_name == name:
                    host.occupy(r.device_serial, until)
            host.save()


def run_job_capture(job_id: int) -> None:
    """Capture a queued job in wall-clock time, store each rank's trace, fan out the analyses."""
    if not move_job(job_id, [JobStatus.QUEUED], JobStatus.CAPTURING, capture_started_at=timezone.now()):
        return  # gone, or another worker has it
    job = Job.objects.get(pk=job_id)
    ranks = list(job.ranks.select_related("device__host", "trace"))
    gone = [r for r in ranks if r.device is None]
    if gone:
        fail_job(job_id, f"device {gone[0].device_serial} was removed before the capture started")
        return
    duration = job.params["duration_s"]
    spec = JobSpec(job.name, tuple(Rank(r.rank, r.device_serial, r.host_name, job.device_type, _sw_version(r.device))
                                   for r in ranks), job.parallelism)
    traced = [r for r in ranks if r.status == RankStatus.QUEUED and r.trace_id]
    started = timezone.now()
    for r in traced:
        writers.move(r.trace_id, [TraceStatus.QUEUED], TraceStatus.CAPTURING, capture_started_at=started)
        r.status = RankStatus.CAPTURING
        r.health = {"snapshots": {"start": snapshot_facts(r.device_id)}}
    JobRank.objects.bulk_update(traced, ["status", "health"])
    hosts = {name: writers.emulated_host(name) for name in spec.hosts}
    _occupy(hosts, ranks, time.time() + duration + 30)
    capture = run_job_live(spec, duration, _conditions(hosts), seed=job_id, traced=[r.rank for r in traced],
                           max_events=settings.JOB_RANK_MAX_EVENTS, progress=_Progress(job_id, traced))
    ended = timezone.now()
    for r in traced:
        r.health["snapshots"]["end"] = snapshot_facts(r.device_id)
    if not move_job(job_id, [JobStatus.CAPTURING], JobStatus.ANALYSING, capture_ended_at=ended,
                    analysis_started_at=ended, progress=0.0):
        return  # failed meanwhile (its timeout): its ranks failed with it
    # Each rank's digest is queued the moment its trace is stored: the trace workers digest
    # the first ranks while this stores the others.
    for r in traced:
        if r.rank in capture.failed:
            _rank_failed(r, capture.failed[r.rank])
        else:
            _store_rank(r, capture, ended)
        r.save(update_fields=["status", "error", "health", "events", "progress"])
        push_ranks(job_id, 1.0, [{"rank": r.rank, "status": r.status, "progress": 1.0, "events": r.events,
                                  "error": r.error}])
        if r.status == RankStatus.ANALYSING:
            job_analysis.enqueue(job_id, writers.queueing.JOB_RANK_TASK, settings.TRACE_ANALYSIS_TIMEOUT_S, r.rank)
    if not any(r.status == RankStatus.ANALYSING for r in traced):
        why = "; ".join(dict.fromkeys(r.error for r in traced if r.error))
        fail_job(job_id, "no rank was traced" + (f": {why}" if why else ""), [JobStatus.ANALYSING])


def _rank_failed(r: JobRank, reason: str) -> None:
    r.status, r.error = RankStatus.FAILED, reason
    writers.fail(r.trace_id, reason)


def _store_rank(r: JobRank, capture, ended) -> None:
    trace = capture.traces[r.rank]
    raw = writers.chrome_gz(trace)
    files = TraceFiles(r.trace_id)
    name = files.raw_name(head=raw[:2])
    files.save_stream(name, io.BytesIO(raw))
    writers.move(
        r.trace_id, [TraceStatus.CAPTURING], TraceStatus.ANALYSING,
        capture_ended_at=ended, raw_file=name, raw_format="chrome", raw_bytes=len(raw), stored_bytes=len(raw),
        progress=0.0, iterations_kept=capture.steps_kept, iterations_run=capture.steps_run,
    )
    r.status, r.events, r.progress = RankStatus.ANALYSING, len(trace), 1.0

