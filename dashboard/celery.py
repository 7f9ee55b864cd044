"""The Celery app: settings under the CELERY_ namespace, tasks found in the apps."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

app = Celery("asicmon")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def declare_beat_schedule(sender, **kwargs):
    """Every periodic task is declared here, each expiring just under its interval."""
    from django.conf import settings

    interval = settings.POLL_INTERVAL
    sender.conf.beat_schedule = {
        "poll-fleet": {
            "task": "fleet.tasks.poll_fleet",
            "schedule": interval,
            "options": {"expires": interval * 0.9},
        },
        "sync-scheduler": {
            "task": "fleet.tasks.sync_scheduler",
            "schedule": interval,
            "options": {"expires": interval * 0.9},
        },
        "send-alerts": {
            "task": "fleet.tasks.send_alerts",
            "schedule": interval,
            "options": {"expires": interval * 0.9},
        },
        "flush-samples": {
            "task": "fleet.tasks.flush_samples",
            "schedule": 10.0,
            "options": {"expires": 9.0},
        },
        "expire-stuck-traces": {
            "task": "traces.tasks.expire_stuck_traces",
            "schedule": 30.0,
            "options": {"expires": 29.0},
        },
        "attach-request-spans": {
            "task": "traces.tasks.attach_request_spans",
            "schedule": 10.0,
            "options": {"expires": 9.0},
        },
        "prune-request-spans": {
            "task": "traces.tasks.prune_request_spans",
            "schedule": 60.0,
            "options": {"expires": 59.0},
        },
        "prune-driver-errors": {
            "task": "fleet.tasks.prune_driver_errors",
            "schedule": 3600.0,
            "options": {"expires": 3500.0},
        },
        "prune-traces": {
            "task": "traces.tasks.prune_traces",
            "schedule": 3600.0,
            "options": {"expires": 3500.0},
        },
    }
