"""The traces app's one talker to the channel layer: a trace's state changes and capture
progress, typed, to the trace's group; a job's state changes and its ranks' progress to the
job's group. The consumers (traces/consumers.py) forward what arrives."""

from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


class TraceEvent(TypedDict):
    type: Literal["trace.changed", "trace.progress"]
    trace: int
    status: str
    progress: float
    events: int | None
    error: str
    url: str
    stage: str  # where a capture is, in words ("" where the progress says it all)


def trace_group(trace_id: int) -> str:
    return f"traces.{trace_id}"


def trace_changed(trace_id: int, status: str, progress: float, error: str, url: str = "") -> None:
    """A trace moved to another state (queued, capturing, analysing, ready, failed)."""
    message: TraceEvent = {
        "type": "trace.changed", "trace": trace_id, "status": str(status), "progress": progress,
        "events": None, "error": error, "url": url, "stage": "",
    }
    async_to_sync(get_channel_layer().group_send)(trace_group(trace_id), message)


def trace_progress(trace_id: int, status: str, progress: float, events: int, stage: str = "") -> None:
    """How far a running capture has got (``stage``: where it is, in words, when that says more)."""
    message: TraceEvent = {
        "type": "trace.progress", "trace": trace_id, "status": str(status), "progress": progress,
        "events": events, "error": "", "url": "", "stage": stage,
    }
    async_to_sync(get_channel_layer().group_send)(trace_group(trace_id), message)


class JobEvent(TypedDict):
    type: Literal["job.changed"]
    job: int
    status: str
    progress: float
    error: str
    url: str


class RankEvent(TypedDict):
    type: Literal["job.ranks"]
    job: int
    progress: float
    ranks: list[dict]  # {"rank", "status", "progress", "events", "error"}


def job_group(job_id: int) -> str:
    return f"jobs.{job_id}"


def job_changed(job_id: int, status: str, progress: float, error: str, url: str = "") -> None:
    """A job moved to another state (queued, capturing, analysing, combining, ready, failed)."""
    message: JobEvent = {"type": "job.changed", "job": job_id, "status": str(status), "progress": progress,
                         "error": error, "url": url}
    async_to_sync(get_channel_layer().group_send)(job_group(job_id), message)


def job_ranks(job_id: int, progress: float, ranks: list[dict]) -> None:
    """Where each rank of a job is: one message for all the ranks that changed."""
    message: RankEvent = {"type": "job.ranks", "job": job_id, "progress": progress, "ranks": ranks}
    async_to_sync(get_channel_layer().group_send)(job_group(job_id), message)
