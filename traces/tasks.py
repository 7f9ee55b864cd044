"""Celery tasks: thin wrappers over traces.writers, taking ids, on the traces queue.

Captures and analyses run on their own queue (``<CELERY_QUEUE>.traces``) served by their
own worker process, so a fleet poll never waits behind a trace.
"""

from celery import shared_task

from traces import writers
from traces.jobs import analysis as job_analysis
from traces.jobs import arrivals as job_arrivals
from traces.jobs import capture as job_capture
from traces.jobs import results as job_results
from traces.queueing import trace_queue  # noqa: F401  (the queue a trace worker serves)
from traces.uploads import sessions as upload_sessions


@shared_task
def capture_trace(trace_id: int) -> None:
    writers.run_capture(trace_id)


@shared_task
def capture_process(trace_id: int) -> None:
    """On a host's agent: capture a real PyTorch process (traces.processes.capture) in a
    thread, so the agent's one worker goes on polling its devices meanwhile."""
    from traces.processes import capture

    capture.start_capture(trace_id)


@shared_task
def analyse_trace(trace_id: int) -> None:
    writers.analyse(trace_id)


@shared_task
def capture_job(job_id: int) -> None:
    job_capture.run_job_capture(job_id)


@shared_task
def analyse_job_rank(job_id: int, rank: int) -> None:
    job_analysis.analyse_rank(job_id, rank)


@shared_task
def combine_job(job_id: int) -> None:
    job_results.combine(job_id)


@shared_task
def refresh_job_health(job_id: int, attempt: int) -> None:
    job_results.refresh_health(job_id, attempt)


@shared_task
def expire_stuck_traces() -> int:
    return writers.expire_stuck() + job_analysis.expire_stuck_jobs() + job_arrivals.close_overdue()


@shared_task
def prune_traces() -> int:
    pruned = writers.prune_traces() + job_results.prune_jobs(writers.retention_cutoff())
    return pruned + upload_sessions.prune_idle()



@shared_task
def join_requests(trace_id: int) -> None:
    from traces.requests import service as requests_service

    requests_service.join_requests(trace_id)


@shared_task
def attach_request_spans() -> int:
    """Live spans to the captures whose windows they fall in (periodic: no request writes them)."""
    from traces.requests import store as span_store

    return span_store.attach_to_recent_captures()


@shared_task
def prune_request_spans() -> int:
    """Live spans past SPAN_RETENTION_HOURS that no trace holds (periodic: not in the receiver)."""
    from traces.requests import store as span_store

    return span_store.prune_expired()
