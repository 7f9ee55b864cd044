"""The replay page: signed-in viewers upload a history, get 400 with why for a bad one, and
poll the replay's status."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from fleet.replay import runs as replays

CSV = b"n1,0.1,0.5,GPU,GPU Lost\n"


def test_signed_out_and_outsiders_get_nothing(client, outsider, clean_redis):
    assert client.get(reverse("fleet:replay")).status_code == 302
    client.force_login(outsider)
    assert client.get(reverse("fleet:replay")).status_code == 403
    assert client.get(reverse("fleet:replay-status", args=["0" * 32])).status_code == 403


def test_upload_queue_and_status(client, viewer, clean_redis):
    client.force_login(viewer)
    page = client.get(reverse("fleet:replay"))
    assert page.status_code == 200 and b'name="history"' in page.content
    response = client.post(reverse("fleet:replay"), {
        "history": SimpleUploadedFile("h.csv", CSV), "nodes": "2", "devices_per_node": "2", "jobs": "1"})
    assert response.status_code == 302
    rid = response["Location"].split("id=")[1]
    status_url = reverse("fleet:replay-status", args=[rid])
    assert client.get(response["Location"]).content.count(status_url.encode()) == 1
    assert client.get(status_url).json() == {"state": "queued", "progress": 0.0}
    replays.run(rid)  # what the task does
    assert client.get(status_url).json()["summary"]["policies"]["asicmon"]["repairs"] == {"reboot_host: cured": 1}


def test_bad_input_is_a_400_with_why(client, viewer, clean_redis):
    client.force_login(viewer)
    url = reverse("fleet:replay")
    for data, message in [
        ({}, b"choose a history file"),
        ({"history": SimpleUploadedFile("h.csv", b"n1,zero,1,GPU\n")}, b"start and end must be days or ISO dates"),
        ({"history": SimpleUploadedFile("h.csv", CSV), "nodes": "many"}, b"nodes: &#x27;many&#x27; is not a whole number"),
        ({"history": SimpleUploadedFile("h.csv", CSV), "jobs": "big"}, b"is not SIZE or SIZExCOUNT"),
        ({"history": SimpleUploadedFile("h.csv", CSV), "settings": '{"max_attempts": "x"}'},
         b"settings: max_attempts: &#x27;x&#x27; is not a number"),
        ({"history": SimpleUploadedFile("h.csv", CSV), "settings": '{"max_attempts": 2,'}, b"settings:1:20: Expecting"),
        ({"history": SimpleUploadedFile("h.csv", CSV), "settings": '{"speed": 2}'}, b"unknown settings speed"),
    ]:
        response = client.post(url, data)
        assert response.status_code == 400 and message in response.content, message
    assert not list(clean_redis.scan_iter(replays._key("*", "*")))


def test_unknown_replays_are_404(client, viewer, clean_redis):
    client.force_login(viewer)
    assert client.get(reverse("fleet:replay-status", args=["f" * 32])).status_code == 404
    assert client.get(reverse("fleet:replay-status", args=["not-an-id"])).status_code == 404


def test_settings_and_tuning_from_the_page(client, viewer, clean_redis):
    client.force_login(viewer)
    response = client.post(reverse("fleet:replay"), {
        "history": SimpleUploadedFile("h.csv", CSV), "nodes": "2", "devices_per_node": "2", "jobs": "1",
        "settings": '{"diagnostic": false, "poll_s": 10}', "tune": "on"})
    assert response.status_code == 302
    rid = response["Location"].split("id=")[1]
    replays.run(rid)
    status = client.get(reverse("fleet:replay-status", args=[rid])).json()
    # no diagnostic: back on its health at the next poll, not validated
    assert status["summary"]["policies"]["asicmon"]["repairs"] == {"reboot_host: cured, not validated": 1}
    rows = status["grid"]["rows"]
    assert len(rows) == 27 and {tuple(r["settings"]) for r in rows} == {
        ("max_attempts", "breaker_share", "offender_incidents")}
    assert status["grid"]["best"]["by_ettr"] in rows
