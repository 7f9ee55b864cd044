"""The API's rate limits: per signed-in user and per address without signing in, counted in
Redis, 429 with Retry-After past the rate; the OTLP receiver and /metrics are not counted."""

import time
from ipaddress import ip_network

import pytest
from rest_framework.authtoken.models import Token

from dashboard import throttles
from tests.support.otlp import protobuf_body, sdk_spans

pytestmark = pytest.mark.django_db

#: 10 s into a minute: the calls of a test all fall in one window, whatever the real clock says.
NOW = 1_800_000_010.0


@pytest.fixture
def still_clock(monkeypatch, clean_redis):
    monkeypatch.setattr(throttles, "clock", lambda: NOW)
    return clean_redis


def test_a_user_past_the_rate_gets_429_with_retry_after_and_others_do_not(api_client, viewer, operator, settings,
                                                                          still_clock):
    settings.API_THROTTLE_USER = "3/min"
    token = Token.objects.create(user=viewer).key
    answers = [api_client.get("/api/counters/", HTTP_AUTHORIZATION=f"Token {token}") for _ in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[-1]
    assert refused["Retry-After"] == "50"  # the minute's window ends 50 s after NOW
    assert "API_THROTTLE_USER=3/min" in refused.json()["detail"]
    api_client.force_login(viewer)  # a session is the same user: refused as well
    assert api_client.get("/api/counters/").status_code == 429
    api_client.force_login(operator)
    assert api_client.get("/api/counters/").status_code == 200


def test_the_count_is_kept_in_redis_where_every_web_process_sees_it(api_client, viewer, settings, still_clock):
    """Another process counts against the same key: the key is in the shared Redis."""
    settings.API_THROTTLE_USER = "3/min"
    api_client.force_login(viewer)
    assert api_client.get("/api/counters/").status_code == 200
    keys = [key.decode() for key in still_clock.scan_iter(f"{settings.REDIS_KEY_PREFIX}:*throttle:user:*")]
    assert len(keys) == 1 and keys[0].endswith(f"throttle:user:{viewer.pk}:{int(NOW // 60)}")
    still_clock.incr(keys[0], 2)  # two calls another web process counted
    assert api_client.get("/api/counters/").status_code == 429


def test_an_address_past_the_anonymous_rate_gets_429_before_the_401(api_client, settings, still_clock):
    settings.API_THROTTLE_ANON = "2/min"
    answers = [api_client.get("/api/devices/", REMOTE_ADDR="10.1.2.3") for _ in range(3)]
    assert [a.status_code for a in answers] == [401, 401, 429]
    assert answers[-1]["Retry-After"] == "50" and "API_THROTTLE_ANON=2/min" in answers[-1].json()["detail"]
    assert api_client.get("/api/devices/", REMOTE_ADDR="10.9.9.9").status_code == 401  # another address
    # Behind a trusted proxy, the address counted is the client's the proxy names.
    settings.TRUSTED_PROXIES = (ip_network("127.0.0.1/32"),)
    proxied = api_client.get("/api/devices/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.1.2.3")
    assert proxied.status_code == 429


def test_off_counts_nothing(api_client, viewer, settings, still_clock):
    settings.API_THROTTLE_USER = "off"
    api_client.force_login(viewer)
    assert all(api_client.get("/api/counters/").status_code == 200 for _ in range(5))
    assert list(still_clock.scan_iter(f"{settings.REDIS_KEY_PREFIX}:*throttle*")) == []


def test_an_unreachable_redis_lets_calls_through_at_once(settings, caplog):
    """With Redis down every call is let through, and in well under a second: the shared
    client's retries with back-off took about 7 s a call."""
    settings.REDIS_URL = "redis://127.0.0.1:9/0"  # nothing listens there
    started = time.monotonic()
    assert throttles.seconds_to_wait("user", "7", "1/min") is None
    assert throttles.seconds_to_wait("user", "7", "1/min") is None
    assert time.monotonic() - started < 1.0
    assert "API rate limit not counted (Redis is not answering" in caplog.text


def test_the_otlp_receiver_and_metrics_are_not_counted_by_the_api_rates(client, settings, still_clock):
    settings.API_THROTTLE_USER = settings.API_THROTTLE_ANON = "1/min"
    settings.OTLP_TOKEN, settings.METRICS_TOKEN = "otlp-token", "metrics-token"
    body = protobuf_body(sdk_spans(1))
    for _ in range(4):
        sent = client.post("/v1/traces", data=body, content_type="application/x-protobuf",
                           HTTP_AUTHORIZATION="Bearer otlp-token")
        assert sent.status_code == 200
        scraped = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-token")
        assert scraped.status_code == 200
    assert client.get("/api/devices/").status_code == 401
    assert client.get("/api/devices/").status_code == 429  # the API itself is limited
