"""The Celery app: every periodic task on the beat schedule is a task the apps' tasks modules
register, expiring just under its interval, and the fleet is polled at POLL_INTERVAL."""

from dashboard.celery import app, declare_beat_schedule


def test_every_scheduled_task_is_registered_and_expires_before_its_next_run():
    app.loader.import_default_modules()  # what a worker does at its start: the apps' tasks found
    registered = app.tasks  # and the app finalised, which declares the schedule
    schedule = app.conf.beat_schedule
    assert {"poll-fleet", "flush-samples", "prune-traces"} <= set(schedule)
    for name, entry in schedule.items():
        assert entry["task"] in registered, name
        assert 0 < entry["options"]["expires"] < entry["schedule"], name


def test_the_fleet_is_polled_at_the_poll_interval(settings):
    original = settings.POLL_INTERVAL
    settings.POLL_INTERVAL = 7.0
    try:
        declare_beat_schedule(app)
        assert app.conf.beat_schedule["poll-fleet"]["schedule"] == 7.0
        assert app.conf.beat_schedule["poll-fleet"]["options"]["expires"] == 7.0 * 0.9
    finally:
        settings.POLL_INTERVAL = original
        declare_beat_schedule(app)
