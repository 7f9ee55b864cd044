from django.apps import AppConfig, apps
from django.conf import settings
from django.db.models.signals import post_migrate


class FleetAppConfig(AppConfig):
    name = "fleet"
    verbose_name = "Fleet"

    def ready(self):
        from fleet.health import check_limit_overrides
        from fleet.roles import ensure_roles
        from fleet.samples import mirror_catalogue

        check_limit_overrides(settings.HEALTH_LIMITS)

        # Roles name permissions of fleet and traces: create them once both apps have theirs.
        post_migrate.connect(ensure_roles, sender=apps.get_app_config("traces"))
        post_migrate.connect(mirror_catalogue, sender=self)
