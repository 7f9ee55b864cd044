"""Answers for requests no view should see, and for services that are down.

- a query string longer than MAX_QUERY_STRING: 414;
- a NUL byte in the URL's path or query string (no database stores one in a text column,
  so no path or query parameter accepts it): 400;
- Redis, the task broker or the time-series store not answering while a page or API call
  needs it: 503 saying so, not a 500; the store refusing a query: 502 with its words;
- a trace's stored result that cannot be read whole (traces.store.files.ResultUnreadable):
  503 naming it, with Retry-After, not a 500;
- a URL under /api/ that matches nothing: a JSON 404, like every other API answer.
"""

import logging
from urllib.parse import unquote_to_bytes

import redis
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from kombu.exceptions import OperationalError as BrokerUnavailable

from fleet.tsdb import TsdbError, TsdbUnavailable
from traces.store.files import ResultUnreadable

log = logging.getLogger(__name__)


def _answer(request, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RequestGuardMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if len(query) > settings.MAX_QUERY_STRING:
            return _answer(
                request, 414, f"The query string is {len(query)} characters; at most {settings.MAX_QUERY_STRING} are accepted."
            )
        if "\x00" in request.path:
            return _answer(request, 400, "The URL path contains a NUL byte (%00), which no parameter accepts.")
        if "\x00" in query or b"\x00" in unquote_to_bytes(query):
            return _answer(request, 400, "The query string contains a NUL byte (%00), which no parameter accepts.")
        response = self.get_response(request)
        if (
            response.status_code == 404
            and request.path.startswith("/api/")
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            return JsonResponse({"detail": f"No API endpoint or object at {request.path}."}, status=404)
        return response

    def process_exception(self, request, exception):
        if isinstance(exception, redis.ConnectionError | redis.TimeoutError):
            log.warning("Redis unavailable for %s: %s", request.path, exception)
            response = _answer(
                request, 503, f"Redis, which holds the fleet's latest state, is not answering ({exception}). Try again shortly."
            )
            response["Retry-After"] = "5"
            return response
        if isinstance(exception, BrokerUnavailable):
            log.warning("task broker unavailable for %s: %s", request.path, exception)
            response = _answer(
                request, 503, f"The task broker, which queues captures and analyses, is not answering ({exception}). Try again shortly."
            )
            response["Retry-After"] = "5"
            return response
        if isinstance(exception, TsdbUnavailable):
            log.warning("time-series store unavailable for %s: %s", request.path, exception)
            response = _answer(
                request, 503, f"The time-series store, which holds the samples' history, is not answering ({exception}). "
                "Try again shortly."
            )
            response["Retry-After"] = "5"
            return response
        if isinstance(exception, ResultUnreadable):
            log.warning("unreadable stored result for %s: %s", request.path, exception.__cause__ or exception)
            response = _answer(request, 503, str(exception))
            response["Retry-After"] = str(exception.retry_after_s)
            return response
        if isinstance(exception, TsdbError):
            log.warning("time-series store refused a query for %s: %s", request.path, exception)
            return _answer(request, 502, f"The time-series store refused the query: {exception}")
        return None
