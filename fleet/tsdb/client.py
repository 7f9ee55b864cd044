"""A small HTTP client for a Prometheus-compatible store: PromQL reads and remote writes.

Reads go to `read_url` (/api/v1/query_range, /api/v1/query), writes to `write_url`
(Prometheus remote write: a snappy-compressed protobuf WriteRequest). The same calls work on
VictoriaMetrics (single node, or vmselect/vminsert), Prometheus with
--web.enable-remote-write-receiver, and Mimir. Plain standard library: one kept-alive
connection per thread and server.
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

import orjson

WRITE_PATHS = ("/api/v1/write", "/api/v1/push")


class TsdbError(Exception):
    """The store answered with an error (its message): a bad query, a rejected write.

    `status` is the HTTP status (None when no answer came), `reason` a short name for it
    (`failure_reason`), as /metrics labels write failures."""

    def __init__(self, message: str, status: int | None = None, reason: str | None = None):
        super().__init__(message)
        self.status = status
        self.reason = reason or failure_reason(status)


class TsdbUnavailable(TsdbError):
    """The store did not answer in time, refused the connection or failed (5xx): history
    is unavailable for now; a write may succeed later."""


# A write refused with these statuses is the request's own fault (the store cannot read it, or
# refuses some of its samples): sending it again as it is would be refused again.
MALFORMED = (400, 422)
_REASONS = {400: "malformed", 422: "malformed", 401: "unauthorized", 403: "forbidden", 404: "not_found",
            408: "busy", 429: "busy", 413: "too_large"}


def failure_reason(status: int | None) -> str:
    """A bounded name for a failed request's status: `unauthorized`, `not_found`,
    `server_error`, … (`http_<status>` for the others; `connection_error` with no status)."""
    if status is None:
        return "connection_error"
    if status >= 500:
        return "server_error"
    return _REASONS.get(status, f"http_{status}")


@dataclass(frozen=True, slots=True)
class Series:
    labels: dict[str, str]  # includes "__name__" when the store returns it
    points: list[tuple[float, float]]  # (epoch seconds, value), oldest first


def write_endpoint(write_url: str) -> str:
    """The remote-write URL of a write base URL (a full .../api/v1/write or /push is kept)."""
    url = write_url.rstrip("/")
    return url if url.endswith(WRITE_PATHS) else url + "/api/v1/write"


class Client:
    def __init__(self, read_url: str, write_url: str | None = None, read_timeout_s: float = 10.0,
                 write_timeout_s: float = 2.0):
        self.read_url = read_url.rstrip("/")
        self.write_url = write_endpoint(write_url or read_url)
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self._local = threading.local()

    # --- Reads ---------------------------------------------------------------------

    def query_range(self, promql: str, start: float, end: float, step: float) -> list[Series]:
        """The series of a PromQL expression from `start` to `end` (epoch seconds), a point
        every `step` seconds."""
        data = self._read("/api/v1/query_range", {"query": promql, "start": _number(start),
                                                   "end": _number(end), "step": _number(step)})
        return _series(data)

    def query(self, promql: str, at: float | None = None) -> list[Series]:
        """An instant query at `at` (now by default). A range-vector expression
        (``m[5m]``) gives its raw samples."""
        params = {"query": promql}
        if at is not None:
            params["time"] = _number(at)
        return _series(self._read("/api/v1/query", params))

    def _read(self, path: str, params: dict) -> dict:
        body = urlencode(params).encode()
        status, payload = self._request(
            "POST", self.read_url + path, body, {"Content-Type": "application/x-www-form-urlencoded"},
            self.read_timeout_s,
        )
        try:
            answer = orjson.loads(payload)
        except orjson.JSONDecodeError:
            answer = None
        if status == 200 and isinstance(answer, dict) and answer.get("status") == "success":
            return answer["data"]
        message = _message(status, payload, answer)
        if status >= 500 or status in (408, 429):
            raise TsdbUnavailable(message, status)
        raise TsdbError(message, status)

    # --- Writes --------------------------------------------------------------------

    def write(self, body: bytes, timeout_s: float | None = None) -> None:
        """Send one remote-write request (`body`: a snappy-compressed WriteRequest).

        Raises TsdbUnavailable when it may succeed later (no answer in time, refused, 5xx,
        408, 429) and TsdbError for another answer (4xx), with its `status`: whether the
        request itself is at fault (MALFORMED) is the caller's to decide."""
        status, payload = self._request(
            "POST", self.write_url, body,
            {"Content-Type": "application/x-protobuf", "Content-Encoding": "snappy",
             "X-Prometheus-Remote-Write-Version": "0.1.0"},
            self.write_timeout_s if timeout_s is None else timeout_s,
        )
        if 200 <= status < 300:
            return
        message = _message(status, payload, None)
        if status >= 500 or status in (408, 429):
            raise TsdbUnavailable(message, status)
        raise TsdbError(message, status)

    # --- HTTP ----------------------------------------------------------------------

    def _request(self, method: str, url: str, body: bytes, headers: dict, timeout: float) -> tuple[int, bytes]:
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        deadline = time.monotonic() + timeout
        for attempt in (1, 2):
            conn, reused = self._connection(parts.scheme, parts.netloc, timeout)
            try:
                conn.timeout = max(0.01, deadline - time.monotonic())
                if conn.sock is not None:
                    conn.sock.settimeout(conn.timeout)
                conn.request(method, target, body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                if response.will_close:
                    self._drop(parts.scheme, parts.netloc)
                return response.status, payload
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self._drop(parts.scheme, parts.netloc)
                if reused and attempt == 1 and time.monotonic() < deadline:
                    continue  # the server closed an idle kept-alive connection: once more, afresh
                raise TsdbUnavailable(f"{url}: {type(exc).__name__}: {exc}") from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop(parts.scheme, parts.netloc)
                if isinstance(exc, TimeoutError):
                    raise TsdbUnavailable(f"{url}: no answer within the timeout", reason="timeout") from exc
                reason = "connection_refused" if isinstance(exc, ConnectionRefusedError) else "connection_error"
                raise TsdbUnavailable(f"{url}: {type(exc).__name__}: {exc}", reason=reason) from exc
        raise AssertionError("unreachable")

    def _connection(self, scheme: str, netloc: str, timeout: float):
        pool = self._local.__dict__.setdefault("connections", {})
        conn = pool.get((scheme, netloc))
        if conn is not None:
            return conn, conn.sock is not None
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = pool[(scheme, netloc)] = cls(netloc, timeout=timeout)
        return conn, False

    def _drop(self, scheme: str, netloc: str) -> None:
        conn = self._local.__dict__.get("connections", {}).pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._local.__dict__.pop("connections", {}).values():
            conn.close()


def _number(value: float) -> str:
    return repr(float(value))


def _message(status: int, payload: bytes, answer) -> str:
    """The store's own words for an error."""
    if answer is None:
        try:
            answer = orjson.loads(payload)
        except orjson.JSONDecodeError:
            answer = None
    if isinstance(answer, dict) and answer.get("error"):
        return f"{answer.get('errorType', status)}: {answer['error']}".strip()
    text = payload.decode("utf-8", "replace").strip()
    return f"HTTP {status}: {text[:500]}" if text else f"HTTP {status}"


def _series(data: dict) -> list[Series]:
    kind, result = data.get("resultType"), data.get("result")
    if kind == "matrix":
        return [Series(r.get("metric", {}), [(float(t), float(v)) for t, v in r.get("values", [])]) for r in result]
    if kind == "vector":
        return [Series(r.get("metric", {}), [(float(r["value"][0]), float(r["value"][1]))]) for r in result]
    if kind == "scalar":
        return [Series({}, [(float(result[0]), float(result[1]))])]
    raise TsdbError(f"unexpected answer from the store: resultType {kind!r}")
