"""Limit/offset pagination that refuses what it cannot honour instead of guessing or failing.

DRF's own class silently falls back to the default on a negative or malformed limit and
passes an offset beyond a 64-bit integer to the database (a 500). Here a bad value is a
400 naming the parameter, and `limit` is capped at MAX_LIMIT.
"""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000
MAX_OFFSET = 2**31 - 1


def _bounded_int(request, name: str, *, minimum: int, maximum: int) -> int | None:
    raw = request.query_params.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValidationError({name: f"'{raw[:40]}' is not an integer."}) from None
    if not minimum <= value <= maximum:
        raise ValidationError({name: f"{name} must be between {minimum} and {maximum}."})
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request):
        value = _bounded_int(request, self.limit_query_param, minimum=1, maximum=self.max_limit)
        return self.default_limit if value is None else value

    def get_offset(self, request):
        value = _bounded_int(request, self.offset_query_param, minimum=0, maximum=MAX_OFFSET)
        return value or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.limit_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_limit)
            elif parameter["name"] == self.offset_query_param:
                parameter["schema"].update(minimum=0, maximum=MAX_OFFSET)
        return parameters
