"""Who may do what: ONE table of decisions for every page, API route and websocket.

tests/scenarios/test_authorization.py walks the URL configuration (dashboard/urls.py) and
the websocket routes (dashboard/routing.py) and checks each route, with every method, as
each role of ROLES against the decision declared here. A route without a decision fails
that test: add a row below.

A row, keyed by the route's URL name (``namespace:name`` where there is one; a websocket by
its path pattern), says who may read it (GET, HEAD, OPTIONS) and who may use the methods
that change something (``changes``). What a refusal looks like follows from the kind of
route (``style``, guessed from the view; say it where the guess is wrong):

- "api" (a DRF view): not signed in or a bad token 401, signed in without the permission 403;
- "page" (a Django view): not signed in 302 to the sign-in page, no permission 403;
- "admin" (Django's admin): anyone not staff 302 to the admin's sign-in page (or its index,
  which sends them there), staff without the model's permission 403;
- "bearer" (/metrics): its own token, no user: every role 401.

An allowed request may still be refused for its (empty) body or a missing sample object's
state (400, 409, 415): anything but a refusal, a 404 and a 5xx. A method the route does not
have is 405 for whoever passes its permission check (the others may get their refusal
first). No 5xx anywhere.

A path that names an object gets a real one: `path_arguments` in the test picks it by the
parameter's name and the route's name (a route named "trace-..." with a `pk` gets the
trace); a route naming a new kind of object fails there, saying what to add.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

# The cast (tests/conftest.py): `outsider` is signed in with no role; `bad token` sends
# "Authorization: Token <40 characters no token has>"; `admin` is a superuser (staff).
ROLES = ("anonymous", "bad token", "outsider", "viewer", "operator", "admin")
NOT_SIGNED_IN = frozenset({"anonymous", "bad token"})

ANYONE = frozenset(ROLES)
SIGNED_IN = frozenset({"outsider", "viewer", "operator", "admin"})
VIEWERS = frozenset({"viewer", "operator", "admin"})  # fleet.view_device, traces.view_trace
OPERATORS = frozenset({"operator", "admin"})  # fleet.operate_device, traces.capture/upload_trace
STAFF = frozenset({"admin"})
NOBODY = frozenset()

READS = ("GET", "HEAD", "OPTIONS")
HTTP_METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Decision:
    read: frozenset  # who may GET and HEAD it
    change: frozenset = NOBODY  # who may use `changes`
    changes: tuple[str, ...] = ()  # its methods that change something
    why: str = ""
    style: str = ""  # "api", "page", "admin", "bearer"; empty: from the view
    methods: tuple[str, ...] = HTTP_METHODS  # those the matrix tries (the admin's: GET and POST)
    fresh: bool = False  # a change may use up the object its path names: a new one per request


def page(read, why="", **kw) -> Decision:
    return Decision(read=read, why=why, style="page", **kw)


def api(read, change=NOBODY, changes=(), why="", **kw) -> Decision:
    return Decision(read=read, change=change, changes=changes, why=why, style="api", **kw)


ADMIN = Decision(read=STAFF, change=STAFF, changes=("POST",), style="admin", methods=("GET", "POST"),
                 why="Django's admin: staff only")

# Route name -> decision. "ns:*" decides every route of a namespace not named on its own.
HTTP_DECISIONS: dict[str, Decision] = {
    # -- Pages -------------------------------------------------------------------------------
    "fleet:fleet": page(VIEWERS),
    "fleet:fleet-table": page(VIEWERS),
    "fleet:device": page(VIEWERS),
    "fleet:host": page(VIEWERS),
    "traces:catalogue": page(VIEWERS),
    "traces:upload": page(OPERATORS, why="the upload form: traces.upload_trace"),
    "traces:compare": page(VIEWERS),
    "traces:versions": page(VIEWERS),
    "traces:detail": page(VIEWERS),
    "traces:jobs": page(VIEWERS),
    "traces:job": page(VIEWERS),
    # -- Signing in and out ------------------------------------------------------------------
    "login": page(ANYONE, change=ANYONE, changes=("POST",), why="the sign-in form"),
    "logout": page(NOBODY, change=ANYONE, changes=("POST",), why="signing out is a POST (Django 5)"),
    "rest_framework:login": page(ANYONE, change=ANYONE, changes=("POST", "PUT"),
                                 why="the browsable API's sign-in (Django's LoginView takes a PUT for a POST)"),
    "rest_framework:logout": page(NOBODY, change=ANYONE, changes=("POST",)),
    # -- Prometheus --------------------------------------------------------------------------
    "fleet:metrics": Decision(read=NOBODY, style="bearer", why="METRICS_TOKEN as a bearer token, no user"),
    "otlp-traces": Decision(read=NOBODY, style="bearer", why="OTLP spans in: OTLP_TOKEN as a bearer token, no user"),
    "traces:requests": page(VIEWERS),
    "fleet:offenders": page(VIEWERS),
    "fleet:replay": page(VIEWERS, change=VIEWERS, changes=("POST",),
                         why="a replay of a fault history changes no device and captures nothing: any viewer may run one"),
    "fleet:replay-status": page(VIEWERS),
    "favicon.ico": page(ANYONE, why="the icon: a redirect to a static file"),
    "driver-error-list": api(VIEWERS),
    "driver-error-detail": api(VIEWERS),
    "driver-error-offenders": api(VIEWERS),
    "device-workload": api(NOBODY, OPERATORS, ("PUT",), why="label the workload a device serves: fleet.operate_device"),
    "traces:request": page(VIEWERS),
    # -- API: the fleet ----------------------------------------------------------------------
    "api-root": api(VIEWERS),
    "host-list": api(VIEWERS),
    "host-detail": api(VIEWERS),
    "device-list": api(VIEWERS),
    "device-detail": api(VIEWERS),
    "device-samples": api(VIEWERS),
    "counter-list": api(VIEWERS),
    "counter-detail": api(VIEWERS),
    "health-event-list": api(VIEWERS),
    "health-event-detail": api(VIEWERS),
    "action-list": api(VIEWERS),
    "action-detail": api(VIEWERS),
    "capacity": api(VIEWERS),
    "device-actions": api(NOBODY, OPERATORS, ("POST",), why="reboot, drain, repair...: fleet.operate_device"),
    "automation": api(VIEWERS, OPERATORS, ("POST",), why="pause or resume automation: fleet.operate_device"),
    # -- API: traces and jobs ----------------------------------------------------------------
    "trace-list": api(VIEWERS, OPERATORS, ("POST",), why="an upload: traces.upload_trace"),
    "trace-detail": api(VIEWERS),
    "trace-breakdown": api(VIEWERS),
    "trace-download": api(VIEWERS),
    "trace-instances": api(VIEWERS),
    "trace-compare": api(VIEWERS),
    "trace-versions": api(VIEWERS),
    "trace-findings": api(VIEWERS),
    "trace-flame": api(VIEWERS),
    "trace-timeline": api(VIEWERS),
    "trace-event": api(VIEWERS),
    "trace-critical-path": api(VIEWERS),
    "trace-correlation": api(VIEWERS),
    "trace-metrics": api(VIEWERS),
    "device-capture": api(NOBODY, OPERATORS, ("POST",), why="a capture: traces.capture_trace"),
    "host-capture": api(NOBODY, OPERATORS, ("POST",), why="a capture of a host's process: traces.capture_trace"),
    "job-list": api(VIEWERS, OPERATORS, ("POST",), why="a job upload: traces.upload_trace"),
    "job-detail": api(VIEWERS),
    "job-report": api(VIEWERS),
    "job-timeline": api(VIEWERS),
    "job-capture": api(NOBODY, OPERATORS, ("POST",), why="a job capture: traces.capture_trace"),
    "trace-spans": api(NOBODY, OPERATORS, ("POST",), why="request spans uploaded beside a trace: traces.upload_trace"),
    "job-spans": api(NOBODY, OPERATORS, ("POST",), why="request spans uploaded beside a job: traces.upload_trace"),
    "job-ranks": api(NOBODY, OPERATORS, ("POST",), why="a rank sent to an open job: traces.upload_trace, and "
                                                        "the job's opener (or a superuser)"),
    "trace-requests": api(VIEWERS),
    "trace-request": api(VIEWERS),
    "upload-list": api(NOBODY, OPERATORS, ("POST",), why="start a resumable upload: traces.upload_trace"),
    "upload-detail": api(OPERATORS, OPERATORS, ("PUT", "DELETE"), fresh=True,
                         why="a resumable upload's state, a chunk, a cancel: its uploader (an admin: any)"),
    "upload-finish": api(NOBODY, OPERATORS, ("POST",), fresh=True, why="confirm an upload's size: its uploader"),
    # -- API schema (API_SCHEMA_PUBLIC=true opens both to anyone) -----------------------------
    "schema": api(SIGNED_IN, why="the API's shape, no data: any signed-in user"),
    "api-docs": page(SIGNED_IN, why="Swagger UI: any signed-in user"),
    # -- Django's admin ----------------------------------------------------------------------
    "admin:*": ADMIN,
    "admin:login": page(ANYONE, change=ANYONE, changes=("POST",), methods=("GET", "POST")),
    "admin:logout": replace(ADMIN, read=NOBODY, why="staff sign out with a POST; others are sent to the index"),
    "admin:password_change_done": replace(ADMIN, change=NOBODY, changes=()),
    "admin:jsi18n": replace(ADMIN, change=NOBODY, changes=()),
    "admin:autocomplete": replace(ADMIN, read=NOBODY, change=NOBODY, changes=(),
                                  why="no model admin has autocomplete fields: every query is refused"),
}


@dataclass(frozen=True)
class SocketDecision:
    """Who keeps a socket open; the others see it accepted, then closed with 4401 (not
    signed in) or 4403 (no permission), or `closes_with` whoever they are.

    No socket takes an action yet (a capture, a device action): they only forward. Every
    role that keeps one open sends it SOCKET_PROBES, actions among them: none may crash the
    consumer, and none may write a row. A socket that comes to act needs its own decision
    for that (who may send which message), and the matrix a check of it."""

    connect: frozenset
    why: str = ""
    closes_with: int | None = None


# Websocket route pattern (dashboard/routing.py and the apps' consumers) -> decision.
SOCKET_DECISIONS: dict[str, SocketDecision] = {
    "ws/fleet/": SocketDecision(VIEWERS, why="the fleet page's live table"),
    "ws/devices/<int:device_id>/": SocketDecision(VIEWERS),
    "ws/traces/<int:trace_id>/": SocketDecision(VIEWERS),
    "ws/jobs/<int:job_id>/": SocketDecision(VIEWERS),
    "": SocketDecision(NOBODY, closes_with=4404, why="any other path"),
}

# What the matrix sends on every open socket ({device} is a real device's id).
SOCKET_PROBES = (
    '{{"type": "subscribe", "devices": [{device}]}}',  # what the fleet page sends
    '{{"type": "reboot", "device": {device}}}',
    '{{"type": "capture", "device": {device}, "duration_s": 1}}',
    '{{"action": "drain", "device": {device}}}',
    "not JSON",
    "[]",
    b"\x00\xff binary",
)


def decision_of(key: str, namespace: str | None) -> Decision | None:
    return HTTP_DECISIONS.get(key) or (HTTP_DECISIONS.get(f"{namespace}:*") if namespace else None)


def missing_decision_message(routes: list[str]) -> str:
    listed = "\n".join(f"    {route}" for route in routes)
    return (
        f"These routes have no authorization decision:\n{listed}\n"
        "Declare who may read and who may change each in tests/support/authorization.py "
        "(HTTP_DECISIONS for a URL name, SOCKET_DECISIONS for a websocket path), e.g.\n"
        '    "my-route": api(VIEWERS, OPERATORS, ("POST",), why="what a POST does: which permission"),\n'
        "then run tests/scenarios/test_authorization.py: it checks the route as every role."
    )
