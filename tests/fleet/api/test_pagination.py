"""The API's limit/offset pagination: a bad value is a 400 naming its parameter, never a
silent default or a database error."""

import pytest
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from fleet.api.pagination import MAX_LIMIT, MAX_OFFSET, BoundedLimitOffsetPagination


def _page(query: str) -> tuple[int, int]:
    paginator = BoundedLimitOffsetPagination()
    paginator.default_limit = 50
    request = Request(APIRequestFactory().get(f"/api/devices/?{query}"))
    return paginator.get_limit(request), paginator.get_offset(request)


def test_limit_and_offset_are_read_and_default_when_absent():
    assert _page("limit=10&offset=20") == (10, 20)
    assert _page("") == (50, 0)
    assert _page(f"limit={MAX_LIMIT}&offset={MAX_OFFSET}") == (MAX_LIMIT, MAX_OFFSET)


@pytest.mark.parametrize(
    ("query", "name", "message"),
    [
        ("limit=0", "limit", f"limit must be between 1 and {MAX_LIMIT}."),
        (f"limit={MAX_LIMIT + 1}", "limit", f"limit must be between 1 and {MAX_LIMIT}."),
        ("limit=ten", "limit", "'ten' is not an integer."),
        ("offset=-1", "offset", f"offset must be between 0 and {MAX_OFFSET}."),
        ("offset=99999999999999999999", "offset", f"offset must be between 0 and {MAX_OFFSET}."),
    ],
)
def test_a_value_out_of_bounds_or_not_a_number_is_refused_by_name(query, name, message):
    with pytest.raises(ValidationError) as exc:
        _page(query)
    assert exc.value.detail == {name: message}
