"""What a web process loads at its start: the object store's client (boto3/botocore,
django-storages' S3 backend) only once a trace goes to or comes from the store, never on
the local folder (botocore.exceptions alone was 0.4 MB; the client, ~25 MB, comes with the
store's first use)."""

import json
import subprocess
import sys

import pytest

from tests.support.processes import ROOT, child_env

LAZY = ("boto3", "botocore", "s3transfer", "storages.backends.s3", "traces.store.object_store")
PROBE = f"""
import json, sys
import daphne.server  # as `daphne dashboard.asgi:application` has it before the application
import dashboard.asgi
print(json.dumps([name for name in {LAZY!r} if name in sys.modules]))
"""


def loaded_at_start(**env) -> list[str]:
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", PROBE], cwd=ROOT, env=child_env(**env),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # imports the whole web application in a fresh interpreter: seconds of CPU (make test runs it, make test-fast does not)
@pytest.mark.parametrize("storage", ["", "s3://traces-bucket/prefix"], ids=["local folder", "object store"])
def test_the_asgi_application_loads_no_object_store_client_at_start(storage):
    assert loaded_at_start(TRACE_STORAGE=storage, AWS_S3_ENDPOINT_URL="http://127.0.0.1:9") == []

