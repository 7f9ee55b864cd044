"""A private trace storage per test, for the tests of the traces app and the scenarios and
gates that store traces (their conftest.py files import these fixtures)."""

import pytest

from tests.support.object_store import object_store, object_store_server  # noqa: F401 (fixtures)


@pytest.fixture
def trace_storage(settings, tmp_path):
    """Trace files under tmp_path (Django rebuilds the storage when STORAGES changes)."""
    location = tmp_path / "traces"
    settings.STORAGES = {
        **settings.STORAGES,
        "traces": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(location)}},
    }
    settings.TRACE_STORAGE_DIR = location
    from django.core.files.storage import storages

    return storages["traces"]
