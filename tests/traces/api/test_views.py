"""The traces API: every endpoint, every permission, bad input, a busy device, real traces.

Services run in-process here (analysis called directly); tests/scenarios/test_trace_worker.py runs
them through a real Celery worker.
"""

from decimal import Decimal
from pathlib import Path

import pytest

from tests.support.traces import exact_totals_by_name, files_in, gzip_bytes, real_trace, upload_file
from traces import writers
from traces.choices import TraceStatus
from traces.models import Trace

pytestmark = pytest.mark.django_db

QWEN = "mi300_qwen_infer.json.gz"


def upload(client, path_or_file, **fields):
    if isinstance(path_or_file, Path):
        with path_or_file.open("rb") as f:
            return client.post("/api/traces/", {"file": f, **fields}, format="multipart")
    return client.post("/api/traces/", {"file": path_or_file, **fields}, format="multipart")


@pytest.fixture
def ready_trace(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    response = upload(api_client, real_trace(QWEN), name="qwen")
    assert response.status_code == 201, response.content
    writers.analyse(response.data["id"])
    return Trace.objects.get(pk=response.data["id"])


# -- permissions -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "method,url",
    [
        ("get", "/api/traces/"),
        ("get", "/api/traces/1/"),
        ("get", "/api/traces/1/breakdown/"),
        ("get", "/api/traces/1/instances/?op=x"),
        ("get", "/api/traces/1/download/"),
        ("post", "/api/traces/"),
        ("post", "/api/devices/1/capture/"),
    ],
)
def test_anonymous_gets_401_everywhere(api_client, method, url):
    response = getattr(api_client, method)(url)
    assert response.status_code == 401


def test_viewer_reads_but_may_not_capture_or_upload(api_client, viewer, seeded_fleet, trace_storage):
    api_client.force_authenticate(viewer)
    assert api_client.get("/api/traces/").status_code == 200
    device = seeded_fleet[0]
    response = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 5}, format="json")
    assert response.status_code == 403
    assert "capture trace" in response.data["detail"]
    response = upload(api_client, real_trace("simple_add_kineto.json.gz"))
    assert response.status_code == 403
    assert not Trace.objects.exists()


def test_user_without_a_role_may_not_read(api_client, outsider):
    api_client.force_authenticate(outsider)
    assert api_client.get("/api/traces/").status_code == 403


# -- capture ---------------------------------------------------------------------------
def test_operator_captures_and_a_second_capture_of_the_device_is_409(api_client, operator, seeded_fleet, trace_storage):
    api_client.force_authenticate(operator)
    device = seeded_fleet[0]
    response = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 3}, format="json")
    assert response.status_code == 202
    trace = Trace.objects.get(pk=response.data["id"])
    assert response.data["url"] == f"/traces/{trace.pk}/"
    assert (trace.status, trace.source, trace.params) == ("queued", "capture", {"duration_s": 3.0})
    assert (trace.device_id, trace.host_name, trace.device_type) == (device.id, device.host.name, device.device_type)
    assert trace.sw_version and trace.workload and trace.created_by == operator

    again = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 3}, format="json")
    assert again.status_code == 409
    assert "already capturing" in again.data["detail"]
    # Another device is free.
    other = api_client.post(f"/api/devices/{seeded_fleet[1].id}/capture/", {}, format="json")
    assert other.status_code == 202
    assert Trace.objects.get(pk=other.data["id"]).params == {"duration_s": 5.0}


def test_a_capture_may_ask_for_emulator_problems(api_client, operator, seeded_fleet, trace_storage):
    api_client.force_authenticate(operator)
    device = seeded_fleet[0]
    body = {"duration_s": 2, "problems": ["input_stall", "host_sync"]}
    response = api_client.post(f"/api/devices/{device.id}/capture/", body, format="json")
    assert response.status_code == 202
    assert Trace.objects.get(pk=response.data["id"]).params == {"duration_s": 2.0, "problems": ["host_sync", "input_stall"]}


@pytest.mark.parametrize(("problems", "message"), [
    (["gremlins"], "unknown problems gremlins"), ("input_stall", "must be a list"), ([3], "must be a list"),
])
def test_bad_capture_problems_are_400_and_write_nothing(api_client, operator, seeded_fleet, problems, message):
    api_client.force_authenticate(operator)
    body = {"duration_s": 2, "problems": problems}
    response = api_client.post(f"/api/devices/{seeded_fleet[0].id}/capture/", body, format="json")
    assert response.status_code == 400 and message in response.data["detail"]
    assert not Trace.objects.exists()


@pytest.mark.parametrize("duration", [0, 0.5, 61, -3, "soon", None])
def test_bad_capture_duration_is_400_and_writes_nothing(api_client, operator, seeded_fleet, duration):
    api_client.force_authenticate(operator)
    response = api_client.post(f"/api/devices/{seeded_fleet[0].id}/capture/", {"duration_s": duration}, format="json")
    assert response.status_code == 400
    assert "duration_s" in response.data["detail"]
    assert not Trace.objects.exists()


def test_capture_of_an_unknown_device_is_404(api_client, operator, db):
    api_client.force_authenticate(operator)
    assert api_client.post("/api/devices/999999/capture/", {"duration_s": 5}, format="json").status_code == 404


# -- upload ----------------------------------------------------------------------------
def test_upload_of_a_real_trace_reaches_a_breakdown_equal_to_exact_sums(ready_trace, api_client):
    assert ready_trace.status == TraceStatus.READY, ready_trace.error
    detail = api_client.get(f"/api/traces/{ready_trace.pk}/").data
    assert detail["status"] == "ready" and detail["progress"] == 1.0 and detail["source"] == "upload"
    assert detail["events"] > 1000 and detail["span_us"] > 0 and detail["name"] == "qwen"

    response = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=host&kind=host_op")
    assert response.status_code == 200
    rows = {r["op"]: r for r in response.data["results"]}
    assert response.data["count"] == len(rows)
    exact = exact_totals_by_name(real_trace(QWEN), {"cpu_op"})
    assert set(rows) == set(exact)
    for op, (count, total) in exact.items():
        assert rows[op]["count"] == count, op
        assert Decimal(str(rows[op]["total_us"])) == total.quantize(Decimal("0.001")), op
    for row in rows.values():
        assert set(row) == {"op", "side", "kind", "count", "total_us", "self_us", "mean_us", "p50_us", "p95_us", "max_us", "share"}
        assert row["self_us"] <= row["total_us"] and row["p50_us"] <= row["p95_us"] <= row["max_us"]


def test_breakdown_keeps_kinds_apart_and_lists_them(ready_trace, api_client):
    host = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=host").data
    assert "host_op" in host["kinds"] and "runtime" in host["kinds"]
    assert {r["kind"] for r in host["results"]} == set(host["kinds"])
    device = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=device").data
    assert "kernel" in device["kinds"] and all(r["side"] == "device" for r in device["results"])
    bad = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=device&kind=python")
    assert bad.status_code == 400 and "kind" in bad.data
    assert api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=middle").status_code == 400


def test_drill_down_pages_instances_with_histogram_launcher_and_group_by(ready_trace, api_client):
    device = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=device&kind=kernel").data["results"]
    top = device[0]
    url = f"/api/traces/{ready_trace.pk}/instances/"
    first = api_client.get(url, {"side": "device", "op": top["op"], "limit": 5}).data
    assert first["count"] == top["count"] and len(first["results"]) == min(5, top["count"])
    assert sum(first["histogram"]["counts"]) == top["count"]
    durations = [r["dur_us"] for r in first["results"]]
    assert durations == sorted(durations, reverse=True) and durations[0] == top["max_us"]
    # Kernels name the framework operator that launched them (where the trace links them).
    everything = api_client.get(url, {"side": "device", "op": top["op"], "limit": 1000}).data["results"]
    host_ops = {r["op"] for r in api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=host&kind=host_op").data["results"]}
    launchers = [r["launched_by"] for r in everything if r["launched_by"]]
    assert launchers and set(launchers) <= host_ops
    assert all(r["track"] for r in first["results"])

    second = api_client.get(url, {"side": "device", "op": top["op"], "limit": 5, "offset": 5}).data
    if top["count"] > 5:
        assert second["results"][0]["dur_us"] <= durations[-1]

    host_op = api_client.get(f"/api/traces/{ready_trace.pk}/breakdown/?side=host&kind=host_op").data["results"][0]
    grouped = api_client.get(url, {"op": host_op["op"], "kind": "host_op", "group_by": "Input Dims"}).data
    assert sum(g["count"] for g in grouped["groups"]) == host_op["count"]
    assert sum(Decimal(str(g["total_us"])) for g in grouped["groups"]) == pytest.approx(Decimal(str(host_op["total_us"])), abs=Decimal("0.01"))

    by_start = api_client.get(url, {"op": host_op["op"], "kind": "host_op", "order": "start", "limit": 50}).data["results"]
    assert [r["start_us"] for r in by_start] == sorted(r["start_us"] for r in by_start)


BAD_DRILL_DOWNS = [({}, "op"), ({"op": "no::such_op"}, "op"), ({"op": "x", "limit": "0"}, "limit"),
                   ({"op": "x", "limit": "many"}, "limit"), ({"op": "x", "offset": "-1"}, "offset"),
                   ({"op": "x", "order": "random"}, "order"), ({"op": "x", "side": "gpu"}, "side")]


def test_bad_drill_down_parameters_are_400(ready_trace, api_client):
    for query, field in BAD_DRILL_DOWNS:  # one analysed trace asked seven wrong ways
        response = api_client.get(f"/api/traces/{ready_trace.pk}/instances/", query)
        assert response.status_code == 400, query
        assert field in response.data, (query, response.data)


def test_downloads_raw_as_uploaded_and_chrome_once_exported(ready_trace, api_client):
    raw = api_client.get(f"/api/traces/{ready_trace.pk}/download/?format=raw")
    assert raw.status_code == 200
    assert b"".join(raw.streaming_content) == real_trace(QWEN).read_bytes()
    chrome = api_client.get(f"/api/traces/{ready_trace.pk}/download/?format=chrome")
    assert chrome.status_code == 200
    import gzip
    import json

    doc = json.loads(gzip.decompress(b"".join(chrome.streaming_content)))
    assert any(e.get("args", {}).get("critical_path") for e in doc["traceEvents"])
    assert api_client.get(f"/api/traces/{ready_trace.pk}/download/?format=pdf").status_code == 400


def test_results_of_a_trace_not_ready_are_409(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    response = upload(api_client, real_trace("simple_add_kineto.json.gz"))
    trace_id = response.data["id"]
    assert response.data["status"] == "queued"
    for url in (f"/api/traces/{trace_id}/breakdown/", f"/api/traces/{trace_id}/instances/?op=aten::add"):
        answer = api_client.get(url)
        assert answer.status_code == 409 and "queued" in answer.data["detail"]


# Refused in the request: what its first bytes (the head it looks at) show.
BAD_FILES = {
    "empty": ("empty.json", b"", "empty"),
    "truncated gzip": ("cut.json.gz", None, "truncated"),
    "wrong format": ("photo.json", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, ""),
    "not a trace": ("numbers.json", b'{"hello": [1, 2, 3]}', ""),
}
# Accepted by the request, which reads only the head, and failed by the worker that parses.
BAD_PAST_THE_HEAD = {
    "gzip bomb": ("bomb.json.gz", "gzip bomb"),
    "truncated JSON": ("cut.json", "truncated"),
    "malformed event deep in the file": ("broken.json", "malformed event JSON"),
    "not an event object": ("numbers-in-events.json", "traceEvents"),
}
EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.25, "args": {"shape": "[[1, 2]]"}}'


def many_events(middle: bytes = b"", n: int = 60_000) -> bytes:
    """A Kineto trace of ``n`` events (several MB, so the scan reads it in many chunks), with
    ``middle`` put between two events half way."""
    events = [EVENT] * n
    if middle:
        events.insert(n // 2, middle)
    return b'{"schemaVersion": 1, "traceEvents": [\n' + b",\n".join(events) + b"\n]}"


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_upload_is_400_with_the_engines_message_and_leaves_nothing(case, api_client, operator, trace_storage, settings):
    name, data, words = BAD_FILES[case]
    if case == "truncated gzip":
        data = real_trace("simple_add_kineto.json.gz").read_bytes()[:-200]
    api_client.force_authenticate(operator)
    response = upload(api_client, upload_file(name, data))
    assert response.status_code == 400, response.content
    assert name in response.data["detail"] and words in response.data["detail"]
    assert not Trace.objects.exists()
    assert files_in(settings.TRACE_STORAGE_DIR) == []


def _bad_past_the_head(case: str) -> bytes:
    return {
        "gzip bomb": lambda: gzip_bytes(b'{"traceEvents": [' + b" " * (80 << 20)),
        "truncated JSON": lambda: many_events()[:-5000],
        "malformed event deep in the file": lambda: many_events(b'{"ph": "X", "name": "bad" "dur": 1}'),
        "not an event object": lambda: many_events(b"[1, 2]"),
    }[case]()


@pytest.mark.parametrize("case", list(BAD_PAST_THE_HEAD))
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_file_bad_past_its_head_is_parsed_only_by_the_worker_which_fails_it(case, api_client, operator, trace_storage):
    """The web process reads the first 64 kB of an upload only (issue 25: a Chakra or a gzip
    was read whole in the request); the worker's parse finds the fault and fails the trace."""
    name, words = BAD_PAST_THE_HEAD[case]
    api_client.force_authenticate(operator)
    response = upload(api_client, upload_file(name, _bad_past_the_head(case)))
    assert response.status_code == 201, response.content
    writers.analyse(response.data["id"])
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.status == TraceStatus.FAILED
    assert name in trace.error and words in trace.error, trace.error


def test_an_upload_the_reader_refuses_past_the_requests_scan_fails_with_the_reason(api_client, operator, trace_storage):
    """The request checks the file's structure only; an event with a negative duration is
    well-formed JSON, so it is accepted and its analysis fails with the reader's message."""
    api_client.force_authenticate(operator)
    bad = b'{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "pid": 1, "tid": 1, "ts": 5, "dur": -3}'
    response = upload(api_client, upload_file("negative.json", many_events(bad, n=100)))
    assert response.status_code == 201, response.content
    assert response.data["status"] == "queued"
    writers.analyse(response.data["id"])
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.status == TraceStatus.FAILED
    assert "negative duration" in trace.error and "traceEvents[50]" in trace.error


def test_a_failed_analysis_names_the_upload_not_where_the_server_stores_it(api_client, operator, trace_storage, settings):
    """It said "the trace cannot be analysed: /…/var/traces/10/raw.json, traceEvents[0]: …"."""
    api_client.force_authenticate(operator)
    bad = b'{"ph": "X", "cat": "cpu_op", "name": "aten::neg", "pid": 1, "tid": 1, "ts": 5, "dur": -3}'
    response = upload(api_client, upload_file("negative.json", many_events(bad, n=100)))
    writers.analyse(response.data["id"])
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.status == TraceStatus.FAILED
    assert trace.error.startswith("the trace cannot be analysed: negative.json, traceEvents[50]"), trace.error
    assert str(settings.TRACE_STORAGE_DIR) not in trace.error and "raw.json" not in trace.error
    page = api_client.get(f"/api/traces/{trace.pk}/").data
    assert page["error"] == trace.error


def test_upload_records_the_format_and_the_metadata_the_scan_found(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    head = b'{"schemaVersion": 1, "sw_version": "2.7", "workload": "mm-bench", "traceEvents": [' + EVENT + b"]}"
    response = upload(api_client, upload_file("meta.json", head))
    assert response.status_code == 201, response.content
    trace = Trace.objects.get(pk=response.data["id"])
    assert (trace.raw_format, trace.sw_version, trace.workload) == ("kineto", "2.7", "mm-bench")


@pytest.mark.parametrize("fmt", ["chrome-json", "chakra-et"])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_upload_of_other_formats_reaches_ready(fmt, api_client, operator, trace_storage):
    import gzip

    if fmt == "chrome-json":  # plain, not gzipped
        file = upload_file("plain.json", gzip.decompress(real_trace("simple_add_kineto.json.gz").read_bytes()))
    else:
        file = upload_file("feeder.et", real_trace("chakra_feeder.0.et").read_bytes())
    api_client.force_authenticate(operator)
    response = upload(api_client, file)
    assert response.status_code == 201, response.content
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.raw_file.endswith(".json" if fmt == "chrome-json" else ".et")
    writers.analyse(trace.pk)
    trace.refresh_from_db()
    assert trace.status == TraceStatus.READY, trace.error
    assert api_client.get(f"/api/traces/{trace.pk}/breakdown/?side=host").data["count"] > 0


def test_upload_larger_than_the_limit_is_413(api_client, operator, trace_storage, settings):
    settings.TRACE_UPLOAD_MAX_MB = 1
    api_client.force_authenticate(operator)
    response = upload(api_client, upload_file("big.json", b"[" + b" " * (3 << 20) + b"]"))
    assert response.status_code == 413
    assert "TRACE_UPLOAD_MAX_MB" in response.data["detail"]
    assert not Trace.objects.exists()


def test_upload_without_a_file_or_with_an_unknown_device_is_400(api_client, operator, trace_storage):
    api_client.force_authenticate(operator)
    assert "file" in api_client.post("/api/traces/", {"name": "x"}, format="multipart").data
    response = upload(api_client, real_trace("simple_add_kineto.json.gz"), device=999999)
    assert response.status_code == 400 and "device" in response.data
    assert not Trace.objects.exists()


# -- catalogue -------------------------------------------------------------------------
def test_list_filters_and_rejects_bad_filters(api_client, operator, seeded_fleet, trace_storage):
    api_client.force_authenticate(operator)
    upload(api_client, real_trace("simple_add_kineto.json.gz"), sw_version="9.9")
    api_client.post(f"/api/devices/{seeded_fleet[0].id}/capture/", {"duration_s": 2}, format="json")
    everything = api_client.get("/api/traces/").data
    assert everything["count"] == 2
    assert [t["source"] for t in api_client.get("/api/traces/?source=upload").data["results"]] == ["upload"]
    assert api_client.get("/api/traces/?sw_version=9.9").data["count"] == 1
    captured = api_client.get(f"/api/traces/?device={seeded_fleet[0].id}&host={seeded_fleet[0].host.name}&type={seeded_fleet[0].device_type}").data
    assert [t["source"] for t in captured["results"]] == ["capture"]
    assert api_client.get("/api/traces/?status=queued").data["count"] == 2
    assert api_client.get("/api/traces/?q=SIMPLE_add").data["count"] == 1
    assert api_client.get("/api/traces/?by=otto").data["count"] == 2
    assert api_client.get("/api/traces/?by=vera").data["count"] == 0
    for bad in ("status=done", "source=ftp", "device=abc", "ordering=color"):
        assert api_client.get(f"/api/traces/?{bad}").status_code == 400, bad


def test_schema_documents_every_trace_endpoint(api_client, viewer):
    api_client.force_authenticate(viewer)
    schema = api_client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    for path in ["/api/traces/", "/api/traces/{id}/", "/api/traces/{id}/breakdown/", "/api/traces/{id}/instances/",
                 "/api/traces/{id}/download/", "/api/devices/{id}/capture/"]:
        assert path in paths, path
    assert "post" in paths["/api/traces/"] and "post" in paths["/api/devices/{id}/capture/"]


# -- services down ------------------------------------------------------------------------
@pytest.fixture
def broker_and_redis_down(settings):
    """Redis (live state, channel layer) and the task broker at a port nothing listens on."""
    from celery import current_app
    from channels.layers import channel_layers

    from fleet.redis import get_redis
    from tests.support.processes import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"
    original = settings.REDIS_URL, settings.CHANNEL_LAYERS, current_app.conf.broker_url
    settings.REDIS_URL = dead
    settings.CHANNEL_LAYERS = {"default": {**settings.CHANNEL_LAYERS["default"], "CONFIG": {
        **settings.CHANNEL_LAYERS["default"]["CONFIG"], "hosts": [dead]}}}
    current_app.conf.broker_url = dead
    current_app.conf.broker_connection_max_retries = 1
    current_app.conf.broker_transport_options = {"max_retries": 1}

    def reset():
        get_redis.cache_clear()
        channel_layers.backends.clear()
        current_app._pool = None
        current_app.amqp._producer_pool = None

    reset()
    yield
    settings.REDIS_URL, settings.CHANNEL_LAYERS, current_app.conf.broker_url = original
    reset()


@pytest.mark.django_db(transaction=True)  # the row commits, so the queueing runs in the request
def test_a_capture_while_the_broker_is_down_is_503_and_its_trace_fails_saying_why(
    api_client, operator, seeded_fleet, trace_storage, broker_and_redis_down,
):
    api_client.force_authenticate(operator)
    device = seeded_fleet[0]
    response = api_client.post(f"/api/devices/{device.id}/capture/", {"duration_s": 2}, format="json")
    assert response.status_code == 503
    assert "broker" in response.json()["detail"] and response["Retry-After"] == "5"
    trace = Trace.objects.get(device=device)
    assert trace.status == TraceStatus.FAILED  # not left queued until its timeout
    assert "could not be queued" in trace.error
