"""Capturing an inference device while it serves requests: the capture runs the emulator's
inference service, its spans (made by the OpenTelemetry SDK) land beside the trace, and the
join explains its requests; an overheating device's requests are blamed on it."""

import time

import pytest

from fleet.hosts.emulated_fleet import host_monitor
from traces import writers
from traces.choices import TraceStatus
from traces.requests import service
from traces.requests.models import RequestSpan

pytestmark = pytest.mark.django_db


def _inference(fleet):
    return next(d for d in fleet if d.device_type == "inference")


def _capture(device, user, seconds=2):
    trace = writers.request_capture(device, user, seconds)
    started = time.time()
    writers.run_capture(trace.pk)
    assert time.time() - started >= seconds * 0.95
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    return trace


@pytest.mark.slow  # a real-time capture of the serving emulator
def test_an_inference_capture_serves_requests_and_joins_them(seeded_fleet, operator, trace_storage, settings):
    settings.OTLP_TOKEN = ""  # no receiver: the spans go straight beside the trace
    trace = _capture(_inference(seeded_fleet), operator)
    assert trace.workload == "llm_serving"
    spans = RequestSpan.objects.filter(trace=trace)
    assert spans.filter(name="llm_request").count() >= 10
    assert set(spans.values_list("device_serial", flat=True)) == {trace.device.serial}
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    assert doc["join"]["mode"] == "ids" and doc["join"]["max_share_error_ns"] == 0
    assert doc["requests"] == spans.filter(name="llm_request").count()
    # Start times are the wall clock's: the requests lie in the capture window.
    window = (trace.capture_started_at.timestamp() * 1e9, trace.capture_ended_at.timestamp() * 1e9)
    assert all(window[0] - 1e9 <= r["start_ns"] <= window[1] for r in doc["rows"])
    assert not [r for r in doc["rows"] if r["cause"] == "throttled"]


@pytest.mark.slow  # a 4 s real-time capture of the serving emulator
def test_an_overheating_device_serves_slowly_and_is_blamed(seeded_fleet, operator, trace_storage, settings):
    settings.OTLP_TOKEN = ""
    device = _inference(seeded_fleet)
    emulated = host_monitor(device.host.name).host
    with emulated.locked():
        emulated.sync()
        emulated.inject_fault(device.serial, "overheat")
        emulated.save()
    # Spans are sent as requests finish: a throttled device on a loaded machine may finish none
    # in 2 s (seen three times at a load of ~8), so this capture lasts 4 s.
    trace = _capture(device, operator, seconds=4)
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    assert "worst" in doc, doc
    assert doc["worst"][0]["cause"] == "throttled"
    assert "clock at 50 %" in doc["worst"][0]["reason"]


def test_other_device_types_capture_their_workload_as_before(seeded_fleet, operator, trace_storage):
    gpu = next(d for d in seeded_fleet if d.device_type == "gpu")
    trace = _capture(gpu, operator, 1)
    assert trace.workload != "llm_serving"
    assert not RequestSpan.objects.filter(trace=trace).exists()
