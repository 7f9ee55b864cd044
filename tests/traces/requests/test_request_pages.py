"""The request pages render from the stored join: percentiles, the worst ten with reasons,
one request; the states before and without a join; permissions as for traces."""

import pytest

from tests.support.serving import spans_upload, uploaded_serving_trace
from traces.requests import service

pytestmark = pytest.mark.django_db


@pytest.fixture
def joined(client, api_client, operator, trace_storage, tmp_path):
    trace, spans, run = uploaded_serving_trace(operator, tmp_path, "full_queue", seed=9, duration=1.5)
    api_client.force_authenticate(operator)
    api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(spans)}, format="multipart")
    service.join_requests(trace.pk)
    return trace, run


def test_the_requests_page_lists_the_slowest_with_their_reasons(client, viewer, joined):
    trace, run = joined
    client.force_login(viewer)
    page = client.get(f"/traces/{trace.pk}/requests/").content.decode()
    assert f'data-requests="{len(run.requests)}"' in page
    assert 'data-q="p99"' in page and "queued " in page and " ms behind " in page
    assert page.count('data-cause="') == 10


def test_a_request_page_has_its_reason_and_a_link_to_the_timeline(client, viewer, joined):
    trace, _ = joined
    client.force_login(viewer)
    worst = service.stored_join(trace)["worst"][0]
    response = client.get(f"/traces/{trace.pk}/requests/{worst['request_id']}/")
    page = response.content.decode()
    assert response.status_code == 200 and worst["reason"] in page
    assert f'href="/traces/{trace.pk}/#window=' in page and "trace_request.js" in page
    assert client.get(f"/traces/{trace.pk}/requests/nobody/").status_code == 404


def test_the_trace_page_links_to_its_requests(client, viewer, joined):
    trace, _ = joined
    client.force_login(viewer)
    assert f'href="/traces/{trace.pk}/requests/"' in client.get(f"/traces/{trace.pk}/").content.decode()


def test_without_spans_the_page_says_how_to_send_them(client, viewer, operator, trace_storage, tmp_path):
    trace, _, _ = uploaded_serving_trace(operator, tmp_path, duration=0.5)
    client.force_login(viewer)
    page = client.get(f"/traces/{trace.pk}/requests/").content.decode()
    assert "No request spans" in page and "/v1/traces" in page


def test_pages_need_sign_in_and_the_view_permission(client, outsider, joined):
    trace, _ = joined
    for url in (f"/traces/{trace.pk}/requests/", f"/traces/{trace.pk}/requests/x/"):
        assert client.get(url).status_code == 302
    client.force_login(outsider)
    assert client.get(f"/traces/{trace.pk}/requests/").status_code == 403


@pytest.mark.parametrize(("name", "grammar"), [("sglang_qwen3_prefilldecode.json.gz", "execute-sq-sk+sglang-step"),
                                               ("vllm_prefilldecode_piecewise.json.gz", "execute-sq-sk")])
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_real_engine_s_requests_page_says_its_grammar_join_and_confidence(
        client, api_client, viewer, operator, trace_storage, tmp_path, name, grammar):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from emulator.serving.spans import write_otlp_json
    from tests.support.engine_spans import engine_sdk_spans
    from tests.support.traces import real_trace
    from traces import writers
    from traces.atrace import read_trace
    from traces.atrace.analysis.requests.steps import find_steps

    path = real_trace(name)
    trace = read_trace(path)
    finished, plan = engine_sdk_spans(trace, find_steps(trace), "sglang")
    write_otlp_json(finished, tmp_path / "spans.jsonl")
    row = writers.accept_upload(SimpleUploadedFile(name, path.read_bytes()), operator, name=name)
    writers.analyse(row.pk)
    row.refresh_from_db()
    assert row.status == "ready", row.error
    api_client.force_authenticate(operator)
    answer = api_client.post(f"/api/traces/{row.pk}/spans/", {"file": spans_upload(tmp_path / "spans.jsonl")},
                             format="multipart")
    assert answer.status_code == 201, answer.content
    service.join_requests(row.pk)
    client.force_login(viewer)
    page = client.get(f"/traces/{row.pk}/requests/").content.decode()
    assert f'data-requests="{len(plan)}"' in page and f'data-grammar="{grammar}"' in page
    assert '<b id="join-mode">time and phase</b>' in page and '<b id="join-confidence">high</b>' in page
    assert "confirm the batch of all 1 checked" in page
    worst = service.stored_join(row)["worst"][0]
    page = client.get(f"/traces/{row.pk}/requests/{worst['request_id']}/").content.decode()
    assert "Joined by time and phase (confidence high), steps read by " + grammar in page
