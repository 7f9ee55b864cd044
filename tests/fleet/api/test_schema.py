"""Schemathesis against /api/schema/: generated requests to every read endpoint of the API.

No request may get a server error, and every answer must be one the schema declares, in
the shape it declares (issue 12). Examples are bounded so that the suite stays quick, and
derandomized so that a run in CI tries what a run here tried. Schemathesis' coverage phase
(about 1,300 systematic cases: every boundary and wrong type of every parameter) runs under
the `ci` profile (`make test`, CI); `make test-fast` runs the generated examples only.
"""

import json

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.config import SchemathesisConfig

from fleet.polling import poller
from tests.support.examples import examples

pytestmark = [pytest.mark.django_db]

# A query string over the limit is refused with 414 (declared on every operation): a
# rejection of bad data as much as a 400 is.
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "414", "415", "422", "428", "429"]
config = SchemathesisConfig.from_dict({
    "checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}},
    "phases": {"coverage": {"enabled": hypothesis_settings.get_current_profile_name() == "ci"}},
})


def served_schema() -> dict:
    """The document /api/schema/ serves to a signed-in user, made as its view makes it:
    collection has no database, so no user to sign in with. That the view needs sign-in is
    tests/dashboard/test_urls.py's and the authorization matrix's business."""
    from drf_spectacular.renderers import OpenApiJsonRenderer

    from fleet.api.schema import SchemaView

    view = SchemaView()
    document = view.generator_class(urlconf=view.urlconf, api_version=view.api_version).get_schema(
        request=None, public=view.serve_public,
    )
    return json.loads(OpenApiJsonRenderer().render(document))


schema = schemathesis.openapi.from_dict(served_schema(), config=config).include(method="GET")
schema.app = get_wsgi_application()
schema.location = "/api/schema/?format=json"


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

    for shard in poller.shards():
        poller.poll_shard(shard, poller.current_cycle())
    return Token.objects.create(user=operator).key


@schema.parametrize()
@hypothesis_settings(max_examples=examples(15), deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@pytest.mark.slow  # over 1.5 s on 2 cores: in make test, out of make test-fast
def test_api_answers_as_its_schema_says(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"})
