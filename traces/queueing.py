"""Sending trace work to the traces queue (``<CELERY_QUEUE>.traces``), by task name, so
traces.services can queue a task without importing traces.tasks (which imports it)."""

from celery import current_app
from django.conf import settings

CAPTURE_TASK = "traces.tasks.capture_trace"
ANALYSIS_TASK = "traces.tasks.analyse_trace"


def trace_queue() -> str:
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.traces"


def send(task_name: str, trace_id: int, limit_s: float) -> None:
    """Queue ``task_name(trace_id)``: soft time limit ``limit_s``, killed 30 s later."""
    current_app.send_task(
        task_name, (trace_id,), queue=trace_queue(), time_limit=limit_s + 30, soft_time_limit=limit_s
    )
