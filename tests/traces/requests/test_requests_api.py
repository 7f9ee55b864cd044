"""The requests of a trace through the API: spans uploaded beside it, the join stored by the
worker's service, the summary and one request; permissions as for traces; bad files."""

import gzip

import pytest

from tests.support.serving import spans_upload, uploaded_serving_trace
from traces.requests import service
from traces.requests.models import RequestSpan

pytestmark = pytest.mark.django_db


@pytest.fixture
def joined(api_client, operator, trace_storage, tmp_path):
    api_client.force_authenticate(operator)
    trace, spans, run = uploaded_serving_trace(operator, tmp_path, "throttled", seed=7)
    response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(spans)}, format="multipart")
    assert response.status_code == 201, response.content
    assert response.data["spans"] == 4 * len(run.requests)
    service.join_requests(trace.pk)
    return trace, run


def test_the_summary_gives_percentiles_and_the_worst_with_reasons(api_client, joined):
    trace, run = joined
    response = api_client.get(f"/api/traces/{trace.pk}/requests/")
    assert response.status_code == 200, response.content
    data = response.data
    assert data["requests"] == len(run.requests) and data["join"]["mode"] == "ids"
    assert set(data["latency_ms"]) == {"p50", "p90", "p99"}
    assert len(data["worst"]) == 10 and data["worst"][0]["reason"].startswith("device throttled")
    assert data["health_source"] == "trace counters"
    assert len(data["rows"]) == min(100, len(run.requests))
    assert api_client.get(f"/api/traces/{trace.pk}/requests/?limit=5").data["rows"][0] == data["rows"][0]
    assert api_client.get(f"/api/traces/{trace.pk}/requests/?limit=x").status_code == 400


def test_one_request_with_its_spans_and_the_steps_and_kernels_under_it(api_client, joined):
    trace, _ = joined
    worst = api_client.get(f"/api/traces/{trace.pk}/requests/").data["worst"][0]
    response = api_client.get(f"/api/traces/{trace.pk}/requests/{worst['request_id']}/?width_px=800")
    assert response.status_code == 200
    data = response.data
    assert {s["name"] for s in data["spans"]} == {"llm_request", "queue", "prefill", "decode"}
    timeline = data["timeline"]
    assert timeline["start_us"] * 1000 <= worst["start_ns"] and timeline["end_us"] * 1000 >= worst["end_ns"]
    labels = " ".join(r["label"] for r in timeline["rows"])
    assert "scheduler" in labels and "stream 0" in labels
    assert any(n.startswith("engine_step#") for n in timeline["names"])
    assert api_client.get(f"/api/traces/{trace.pk}/requests/nope/").status_code == 404


def test_new_spans_make_the_stored_join_stale(api_client, joined, tmp_path):
    trace, _ = joined
    from tests.support.serving import serving_files

    _, more, _ = serving_files(tmp_path, seed=8, duration=0.5)
    assert api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(more)}, format="multipart").status_code == 201
    response = api_client.get(f"/api/traces/{trace.pk}/requests/")
    assert response.status_code == 202 and response.data["status"] == "joining"


def test_without_spans_the_answer_says_so(api_client, operator, trace_storage, tmp_path):
    api_client.force_authenticate(operator)
    trace, _, _ = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    response = api_client.get(f"/api/traces/{trace.pk}/requests/")
    assert response.status_code == 409 and "No request spans" in response.data["detail"]


def test_bad_span_files_are_400_and_keep_nothing(api_client, operator, trace_storage, tmp_path):
    api_client.force_authenticate(operator)
    trace, spans, _ = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    lines = spans.read_bytes().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(lines[0] + b"\n{oops\n")
    for bad, reason in ((broken, "line 2 is not JSON"), (tmp_path / "empty.jsonl", "no spans")):
        if not bad.exists():
            bad.write_bytes(b"")
        response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(bad)}, format="multipart")
        assert response.status_code == 400 and reason in str(response.data["file"])
    assert not RequestSpan.objects.filter(owner=trace.pk).exists()
    gz = tmp_path / "spans.jsonl.gz"
    gz.write_bytes(gzip.compress(spans.read_bytes()))
    assert api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(gz)}, format="multipart").status_code == 201
    from traces.atrace.io.otlp import read_otlp_json

    assert RequestSpan.objects.filter(trace=trace, owner=trace.pk).count() == len(read_otlp_json(spans))
    assert api_client.post(f"/api/traces/{trace.pk}/spans/", {}, format="multipart").status_code == 400


def test_permissions_as_for_traces(api_client, viewer, outsider, joined):
    trace, _ = joined
    url = f"/api/traces/{trace.pk}/requests/"
    api_client.force_authenticate(None)
    assert api_client.get(url).status_code == 401
    assert api_client.post(f"/api/traces/{trace.pk}/spans/").status_code == 401
    api_client.force_authenticate(outsider)
    assert api_client.get(url).status_code == 403
    api_client.force_authenticate(viewer)
    assert api_client.get(url).status_code == 200
    response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload_of_nothing()}, format="multipart")
    assert response.status_code == 403


def spans_upload_of_nothing():
    import io

    f = io.BytesIO(b"{}")
    f.name = "x.jsonl"
    return f


def test_the_device_health_comes_from_the_time_series_store(api_client, operator, seeded_fleet, trace_storage, tmp_path):
    import time

    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.support.history import write_points
    from tests.support.serving import serving_files
    from traces import writers

    device = next(d for d in seeded_fleet if d.device_type == "inference")
    t0 = (int(time.time()) - 600) * 10**9
    # No problem played: the trace's own counters say 64 °C at full clock; the store says otherwise.
    raw, spans, _ = serving_files(tmp_path, seed=4, duration=2.0, t0_ns=t0)
    trace = writers.accept_upload(SimpleUploadedFile("serving.json", raw), operator, name="hot", device=device)
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    service.upload_spans(trace, SimpleUploadedFile("spans.jsonl", spans.read_bytes()))
    at = t0 / 1e9
    samples = [at - 5 + k for k in range(20)]
    write_points(device, {"temperature_c": [(t, 93.0) for t in samples], "clock_mhz": [(t, 500.0) for t in samples],
                          "clock_max_mhz": [(t, 1000.0) for t in samples]})
    service.join_requests(trace.pk)
    doc = service.stored_join(trace)
    assert doc["health_source"] == "time-series store"
    worst = doc["worst"][0]
    assert worst["health"] == {"max_temperature_c": 93.0, "min_clock_share": 0.5}
    assert worst["cause"] == "throttled" and "temperature 93 °C, clock at 50 %" in worst["reason"]


def test_spans_beside_a_job_go_beside_every_rank(api_client, operator, viewer, trace_storage, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.support.serving import serving_files
    from traces.jobs.uploads import accept_job_upload

    raw, spans, run = serving_files(tmp_path, seed=5, duration=0.5)
    job = accept_job_upload([SimpleUploadedFile(f"rank{r}.json", raw) for r in (0, 1)], operator, name="served")
    api_client.force_authenticate(viewer)
    assert api_client.post(f"/api/jobs/{job.pk}/spans/", {"file": spans_upload(spans)}, format="multipart").status_code == 403
    api_client.force_authenticate(operator)
    response = api_client.post(f"/api/jobs/{job.pk}/spans/", {"file": spans_upload(spans)}, format="multipart")
    assert response.status_code == 201 and response.data == {"job": job.pk, "ranks": 2, "spans": 4 * len(run.requests)}
    for rank in job.ranks.all():
        assert RequestSpan.objects.filter(trace=rank.trace, name="llm_request").count() == len(run.requests)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("nope\n")
    assert api_client.post(f"/api/jobs/{job.pk}/spans/", {"file": spans_upload(bad)}, format="multipart").status_code == 400
    assert api_client.post("/api/jobs/999999/spans/", {"file": spans_upload(spans)}, format="multipart").status_code == 404


def test_a_pretty_printed_document_is_accepted_and_a_broken_one_is_400(api_client, operator, trace_storage, tmp_path):
    import orjson

    api_client.force_authenticate(operator)
    trace, spans, run = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    requests = [orjson.loads(line) for line in spans.read_bytes().splitlines()]
    pretty = tmp_path / "pretty.json"
    pretty.write_bytes(orjson.dumps(requests, option=orjson.OPT_INDENT_2))
    response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(pretty)}, format="multipart")
    assert response.status_code == 201 and response.data["spans"] == 4 * len(run.requests)
    broken = tmp_path / "broken.json"
    broken.write_bytes(orjson.dumps(requests, option=orjson.OPT_INDENT_2)[:-40])
    response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(broken)}, format="multipart")
    assert response.status_code == 400 and "neither JSON lines nor one JSON document" in str(response.data["file"])


def test_a_damaged_gzip_file_is_400(api_client, operator, trace_storage, tmp_path):
    import gzip

    api_client.force_authenticate(operator)
    trace, spans, _ = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    packed = gzip.compress(spans.read_bytes())
    for name, body in (("cut.jsonl.gz", packed[: len(packed) // 2]),
                       ("garbled.jsonl.gz", packed[:20] + bytes(b ^ 0x5A for b in packed[20:60]) + packed[60:])):
        bad = tmp_path / name
        bad.write_bytes(body)
        response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(bad)}, format="multipart")
        assert response.status_code == 400, (name, response.content)
    assert not RequestSpan.objects.filter(owner=trace.pk).exists()


def test_a_pending_join_is_queued_once_however_often_it_is_asked_for(api_client, joined, tmp_path, monkeypatch):
    from tests.support.serving import serving_files
    from traces import queueing

    trace, _ = joined
    sent = []
    monkeypatch.setattr(queueing, "send", lambda *args: sent.append(args))  # the broker is not what is tested
    _, more, _ = serving_files(tmp_path, seed=9, duration=0.3)
    api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(more)}, format="multipart")
    for _ in range(3):
        assert api_client.get(f"/api/traces/{trace.pk}/requests/").status_code == 202
    assert sent == [(service.JOIN_TASK, trace.pk, service.JOIN_LIMIT_S)]


def test_a_gzip_bomb_of_a_spans_file_is_413_and_keeps_nothing(api_client, operator, trace_storage, tmp_path, settings):
    import gzip

    api_client.force_authenticate(operator)
    trace, spans, _ = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    settings.SPAN_UPLOAD_MAX_MB = 0.05  # 51 KiB as sent or once inflated
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(spans.read_bytes().splitlines()[0] + b"\n" + b" " * (40 << 20)))
    assert bomb.stat().st_size < 51 * 1024
    response = api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(bomb)}, format="multipart")
    assert response.status_code == 413 and "inflates to more than" in response.data["detail"]
    assert not RequestSpan.objects.filter(owner=trace.pk).exists()
