"""An S3-compatible object store of the test's own: moto's standalone server, a real HTTP
process speaking the S3 API to the real boto3 client (no patched client)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
import uuid

import pytest

from tests.support.processes import BIN, Service, free_port
from tests.support.tiers import starts_processes

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "asicmon-test", "AWS_SECRET_ACCESS_KEY": "asicmon-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


class ObjectStore:
    """A moto server: its endpoint, a bucket, a boto3 client, and stop/start for an outage."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.bucket = f"traces-{uuid.uuid4().hex[:8]}"
        self.service = None
        self.start()
        self.client().create_bucket(Bucket=self.bucket)

    def start(self) -> None:
        self.service = Service("moto-s3", [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
                               {"PATH": f"{BIN}:/usr/bin:/bin", **CREDENTIALS})
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
                    return
            except (urllib.error.URLError, OSError):
                if self.service.proc.poll() is not None:
                    raise RuntimeError(f"moto_server exited:\n{self.service.output()}") from None
                time.sleep(0.1)
        raise TimeoutError(f"moto_server did not answer at {self.endpoint}:\n{self.service.output()}")

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()

    def client(self):
        import boto3  # here, not at the top: every test process imports this module, few start a store

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])

    def keys(self, prefix: str = "") -> list[str]:
        found = self.client().list_objects_v2(Bucket=self.bucket, Prefix=prefix)
        return sorted(o["Key"] for o in found.get("Contents", []))

    def open_multipart_uploads(self) -> list[str]:
        return [u["Key"] for u in self.client().list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])]

    def environment(self, prefix: str = "traces") -> dict[str, str]:
        """The variables that point asicmon's trace storage at this store."""
        return {"TRACE_STORAGE": f"s3://{self.bucket}/{prefix}", "AWS_S3_ENDPOINT_URL": self.endpoint, **CREDENTIALS}


@pytest.fixture(scope="module")
@starts_processes
def object_store_server():
    store = ObjectStore()
    yield store
    store.stop()


@pytest.fixture
def object_store(object_store_server, settings, monkeypatch, tmp_path):
    """The traces storage in the test's object store (a prefix of its own), as
    TRACE_STORAGE=s3://… sets it; the web's local copies under tmp_path."""
    from dashboard.settings import trace_storage

    prefix = f"t-{uuid.uuid4().hex[:8]}"
    for name, value in object_store_server.environment(prefix).items():
        monkeypatch.setenv(name, value)
    config = trace_storage(f"s3://{object_store_server.bucket}/{prefix}")
    config["OPTIONS"].update(endpoint_url=object_store_server.endpoint, region_name="us-east-1", part_mb=5)
    settings.STORAGES = {**settings.STORAGES, "traces": config}
    settings.TRACE_STORAGE = f"s3://{object_store_server.bucket}/{prefix}"  # and so for child processes
    settings.AWS_S3_ENDPOINT_URL = object_store_server.endpoint
    settings.VAR_DIR = tmp_path / "var"
    object_store_server.prefix = prefix
    return object_store_server
