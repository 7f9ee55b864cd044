"""Asicmon settings: one file, every knob from the environment, with sane defaults.

A bad value fails loudly at start-up with ImproperlyConfigured rather than being
guessed at. The README has the table of variables.
"""

import os
import socket
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from dashboard.env import (
    env_bool,
    env_exporters,
    env_float,
    env_host_name,
    env_int,
    env_json_object,
    env_list,
    env_networks,
    env_paths,
    env_rate,
    env_str,
    secret_key_file,
)
from dashboard.redaction import logging_config, redact_url
from emulator.config import DEFAULT_TYPES

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ASICMON_VAR_DIR", BASE_DIR / "var"))


# Development mode (debug pages that show settings) is an explicit choice: DEBUG=true.
DEBUG = env_bool("DEBUG", False)
# SECRET_KEY from the environment in production; otherwise one generated once under var/.
SECRET_KEY = os.environ.get("SECRET_KEY") or secret_key_file(VAR_DIR / "secret_key")

# HTTPS: HTTPS=true (the site is served over TLS, directly or behind a proxy) switches on
# redirects, secure cookies and HSTS; each can also be set on its own.
HTTPS = env_bool("HTTPS", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", HTTPS)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", HTTPS)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", HTTPS)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", HTTPS)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", HTTPS)
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto (only then: it is trusted).
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Failed sign-ins: this many per user name and address lock that pair out for a while.
SIGNIN_MAX_FAILURES = env_int("SIGNIN_MAX_FAILURES", 5, minimum=1)
SIGNIN_LOCKOUT_SECONDS = env_int("SIGNIN_LOCKOUT_SECONDS", 900, minimum=1)
AUTHENTICATION_BACKENDS = ["dashboard.signin.ThrottledModelBackend"]
# Proxies whose X-Forwarded-For is believed (addresses or networks, "127.0.0.1,10.0.0.0/8"):
# a request from one of them counts against the client it names, not the proxy. Empty: the
# connection's own address, whatever the headers say.
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES")
# The OpenAPI schema and its docs page need sign-in unless this publishes them.
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", False)
# API calls (DRF views) per signed-in user, and per client address for calls nobody signed in
# for, across every web process (counted in Redis): past the rate, 429 with
# Retry-After (dashboard/throttles.py). "<count>/<s|min|hour|day>", or off.
API_THROTTLE_USER = env_rate("API_THROTTLE_USER", "1200/min")
API_THROTTLE_ANON = env_rate("API_THROTTLE_ANON", "120/min")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "dashboard",
    "fleet",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "dashboard.middleware.RequestGuardMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

# Longer query strings get 414 (no parameter of the pages or the API needs more).
MAX_QUERY_STRING = env_int("MAX_QUERY_STRING", 4096, minimum=256)

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: SQLite file by default, PostgreSQL when DATABASE_URL says so. ---
DEFAULT_SQLITE_PATH = VAR_DIR / "db.sqlite3"
DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{DEFAULT_SQLITE_PATH}")
try:
    _default_db = dj_database_url.parse(DATABASE_URL)
except (ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL={redact_url(DATABASE_URL)!r} is not a database URL: {exc}") from None
# Connections per process on PostgreSQL: a bounded psycopg pool. Under ASGI every request
# runs on its own thread, and persistent per-thread connections add up until the server
# refuses clients; a pool caps each process at DB_POOL_MAX_SIZE and makes a request wait
# (at most DB_POOL_TIMEOUT seconds) for a free connection instead.
DB_POOL_MIN_SIZE = env_int("DB_POOL_MIN_SIZE", 1, minimum=0)
DB_POOL_MAX_SIZE = env_int("DB_POOL_MAX_SIZE", 8, minimum=1)
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1)
if DB_POOL_MIN_SIZE > DB_POOL_MAX_SIZE:
    raise ImproperlyConfigured(f"DB_POOL_MIN_SIZE={DB_POOL_MIN_SIZE} exceeds DB_POOL_MAX_SIZE={DB_POOL_MAX_SIZE}")
if _default_db["ENGINE"] == "django.db.backends.postgresql":
    _default_db["CONN_MAX_AGE"] = 0  # the pool keeps connections; Django must not
    _default_db.setdefault("OPTIONS", {})["pool"] = {
        "min_size": DB_POOL_MIN_SIZE,
        "max_size": DB_POOL_MAX_SIZE,
        "timeout": DB_POOL_TIMEOUT,
        "max_idle": 300,
    }
if _default_db["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (web, worker, beat) share the file: WAL, a busy timeout and
    # IMMEDIATE transactions keep writers from failing with "database is locked".
    _default_db["CONN_MAX_AGE"] = 0
    _default_db["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests run Daphne and Celery in separate processes: they need a file, not :memory:.
    _default_db["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
DATABASES = {"default": _default_db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, channel layer and the snapshot cache. ---
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
REDIS_KEY_PREFIX = env_str("REDIS_KEY_PREFIX", "asicmon")

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": f"{REDIS_KEY_PREFIX}:ws",
            "capacity": 500,
            "expiry": 30,
        },
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"{REDIS_KEY_PREFIX}:cache",
    }
}

# --- Celery (read by dashboard/celery.py with the CELERY_ namespace). ---
POLL_INTERVAL = env_float("POLL_INTERVAL", 5.0, minimum=0.5)
POLL_SHARDS = env_int("POLL_SHARDS", 2, minimum=1)
PROBE_TIMEOUT = env_float("PROBE_TIMEOUT", 0.5, minimum=0.01)
# Hosts of a shard polled side by side, so that hung devices on many hosts cost a shard
# about one PROBE_TIMEOUT per cycle rather than one per host.
POLL_HOST_THREADS = env_int("POLL_HOST_THREADS", 32, minimum=1)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "asicmon")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
# A task is acknowledged only once it has run: a worker killed mid-cycle leaves its
# shard to be redelivered, and the idempotent writes make the repeat harmless.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# On Redis, a task taken by a worker that dies whole comes back only after this many
# seconds; RabbitMQ (amqp://) gives it back as soon as the worker's connection drops.
BROKER_VISIBILITY_TIMEOUT = env_int("BROKER_VISIBILITY_TIMEOUT", 300, minimum=1)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {"visibility_timeout": BROKER_VISIBILITY_TIMEOUT} if CELERY_BROKER_URL.startswith(("redis", "rediss")) else {}
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- The emulated fleet. ---
FLEET_SEED = env_int("FLEET_SEED", 42)
# 0 runs a stack with no emulated fleet (only hosts with an agent; see fleet/agent).
FLEET_HOSTS = env_int("FLEET_HOSTS", 4, minimum=0)
FLEET_DEVICES_PER_HOST = env_int("FLEET_DEVICES_PER_HOST", 8, minimum=1)
FLEET_TYPES = tuple(env_list("FLEET_TYPES", list(DEFAULT_TYPES)))
EMULATOR_STATE_DIR = Path(env_str("EMULATOR_STATE_DIR", str(VAR_DIR / "emulator")))
# Where emulated hosts keep their state: "file" (under EMULATOR_STATE_DIR, a folder every
# poll worker, trace worker and web process must share) or "redis" (the stack's Redis, for
# roles on machines that share no disk; see docs/deploy.md).
EMULATOR_STATE = env_str("EMULATOR_STATE", "file").strip().lower()
if EMULATOR_STATE not in ("file", "redis"):
    raise ImproperlyConfigured(f"EMULATOR_STATE={EMULATOR_STATE!r} is neither file nor redis")
# --- Host agents (fleet/agent): workers on machines with real accelerators. ---
AGENT_HOST = env_host_name("AGENT_HOST", socket.gethostname())
HWMON_ROOT = Path(env_str("HWMON_ROOT", "/sys/class/hwmon"))
ASIMOV_SPEC_DIRS = env_paths("ASIMOV_SPEC_DIRS")
AGENT_REDISCOVER_S = env_float("AGENT_REDISCOVER_S", 60.0, minimum=1.0)  # s between looks for devices
EXPORTER_URLS = env_exporters("EXPORTER_URLS")  # dcgm-/AMD exporters polled as hosts (README)
OTLP_METRICS_ENDPOINT = env_str("OTLP_METRICS_ENDPOINT", "")  # samples out as OTLP hw.gpu.* (README)
# How long an emulated device's reboot takes it away (short in tests).
EMULATOR_REBOOT_S = env_float("EMULATOR_REBOOT_S", 60.0, minimum=0.1)

# --- Health and remediation (fleet/health/detection.py holds the rules' thresholds). ---
REMEDIATION_DRY_RUN = env_bool("REMEDIATION_DRY_RUN", False)  # record what automation would do, do nothing
# The brake: devices automation may have in remediation at once, fleet-wide and per host.
REMEDIATION_MAX_ACTIVE = env_int("REMEDIATION_MAX_ACTIVE", 3)
REMEDIATION_MAX_PER_HOST = env_int("REMEDIATION_MAX_PER_HOST", 1)
REMEDIATION_PAUSE_CRITICAL = env_int("REMEDIATION_PAUSE_CRITICAL", 8, minimum=1)  # critical at once: pause
# A device rebooted this many times within the window goes to repair instead.
REMEDIATION_MAX_REBOOTS = env_int("REMEDIATION_MAX_REBOOTS", 2, minimum=1)
REMEDIATION_REBOOT_WINDOW_S = env_float("REMEDIATION_REBOOT_WINDOW_S", 3600.0, minimum=1.0)
# A rebooted device not healthy again within this many seconds goes to repair.
REMEDIATION_REBOOT_TIMEOUT_S = env_float("REMEDIATION_REBOOT_TIMEOUT_S", 180.0, minimum=1.0)

# --- Driver errors and the repair ladder (fleet/driver_errors, docs/health.md). ---
# Identical error events within a bucket of this many seconds are one event with a count.
DRIVER_ERROR_BUCKET_S = env_float("DRIVER_ERROR_BUCKET_S", 300.0, minimum=1.0)
# Stored driver errors are kept this many days after first seen (an hourly task prunes).
DRIVER_ERROR_RETENTION_DAYS = env_int("DRIVER_ERROR_RETENTION_DAYS", 180, minimum=1)
# Where a host agent reads Xid/SXid/amdgpu lines: /dev/kmsg, or a file (tests). Empty: not read.
AGENT_KERNEL_LOG = env_str("AGENT_KERNEL_LOG", "/dev/kmsg")
# Where a host agent keeps what its error sources had read (the kernel log's position, the
# RAS counters' last readings: error-sources.json), so that a restarted agent resumes there.
AGENT_STATE_DIR = Path(env_str("AGENT_STATE_DIR", str(VAR_DIR / "agent")))
# The share of a core the kernel-log follower (a child at the lowest priority) may be busy
# catching up with a flood (1: no pause); below 1 it pauses between chunks.
AGENT_KERNEL_LOG_DUTY = min(1.0, env_float("AGENT_KERNEL_LOG_DUTY", 0.5, minimum=0.05))
# Kineto's daemon protocol served by the agent (docs/capture.md): "off", "abstract" (@dynolog,
# libkineto's default) or the socket's folder, the jobs' KINETO_IPC_SOCKET_DIR.
AGENT_KINETO = env_str("AGENT_KINETO", os.environ.get("KINETO_IPC_SOCKET_DIR", "") or "abstract")
# The workload label an agent gives its devices (empty: the API's); the blast radius counts by it.
AGENT_WORKLOAD = env_str("AGENT_WORKLOAD", "")
# The workload manager kept in step with the devices' states (fleet/scheduler; docs/schedulers.md).
SCHEDULER = env_str("SCHEDULER", "").strip().lower()
if SCHEDULER not in ("", "slurm"):
    raise ImproperlyConfigured(f"SCHEDULER={SCHEDULER!r} is neither empty nor slurm (Kubernetes: docs/schedulers.md)")
SLURM_CONF = env_str("SLURM_CONF", "")
SCHEDULER_REQUEUE = env_bool("SCHEDULER_REQUEUE", False)  # requeue a job on a GPU being rebooted
ALERTMANAGER_URL = env_str("ALERTMANAGER_URL", "")  # where alerts go (fleet/alerts); empty: none sent
# The ladder's rungs on a host with an agent: the commands that restart the device's
# application and reboot the machine (run by the agent as an argument list, no shell, in an
# environment of PATH, LANG, ASICMON_RUNG, ASICMON_DEVICE_SERIAL, ASICMON_HOST and
# ASICMON_WORKLOAD only; exit 0 is done), each within AGENT_RUNG_TIMEOUT_S. Empty: the rung
# is not configured there and the ladder skips it.
AGENT_RESTART_APP_COMMAND = env_str("AGENT_RESTART_APP_COMMAND", "")
AGENT_REBOOT_COMMAND = env_str("AGENT_REBOOT_COMMAND", "")
AGENT_RUNG_TIMEOUT_S = env_float("AGENT_RUNG_TIMEOUT_S", 120.0, minimum=1.0)
# The attempt budget: repairs per device and cause within the window (the first counts);
# past it the device goes out of service for inspection.
LADDER_MAX_ATTEMPTS = env_int("LADDER_MAX_ATTEMPTS", 3, minimum=1)
LADDER_WINDOW_S = env_float("LADDER_WINDOW_S", 86400.0, minimum=1.0)
# Seconds a repaired device has to pass its validation check before it counts as failed.
LADDER_CHECK_TIMEOUT_S = env_float("LADDER_CHECK_TIMEOUT_S", 300.0, minimum=1.0)
# Seconds a running diagnostic (the spec's `diagnose` command) may take, start to end, before
# it is stopped and the check counts as failed.
LADDER_DIAGNOSTIC_TIMEOUT_S = env_float("LADDER_DIAGNOSTIC_TIMEOUT_S", 900.0, minimum=1.0)
# The blast radius: devices of one workload automation may have under repair at once.
LADDER_MAX_PER_WORKLOAD = env_int("LADDER_MAX_PER_WORKLOAD", 1, minimum=1)
# The breaker: automation pauses when more than this share of the fleet, and at least
# LADDER_BREAKER_MIN_DEVICES devices, went under repair within LADDER_BREAKER_WINDOW_S.
LADDER_BREAKER_SHARE = env_float("LADDER_BREAKER_SHARE", 0.1, minimum=0.0)
LADDER_BREAKER_MIN_DEVICES = env_int("LADDER_BREAKER_MIN_DEVICES", 3, minimum=1)
LADDER_BREAKER_WINDOW_S = env_float("LADDER_BREAKER_WINDOW_S", 600.0, minimum=1.0)
# Repeat offenders: a device with this many hardware incidents within the window is
# recommended for pulling, whatever its repairs said.
OFFENDER_HARDWARE_INCIDENTS = env_int("OFFENDER_HARDWARE_INCIDENTS", 3, minimum=1)
OFFENDER_WINDOW_S = env_float("OFFENDER_WINDOW_S", 30 * 86400.0, minimum=1.0)
# Errors of a device less than this many seconds apart are one incident (a 48 and its 63).
OFFENDER_INCIDENT_GAP_S = env_float("OFFENDER_INCIDENT_GAP_S", 120.0, minimum=0.0)
# Thresholds of the health rules changed for every device type, as a JSON object of
# fleet.health.detection.Limits fields, e.g. {"leak_critical_s": 600}; checked when the app starts.
HEALTH_LIMITS = env_json_object("HEALTH_LIMITS")
# A device doing much less work than its utilization says (the slow_work rule) gets a short
# trace captured by itself, at most once an hour per device and AUTOCAPTURE_MAX_PER_HOUR
# fleet-wide; 0 turns it off.
AUTOCAPTURE_DURATION_S = env_float("AUTOCAPTURE_DURATION_S", 3.0, minimum=1.0)
AUTOCAPTURE_MAX_PER_HOUR = env_int("AUTOCAPTURE_MAX_PER_HOUR", 6)
# Bearer token Prometheus sends to /metrics; empty turns /metrics off.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")

# --- The time-series store (fleet/tsdb): samples go to a Prometheus-compatible store. ---
# Read base URL (PromQL: /api/v1/query_range, /api/v1/query): VictoriaMetrics by default,
# a vmselect (http://host:8481/select/0/prometheus) or a Prometheus.
TSDB_URL = env_str("TSDB_URL", "http://127.0.0.1:8428").rstrip("/")
# Write base URL (Prometheus remote write, /api/v1/write appended unless it ends in
# /api/v1/write or /api/v1/push): the read URL by default, or a vminsert
# (http://host:8480/insert/0/prometheus), a Prometheus with --web.enable-remote-write-receiver.
TSDB_WRITE_URL = env_str("TSDB_WRITE_URL", "").rstrip("/") or TSDB_URL
TSDB_READ_TIMEOUT_S = env_float("TSDB_READ_TIMEOUT_S", 10.0, minimum=0.1)
TSDB_WRITE_TIMEOUT_S = env_float("TSDB_WRITE_TIMEOUT_S", 2.0, minimum=0.1)
# Where a poll's samples wait while the store is down or slow (fleet/tsdb/buffer.py), and how
# large that spool may grow before its oldest batches are dropped (and said so).
TSDB_BUFFER_DIR = Path(env_str("TSDB_BUFFER_DIR", str(VAR_DIR / "tsdb-buffer")))
TSDB_BUFFER_MAX_MB = env_int("TSDB_BUFFER_MAX_MB", 512, minimum=1)
# Seconds a poll (or the flush task) may spend writing waiting batches to the store.
TSDB_FLUSH_BUDGET_S = env_float("TSDB_FLUSH_BUDGET_S", 1.0, minimum=0.1)
# Also write the dcgm-exporter names (DCGM_FI_DEV_*) of GPU-type devices.
TSDB_DCGM_SERIES = env_bool("TSDB_DCGM_SERIES", True)
# Extra labels on every written series and in every selector read, "name=value,name=value":
# lets installations share one store (and tests keep to their own series).
# Checked when the app starts (fleet/apps.py).
TSDB_LABELS = env_str("TSDB_LABELS", "")
# Days of samples the store keeps (its -retentionPeriod, set by `make run`).
SAMPLE_RETENTION_DAYS = env_int("SAMPLE_RETENTION_DAYS", 30, minimum=1)

# Migration 0009 drops the samples tables PostgreSQL kept before the store; it refuses while
# they hold rows `manage.py export_samples` has not copied to the store, unless this is set
# (docs/deploy.md, "Moving history out of PostgreSQL").
ASICMON_DROP_SAMPLES = env_bool("ASICMON_DROP_SAMPLES", False)

# --- Traces. ---
TRACE_STORAGE_MAX_GB = env_float("TRACE_STORAGE_MAX_GB", 20.0, minimum=0.001)
TRACE_RETENTION_DAYS = env_int("TRACE_RETENTION_DAYS", 30, minimum=1)
TRACE_UPLOAD_MAX_MB = env_int("TRACE_UPLOAD_MAX_MB", 8192, minimum=1)
# Largest request body of any other route (the web process refuses more before storing it).
WEB_BODY_MAX_MB = env_int("WEB_BODY_MAX_MB", 32, minimum=1)
# A chunk of a resumable upload (/api/uploads/) may be at most this large.
TRACE_UPLOAD_CHUNK_MB = env_int("TRACE_UPLOAD_CHUNK_MB", 16, minimum=1)
# Upload bodies one web process receives at once (plain POSTs and chunks); more get 429.
TRACE_UPLOADS_MAX_ACTIVE = env_int("TRACE_UPLOADS_MAX_ACTIVE", 4, minimum=1)
# Resumable uploads not touched for this many hours are deleted (with what they received).
TRACE_UPLOAD_IDLE_HOURS = env_int("TRACE_UPLOAD_IDLE_HOURS", 24, minimum=1)
# A worker refuses to parse a trace that decompresses to more than this (the trace fails).
TRACE_PARSE_MAX_MB = env_int("TRACE_PARSE_MAX_MB", 8192, minimum=1)
# A capture keeps whole iterations up to this many events and says how many it dropped.
TRACE_CAPTURE_MAX_EVENTS = env_int("TRACE_CAPTURE_MAX_EVENTS", 1_000_000, minimum=1000)
# Seconds an analysis may take before it is stopped and the trace fails.
TRACE_ANALYSIS_TIMEOUT_S = env_int("TRACE_ANALYSIS_TIMEOUT_S", 600, minimum=10)
# Seconds a trace may wait in the queue before it fails (no trace worker running?).
TRACE_QUEUE_TIMEOUT_S = env_int("TRACE_QUEUE_TIMEOUT_S", 900, minimum=10)
TRACE_WORKER_CONCURRENCY = env_int("TRACE_WORKER_CONCURRENCY", 3, minimum=1)
# Distributed jobs: at most this many ranks, and this many events kept per captured rank.
JOB_MAX_RANKS = env_int("JOB_MAX_RANKS", 256, minimum=1)
JOB_RANK_MAX_EVENTS = env_int("JOB_RANK_MAX_EVENTS", 250_000, minimum=1000)
# A job whose ranks are sent one at a time waits this long for them by default (a request
# may say otherwise), then is combined with the ranks it has.
JOB_RANKS_WAIT_S = env_int("JOB_RANKS_WAIT_S", 3600, minimum=10)
# A real job captured by iterations starts on every rank at the next multiple of this many.
JOB_ITERATION_ROUNDUP = env_int("JOB_ITERATION_ROUNDUP", 100, minimum=1)
# The cross-rank step waits up to this long for the time-series store to hold the capture
# window's last poll; a job whose reasons were computed without it has them computed again
# this many seconds later (up to JOB_HEALTH_RECHECKS times).
JOB_HEALTH_WAIT_S = env_float("JOB_HEALTH_WAIT_S", 10.0, minimum=0.0)
JOB_HEALTH_RECHECK_S = env_float("JOB_HEALTH_RECHECK_S", 30.0, minimum=1.0)
JOB_HEALTH_RECHECKS = env_int("JOB_HEALTH_RECHECKS", 3, minimum=0)

# --- Request spans (OTLP/HTTP in, traces/requests/). ---
# Bearer token services send to POST /v1/traces; empty turns the receiver off.
OTLP_TOKEN = env_str("OTLP_TOKEN", "")
# Largest OTLP body, as sent and once inflated (HTTP 413 beyond).
OTLP_MAX_BODY_MB = env_float("OTLP_MAX_BODY_MB", 16.0, minimum=0.001)
# OTLP bodies over 1 MB one web process receives at once (more get 429 with Retry-After);
# smaller ones are not counted. Apart from TRACE_UPLOADS_MAX_ACTIVE: uploads never hold spans back.
OTLP_MAX_ACTIVE = env_int("OTLP_MAX_ACTIVE", 8, minimum=1)
# Spans not attached to a trace are kept this long.
SPAN_RETENTION_HOURS = env_float("SPAN_RETENTION_HOURS", 24.0, minimum=0.01)
# Largest OTLP JSON spans file uploaded beside a trace (HTTP 413 beyond).
SPAN_UPLOAD_MAX_MB = env_float("SPAN_UPLOAD_MAX_MB", 256.0, minimum=0.001)
# Emulated device types that serve requests (an inference service) while a trace is captured;
# their spans go to EMULATOR_OTLP_ENDPOINT when OTLP_TOKEN is set, else straight beside the trace.
EMULATOR_SERVING_TYPES = tuple(env_list("EMULATOR_SERVING_TYPES", ["inference"]))
EMULATOR_OTLP_ENDPOINT = env_str(
    "EMULATOR_OTLP_ENDPOINT",
    f"http://{env_str('WEB_HOST', '127.0.0.1')}:{env_str('WEB_PORT', '8000')}/v1/traces",
)

# --- Auth, REST API. ---
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "fleet:fleet"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    # Token first so that an anonymous call gets 401 with a WWW-Authenticate header.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        # Last: counts the calls that no credentials signed in for, per address (429 past
        # API_THROTTLE_ANON), before a permission check answers 401.
        "dashboard.throttles.AnonymousAddressRate",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["dashboard.throttles.UserRate"],
    "DEFAULT_PERMISSION_CLASSES": ["fleet.api.permissions.CanViewFleet"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "fleet.api.pagination.BoundedLimitOffsetPagination",
    "PAGE_SIZE": 100,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Asicmon API",
    "DESCRIPTION": "Fleet, devices, time series and traces of AI accelerators.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "fleet.api.schema.declare_errors",
    ],
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Raw traces and their analysis results go through the "traces" storage: a folder under
# var/ by default (TRACE_STORAGE_DIR), or an S3-compatible object store with
# TRACE_STORAGE=s3://bucket/prefix (endpoint, region and credentials: the AWS_* variables).
TRACE_STORAGE_DIR = Path(env_str("TRACE_STORAGE_DIR", str(VAR_DIR / "traces")))
TRACE_STORAGE = env_str("TRACE_STORAGE", "").strip()
# Flush each result to the disk before it is renamed into place (traces/store/files.py), so a
# power cut leaves the old file or the new one whole; off, a rename still keeps readers from
# half-written files (the test settings turn it off: ~7 ms a file on a busy disk).
TRACE_STORAGE_FSYNC = env_bool("TRACE_STORAGE_FSYNC", True)
AWS_S3_ENDPOINT_URL = env_str("AWS_S3_ENDPOINT_URL", "") or env_str("AWS_ENDPOINT_URL_S3", "") or env_str("AWS_ENDPOINT_URL", "")
AWS_S3_REGION_NAME = env_str("AWS_S3_REGION_NAME", "") or env_str("AWS_REGION", "") or env_str("AWS_DEFAULT_REGION", "")
TRACE_S3_PART_MB = env_int("TRACE_S3_PART_MB", 8, minimum=5)  # S3's smallest part but the last
TRACE_S3_PARTS_IN_FLIGHT = env_int("TRACE_S3_PARTS_IN_FLIGHT", 2, minimum=1)
# Downloads (the Chrome export) larger than this redirect to a presigned URL of the object store.
TRACE_S3_REDIRECT_MB = env_int("TRACE_S3_REDIRECT_MB", 8)
# The local copies of page analyses that a web process keeps of an object store's traces.
TRACE_CACHE_MAX_MB = env_int("TRACE_CACHE_MAX_MB", 512, minimum=1)


def trace_storage(url: str) -> dict:
    """The "traces" storage: the local folder, or the bucket and prefix of an s3:// URL."""
    if not url:
        return {
            "BACKEND": env_str("TRACE_STORAGE_BACKEND", "django.core.files.storage.FileSystemStorage"),
            "OPTIONS": {"location": str(TRACE_STORAGE_DIR)},
        }
    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    if scheme != "s3" or not bucket:
        raise ImproperlyConfigured(f"TRACE_STORAGE={url!r} is not s3://bucket or s3://bucket/prefix")
    options = {"bucket_name": bucket, "location": prefix.strip("/"), "part_mb": TRACE_S3_PART_MB,
               "parts_in_flight": TRACE_S3_PARTS_IN_FLIGHT, "querystring_expire": 600}
    options.update({k: v for k, v in [("endpoint_url", AWS_S3_ENDPOINT_URL), ("region_name", AWS_S3_REGION_NAME)] if v})
    return {"BACKEND": "traces.store.object_store.TraceObjectStorage", "OPTIONS": options}


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
    "traces": trace_storage(TRACE_STORAGE),
}
WHITENOISE_USE_FINDERS = True
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "media/"

LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
# Error pages (DEBUG) and reports mask URLs' passwords in settings and variables too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "dashboard.reporting.RedactingExceptionReporterFilter"
LOGGING = logging_config(LOG_LEVEL)
