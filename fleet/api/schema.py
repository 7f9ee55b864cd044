"""The OpenAPI schema and its docs page, for signed-in users only (API_SCHEMA_PUBLIC=true
opens both to anyone); and the post-processing that declares the error answers every
endpoint can give.

Every operation may answer 401 (no credentials), 403 (no permission), 414 (a query string
over the limit), 429 (over the API's rate, with Retry-After) and 503 (Redis, which holds the
live state, is unreachable); one with query parameters 400 (a bad parameter, named in the
body); one with a path parameter 404. The bodies are the JSON DRF writes: {"detail": "..."} or {"parameter": "message" | ["message"]}.
"""

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import BasePermission


class SchemaAccess(BasePermission):
    """Signed in (session or token), unless API_SCHEMA_PUBLIC publishes the schema."""

    message = "Sign in to read the API schema (API_SCHEMA_PUBLIC=true publishes it)."

    def has_permission(self, request, view):
        return settings.API_SCHEMA_PUBLIC or bool(request.user and request.user.is_authenticated)


class AnonymousAddressRateScheme(OpenApiAuthenticationExtension):
    """dashboard/throttles.py's rate for calls without credentials signs nobody in: no scheme."""

    target_class = "dashboard.throttles.AnonymousAddressRate"
    name = []  # no security scheme to declare

    def get_security_requirement(self, auto_schema):
        return None

    def get_security_definition(self, auto_schema):
        return []


class SchemaView(SpectacularAPIView):
    """GET /api/schema/: the OpenAPI document (401 without credentials)."""

    permission_classes = [SchemaAccess]


class DocsView(SpectacularSwaggerView):
    """GET /api/docs/: Swagger UI, a page for people: a visitor who is not signed in is sent
    to the sign-in page and comes back. Session only (token clients read /api/schema/)."""

    permission_classes = [SchemaAccess]
    authentication_classes = [SessionAuthentication]
    http_method_names = ["get", "head"]  # OPTIONS would render DRF's metadata with no template: a 500

    def handle_exception(self, exc):
        if isinstance(exc, NotAuthenticated):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)

ERROR_SCHEMA = {
    "type": "object",
    "description": "What was wrong: `detail`, or a message per parameter",
    "additionalProperties": {
        "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
    },
}


def _error(description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}


THROTTLED = {
    **_error("Over the API's rate (API_THROTTLE_USER per user, API_THROTTLE_ANON per address without signing in)"),
    "headers": {"Retry-After": {"description": "Seconds until a call is taken again", "schema": {"type": "integer"}}},
}


def _no_nul(params: list) -> None:
    """A NUL byte in the query string is refused (400) whatever the parameter: say so."""
    for param in params:
        schema = param.get("schema", {})
        if param.get("in") == "query" and schema.get("type") == "string" and not {"enum", "pattern", "format"} & set(schema):
            schema["pattern"] = "^[^\\x00]*$"


def _empty_means_any(params: list) -> None:
    """An optional choice left empty (`?level=`, as a form sends it) means "any": say so."""
    for param in params:
        schema = param.get("schema", {})
        if param.get("in") == "query" and not param.get("required") and "enum" in schema and "" not in schema["enum"]:
            schema["enum"] = ["", *schema["enum"]]


def declare_errors(result, generator, request, public):
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            params = operation.get("parameters", [])
            _empty_means_any(params)
            _no_nul(params)
            responses.setdefault("401", _error("Not signed in"))
            responses.setdefault("403", _error("Signed in without the permission"))
            responses.setdefault("414", _error("The query string is over the limit"))
            responses.setdefault("429", THROTTLED)
            responses.setdefault("503", _error("A backing service is unreachable; the body says which"))
            if any(p.get("in") == "query" for p in params) or "requestBody" in operation:
                responses.setdefault("400", _error("A bad parameter, named in the body"))
            if any(p.get("in") == "path" for p in params):
                responses.setdefault("404", _error("No such object"))
    return result
