from django import template
from django.conf import settings
from django.utils.html import json_script

from emulator.serving.engine import SERVING_PROBLEMS
from fleet.agent.queues import capture_process, capture_unavailable_reason, fresh_processes
from fleet.durations import human_duration
from traces.choices import TraceStatus
from traces.models import Job, Trace

register = template.Library()


@register.simple_tag
def trace_statuses_script():
    """The trace states' labels as JSON for the page JavaScript (``<script id="trace-statuses">``),
    as base.html gives the key counters: the labels live in traces/choices.py only."""
    return json_script(dict(TraceStatus.choices), "trace-statuses")


@register.inclusion_tag("traces/device_traces.html", takes_context=True)
def device_traces(context, device, limit: int = 10):
    """The Capture trace button (for those who may capture), with the serving problems an
    inference device can play while it is captured, and the device's latest traces."""
    user = context["request"].user
    serving = device.device_type in settings.EMULATOR_SERVING_TYPES
    return {
        "serving_problems": [(p, p.replace("_", " ")) for p in SERVING_PROBLEMS] if serving else [],
        "device": device,
        "traces": list(Trace.objects.filter(device=device).select_related("created_by")[:limit]),
        "can_capture": user.has_perm("traces.capture_trace"),
        "capture_unavailable": capture_unavailable_reason(device.host, device),
        "processes": list(device.host.processes.all()) if device.host.has_agent else [],
        "capture_process": capture_process(device.host, device) if device.host.has_agent else None,
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("traces/host_traces.html", takes_context=True)
def host_traces(context, host, limit: int = 10):
    """A host's PyTorch processes (those polling its agent) with the Capture button for those
    who may capture, a Capture job button per job with ranks here, and its latest traces."""
    user = context["request"].user
    processes = list(fresh_processes(host)) if host.has_agent else []
    default = capture_process(host) or next((p for p in processes if p.role != "launcher"), None)
    jobs: dict[str, int] = {}
    for p in processes:
        if p.role == "rank" and p.run_id:
            jobs[p.run_id] = jobs.get(p.run_id, 0) + 1
    return {
        "host": host,
        "processes": processes,
        "default_pid": default.pid if default else None,
        "jobs": sorted(jobs.items()),
        "traces": list(Trace.objects.filter(host_name=host.name).select_related("created_by")[:limit]),
        "can_capture": user.has_perm("traces.capture_trace"),
        "capture_unavailable": capture_unavailable_reason(host, any_process=True) if host.has_agent else
        "this host's emulated devices are captured from their own pages",
        "csrf_token": context.get("csrf_token"),
    }


@register.inclusion_tag("traces/device_jobs.html")
def device_straggler_jobs(device, limit: int = 10):
    """The jobs in which this device was the straggler, latest first."""
    found = Job.objects.filter(straggler_device=device).order_by("-created_at")
    return {"device": device, "jobs": list(found[:limit]), "total": found.count()}


@register.filter
def duration(seconds):
    """Seconds as people read them ("1 min 5 s"): fleet.durations.human_duration."""
    return "–" if seconds is None or seconds == "" else human_duration(float(seconds))


@register.filter
def us_human(value):
    """Microseconds as µs, ms or s."""
    if value is None:
        return "–"
    value = float(value)
    if value >= 1e6:
        return f"{value / 1e6:.2f} s"
    if value >= 1e3:
        return f"{value / 1e3:.2f} ms"
    return f"{value:.1f} µs"


@register.filter
def percent(share):
    """A share (0..1) as a percentage with one decimal."""
    return "–" if share is None else f"{100 * float(share):.1f}%"


@register.filter
def bytes_human(value):
    value = float(value or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return ""
