"""OTLP decoding: whatever arrives, a request or an OtlpError (never another exception), and
the JSON mapping (hex ids) reads back to the same spans as protobuf."""

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.otlp import sdk_spans
from traces.atrace.io.otlp import (
    JSON,
    PROTOBUF,
    OtlpError,
    decode_body,
    decompress,
    request_to_json,
    spans_of,
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["resourceSpans", "scopeSpans", "spans", "traceId", "spanId", "parentSpanId", "name",
                         "startTimeUnixNano", "attributes", "links", "key", "value", "stringValue", "kind"]),
        inner, max_size=4),
    max_leaves=20,
)


def _decodes_or_says_why(body: bytes, media: str) -> None:
    try:
        spans_of(decode_body(body, media))
    except OtlpError as exc:
        assert str(exc)


@given(st.binary(max_size=300))
def test_any_bytes_as_protobuf(body):
    _decodes_or_says_why(body, PROTOBUF)


@given(JSON_VALUES)
def test_any_json_as_otlp_json(value):
    _decodes_or_says_why(orjson.dumps(value), JSON)


@given(st.binary(max_size=200), st.sampled_from(["gzip", "deflate", "br", ""]))
def test_any_bytes_as_compressed(body, encoding):
    try:
        decompress(body, encoding, 10_000)
    except OtlpError as exc:
        assert str(exc)


def test_numbers_past_64_bits_are_a_reason_not_a_crash():
    body = (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00000000000000000000000000000001", '
            b'"spanId": "0000000000000001", "startTimeUnixNano": 123456789012345678901234567890}]}]}]}')
    _decodes_or_says_why(body, JSON)


def test_the_json_mapping_reads_back_to_the_same_spans():
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    message = encode_spans(sdk_spans(3))
    line = request_to_json(message)
    assert b'"traceId":"' in line and b"==" not in line  # hex, not base64
    from_json = spans_of(decode_body(line, JSON))
    from_protobuf = spans_of(decode_body(message.SerializeToString(), PROTOBUF))
    assert [s.to_dict() for s in from_json] == [s.to_dict() for s in from_protobuf]


def test_a_span_that_cannot_be_kept_raises_or_with_a_list_is_left_out_and_said():
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    message = encode_spans(sdk_spans(2))
    spans = message.resource_spans[0].scope_spans[0].spans
    spans[0].kind, spans[1].end_time_unix_nano = 7, 1
    with pytest.raises(OtlpError, match="kind 7 is not a span kind"):
        spans_of(message)
    rejected = []
    kept = spans_of(message, rejected)
    assert len(kept) == 6 and len(rejected) == 2
    assert "kind 7 is not a span kind" in rejected[0] and "ns before it starts" in rejected[1]
