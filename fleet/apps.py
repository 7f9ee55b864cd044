from django.apps import AppConfig, apps
from django.conf import settings
from django.db.models.signals import post_migrate


def check_tsdb_labels(text: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from fleet.tsdb.series import parse_labels

    try:
        parse_labels(text)
    except ValueError as exc:
        raise ImproperlyConfigured(f"TSDB_LABELS={text!r}: {exc}") from None


class FleetAppConfig(AppConfig):
    name = "fleet"
    verbose_name = "Fleet"

    def ready(self):
        from fleet.health.detection import check_limit_overrides
        from fleet.polling.counter_catalogue import mirror_catalogue
        from fleet.roles import ensure_roles

        check_limit_overrides(settings.HEALTH_LIMITS)
        check_tsdb_labels(settings.TSDB_LABELS)

        # Roles name permissions of fleet and traces: create them once both apps have theirs.
        post_migrate.connect(ensure_roles, sender=apps.get_app_config("traces"))
        post_migrate.connect(mirror_catalogue, sender=self)
