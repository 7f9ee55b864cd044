"""Trace work goes to the traces queue by task name, with its time limits."""

import traces.tasks
from traces import queueing


def test_every_queued_task_name_is_a_task_of_traces_tasks():
    names = [getattr(queueing, n) for n in dir(queueing) if n.endswith("_TASK")]
    assert len(names) == 7
    for name in names:
        module, attr = name.rsplit(".", 1)
        assert module == "traces.tasks" and getattr(traces.tasks, attr).name == name


def test_a_task_is_sent_to_the_traces_queue_with_a_hard_limit_after_the_soft_one(
    monkeypatch, settings
):
    settings.CELERY_TASK_DEFAULT_QUEUE = "asicmon"
    sent = []
    monkeypatch.setattr(queueing.current_app, "send_task", lambda *a, **kw: sent.append((a, kw)))
    queueing.send(queueing.ANALYSIS_TASK, 42, 600, 3, countdown=5)
    ((args, kw),) = sent
    assert args == (queueing.ANALYSIS_TASK, (42, 3))
    assert kw == {
        "queue": "asicmon.traces",
        "time_limit": 630,
        "soft_time_limit": 600,
        "countdown": 5,
    }
    assert queueing.trace_queue() == "asicmon.traces"


def test_a_process_capture_is_sent_to_the_agents_queue(monkeypatch, settings):
    sent = []
    monkeypatch.setattr(queueing.current_app, "send_task", lambda *a, **kw: sent.append((a, kw)))
    queueing.send(queueing.PROCESS_CAPTURE_TASK, 7, 90, queue="asicmon.host.node-a")
    ((args, kw),) = sent
    assert args == ("traces.tasks.capture_process", (7,)) and kw["queue"] == "asicmon.host.node-a"
