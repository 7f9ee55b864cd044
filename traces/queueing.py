"""Sending trace work to the traces queue (``<CELERY_QUEUE>.traces``), by task name, so
traces.writers can queue a task without importing traces.tasks (which imports it)."""

from celery import current_app
from django.conf import settings

CAPTURE_TASK = "traces.tasks.capture_trace"
ANALYSIS_TASK = "traces.tasks.analyse_trace"
JOB_CAPTURE_TASK = "traces.tasks.capture_job"
JOB_RANK_TASK = "traces.tasks.analyse_job_rank"
JOB_COMBINE_TASK = "traces.tasks.combine_job"
JOB_HEALTH_TASK = "traces.tasks.refresh_job_health"


def trace_queue() -> str:
    return f"{settings.CELERY_TASK_DEFAULT_QUEUE}.traces"


PROCESS_CAPTURE_TASK = "traces.tasks.capture_process"


def send(task_name: str, trace_id: int, limit_s: float, *more: int, countdown: float | None = None,
         queue: str | None = None) -> None:
    """Queue ``task_name(trace_id, *more)`` (on the traces queue unless ``queue`` is named):
    soft time limit ``limit_s``, killed 30 s later; run no sooner than ``countdown`` seconds
    from now when given."""
    current_app.send_task(
        task_name, (trace_id, *more), queue=queue or trace_queue(), time_limit=limit_s + 30,
        soft_time_limit=limit_s, countdown=countdown,
    )


def send_group(task_name: str, arguments: list[tuple], limit_s: float) -> None:
    """Queue one ``task_name(*args)`` per item of ``arguments`` at once (a Celery group), for
    as many trace workers as there are to take them."""
    from celery import group

    signature = current_app.signature
    group(signature(task_name, args, queue=trace_queue(), time_limit=limit_s + 30, soft_time_limit=limit_s)
          for args in arguments).apply_async()
