"""The fleet table's filter form: the query string becomes a table query, empty fields its
defaults, and values the table does not know are refused."""

from fleet.forms import FleetFilterForm
from fleet.reading.queries import PAGE_SIZES


def test_an_empty_query_string_is_the_first_page_sorted_by_host():
    form = FleetFilterForm({})
    assert form.is_valid(), form.errors
    query = form.table_query()
    assert (query.sort, query.page, query.per_page) == ("host", 1, PAGE_SIZES[1])
    assert (query.host, query.device_type, query.health, query.state, query.search) == (
        "",
        "",
        "",
        "",
        "",
    )


def test_filters_sort_and_page_are_carried_and_the_search_is_trimmed():
    form = FleetFilterForm(
        {
            "host": "host-01",
            "type": "gpu",
            "health": "critical",
            "state": "drained",
            "q": "  GPU-1 ",
            "page": "3",
            "per_page": str(PAGE_SIZES[0]),
        }
    )
    assert form.is_valid(), form.errors
    query = form.table_query()
    assert (query.host, query.device_type, query.health, query.state) == (
        "host-01",
        "gpu",
        "critical",
        "drained",
    )
    assert (query.search, query.page, query.per_page) == ("GPU-1", 3, PAGE_SIZES[0])


def test_unknown_values_are_form_errors_by_field():
    form = FleetFilterForm({"health": "sick", "sort": "colour", "page": "0", "per_page": "7"})
    assert not form.is_valid()
    assert set(form.errors) == {"health", "sort", "page", "per_page"}
