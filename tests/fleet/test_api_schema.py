"""Schemathesis against /api/schema/: generated requests to every read endpoint of the API.

No request may get a server error, and every answer must be one the schema declares, in
the shape it declares (issue 12). Examples are bounded so that the suite stays quick.
"""

import re

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from fleet import services

pytestmark = [pytest.mark.django_db]

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application()).include(method="GET")


@pytest.fixture
def keep_test_connection():
    """As Django's test client does: the request signals must not close the connection that
    holds the test's transaction."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(seeded_fleet, operator, keep_test_connection):
    from rest_framework.authtoken.models import Token

    for shard in services.shards():
        services.poll_shard(shard, services.current_cycle())
    return Token.objects.create(user=operator).key


OWN = r"^/api/(devices|hosts|counters)/"  # fleet reads: every check; the rest: no server error


@schema.parametrize()
@hypothesis_settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_answers_as_its_schema_says(case, token):
    headers = {"Authorization": f"Token {token}"}
    if re.match(OWN, case.operation.path):
        case.call_and_validate(headers=headers)
    else:
        response = case.call(headers=headers)
        assert response.status_code < 500, f"{case.operation.path}: {response.status_code} {response.text[:300]}"
