"""Inputs that used to answer 500 (issue 12) get a clear 4xx or 503, and change nothing."""

import pytest
from rest_framework.exceptions import ValidationError

from fleet.polling import poller

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(api_client, viewer, seeded_fleet):
    poller.poll_shard(0, poller.current_cycle())
    api_client.force_authenticate(viewer)
    return api_client


@pytest.mark.parametrize(
    ("url", "status", "text"),
    [
        ("/api/devices/?limit=9223372036854775808", 400, "limit must be between 1 and 1000"),
        ("/api/devices/?limit=-1", 400, "limit must be between 1 and 1000"),
        ("/api/devices/?offset=-5", 400, "offset must be between 0 and"),
        ("/api/devices/?offset=9223372036854775808", 400, "offset must be between 0 and"),
        ("/api/hosts/?limit=abc", 400, "'abc' is not an integer"),
        ("/api/devices/?host=gpu%00host", 400, "NUL byte"),
        ("/api/devices/?type=%00", 400, "NUL byte"),
    ],
)
def test_bad_list_parameters_are_4xx_with_a_message(signed_in, url, status, text):
    response = signed_in.get(url)
    assert response.status_code == status, response.content
    assert text in response.content.decode()


def test_the_largest_page_is_the_maximum(signed_in):
    response = signed_in.get("/api/devices/?limit=1000")
    assert response.status_code == 200
    assert response.json()["count"] == 8


def test_samples_with_a_nul_counter_or_year_one_are_400(signed_in, seeded_fleet):
    device = seeded_fleet[0].id
    nul = signed_in.get(f"/api/devices/{device}/samples/?counter=temperature_c%00")
    assert nul.status_code == 400 and "NUL byte" in nul.json()["detail"]
    early = signed_in.get(f"/api/devices/{device}/samples/?counter=temperature_c&until=0001-01-01T00:00:00Z")
    assert early.status_code == 400
    assert "too early" in str(early.json()["until"])


def test_list_filters_do_not_apply_to_a_device_or_its_samples(signed_in, seeded_fleet):
    device = seeded_fleet[0]
    assert signed_in.get(f"/api/devices/{device.id}/?host=elsewhere&type=nothing").status_code == 200
    samples = signed_in.get(f"/api/devices/{device.id}/samples/?counter=temperature_c&host=elsewhere")
    assert samples.status_code == 200


def test_an_over_long_query_string_is_414(signed_in):
    response = signed_in.get("/api/devices/?host=" + "h" * 5000)
    assert response.status_code == 414
    assert "at most 4096" in response.json()["detail"]


def test_pages_and_api_answer_503_with_why_when_redis_is_down(client, api_client, viewer, seeded_fleet, settings):
    from fleet.redis import get_redis
    from tests.support.processes import free_port

    original = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    get_redis.cache_clear()
    try:
        api_client.force_authenticate(viewer)
        api = api_client.get("/api/devices/")
        client.force_login(viewer)
        page = client.get("/")
    finally:
        settings.REDIS_URL = original
        get_redis.cache_clear()
    assert api.status_code == 503
    assert "Redis" in api.json()["detail"] and "not answering" in api.json()["detail"]
    assert api["Retry-After"] == "5"
    assert page.status_code == 503
    assert b"Redis" in page.content


def test_an_api_url_that_matches_nothing_is_a_json_404(signed_in):
    response = signed_in.get("/api/nothing-here/")
    assert response.status_code == 404
    assert "No API endpoint or object" in response.json()["detail"]


def test_an_empty_limit_is_refused_like_the_schema_says(signed_in):
    response = signed_in.get("/api/devices/?limit=")
    assert response.status_code == 400
    assert "'' is not an integer" in response.json()["limit"][0] or "not an integer" in str(response.json())


def test_a_database_int_is_an_integer_a_query_can_take():
    from fleet.api.params import database_int

    assert database_int("42", "device") == 42 and database_int(str(2**63 - 1), "device") == 2**63 - 1
    for raw, said in [("x", "is not an integer"), (str(2**63), "out of range"), ("-" + "9" * 30, "out of range")]:
        with pytest.raises(ValidationError) as caught:
            database_int(raw, "device")
        assert said in str(caught.value.detail["device"]), raw
