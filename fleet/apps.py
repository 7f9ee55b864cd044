from django.apps import AppConfig
from django.db.models.signals import post_migrate


class FleetConfig(AppConfig):
    name = "fleet"
    verbose_name = "Fleet"

    def ready(self):
        from fleet.roles import ensure_roles
        from fleet.samples import mirror_catalogue

        post_migrate.connect(ensure_roles, sender=self)
        post_migrate.connect(mirror_catalogue, sender=self)
