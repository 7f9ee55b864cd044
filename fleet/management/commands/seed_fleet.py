from django.core.management.base import BaseCommand

from fleet.hosts.emulated_fleet import fleet_config, seed_fleet


class Command(BaseCommand):
    help = "Create the hosts and devices of the emulated fleet (idempotent)."

    def handle(self, *args, **options):
        config = fleet_config()
        result = seed_fleet(config)
        self.stdout.write(
            f"Fleet seed {config.seed}: {config.hosts} hosts x {config.devices_per_host} devices "
            f"({', '.join(config.types)}); created {result.hosts_created} hosts and "
            f"{result.devices_created} devices, {result.devices_total} devices in all."
        )
