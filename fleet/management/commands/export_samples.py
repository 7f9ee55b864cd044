from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from fleet import tsdb
from fleet.polling import sample_export


class Command(BaseCommand):
    help = (
        "Copy the samples PostgreSQL kept before the time-series store (raw samples, and the "
        "rollups' means where no raw samples remain) to the store at TSDB_WRITE_URL, then mark "
        "them exported so that the migration dropping those tables may run "
        "(docs/deploy.md, 'Moving history out of PostgreSQL')."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=50_000, help="rows per write to the store (default 50,000)")

    def handle(self, *args, batch: int, **options):
        if batch < 1:
            raise CommandError("--batch must be at least 1")
        tables = sample_export.sample_tables()
        if not tables:
            self.stdout.write("No samples tables left in this database: nothing to export.")
            return
        self.stdout.write(f"Exporting {', '.join(tables)} to {settings.TSDB_WRITE_URL} …")
        try:
            result = sample_export.export(tsdb.client(), extra=settings.TSDB_LABELS, batch=batch,
                                          progress=lambda line: self.stdout.write(line))
        except tsdb.TsdbError as exc:
            raise CommandError(f"The time-series store did not take the samples ({exc}); nothing was marked "
                               "exported. Run the command again when it answers: points already sent are "
                               "written once.") from exc
        for table, points in result.points.items():
            left = result.left_out[table]
            note = f"; {left:,} rows left out (their device or counter is gone)" if left else ""
            self.stdout.write(f"{table}: {points:,} points exported{note}.")
        self.stdout.write(self.style.SUCCESS(
            f"Done in {result.requests:,} writes; the tables are marked exported: `manage.py migrate` may drop them."
        ))
