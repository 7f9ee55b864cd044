"""A worker's parse is bounded (issue 25, point 2): a trace that decompresses past
TRACE_PARSE_MAX_MB fails with a message that names the limit, and the worker's memory stays
a small multiple of the limit, not of the decompressed size."""

import tracemalloc

import pytest

from tests.support.traces import gzip_bytes, upload_file
from traces import writers
from traces.choices import TraceStatus
from traces.models import Trace

pytestmark = pytest.mark.django_db

EVENT = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.25},\n'


@pytest.mark.slow  # streams a trace past the parse limit: seconds of CPU (make test runs it, make test-fast does not)
def test_a_trace_past_the_parse_limit_fails_with_the_limit_named_in_bounded_memory(api_client, operator, trace_storage, settings):
    settings.TRACE_PARSE_MAX_MB = 8
    # Valid-looking events, 48 MB of text, gzipped 30:1 (under the engine's gzip-bomb ratio).
    text = b'{"schemaVersion": 1, "traceEvents": [\n' + EVENT * (48 * (1 << 20) // len(EVENT))
    api_client.force_authenticate(operator)
    response = api_client.post("/api/traces/", {"file": upload_file("large.json.gz", gzip_bytes(text))}, format="multipart")
    assert response.status_code == 201, response.content
    del text
    tracemalloc.start()
    try:
        writers.analyse(response.data["id"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.status == TraceStatus.FAILED
    assert "TRACE_PARSE_MAX_MB" in trace.error and "large.json.gz" in trace.error, trace.error
    assert peak < 64 << 20, peak


def test_a_trace_within_the_parse_limit_is_read(api_client, operator, trace_storage, settings):
    settings.TRACE_PARSE_MAX_MB = 8
    text = b'{"schemaVersion": 1, "traceEvents": [\n' + EVENT * 2000 + EVENT.rstrip(b",\n") + b"]}"
    api_client.force_authenticate(operator)
    response = api_client.post("/api/traces/", {"file": upload_file("small.json.gz", gzip_bytes(text))}, format="multipart")
    writers.analyse(response.data["id"])
    trace = Trace.objects.get(pk=response.data["id"])
    assert trace.status == TraceStatus.READY, trace.error
    assert trace.events == 2001
