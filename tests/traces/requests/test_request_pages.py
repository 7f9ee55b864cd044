"""The request pages render from the stored join: percentiles, the worst ten with reasons,
one request; the states before and without a join; permissions as for traces."""

import pytest

from tests.support.serving import spans_upload, uploaded_serving_trace
from traces.requests import service

pytestmark = pytest.mark.django_db


@pytest.fixture
def joined(client, api_client, operator, trace_storage, tmp_path):
    trace, spans, run = uploaded_serving_trace(operator, tmp_path, "full_queue", seed=9)
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
