"""Errors raised by the Atrace engine.

Every error says *what* is wrong and *where* (a file, a byte offset, an event ordinal or a
node id), so that an upload can be rejected with a message a person can act on.
"""

from __future__ import annotations


class TraceError(ValueError):
    """Base class of every error this package raises on bad input."""

    def __init__(self, what: str, where: str | None = None):
        self.what = what
        self.where = where
        super().__init__(f"{where}: {what}" if where else what)


class TraceFormatError(TraceError):
    """The input is not a trace we can read: bad JSON, a wrong schema, bad values."""


class TraceTooLargeError(TraceFormatError):
    """The input decompresses to more than we accept (a gzip bomb, for instance)."""


class EmptyTraceError(TraceError):
    """The input is a valid file but holds no events to analyse."""


class TraceGraphError(TraceError):
    """The dependency graph is inconsistent (a cycle, an edge back in time)."""
