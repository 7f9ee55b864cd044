"""What no view should see is answered before any view runs (dashboard/middleware.py): a NUL
byte in a path or query parameter is a 400 saying so, on every kind of URL."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    [
        "/api/counters/a%00b/",  # answered 500: the lookup reached PostgreSQL (issue 20)
        "/api/hosts/1%00/",
        "/api/devices/1%00/samples/?counter=temperature_c",
        "/api/traces/1%00/breakdown/",
        "/devices/1%00/",
        "/traces/%00/",
        "/admin/fleet/counter/a%00b/change/",
        "/static/dashboard/css/asicmon%00.css",
    ],
)
def test_a_nul_byte_in_a_path_parameter_is_a_400_with_a_message(client, admin_user, seeded_fleet, url):
    client.force_login(admin_user)
    response = client.get(url)
    assert response.status_code == 400, (url, response.status_code)
    message = response.json()["detail"] if url.startswith("/api/") else response.content.decode()
    assert "NUL byte" in message and "path" in message


@pytest.mark.parametrize("url", ["/api/devices/?host=a%00b", "/?q=%00", "/traces/?q=x%00"])
def test_a_nul_byte_in_a_query_parameter_is_a_400_with_a_message(client, admin_user, seeded_fleet, url):
    client.force_login(admin_user)
    response = client.get(url)
    assert response.status_code == 400
    assert "NUL byte" in response.content.decode()
