"""The trace page's analyses section, the comparison page and the software-versions page."""

import pytest

from tests.support.trace_views import emulated_trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def versions_pair(operator, trace_storage):
    return emulated_trace(operator, version="2.0", seed=1), emulated_trace(operator, version="2.1", seed=2)


def test_trace_page_offers_its_views_and_the_previous_trace_of_its_workload(client, viewer, versions_pair):
    old, new = versions_pair
    client.force_login(viewer)
    page = client.get(f"/traces/{new.id}/").content.decode()
    assert 'id="trace-views"' in page and "pages/trace_detail.js" in page
    # Each panel reads its API URLs from its section's data-* attributes.
    assert f'id="flame-card" data-url="/api/traces/{new.id}/flame/"' in page
    assert f'data-event-url="/api/traces/{new.id}/events/0/"' in page
    assert f"/traces/compare/?a={old.id}&amp;b={new.id}" in page
    assert "/traces/versions/?workload=transformer&amp;type=gpu" in page
    first = client.get(f"/traces/{old.id}/").content.decode()
    assert "No earlier ready trace" in first
    # The findings panel comes first, above the breakdown, drawn with the page (a ready
    # trace): the verdict, each finding, its data for the links; and its script.
    assert page.index('id="findings-card"') < page.index('id="trace-results"')
    assert f'data-url="/api/traces/{new.id}/findings/"' in page and 'id="findings-data"' in page
    from traces.store import page_data

    stored = page_data.findings(new)
    assert stored["summary"] in page.replace("&#x27;", "'")
    assert page.count('class="finding-show"') == len(stored["findings"])
    # Where the time goes, as the CLI says it (µs, ms or s; the shares add up).
    lines = [line for line in stored["account"]["lines"] if line not in stored["summary"]]
    assert lines and all(line in page.replace("&#x27;", "'") for line in lines)


def test_compare_page_lists_the_findings_that_appeared_and_went_away(client, viewer, operator, trace_storage):
    clean = emulated_trace(operator, seed=6)
    stalled = emulated_trace(operator, seed=6, problems=["input_stall"])
    client.force_login(viewer)
    page = client.get(f"/traces/compare/?a={clean.id}&b={stalled.id}").content.decode()
    appeared = page[page.index('id="findings-appeared"'):page.index('id="findings-went-away"')]
    assert 'data-rule="input_stall"' in appeared and "Input stall" in appeared
    back = client.get(f"/traces/compare/?a={stalled.id}&b={clean.id}").content.decode()
    gone = back[back.index('id="findings-went-away"'):]
    assert 'data-rule="input_stall"' in gone.split("</ul>")[0]


def test_compare_page_ranks_the_slowed_operator_first_with_new_and_vanished_tables(client, viewer, versions_pair):
    old, new = versions_pair
    client.force_login(viewer)
    response = client.get(f"/traces/compare/?a={old.id}&b={new.id}")
    assert response.status_code == 200
    rows = response.context["rows"]
    assert (rows[0]["op"], rows[0]["side"]) == ("bmm", "device")
    page = response.content.decode()
    for table in ("compare-table", "new-table", "vanished-table", "path-difference", "delta-data"):
        assert f'id="{table}"' in page, table


@pytest.mark.parametrize(
    ("query", "message"),
    [("", "a: required"), ("b=1", "a: required"), ("a=x&b=1", "is not a trace id"), ("a=999999&b=999998", "no trace with id"),
     ("a=" + "9" * 23 + "&b=1", "is not a trace id")],  # past what a database id holds: SQLite overflowed, a 500
)
def test_compare_page_says_what_is_wrong_with_its_parameters(client, viewer, query, message):
    client.force_login(viewer)
    response = client.get(f"/traces/compare/?{query}")
    assert response.status_code == 400
    assert message in response.content.decode()


@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_versions_page_flags_the_regression(client, viewer, operator, versions_pair):
    emulated_trace(operator, version="2.0", seed=3)
    emulated_trace(operator, version="2.1", seed=4)
    client.force_login(viewer)
    response = client.get("/traces/versions/?workload=transformer&type=gpu")
    assert response.status_code == 200
    assert [(r["op"], r["to"]) for r in response.context["result"]["regressions"]] == [("bmm", "2.1")]
    (step,) = response.context["result"]["step_changes"]
    assert step["flagged"] and step["delta_us"] > step["noise_us"] and [r["op"] for r in step["responsible"]] == ["bmm"]
    assert 'id="step-table"' in response.content.decode()
    index = client.get("/traces/versions/").content.decode()
    assert "transformer on gpu" in index
    assert client.get("/traces/versions/?workload=transformer").status_code == 400


def test_pages_need_a_signed_in_user_with_view_permission(client, outsider):
    for url in ("/traces/compare/?a=1&b=2", "/traces/versions/"):
        assert client.get(url).status_code == 302  # to sign in
    client.force_login(outsider)
    for url in ("/traces/compare/?a=1&b=2", "/traces/versions/"):
        assert client.get(url).status_code == 403
