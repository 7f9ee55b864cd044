"""The traces app's one talker to the channel layer: a trace's state changes and capture
progress, typed, to the trace's group. The trace page's consumer (traces/consumers.py)
forwards what arrives."""

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


def trace_group(trace_id: int) -> str:
    return f"traces.{trace_id}"


def trace_changed(trace_id: int, status: str, progress: float, error: str, url: str = "") -> None:
    """A trace moved to another state (queued, capturing, analysing, ready, failed)."""
    message: TraceEvent = {
        "type": "trace.changed", "trace": trace_id, "status": str(status), "progress": progress,
        "events": None, "error": error, "url": url,
    }
    async_to_sync(get_channel_layer().group_send)(trace_group(trace_id), message)


def trace_progress(trace_id: int, status: str, progress: float, events: int) -> None:
    """How far a running capture has got."""
    message: TraceEvent = {
        "type": "trace.progress", "trace": trace_id, "status": str(status), "progress": progress,
        "events": events, "error": "", "url": "",
    }
    async_to_sync(get_channel_layer().group_send)(trace_group(trace_id), message)
