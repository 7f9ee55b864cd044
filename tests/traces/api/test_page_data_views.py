"""The API of the trace analyses: flame, timeline, events, critical path, correlation, metrics,
comparison, versions — permissions, answers from stored files, bad parameters."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from fleet.models import Device, Host
from tests.support.history import write_points
from tests.support.processes import free_port
from tests.support.trace_views import emulated_trace
from tests.support.traces import real_trace
from traces import writers
from traces.choices import TraceSource
from traces.models import Trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def gpu_pair(operator, trace_storage):
    return emulated_trace(operator, version="2.0", seed=1), emulated_trace(operator, version="2.1", seed=2)


VIEW_URLS = [
    "/api/traces/{a}/findings/",
    "/api/traces/{a}/flame/",
    "/api/traces/{a}/timeline/",
    "/api/traces/{a}/events/0/",
    "/api/traces/{a}/critical-path/",
    "/api/traces/{a}/correlation/",
    "/api/traces/{a}/metrics/",
    "/api/traces/compare/?a={a}&b={b}",
    "/api/traces/versions/?workload=transformer&type=gpu",
]


def test_views_need_a_signed_in_user_with_view_permission(api_client, outsider, gpu_pair):
    a, b = gpu_pair
    for url in (u.format(a=a.pk, b=b.pk) for u in VIEW_URLS):
        api_client.force_authenticate(None)
        assert api_client.get(url).status_code in (401, 403), url  # anonymous
        api_client.force_authenticate(outsider)
        assert api_client.get(url).status_code == 403, url


def test_viewers_read_every_view_and_cannot_write(api_client, viewer, gpu_pair):
    a, b = gpu_pair
    api_client.force_authenticate(viewer)
    for url in (u.format(a=a.pk, b=b.pk) for u in VIEW_URLS):
        response = api_client.get(url)
        # An upload has no device metrics: a 400 that says so; everything else answers.
        assert response.status_code == (400 if "metrics" in url else 200), (url, response.content)
        assert api_client.post(url.split("?")[0], {}).status_code == 405, url


def test_flame_of_each_side_and_both(api_client, viewer, gpu_pair):
    a, _ = gpu_pair
    api_client.force_authenticate(viewer)
    both = api_client.get(f"/api/traces/{a.pk}/flame/").json()
    assert set(both) == {"host", "device"}
    device = api_client.get(f"/api/traces/{a.pk}/flame/?side=device").json()
    assert list(device) == ["device"] and "bmm" in device["device"]["labels"]
    bad = api_client.get(f"/api/traces/{a.pk}/flame/?side=gpu")
    assert bad.status_code == 400 and "side must be one of" in bad.json()["detail"]


def test_timeline_windows_narrow_on_request_and_bad_windows_are_refused(api_client, viewer, gpu_pair):
    a, _ = gpu_pair
    api_client.force_authenticate(viewer)
    whole = api_client.get(f"/api/traces/{a.pk}/timeline/?width_px=1600").json()
    assert 0 < len(whole["bars"]["row"]) <= 5000
    assert whole["events_in_window"] >= a.events * 0.9  # every slice (instants are not bars)
    assert sum(whole["bars"]["critical"]) > 0
    start, end = whole["span_us"]
    narrow_end = start + (end - start) / 100
    narrow = api_client.get(f"/api/traces/{a.pk}/timeline/?start_us={start}&end_us={narrow_end}&width_px=800").json()
    assert narrow["events_in_window"] < whole["events_in_window"]
    assert all(start <= s and e <= narrow_end + 0.001 for s, e in zip(narrow["bars"]["start_us"], narrow["bars"]["end_us"]))
    single = [e for e, c in zip(narrow["bars"]["event"], narrow["bars"]["count"]) if c == 1]
    detail = api_client.get(f"/api/traces/{a.pk}/events/{single[0]}/").json()
    assert detail["index"] == single[0] and "args" in detail
    for query, message in [
        ("start_us=abc", "start_us must be a number"),
        (f"start_us={end}&end_us={start}", "must be after start_us"),
        ("width_px=0", "width_px must be between"),
        ("width_px=20001", "width_px must be between 1 and 20000"),  # the page's limit, not the engine's
        ("width_px=1.5", "width_px must be an integer"),
    ]:
        response = api_client.get(f"/api/traces/{a.pk}/timeline/?{query}")
        assert response.status_code == 400 and message in response.json()["detail"], query
    missing = api_client.get(f"/api/traces/{a.pk}/events/99999999/")
    assert missing.status_code == 400 and "no slice with index" in missing.json()["detail"]


def test_critical_path_of_the_trace_and_of_a_valid_step(api_client, viewer, gpu_pair):
    a, _ = gpu_pair
    api_client.force_authenticate(viewer)
    whole = api_client.get(f"/api/traces/{a.pk}/critical-path/").json()
    assert whole["step"] is None and whole["table"]["rows"]
    assert whole["valid_steps"] and len(whole["steps"]) >= len(whole["valid_steps"])
    name = whole["valid_steps"][1]
    by_name = api_client.get(f"/api/traces/{a.pk}/critical-path/?step={name}").json()
    by_number = api_client.get(f"/api/traces/{a.pk}/critical-path/?step={name.split('#')[1]}").json()
    assert by_name["step"] == by_number["step"] == name
    assert by_name["table"]["length_us"] < whole["table"]["length_us"]
    bad = api_client.get(f"/api/traces/{a.pk}/critical-path/?step=step%23999999")
    assert bad.status_code == 400 and "valid steps: step#0" in bad.json()["detail"]


def test_compare_ranks_the_operator_the_new_version_slowed_first(api_client, viewer, gpu_pair):
    a, b = gpu_pair
    api_client.force_authenticate(viewer)
    result = api_client.get(f"/api/traces/compare/?a={a.pk}&b={b.pk}").json()
    assert (result["rows"][0]["side"], result["rows"][0]["op"]) == ("device", "bmm")
    assert result["a"]["sw_version"] == "2.0" and result["b"]["sw_version"] == "2.1"
    assert result["critical_path"]["delta_us"] > 0
    for query, field in [(f"a={a.pk}", "b"), (f"a=x&b={b.pk}", "a")]:
        response = api_client.get(f"/api/traces/compare/?{query}")
        assert response.status_code == 400 and field in response.json(), query
    missing = api_client.get(f"/api/traces/compare/?a={a.pk}&b=0")
    assert missing.status_code == 404 and "No trace with id 0 (b)" in missing.json()["detail"]
    assert api_client.get(f"/api/traces/compare/?a={a.pk}&b={b.pk}&level=&rank=").status_code == 200
    bad_level = api_client.get(f"/api/traces/compare/?a={a.pk}&b={b.pk}&level=frames")
    assert bad_level.status_code == 400 and "level must be one of" in bad_level.json()["detail"]


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_versions_flag_the_slowed_operator(api_client, viewer, operator, gpu_pair):
    emulated_trace(operator, version="2.0", seed=3)
    emulated_trace(operator, version="2.1", seed=4)
    api_client.force_authenticate(viewer)
    result = api_client.get("/api/traces/versions/?workload=transformer&type=gpu").json()
    assert result["versions"] == ["2.0", "2.1"] and result["traces_read"] == 4
    assert [(r["side"], r["op"]) for r in result["regressions"]] == [("device", "bmm")]
    choices = api_client.get("/api/traces/versions/").json()["choices"]
    assert {"workload": "transformer", "type": "gpu"} in choices
    narrowed = api_client.get("/api/traces/versions/?workload=transformer")
    assert narrowed.status_code == 200 and narrowed.json()["choices"] == [{"workload": "transformer", "type": "gpu"}]
    assert api_client.get("/api/traces/versions/?type=no-such-type").json()["choices"] == []


@pytest.fixture
def captured(operator, trace_storage):
    """A capture of a device, ten minutes ago, 5 s long."""
    host = Host.objects.create(name="h-metrics")
    device = Device.objects.create(host=host, index=0, serial="EGX-M-1", device_type="gpu", model="X")
    trace = emulated_trace(operator, device=device)
    started = timezone.now().replace(microsecond=0) - timedelta(minutes=10)
    Trace.objects.filter(pk=trace.pk).update(
        source=TraceSource.CAPTURE, capture_started_at=started, capture_ended_at=started + timedelta(seconds=5)
    )
    return trace, device, started


def test_metrics_around_a_capture_come_from_the_time_series_store(api_client, viewer, captured):
    trace, device, started = captured
    at = started.timestamp()
    write_points(device, {
        "device_utilization": [(at + minutes * 60, value) for minutes, value in [(-3, 0.1), (-0.5, 0.5), (0, 0.9), (1.5, 0.4), (5, 0.2)]],
        "power_w": [(at - 60, 300.0), (at + 65, 310.0), (at + 65.001, 999.0)],  # both ends of the window, then past it
    })
    api_client.force_authenticate(viewer)
    result = api_client.get(f"/api/traces/{trace.pk}/metrics/").json()
    # A minute either side: -0.5 and 0 in, -3, +1.5 and +5 out.
    assert result["series"]["device_utilization"] == [[(at - 30) * 1e6, 0.5], [at * 1e6, 0.9]]
    assert [v for _, v in result["series"]["power_w"]] == [300.0, 310.0]
    assert result["series"]["temperature_c"] == [] and result["unavailable"] is None
    assert result["capture_us"][0] == pytest.approx(at * 1e6)


def test_metrics_say_the_history_is_unavailable_when_the_store_is_down(api_client, viewer, captured, settings):
    trace, _, _ = captured
    settings.TSDB_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/traces/{trace.pk}/metrics/")
    assert response.status_code == 200
    result = response.json()
    assert "History unavailable" in result["unavailable"] and "not answering" in result["unavailable"]
    assert all(points == [] for points in result["series"].values())


def test_views_of_a_trace_not_ready_are_refused(api_client, viewer, operator, trace_storage):
    trace = Trace.objects.create(name="pending", source=TraceSource.UPLOAD, created_by=operator)
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/traces/{trace.pk}/timeline/")
    assert response.status_code == 409 and "not ready" in response.json()["detail"]
    assert api_client.get("/api/traces/999999/flame/").status_code == 404


def test_findings_are_stored_with_the_views_and_filtered_on_request(api_client, viewer, operator, trace_storage):
    """An emulated capture whose steps start in the data loader: the API serves the input
    stall the worker found, by estimated saving; bad filters are a 400 that says why."""
    stalled = emulated_trace(operator, seed=4, problems=["input_stall"])
    api_client.force_authenticate(viewer)
    data = api_client.get(f"/api/traces/{stalled.pk}/findings/").json()
    assert data["verdict"] in ("device-bound", "host-bound", "input-bound", "mixed")
    rules = [f["rule"] for f in data["findings"]]
    assert "input_stall" in rules
    savings = [f["saving_us"] for f in data["findings"]]
    assert savings == sorted(savings, reverse=True)
    stall = data["findings"][rules.index("input_stall")]
    assert stall["saving_per_step_us"] == pytest.approx(300, rel=0.1)  # the emulator's 300 µs loader
    assert stall["evidence"]["steps"] and stall["evidence"]["focus_us"] and stall["action"]
    one = api_client.get(f"/api/traces/{stalled.pk}/findings/?rule=input_stall").json()
    assert [f["rule"] for f in one["findings"]] == ["input_stall"] and one["verdict"] == data["verdict"]
    assert len(api_client.get(f"/api/traces/{stalled.pk}/findings/?top=1").json()["findings"]) == 1
    for query, message in [("rule=gremlins", "rule must be one of"), ("top=0", "top must be at least 1"),
                           ("top=many", "top must be an integer")]:
        response = api_client.get(f"/api/traces/{stalled.pk}/findings/?{query}")
        assert response.status_code == 400 and message in response.json()["detail"], query
    assert api_client.get("/api/traces/999999/findings/").status_code == 404
    pending = Trace.objects.create(name="pending", source=TraceSource.UPLOAD, created_by=operator)
    assert api_client.get(f"/api/traces/{pending.pk}/findings/").status_code == 409


def test_a_trace_analysed_before_findings_existed_says_so(api_client, viewer, operator, trace_storage):
    trace = emulated_trace(operator)
    (Path(trace_storage.path(str(trace.pk))) / "view.findings.json").unlink()
    api_client.force_authenticate(viewer)
    response = api_client.get(f"/api/traces/{trace.pk}/findings/")
    assert response.status_code == 409 and "before findings existed" in response.json()["detail"]
    assert api_client.get(f"/api/traces/{trace.pk}/flame/").status_code == 200  # the rest still answers


def test_the_comparison_says_which_findings_appeared_and_went_away(api_client, viewer, operator, trace_storage):
    clean = emulated_trace(operator, seed=5)
    stalled = emulated_trace(operator, seed=5, problems=["input_stall"])
    api_client.force_authenticate(viewer)
    forward = api_client.get(f"/api/traces/compare/?a={clean.pk}&b={stalled.pk}").json()["findings"]
    assert "input_stall" in [f["rule"] for f in forward["appeared"]]
    assert "input_stall" not in [f["rule"] for f in forward["went_away"] + forward["in_both"]]
    back = api_client.get(f"/api/traces/compare/?a={stalled.pk}&b={clean.pk}").json()["findings"]
    assert "input_stall" in [f["rule"] for f in back["went_away"]]
    assert {f["rule"] for f in back["in_both"]} == {f["rule"] for f in forward["in_both"]}


def test_deleting_a_trace_deletes_its_views(operator, trace_storage, django_capture_on_commit_callbacks):
    trace = emulated_trace(operator)
    folder = Path(trace_storage.path(str(trace.pk)))
    assert any(p.name.startswith("view.") for p in folder.iterdir())
    with django_capture_on_commit_callbacks(execute=True):
        writers.delete_trace(trace)
    assert not folder.exists() or not any(folder.iterdir())


def test_openapi_schema_documents_every_view(api_client, viewer):
    api_client.force_authenticate(viewer)
    schema = api_client.get("/api/schema/?format=json").json()
    for path in [
        "/api/traces/{id}/findings/",
        "/api/traces/{id}/flame/",
        "/api/traces/{id}/timeline/",
        "/api/traces/{id}/critical-path/",
        "/api/traces/{id}/correlation/",
        "/api/traces/{id}/metrics/",
        "/api/traces/compare/",
        "/api/traces/versions/",
    ]:
        assert path in schema["paths"] or path.replace("{id}", "{pk}") in schema["paths"], path


def test_every_answer_comes_from_a_storage_without_local_paths(
    api_client, viewer, operator, settings, tmp_path, django_capture_on_commit_callbacks,
):
    """An object store (no `path()`): results are read through the storage API and the views
    from a local copy made once; nothing needs the storage to be a file system."""
    settings.STORAGES = {
        **settings.STORAGES,
        "traces": {"BACKEND": "tests.support.storage.NoLocalPathStorage", "OPTIONS": {"location": str(tmp_path / "store")}},
    }
    settings.VAR_DIR = tmp_path / "var"
    a, b = emulated_trace(operator, version="2.0", seed=1), emulated_trace(operator, version="2.1", seed=2)
    api_client.force_authenticate(viewer)
    for url in [u.format(a=a.pk, b=b.pk) for u in VIEW_URLS if "metrics" not in u] + [
        f"/api/traces/{a.pk}/breakdown/?side=device",
        f"/api/traces/{a.pk}/instances/?side=device&op=bmm&group_by=Input Dims",
        f"/api/traces/{a.pk}/download/?format=chrome",
    ]:
        response = api_client.get(url)
        assert response.status_code == 200, (url, response.content[:300])
    assert api_client.get(f"/api/traces/{a.pk}/instances/?side=device&op=bmm").json()["count"] > 0
    assert list((tmp_path / "var" / "cache" / "trace-views").iterdir())  # the views' local copy
    with django_capture_on_commit_callbacks(execute=True):
        writers.delete_trace(Trace.objects.get(pk=a.pk))
    left = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "store" / str(a.pk)).rglob("*"))
    assert all(p.is_dir() for p in (tmp_path / "store" / str(a.pk)).rglob("*")), left


def test_least_slack_is_grouped_by_operator_without_zero_length_events(api_client, viewer, operator, trace_storage):
    """On the A100 trace the engine's least-slack list holds a dozen zero-length
    aten::_has_compatible_shallow_copy_type events and three cudaDeviceSynchronize: the page
    shows one row per operator, and none of zero length (issue 20)."""
    path = real_trace("a100_alexnet_train.json.gz")
    trace = writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator)
    writers.analyse(trace.pk)
    api_client.force_authenticate(viewer)
    table = api_client.get(f"/api/traces/{trace.pk}/critical-path/").json()["table"]
    events = table["least_slack"]
    grouped = table["least_slack_by_op"]
    names = [row["name"] for row in grouped["rows"]]
    assert len(names) == len(set(names)), names
    assert all(row["dur_us"] > 0 for row in grouped["rows"])
    zero = [e for e in events if e["dur_us"] == 0]
    assert zero and grouped["zero_length_hidden"] == len(zero)
    assert sum(row["events"] for row in grouped["rows"]) == len(events) - len(zero)
    slacks = [row["slack_us"] for row in grouped["rows"]]
    assert slacks == sorted(slacks)
    for row in grouped["rows"]:  # each row's event is its operator's listed event with the least slack
        own = [e for e in events if e["name"] == row["name"] and e["dur_us"] > 0]
        assert row["slack_us"] == min(e["slack_us"] for e in own)
        assert row["index"] in {e["index"] for e in own}
