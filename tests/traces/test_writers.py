"""The trace services: a wall-clock capture, the storage budget, retention, timeouts, roles."""

import time
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from emulator.workloads.tracing import DeviceNow, capture_live
from tests.support.traces import files_in, real_trace
from traces import writers
from traces.choices import TraceStatus
from traces.models import Trace

pytestmark = pytest.mark.django_db


def uploaded(operator, name="simple_add_kineto.json.gz"):
    path = real_trace(name)
    return writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator)


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_live_capture_takes_its_wall_clock_time_and_covers_it():
    started = time.time()
    seen = []
    live = capture_live("gpu", 1.5, lambda t: DeviceNow(load=0.6), progress=lambda f, n: seen.append((f, n)))
    took = time.time() - started
    assert 1.4 <= took <= 15.0  # paced by the clock; generous upper bound on a loaded machine
    first, last = live.trace.span()
    assert abs(first / 1e9 - started) < 0.5  # epoch timestamps: lines up with samples
    assert last / 1e9 >= started + 1.2
    assert live.iterations_kept == live.iterations_run > 1
    assert seen[-1][0] == 1.0 and [f for f, _ in seen] == sorted(f for f, _ in seen)


@pytest.mark.slow  # a real-time capture: seconds of CPU (make test runs it, make test-fast does not)
def test_live_capture_keeps_whole_iterations_within_the_event_budget():
    live = capture_live("inference", 1.0, lambda t: DeviceNow(load=1.0), max_events=5000)
    assert len(live.trace) <= 5000
    assert 0 < live.iterations_kept < live.iterations_run
    steps = [n for n in live.trace.names() if n.startswith("step#")]
    assert len(steps) == live.iterations_kept  # whole iterations only
    assert live.events_dropped > 0


@pytest.mark.slow  # three 1 s real-time captures, busy the whole time
def test_live_capture_follows_the_device_load_and_faults():
    busy = capture_live("gpu", 1.0, lambda t: DeviceNow(load=1.0))
    idle = capture_live("gpu", 1.0, lambda t: DeviceNow(load=0.1))
    assert idle.iterations_run < busy.iterations_run / 3
    hot = capture_live("gpu", 1.0, lambda t: DeviceNow(load=1.0, faults=frozenset({"overheat"})))
    assert hot.iterations_run < busy.iterations_run


def test_run_capture_of_a_seeded_device_stores_raw_and_queues_analysis(seeded_fleet, operator, trace_storage, settings, django_capture_on_commit_callbacks):
    device = seeded_fleet[0]
    trace = writers.request_capture(device, operator, 1)
    started = time.time()
    writers.run_capture(trace.pk)
    assert time.time() - started >= 0.95
    trace.refresh_from_db()
    assert trace.status == TraceStatus.ANALYSING and trace.raw_file.endswith("raw.json.gz")
    assert trace.iterations_kept == trace.iterations_run > 0
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    assert trace.events > 0 and 0.5e6 < trace.span_us < 1.5e6


def test_a_hung_device_fails_the_capture_with_a_reason(seeded_fleet, operator, trace_storage):
    from fleet.hosts.emulated_fleet import host_monitor

    device = seeded_fleet[0]
    emulated = host_monitor(device.host.name).host
    with emulated.locked():
        emulated.sync()
        emulated.inject_fault(device.serial, "hang")
        emulated.save()
    trace = writers.request_capture(device, operator, 1)
    writers.run_capture(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.FAILED and "stopped answering" in trace.error


def test_storage_full_refuses_but_first_deletes_traces_past_retention(operator, trace_storage, settings):
    old = uploaded(operator)
    Trace.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=settings.TRACE_RETENTION_DAYS + 1))
    recent = uploaded(operator)
    settings.TRACE_STORAGE_MAX_GB = (old.stored_bytes + recent.stored_bytes + 100) / (1 << 30)
    third = uploaded(operator)  # fits once the old one is gone
    assert not Trace.objects.filter(pk=old.pk).exists()
    assert Trace.objects.filter(pk__in=[recent.pk, third.pk]).count() == 2
    with pytest.raises(writers.StorageFull, match="TRACE_STORAGE_MAX_GB"):
        uploaded(operator)
    assert Trace.objects.count() == 2


def test_deleting_a_trace_deletes_its_files(operator, trace_storage, settings, django_capture_on_commit_callbacks):
    trace = uploaded(operator)
    writers.analyse(trace.pk)
    assert len(files_in(settings.TRACE_STORAGE_DIR)) >= 4
    with django_capture_on_commit_callbacks(execute=True):
        Trace.objects.get(pk=trace.pk).delete()
    assert files_in(settings.TRACE_STORAGE_DIR) == []


def test_prune_removes_only_traces_past_retention(operator, trace_storage, settings):
    old, new = uploaded(operator), uploaded(operator)
    Trace.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=settings.TRACE_RETENTION_DAYS, hours=1))
    assert writers.prune_traces() == 1
    assert list(Trace.objects.values_list("pk", flat=True)) == [new.pk]


def test_every_state_times_out_to_failed_with_a_reason(operator, seeded_fleet, trace_storage, settings):
    queued = uploaded(operator)
    capturing = writers.request_capture(seeded_fleet[0], operator, 5)
    analysing = uploaded(operator)
    long_ago = timezone.now() - timedelta(hours=2)
    Trace.objects.filter(pk=queued.pk).update(status_changed_at=long_ago)
    Trace.objects.filter(pk=capturing.pk).update(status=TraceStatus.CAPTURING, status_changed_at=long_ago)
    Trace.objects.filter(pk=analysing.pk).update(status=TraceStatus.ANALYSING, status_changed_at=long_ago)
    fresh = uploaded(operator)
    assert writers.expire_stuck() == 3
    reasons = dict(Trace.objects.values_list("pk", "error"))
    assert "no trace worker" in reasons[queued.pk]
    assert "capture did not finish within 1 min 5 s" in reasons[capturing.pk]
    assert "analysis did not finish" in reasons[analysing.pk]
    assert Trace.objects.get(pk=fresh.pk).status == TraceStatus.QUEUED
    # The device is free again.
    writers.request_capture(seeded_fleet[0], operator, 5)


def test_analysis_gives_up_after_repeated_worker_deaths(operator, trace_storage):
    trace = uploaded(operator)
    Trace.objects.filter(pk=trace.pk).update(status=TraceStatus.ANALYSING, attempts=writers.MAX_ANALYSIS_ATTEMPTS)
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.FAILED and "attempts" in trace.error


def test_roles_refuse_unknown_permission_names(db, monkeypatch):
    from fleet import roles

    monkeypatch.setitem(roles.ROLES, "operators", [*roles.OPERATOR_PERMISSIONS, "traces.fly_trace"])
    with pytest.raises(ImproperlyConfigured, match="traces.fly_trace"):
        roles.ensure_roles()


def test_operators_have_capture_and_upload_and_viewers_view(operator, viewer):
    assert operator.has_perm("traces.capture_trace") and operator.has_perm("traces.upload_trace")
    assert viewer.has_perm("traces.view_trace")
    assert not viewer.has_perm("traces.capture_trace") and not viewer.has_perm("traces.upload_trace")
