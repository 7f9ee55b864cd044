"""The engine's errors say what is wrong and where, and sort into the kinds callers catch."""

from __future__ import annotations

from traces.atrace.errors import (
    EmptyTraceError,
    TraceError,
    TraceFormatError,
    TraceGraphError,
    TraceTooLargeError,
)


def test_an_error_says_where_before_what():
    err = TraceFormatError("unknown phase 'Q'", "trace.json: event 12")
    assert str(err) == "trace.json: event 12: unknown phase 'Q'"
    assert (err.what, err.where) == ("unknown phase 'Q'", "trace.json: event 12")
    assert str(EmptyTraceError("no events")) == "no events"


def test_every_error_is_a_trace_error_and_a_value_error():
    for kind in (TraceFormatError, TraceTooLargeError, EmptyTraceError, TraceGraphError):
        assert issubclass(kind, TraceError) and issubclass(kind, ValueError)
    # Too large is a format problem (an upload answered 400); empty and graph errors are not.
    assert issubclass(TraceTooLargeError, TraceFormatError)
    assert not issubclass(EmptyTraceError, TraceFormatError) and not issubclass(
        TraceGraphError, TraceFormatError
    )
