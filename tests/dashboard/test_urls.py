"""The OpenAPI schema and its docs page need sign-in; API_SCHEMA_PUBLIC=true publishes them."""

import pytest
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def test_an_anonymous_client_gets_no_schema_and_is_sent_to_sign_in_for_the_docs(client):
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 401
    assert "paths" not in schema.content.decode()
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"] == "/accounts/login/?next=/api/docs/"


def test_a_bad_token_gets_no_schema(client):
    assert client.get("/api/schema/", HTTP_AUTHORIZATION="Token " + "0" * 40).status_code == 401


def test_a_signed_in_user_reads_both_by_session_or_token(client, viewer):
    token = Token.objects.create(user=viewer).key
    by_token = client.get("/api/schema/", {"format": "json"}, HTTP_AUTHORIZATION=f"Token {token}")
    assert by_token.status_code == 200 and "/api/devices/" in by_token.json()["paths"]
    client.force_login(viewer)
    assert client.get("/api/schema/", {"format": "json"}).status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


def test_api_schema_public_opens_both(client, settings):
    settings.API_SCHEMA_PUBLIC = True
    assert client.get("/api/schema/", {"format": "json"}).status_code == 200
    assert client.get("/api/docs/").status_code == 200
