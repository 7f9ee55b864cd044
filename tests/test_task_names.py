"""Services queue some tasks by name (so they need not import the tasks module that imports
them); those names must be the registered tasks' names."""

from dashboard import celery_app
from fleet import tasks as fleet_tasks
from fleet.health import remediation
from fleet.replay import runs as replays
from traces import queueing
from traces import tasks as trace_tasks


def test_tasks_queued_by_name_are_registered_under_that_name():
    assert fleet_tasks.issue_action.name == remediation.ISSUE_ACTION_TASK
    assert fleet_tasks.run_replay.name == replays.REPLAY_TASK
    assert trace_tasks.capture_trace.name == queueing.CAPTURE_TASK
    assert trace_tasks.analyse_trace.name == queueing.ANALYSIS_TASK
    assert trace_tasks.capture_job.name == queueing.JOB_CAPTURE_TASK
    assert trace_tasks.analyse_job_rank.name == queueing.JOB_RANK_TASK
    assert trace_tasks.combine_job.name == queueing.JOB_COMBINE_TASK
    assert trace_tasks.refresh_job_health.name == queueing.JOB_HEALTH_TASK
    for name in (remediation.ISSUE_ACTION_TASK, replays.REPLAY_TASK, queueing.CAPTURE_TASK, queueing.ANALYSIS_TASK,
                 queueing.JOB_CAPTURE_TASK, queueing.JOB_RANK_TASK, queueing.JOB_COMBINE_TASK, queueing.JOB_HEALTH_TASK):
        assert name in celery_app.tasks, name
