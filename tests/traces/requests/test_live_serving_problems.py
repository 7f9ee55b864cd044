"""A live capture of an inference device can play each serving problem: the capture request
names it (as the advisor's problems are named for other devices), the emulator's inference
service plays it while the trace is captured, and the join blames the slowest requests on it
(the offline check is tests/traces/atrace/analysis/requests/test_joining.py)."""

import pytest

from traces import writers
from traces.choices import TraceStatus
from traces.models import Trace
from traces.requests import service

pytestmark = pytest.mark.django_db

PROBLEM_CAUSE = {"long_prefill": "prefill_interference", "throttled": "throttled", "host_stall": "host_stall",
                 "full_queue": "queue"}


def _device(fleet, device_type="inference"):
    return next(d for d in fleet if d.device_type == device_type)


def test_the_api_takes_serving_problems_for_an_inference_device(api_client, operator, seeded_fleet, trace_storage):
    api_client.force_authenticate(operator)
    body = {"duration_s": 2, "problems": ["host_stall", "long_prefill"]}
    response = api_client.post(f"/api/devices/{_device(seeded_fleet).id}/capture/", body, format="json")
    assert response.status_code == 202, response.data
    assert Trace.objects.get(pk=response.data["id"]).params["problems"] == ["host_stall", "long_prefill"]


@pytest.mark.parametrize(("device_type", "problems", "message"), [
    ("inference", ["input_stall"], "unknown problems input_stall for an inference device serving requests"),
    ("inference", ["full_queue", "gremlins"], "unknown problems gremlins"),
    ("gpu", ["full_queue"], "unknown problems full_queue for this device"),
])
def test_problems_the_device_cannot_play_are_400_and_write_nothing(api_client, operator, seeded_fleet, device_type,
                                                                    problems, message):
    api_client.force_authenticate(operator)
    body = {"duration_s": 2, "problems": problems}
    response = api_client.post(f"/api/devices/{_device(seeded_fleet, device_type).id}/capture/", body, format="json")
    assert response.status_code == 400 and message in response.data["detail"], response.data
    assert not Trace.objects.exists()


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_viewer_may_not_capture_with_problems(api_client, viewer, seeded_fleet):
    api_client.force_authenticate(viewer)
    body = {"duration_s": 2, "problems": ["full_queue"]}
    assert api_client.post(f"/api/devices/{_device(seeded_fleet).id}/capture/", body, format="json").status_code == 403
    api_client.force_authenticate(None)
    assert api_client.post(f"/api/devices/{_device(seeded_fleet).id}/capture/", body, format="json").status_code in (401, 403)
    assert not Trace.objects.exists()


@pytest.mark.slow  # a real-time capture of the serving emulator for each problem: ~8 s of wall clock each
@pytest.mark.parametrize("problem", sorted(PROBLEM_CAUSE))
def test_a_live_capture_plays_the_problem_and_its_slowest_requests_are_blamed_on_it(
        problem, seeded_fleet, operator, trace_storage, settings):
    settings.OTLP_TOKEN = ""  # the spans go straight beside the trace (the OTLP path: test_live_serving_otlp.py)
    trace = writers.request_capture(_device(seeded_fleet), operator, 6, problems=[problem])
    writers.run_capture(trace.pk)
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    causes = [w["cause"] for w in doc["worst"]]
    assert causes.count(PROBLEM_CAUSE[problem]) >= 5, causes
