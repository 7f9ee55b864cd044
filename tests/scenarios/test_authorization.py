"""The authorization matrix: every route of the URL configuration and every websocket route,
with every method, as every role, against the one table of decisions in
tests/support/authorization.py. A route without a decision fails here; so does a refusal
where the table allows, an answer where it refuses, and any server error."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from dashboard.routing import websocket_urlpatterns
from tests.support.authorization import (
    NOT_SIGNED_IN,
    READS,
    ROLES,
    SOCKET_DECISIONS,
    SOCKET_PROBES,
    Decision,
    decision_of,
    missing_decision_message,
)

BAD_TOKEN = "Token " + "f00d" * 10
LOGIN_PAGES = {"page": "/accounts/login/", "admin": "/admin/login/"}
ADMIN_INDEX = "/admin/"


@dataclass(frozen=True)
class Route:
    key: str  # the URL name, namespaced; the pattern where it has no name
    namespace: str | None
    pattern: str  # the whole path pattern, for messages
    route: URLPattern

    @property
    def parameters(self) -> list[str]:
        return list(self.route.pattern.regex.groupindex)


def http_routes(patterns=None, prefix: str = "", namespace: str | None = None) -> list[Route]:
    """Every URL pattern reachable from dashboard/urls.py, resolvers walked into."""
    found = []
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            inner = namespace
            if entry.namespace:
                inner = f"{namespace}:{entry.namespace}" if namespace else entry.namespace
            found += http_routes(entry.url_patterns, prefix + str(entry.pattern), inner)
        else:
            whole = prefix + str(entry.pattern)
            key = (f"{namespace}:{entry.name}" if namespace else entry.name) if entry.name else whole
            found.append(Route(key, namespace, whole, entry))
    return found


def test_every_route_has_a_decision():
    missing = sorted({r.key for r in http_routes() if decision_of(r.key, r.namespace) is None})
    missing += [f"websocket {str(p.pattern)!r}" for p in websocket_urlpatterns if str(p.pattern) not in SOCKET_DECISIONS]
    assert not missing, missing_decision_message(missing)


def test_every_decision_has_a_route():
    keys = {r.key for r in http_routes()} | {f"{r.namespace}:*" for r in http_routes() if r.namespace}
    stale = [key for key in (*_http_keys(), *SOCKET_DECISIONS) if key not in keys
             and key not in {str(p.pattern) for p in websocket_urlpatterns}]
    assert not stale, f"Decisions for routes that no longer exist (remove them): {stale}"


def _http_keys():
    from tests.support.authorization import HTTP_DECISIONS

    return list(HTTP_DECISIONS)


# -- What each answer should be -------------------------------------------------------------

def style_of(route: Route, decision: Decision) -> str:
    if decision.style:
        return decision.style
    view_class = getattr(route.route.callback, "cls", None)
    return "api" if view_class is not None and hasattr(view_class, "permission_classes") else "page"


def is_refusal(response, style: str, role: str) -> bool:
    """Whether `response` is how this kind of route refuses this role."""
    status = response.status_code
    if style == "bearer":
        return status == 401
    if style == "admin" and status in (302, 403):
        return role not in NOT_SIGNED_IN if status == 403 else (
            response["Location"] == ADMIN_INDEX or sent_to_sign_in(response, LOGIN_PAGES["admin"]))
    if style == "admin" or (style == "page" and role in NOT_SIGNED_IN):
        return status == 302 and sent_to_sign_in(response, LOGIN_PAGES[style])
    if style == "api" and role in NOT_SIGNED_IN:
        return status == 401
    return status == 403


def is_pass(response, style: str) -> bool:
    """Let through: not refused, not a missing sample object, no server error."""
    status = response.status_code
    if status in (401, 403, 404, 405) or status >= 500:
        return False
    return not (status == 302 and any(sent_to_sign_in(response, page) for page in LOGIN_PAGES.values()))


def sent_to_sign_in(response, login_page: str) -> bool:
    """A redirect to sign in and come back (`?next=`), not one after signing out."""
    return response["Location"].startswith(f"{login_page}?next=")


def verdict(decision: Decision, style: str, method: str, role: str, response) -> str | None:
    """None when the answer is the decision's, else what was expected."""
    status = response.status_code
    if status >= 500:
        return "no server error"
    if method in READS and role in decision.read:
        return None if is_pass(response, style) or (method == "OPTIONS" and status == 405) else "let through"
    if method in decision.changes and role in decision.change:
        return None if is_pass(response, style) else "let through"
    passes_check = role in decision.read | decision.change and style != "bearer"
    if method not in decision.changes and (method not in READS or not decision.read) and passes_check:
        if method == "OPTIONS" and is_pass(response, style):
            return None
        return None if status == 405 else "405 (no such method here)"
    if is_refusal(response, style, role) or status == 405:
        return None
    return f"refused ({refusal_text(style, role)})"


def refusal_text(style: str, role: str) -> str:
    if style == "bearer" or (style == "api" and role in NOT_SIGNED_IN):
        return "401"
    if style == "admin" or role in NOT_SIGNED_IN:
        return f"302 to {LOGIN_PAGES[style if style == 'admin' else 'page']}?next=..."
    return "403"


# -- Sample path arguments and the clients of each role ------------------------------------

@pytest.fixture
def world(seeded_fleet, viewer, operator, outsider, admin_user, settings):
    """One of each object a route can name, and a client per role."""
    from django.contrib.contenttypes.models import ContentType
    from rest_framework.authtoken.models import Token

    from fleet.models import Action, Counter, DriverError, HealthEvent
    from tests.support.trace_views import emulated_trace
    from traces.choices import TraceSource
    from traces.models import Job

    settings.METRICS_TOKEN = "matrix-metrics-token"
    settings.OTLP_TOKEN = "matrix-otlp-token"
    device = seeded_fleet[0]
    trace = emulated_trace(operator, device=device)
    Token.objects.create(user=viewer)
    objects = {
        "device": device.pk, "host": device.host_id, "trace": trace.pk,
        "job": Job.objects.create(name="matrix", source=TraceSource.UPLOAD, created_by=operator).pk,
        "health-event": HealthEvent.objects.create(device=device, rule="temperature", level="warning",
                                                   reason="hot", started_at=device.created_at).pk,
        "action": Action.objects.create(device=device, kind="drain", user=operator).pk,
        "driver-error": DriverError.objects.create(
            device=device, serial=device.serial, host=device.host.name, vendor="nvidia", code="79",
            name="GPU has fallen off the bus", severity="critical", action="reboot_host",
            first_seen=device.created_at, last_seen=device.created_at, bucket=0, fingerprint="matrix").pk,
        "counter": Counter.objects.order_by("name").first().name,
        "content_type": ContentType.objects.get_for_model(trace).pk,
        "replay": _finished_replay(),
    }
    users = {"outsider": outsider, "viewer": viewer, "operator": operator, "admin": admin_user}
    return {"objects": objects, "users": users, "fresh": {"upload": lambda: new_upload(operator)}}


def _finished_replay() -> str:
    """The id of a replay whose status the workers have left in Redis."""
    from fleet.replay import runs

    rid = "5eed" * 8
    runs._set(rid, state="done", progress=1.0)
    return rid


def new_upload(user):
    from traces.models import Upload

    return Upload.objects.create(created_by=user, filename="matrix.json", size=10).pk


def path_arguments(route: Route, objects: dict) -> dict:
    """A real object for each path parameter of `route`."""
    values = {}
    for name in route.parameters:
        if name == "format":
            values[name] = "json"
        elif name in ("pk", "device_id", "host_id", "trace_id", "job_id", "id", "object_id"):
            values[name] = _object_for(route, objects)
        elif name == "name":
            values[name] = objects["counter"]
        elif name == "request_id":
            values[name] = "matrix-request"
        elif name == "rid":
            values[name] = objects["replay"]
        elif name == "index":
            values[name] = 0
        elif name == "content_type_id":
            values[name] = objects["content_type"]
        elif name == "app_label":
            values[name] = "fleet"
        elif name == "url":
            values[name] = "fleet/host"  # the admin's catch-all: sent on to fleet/host/
        else:
            raise AssertionError(f"{route.pattern}: no sample value for the path parameter {name!r}: add one")
    return values


def _object_for(route: Route, objects: dict):
    if route.key == "admin:view_on_site":
        return objects["trace"]
    if route.namespace == "admin":
        app, model = route.pattern.split("/")[1:3]
        from django.apps import apps

        found = apps.get_model(app, model)._default_manager.order_by("pk").first()
        assert found is not None, f"{route.pattern}: no {app}.{model} to name"
        return found.pk
    name = route.key.rpartition(":")[2]
    kinds = ("health-event", "driver-error", "device", "host", "trace", "job", "action", "upload")
    for prefix in (*[k for k in kinds if name.startswith(k)], *[k for k in kinds if k in route.key]):
        return objects[prefix]  # the kind the route's name starts with, else one its key names
    raise AssertionError(f"{route.key}: which object does its id name? Say so in path_arguments")


def path_of(route: Route, arguments: dict) -> str:
    """The path of `route` with `arguments` put in (no reverse(): unnamed routes too)."""
    path = route.pattern.replace("<drf_format_suffix:format>", ".json")
    for name, value in arguments.items():
        path = re.sub(rf"<(?:\w+:)?{name}>|\(\?P<{name}>[^)]*\)", str(value), path)
    return "/" + path.replace("^", "").replace("$", "").replace("\\.", ".").replace("/?", "/")


class Roles:
    """A client per role; one signed out by a request is signed in again."""

    def __init__(self, users: dict):
        self.users = users
        self.clients = {}
        for role in ROLES:
            headers = {"HTTP_AUTHORIZATION": BAD_TOKEN} if role == "bad token" else {}
            client = Client(raise_request_exception=False, **headers)  # a 500 is an answer like any
            if role in users:
                client.force_login(users[role])
            self.clients[role] = client

    def request(self, role: str, method: str, path: str):
        client = self.clients[role]
        response = client.generic(method, path)
        cookie = client.cookies.get(settings.SESSION_COOKIE_NAME)
        if role in self.users and (cookie is None or not cookie.value):
            client.force_login(self.users[role])
        return response


def _error(response) -> str:
    exc_info = getattr(response, "exc_info", None)
    return f" ({exc_info[0].__name__}: {exc_info[1]})" if exc_info else ""


@pytest.mark.slow  # ~4,000 requests: every route x method x role
@pytest.mark.django_db
def test_http_matrix(world):
    roles = Roles(world["users"])
    wrong = []
    for route in http_routes():
        decision = decision_of(route.key, route.namespace)
        if decision is None:
            wrong.append(missing_decision_message([route.key]))
            continue
        style = style_of(route, decision)
        path = None if decision.fresh else path_of(route, path_arguments(route, world["objects"]))
        for method in decision.methods:
            for role in ROLES:
                if decision.fresh:
                    fresh = {name: make() for name, make in world["fresh"].items()}
                    path = path_of(route, path_arguments(route, {**world["objects"], **fresh}))
                response = roles.request(role, method, path)
                expected = verdict(decision, style, method, role, response)
                if expected:
                    wrong.append(f"{method} {path} ({route.key}) as {role}: {response.status_code}{_error(response)}, "
                                 f"expected {expected}")
    assert not wrong, f"{len(wrong)} answers differ from tests/support/authorization.py:\n" + "\n".join(wrong)


# -- Websockets, through the project's ASGI app and the real Redis channel layer -----------

@pytest.fixture
def socket_world(seeded_fleet, viewer, operator, outsider, admin_user):
    from traces.choices import TraceSource
    from traces.models import Job, Trace

    objects = {
        "device": seeded_fleet[0].pk,
        "trace": Trace.objects.create(name="matrix", source=TraceSource.UPLOAD, created_by=operator).pk,
        "job": Job.objects.create(name="matrix", source=TraceSource.UPLOAD, created_by=operator).pk,
    }
    return {"objects": objects, "users": {"outsider": outsider, "viewer": viewer, "operator": operator,
                                          "admin": admin_user}}


def socket_path(pattern: str, objects: dict) -> str:
    if not pattern:
        return "/ws/no-such-socket/"
    path = re.sub(r"<int:(\w+)_id>", lambda m: str(objects[m.group(1)]), pattern)
    assert "<" not in path, f"websocket {pattern!r}: no sample value for its parameters: add one in socket_path"
    return "/" + path


async def socket_headers(role: str, users: dict) -> list:
    from tests.support.websockets import SAME_ORIGIN, session_headers

    if role in users:
        return await session_headers(Client(), users[role])
    return [SAME_ORIGIN, (b"authorization", BAD_TOKEN.encode())] if role == "bad token" else [SAME_ORIGIN]


def rows_written() -> dict:
    from fleet.models import Action
    from traces.models import Job, Trace

    return {model.__name__: model.objects.count() for model in (Action, Trace, Job)}


async def probe(communicator, message, device: int) -> str | None:
    """Send one probe; what went wrong, if anything (the socket may answer, or not)."""
    frame = {"bytes": message} if isinstance(message, bytes) else {"text": message.format(device=device)}
    try:
        await communicator.send_input({"type": "websocket.receive", **frame})
        while not await communicator.receive_nothing(timeout=0.1):
            answer = await communicator.receive_output(timeout=1)
            if answer["type"] == "websocket.close":
                return f"closed the socket ({answer.get('code')})"
        if communicator.future.done():
            communicator.future.result()  # raises what the consumer died of
            return "the consumer stopped"
    except Exception as exc:  # the consumer crashed: what a 500 is to a page
        return f"crashed: {type(exc).__name__}: {exc}"
    return None


async def check_socket(path: str, decision, role: str, headers: list, device: int) -> list[str]:
    from asgiref.sync import sync_to_async

    from tests.support.websockets import connect

    communicator, connected, _ = await connect(path, headers)
    if not connected:
        return [f"{path} as {role}: refused before the handshake (a browser sees only 1006)"]
    if role not in decision.connect:
        expected = decision.closes_with or (4401 if role in NOT_SIGNED_IN else 4403)
        if await communicator.receive_nothing(timeout=2, interval=0.02):
            await communicator.disconnect()
            return [f"{path} as {role}: stayed open, expected closed with {expected}"]
        message = await communicator.receive_output()
        got = message.get("code") if message["type"] == "websocket.close" else message
        return [] if got == expected else [f"{path} as {role}: {got}, expected closed with {expected}"]
    if not await communicator.receive_nothing(timeout=0.2):
        return [f"{path} as {role}: {await communicator.receive_output()}, expected an open socket"]
    wrong = []
    before = await sync_to_async(rows_written)()
    for message in SOCKET_PROBES:
        if problem := await probe(communicator, message, device):
            wrong.append(f"{path} as {role}, sent {message!r}: {problem}")
            break
    if (after := await sync_to_async(rows_written)()) != before:
        wrong.append(f"{path} as {role}: the probes wrote rows ({before} -> {after}); no socket acts yet")
    if not wrong:  # a crashed consumer has nothing left to disconnect
        await communicator.disconnect()
    return wrong


@pytest.mark.slow  # every socket x role with probes, seconds of waiting for closes
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("close_thread_connections")
async def test_websocket_matrix(socket_world):
    objects, users = socket_world["objects"], socket_world["users"]
    headers = {role: await socket_headers(role, users) for role in ROLES}
    wrong = []
    for route in websocket_urlpatterns:
        pattern = str(route.pattern)
        decision = SOCKET_DECISIONS.get(pattern)
        if decision is None:
            wrong.append(missing_decision_message([f"websocket {pattern!r}"]))
            continue
        for role in ROLES:
            wrong += await check_socket(socket_path(pattern, objects), decision, role, headers[role], objects["device"])
    assert not wrong, f"{len(wrong)} sockets differ from tests/support/authorization.py:\n" + "\n".join(wrong)
