"""End to end over the wire: capturing an inference device while it serves, its spans sent by
the OpenTelemetry SDK's OTLP/HTTP exporter to a real Daphne's /v1/traces, attached to the
capture by its window and device, and joined."""

import pytest

from tests.support.processes import child_env, start_web
from traces import writers
from traces.choices import TraceStatus
from traces.requests import service
from traces.requests.models import RequestSpan

TOKEN = "live-capture-otlp-token"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_capture_s_spans_travel_over_otlp_and_join_the_capture(seeded_fleet, operator, trace_storage, settings):
    web, base = start_web(child_env(OTLP_TOKEN=TOKEN))
    try:
        settings.OTLP_TOKEN = TOKEN
        settings.EMULATOR_OTLP_ENDPOINT = f"{base}/v1/traces"
        device = next(d for d in seeded_fleet if d.device_type == "inference")
        other = next(d for d in seeded_fleet if d.device_type == "inference" and d.pk != device.pk)
        trace = writers.request_capture(device, operator, 2)
        writers.run_capture(trace.pk)
        writers.analyse(trace.pk)
        trace.refresh_from_db()
        assert trace.status == TraceStatus.READY, trace.error
    finally:
        web.stop()
    live = RequestSpan.objects.filter(owner=0)
    assert live.filter(name="llm_request").count() >= 10  # received over HTTP, not stored beside the trace
    assert set(live.values_list("device_serial", flat=True)) == {device.serial}
    # Spans of another device in the same window are not this capture's.
    intruder = live.first()
    RequestSpan.objects.create(otel_trace_id="f" * 32, span_id="e" * 16, name="llm_request", start_ns=intruder.start_ns,
                               end_ns=intruder.end_ns, device_serial=other.serial, request_id="other-device")
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    assert doc["join"]["mode"] == "ids" and doc["requests"] == live.filter(name="llm_request", trace=trace).count()
    assert "other-device" not in {r["request_id"] for r in doc["rows"]}
    assert RequestSpan.objects.get(request_id="other-device").trace_id is None
