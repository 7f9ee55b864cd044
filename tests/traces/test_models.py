"""Trace and Job go through their states with the same lifecycle fields, declared once in
traces.models.Lifecycle; each keeps its own states."""

from traces.choices import JobStatus, TraceStatus
from traces.models import Job, Lifecycle, Trace

SHARED = {"name", "source", "progress", "created_by", "created_at", "status_changed_at",
          "capture_started_at", "capture_ended_at", "analysis_started_at", "ready_at"}


def test_trace_and_job_take_their_lifecycle_fields_from_one_place():
    for model in (Trace, Job):
        assert issubclass(model, Lifecycle)
        fields = {f.name: f for f in model._meta.get_fields()}
        assert set(fields) >= SHARED
        for name in SHARED:
            inherited = Lifecycle._meta.get_field(name)
            assert fields[name].deconstruct()[1:] == inherited.deconstruct()[1:], (model.__name__, name)
        assert model._meta.ordering == ["-created_at", "-id"]
    assert Trace._meta.get_field("status").choices == TraceStatus.choices
    assert Job._meta.get_field("status").choices == JobStatus.choices
    assert {p[0] for p in Trace._meta.permissions} == {"capture_trace", "upload_trace"}


def test_each_is_done_once_ready_or_failed():
    assert [Trace(status=s).is_done for s in TraceStatus.values] == [s in ("ready", "failed") for s in TraceStatus.values]
    assert [Job(status=s).is_done for s in JobStatus.values] == [s in ("ready", "failed") for s in JobStatus.values]
    assert str(Job(name="allreduce", status=JobStatus.COMBINING)) == "allreduce (combining)"
