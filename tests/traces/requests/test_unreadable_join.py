"""A stored join that cannot be read (cut short by a crash of an older writer, damaged) is
joined again: the pages and the API answer 503 with Retry-After and say why meanwhile,
never 500, the new join is queued once, and once it is stored every answer is whole again."""

from pathlib import Path

import pytest

from tests.support.serving import spans_upload, uploaded_serving_trace
from traces import queueing
from traces.requests import service
from traces.store.files import TraceFiles

pytestmark = pytest.mark.django_db


@pytest.fixture
def joined(api_client, operator, trace_storage, tmp_path):
    api_client.force_authenticate(operator)
    trace, spans, _run = uploaded_serving_trace(operator, tmp_path, "throttled", seed=7)
    assert api_client.post(f"/api/traces/{trace.pk}/spans/", {"file": spans_upload(spans)},
                           format="multipart").status_code == 201
    service.join_requests(trace.pk)
    worst = api_client.get(f"/api/traces/{trace.pk}/requests/").data["worst"][0]["request_id"]
    stored = Path(trace_storage.path(TraceFiles(trace.pk).name(service.STORED)))
    return trace, worst, stored


@pytest.fixture
def sent(monkeypatch):
    queued = []
    monkeypatch.setattr(queueing, "send", lambda *args: queued.append(args))  # the broker is not what is tested
    return queued


DAMAGES = {"cut short": lambda whole: whole[: len(whole) // 2], "empty": lambda whole: b"",
           "not JSON": lambda whole: b"\x00\xff garbage", "not a join": lambda whole: b"[1, 2]"}


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_an_unreadable_join_is_503_with_retry_after_and_joined_again(api_client, client, viewer, joined, sent):
    trace, worst, stored = joined
    whole = stored.read_bytes()
    client.force_login(viewer)
    for damage, damaged in DAMAGES.items():  # one analysed trace, damaged four ways in turn
        stored.write_bytes(damaged(whole))
        sent.clear()
        answers = [api_client.get(f"/api/traces/{trace.pk}/requests/"),
                   api_client.get(f"/api/traces/{trace.pk}/requests/{worst}/"),
                   client.get(f"/traces/{trace.pk}/requests/"), client.get(f"/traces/{trace.pk}/requests/{worst}/")]
        for answer in answers:
            assert answer.status_code == 503, (damage, answer.request["PATH_INFO"], answer.content[:300])
            assert answer["Retry-After"] == str(service.RETRY_AFTER_S)
            assert "could not be read" in answer.content.decode(), damage
        assert answers[0].data["status"] == "joining"
        assert 'http-equiv="refresh"' in answers[3].content.decode()  # the page asks again by itself
        assert sent == [(service.JOIN_TASK, trace.pk, service.JOIN_LIMIT_S)], damage  # queued once, however often asked
        service.join_requests(trace.pk)  # what the queued task does
        assert api_client.get(f"/api/traces/{trace.pk}/requests/").status_code == 200
        page = client.get(f"/traces/{trace.pk}/requests/{worst}/")
        assert page.status_code == 200 and 'id="request-reason"' in page.content.decode()
        assert stored.read_bytes() == whole, damage


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_a_join_that_cannot_be_read_from_the_store_is_503_too(api_client, joined, sent, monkeypatch):
    trace, _worst, _stored = joined

    def away(self, file, mode="rb"):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(TraceFiles, "open", away)
    answer = api_client.get(f"/api/traces/{trace.pk}/requests/")
    assert answer.status_code == 503 and answer["Retry-After"] == str(service.RETRY_AFTER_S)
    assert len(sent) == 1
