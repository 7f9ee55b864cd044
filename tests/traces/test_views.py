"""Trace pages render for those allowed, refuse others, and carry what their scripts need."""

import json
import re
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from tests.support.traces import real_trace
from traces import writers
from traces.choices import TraceStatus

STATIC_JS = Path(__file__).resolve().parents[2] / "static" / "dashboard" / "js"

pytestmark = pytest.mark.django_db


@pytest.fixture
def ready(operator, trace_storage):
    path = real_trace("simple_add_kineto.json.gz")
    trace = writers.accept_upload(SimpleUploadedFile(path.name, path.read_bytes()), operator, sw_version="2.1")
    writers.analyse(trace.pk)
    return trace


def test_catalogue_lists_filters_and_rejects_bad_filters(client, viewer, ready, django_assert_max_num_queries):
    client.force_login(viewer)
    with django_assert_max_num_queries(12):
        page = client.get("/traces/")
    assert page.status_code == 200
    assert f'data-trace-id="{ready.pk}"' in page.content.decode()
    assert "Upload a trace" not in page.content.decode()  # viewers do not upload
    assert client.get("/traces/?sw_version=2.1").content.decode().count("data-trace-id=") == 1
    assert client.get("/traces/?sw_version=0.1").content.decode().count("data-trace-id=") == 0
    bad = client.get("/traces/?status=done")
    assert bad.status_code == 400 and "status" in bad.content.decode()


def test_trace_page_carries_api_and_websocket_urls(client, viewer, ready):
    client.force_login(viewer)
    html = client.get(f"/traces/{ready.pk}/").content.decode()
    assert f'data-api-url="/api/traces/{ready.pk}/"' in html
    assert f'data-ws-path="/ws/traces/{ready.pk}/"' in html
    assert 'data-status="ready"' in html and "ui.perfetto.dev" in html
    assert 'type="module"' in html
    # Plotly is fetched early but run by the scripts when they first chart: the page paints first.
    assert '<link rel="preload" as="script" data-plotly href="/static/vendor/plotly/plotly.min.js">' in html
    assert "<script defer src=\"/static/vendor/plotly" not in html


def test_upload_page_is_for_uploaders_only(client, viewer, operator):
    client.force_login(viewer)
    assert client.get("/traces/upload/").status_code == 403
    client.force_login(operator)
    assert 'id="upload-form"' in client.get("/traces/upload/").content.decode()


def test_device_page_shows_capture_button_to_operators_only(client, viewer, operator, seeded_fleet):
    device = seeded_fleet[0]
    client.force_login(viewer)
    html = client.get(f"/devices/{device.id}/").content.decode()
    assert 'id="device-traces"' in html and 'id="capture-button"' not in html
    client.force_login(operator)
    html = client.get(f"/devices/{device.id}/").content.decode()
    assert 'id="capture-button"' in html and f"/api/devices/{device.id}/capture/" in html


def test_anonymous_is_sent_to_sign_in(client, db):
    assert client.get("/traces/").status_code == 302


def test_catalogue_pages_and_sorts(client, viewer, operator, trace_storage):
    from traces.models import Trace

    Trace.objects.bulk_create([Trace(name=f"t{i:03d}", source="upload", events=i) for i in range(60)])
    client.force_login(viewer)
    first = client.get("/traces/?ordering=events").content.decode()
    assert first.count("data-trace-id=") == 50 and "page 1 of 2" in first
    assert first.index(">t000<") < first.index(">t001<")
    second = client.get("/traces/?ordering=events&page=2").content.decode()
    assert second.count("data-trace-id=") == 10 and ">t059<" in second
    by_name_desc = client.get("/traces/?ordering=-name").content.decode()
    assert by_name_desc.index(">t059<") < by_name_desc.index(">t058<")


def test_trace_status_labels_come_from_the_server_not_the_scripts(client, viewer, ready, seeded_fleet):
    """The states' labels live in traces/choices.py; the pages give them to their scripts as
    JSON (like the key counters), and no script keeps a copy."""
    client.force_login(viewer)
    for url in (f"/traces/{ready.pk}/", f"/devices/{seeded_fleet[0].id}/"):
        html = client.get(url).content.decode()
        found = re.search(r'<script id="trace-statuses" type="application/json">(.*?)</script>', html)
        assert found, url
        assert json.loads(found.group(1)) == dict(TraceStatus.choices)
    scripts = {path.name: path.read_text() for path in STATIC_JS.rglob("*.js")}
    for label in ("Queued", "Analysing"):
        copies = [name for name, text in scripts.items() if f'"{label}"' in text]
        assert not copies, f"{label!r} copied into {copies}"
