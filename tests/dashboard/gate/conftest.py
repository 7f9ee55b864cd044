"""Fixtures: a private trace storage (tests/support/trace_storage.py)."""

from tests.support.trace_storage import object_store, object_store_server, trace_storage  # noqa: F401 (fixtures)
